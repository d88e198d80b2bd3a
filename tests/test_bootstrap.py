"""Paired bootstrap: the published worked examples (docs/release.md §3.2) and the RNG conventions."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from intraskill.evaluate.bootstrap import (
    BootstrapResult,
    numpy_paired_bootstrap,
    paired_bootstrap_ci,
    percentile_linear,
    resample_means,
    resample_means_reference,
    success_transitions,
)


@pytest.fixture(scope="module")
def outcomes(release_dir: Path) -> list[dict]:
    return json.loads((release_dir / "analysis" / "test_task_outcomes.json").read_text())


def arm(rows: list[dict], name: str, field: str) -> list[float]:
    return [row[name][field] for row in rows]


def test_seed_is_first_eight_bytes_of_metric_hash() -> None:
    expected = int.from_bytes(hashlib.sha256(b"20260901:r_success").digest()[:8], "big")
    assert paired_bootstrap_ci([0.0, 1.0], [1.0, 1.0], "r_success", samples=10).seed == expected


@pytest.mark.parametrize("n", [1, 2, 3, 7, 400, 513])
@pytest.mark.parametrize("seed", [0, 20260901, 2**64 - 1])
def test_vectorised_resampling_is_bit_identical_to_the_published_loop(n: int, seed: int) -> None:
    deltas = [random.Random(f"{n}:{i}").uniform(-1.0, 1.0) for i in range(n)]
    assert resample_means(deltas, seed, 64) == resample_means_reference(deltas, seed, 64)


def test_iter80_free_minus_base_free_worked_example(outcomes: list[dict]) -> None:
    base, iter80 = "base_free", "iter80_free"
    success = paired_bootstrap_ci(
        arm(outcomes, base, "success"), arm(outcomes, iter80, "success"), "r_success"
    )
    reward = paired_bootstrap_ci(arm(outcomes, base, "reward"), arm(outcomes, iter80, "reward"), "reward")
    assert success.mean_difference == pytest.approx(0.325, abs=1e-12)
    assert success.ci95 == pytest.approx((0.275, 0.375), abs=1e-9)
    assert reward.mean_difference == pytest.approx(0.30789, abs=5e-6)
    assert reward.ci95 == pytest.approx((0.25973, 0.35756), abs=5e-6)
    assert (success.pairs, success.samples) == (400, 10_000)
    transitions = success_transitions(arm(outcomes, base, "success"), arm(outcomes, iter80, "success"))
    assert transitions == {"0->1": 139, "1->0": 9, "1->1": 198, "0->0": 54}


def test_iter80_st_minus_iter80_free_matches_comparison_json(release_dir: Path, outcomes: list[dict]) -> None:
    comparison = release_dir / "eval" / "qwen35-4b-test-iter80-st" / "comparison.json"
    published = json.loads(comparison.read_text())
    metrics = published["paired"]["metrics"]
    fields = {"reward": "reward", "r_success": "success", "r_strict": "reward"}
    for metric, field in fields.items():
        result = paired_bootstrap_ci(
            arm(outcomes, "iter80_free", field), arm(outcomes, "iter80_st", field), metric
        )
        assert result.a_mean == pytest.approx(metrics[metric]["bare_mean"], abs=1e-12)
        assert result.b_mean == pytest.approx(metrics[metric]["equipped_mean"], abs=1e-12)
        assert result.mean_difference == pytest.approx(metrics[metric]["mean_difference"], abs=1e-12)
        assert result.ci95 == pytest.approx(tuple(metrics[metric]["confidence_interval"]), abs=1e-9)
    transitions = success_transitions(
        arm(outcomes, "iter80_free", "success"), arm(outcomes, "iter80_st", "success")
    )
    assert transitions == {
        "0->1": 19,
        "1->0": 11,
        "1->1": 326,
        "0->0": 44,
    }


def test_percentile_interpolates_linearly_at_p_times_b_minus_one() -> None:
    values = [0.0, 10.0, 20.0, 30.0, 40.0]
    assert percentile_linear(values, 0.0) == 0.0
    assert percentile_linear(values, 0.5) == 20.0
    assert percentile_linear(values, 0.1) == pytest.approx(4.0)
    assert percentile_linear(values, 0.975) == pytest.approx(39.0)


def test_constant_deltas_give_a_degenerate_interval() -> None:
    result = paired_bootstrap_ci([0.0] * 20, [0.5] * 20, "reward", samples=50)
    assert result.ci95 == (0.5, 0.5)
    assert result.to_dict()["ci95"] == [0.5, 0.5]


def test_confidence_level_widens_the_interval() -> None:
    a = [random.Random(f"a{i}").random() for i in range(60)]
    b = [random.Random(f"b{i}").random() for i in range(60)]
    narrow = paired_bootstrap_ci(a, b, "reward", samples=500, confidence=0.5)
    wide = paired_bootstrap_ci(a, b, "reward", samples=500, confidence=0.99)
    assert wide.ci95[0] < narrow.ci95[0] <= narrow.ci95[1] < wide.ci95[1]


def test_numpy_behaviour_bootstrap_follows_its_published_recipe() -> None:
    a = [random.Random(f"a{i}").random() for i in range(50)]
    b = [x + random.Random(f"d{i}").uniform(-0.2, 0.4) for i, x in enumerate(a)]
    result = numpy_paired_bootstrap(a, b, "tokens_per_turn")
    seed = int.from_bytes(hashlib.sha256(b"20260909:tokens_per_turn").digest()[:4], "big")
    delta = np.asarray(b) - np.asarray(a)
    boot = delta[np.random.default_rng(seed).integers(0, 50, size=(5000, 50))].mean(axis=1)
    assert result.seed == seed and result.samples == 5000
    assert result.ci95 == tuple(np.quantile(boot, [0.025, 0.975]))
    pure = paired_bootstrap_ci(a, b, "tokens_per_turn")
    assert result.ci95 == pytest.approx(pure.ci95, abs=0.02)
    assert result.ci95[0] < result.mean_difference < result.ci95[1]


def test_bad_input_is_rejected_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_ci([1.0, 2.0], [1.0], "reward")
    with pytest.raises(ValueError, match="empty"):
        paired_bootstrap_ci([], [], "reward")
    with pytest.raises(ValueError, match="non-finite"):
        paired_bootstrap_ci([float("nan")], [1.0], "reward")
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap_ci([1.0], [1.0], "reward", confidence=1.0)
    with pytest.raises(ValueError, match="pair 1"):
        success_transitions([0, 1], [1, 0.5])


def test_result_round_trips_to_json() -> None:
    result = paired_bootstrap_ci([0, 1, 0, 1], [1, 1, 0, 1], "r_success", samples=100)
    record = json.loads(json.dumps(result.to_dict()))
    assert record["method"] == "task_level_paired_percentile"
    assert BootstrapResult(**{**record, "ci95": tuple(record["ci95"])}) == result
