"""Release re-analysis: every headline number of docs/release.md §3 recomputed from the shared files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intraskill.analysis.release import (
    ARMS,
    COMPARISONS,
    EVAL_RUNS,
    locate_release_dir,
    reanalyse_release,
    release_compare,
)
from intraskill.analysis.release_results import ReleaseReanalysis, WandbReconciliation
from intraskill.cli import app

SECTION_3_1 = {  # arm: (strict reward, success)
    "base_free": (0.542167, 0.5175),
    "base_s0": (0.566301, 0.5450),
    "iter80_free": (0.850060, 0.8425),
    "iter80_st": (0.867143, 0.8625),
}
SECTION_3_3_GATE_DELTA = [
    (0.0257, -0.0109, 0.0623),
    (0.0276, -0.0021, 0.0580),
    (0.0197, -0.0083, 0.0478),
    (0.0066, -0.0218, 0.0350),
]
SECTION_3_4 = [  # (step, in, out, candidates, bare strict, masked strict, bare success, masked success)
    (20, 10, 7, 6, 0.765952, 0.791661, 0.7475, 0.7750),
    (40, 7, 5, 6, 0.813119, 0.840690, 0.8000, 0.8275),
    (60, 5, 8, 6, 0.860119, 0.879774, 0.8475, 0.8700),
    (80, 8, 8, 4, 0.869417, 0.876024, 0.8600, 0.8675),
]
SECTION_3_7_OPTIMIZER = [  # (entropy, clip fraction, grad norm)
    (0.18025, 0.00123, 2.18),
    (0.15557, 0.00058, 2.16),
    (0.14212, 0.00056, 1.38),
    (0.13258, 0.00038, 1.14),
]
SECTION_3_7_ROLLOUT = [  # (response_len/mean, truncated_ratio, actor tok/s, rollout_time)
    (287.6, 0.118, 13538.13, 234.0),
    (269.1, 0.204, 13502.78, 245.1),
    (204.7, 0.223, 13468.47, 223.9),
    (246.8, 0.158, 13527.11, 208.8),
]


@pytest.fixture(scope="module")
def reanalysis(release_dir: Path) -> ReleaseReanalysis:
    return reanalyse_release(release_dir)


def test_four_condition_table_matches_every_summary(release_dir: Path, reanalysis: ReleaseReanalysis) -> None:
    assert [row.arm for row in reanalysis.conditions] == list(ARMS)
    for row in reanalysis.conditions:
        summary = json.loads((release_dir / "eval" / EVAL_RUNS[row.arm] / "summary.json").read_text())
        assert row.n == 400
        assert row.reward_mean == pytest.approx(summary["primary"]["reward_mean"], abs=1e-12)
        assert row.success_rate == pytest.approx(summary["primary"]["success_rate"], abs=1e-12)
        assert row.max_abs_error <= 1e-12
        assert (row.reward_mean, row.success_rate) == pytest.approx(SECTION_3_1[row.arm], abs=5e-7)


def test_six_comparisons_cover_every_arm_pair(reanalysis: ReleaseReanalysis) -> None:
    pairs = {frozenset((record.a, record.b)) for record in reanalysis.comparisons.values()}
    assert len(pairs) == 6 and all(len(p) == 2 for p in pairs)
    assert [name for name, _, _ in COMPARISONS] == list(reanalysis.comparisons)
    for record in reanalysis.comparisons.values():
        assert sum(record.transitions.values()) == record.pairs == 400
        for metric in ("reward", "r_success"):
            lo, hi = record.metrics[metric].ci95
            assert lo <= record.metrics[metric].mean_difference <= hi


def test_worked_examples_inside_the_reanalysis(release_dir: Path, reanalysis: ReleaseReanalysis) -> None:
    training = reanalysis.comparisons["training_free"]
    assert training.metrics["r_success"].ci95 == pytest.approx([0.275, 0.375], abs=1e-9)
    assert training.metrics["reward"].ci95 == pytest.approx([0.25973, 0.35756], abs=5e-6)
    assert training.transitions == {"0->1": 139, "1->0": 9, "1->1": 198, "0->0": 54}
    comparison = release_dir / "eval" / "qwen35-4b-test-iter80-st" / "comparison.json"
    published = json.loads(comparison.read_text())
    final = reanalysis.comparisons["final_skill"]
    for metric in ("reward", "r_success"):
        expected = published["paired"]["metrics"][metric]
        produced = final.metrics[metric]
        assert produced.ci95 == pytest.approx(expected["confidence_interval"], abs=1e-9)
        assert produced.mean_difference == pytest.approx(expected["mean_difference"], abs=1e-12)
    assert final.transitions == {"0->1": 19, "1->0": 11, "1->1": 326, "0->0": 44}


def test_gate_rounds_chunks_and_validation(release_dir: Path, reanalysis: ReleaseReanalysis) -> None:
    rounds = reanalysis.rounds
    assert [r.round for r in rounds] == [0, 1, 2, 3]
    assert reanalysis.chunk_sequence == [10, 7, 5, 8, 8]
    assert [r.columns for r in rounds] == [16, 13, 11, 12]
    for row, expected in zip(rounds, SECTION_3_4):
        chunks_in, chunks_out, candidates = expected[1:4]
        bare_strict, masked_strict, bare_success, masked_success = expected[4:]
        assert (row.step, row.input_chunks, row.selected_chunks, row.candidates) == expected[:4]
        published = row.published
        assert int(published["input_chunks"]) == chunks_in
        assert int(published["selected_chunks"]) == chunks_out
        assert int(published["candidate_count"]) == candidates
        assert row.bare_strict == pytest.approx(bare_strict, abs=5e-7)
        assert row.masked_strict == pytest.approx(masked_strict, abs=5e-7)
        assert row.bare_success == pytest.approx(bare_success, abs=1e-12)
        assert row.masked_success == pytest.approx(masked_success, abs=1e-12)
        assert row.masked_success == pytest.approx(row.summary_masked_success, abs=1e-12)
        assert row.masked_strict == pytest.approx(row.summary_masked_strict, abs=1e-12)


def test_gate_delta_cis_to_four_decimals(reanalysis: ReleaseReanalysis) -> None:
    for row, (mean, lo, hi) in zip(reanalysis.rounds, SECTION_3_3_GATE_DELTA):
        delta = row.gate_delta
        assert round(delta.mean_difference, 4) == mean
        assert [round(v, 4) for v in delta.ci95] == [lo, hi]


def test_wandb_reconciliation_counts_3118_values_with_zero_error(reanalysis: ReleaseReanalysis) -> None:
    expected = WandbReconciliation(compared_numeric_values=3118, max_abs_error=0.0)
    assert reanalysis.wandb_reconciliation == expected


def test_optimizer_and_rollout_round_means(reanalysis: ReleaseReanalysis) -> None:
    optimizer = reanalysis.optimizer_rounds
    assert [r.updates for r in optimizer] == [40] * 4
    for row, (entropy, clip, grad) in zip(optimizer, SECTION_3_7_OPTIMIZER):
        assert round(row.metrics["train/entropy_loss"].mean, 5) == entropy
        assert round(row.metrics["train/pg_clipfrac"].mean, 5) == clip
        assert round(row.metrics["train/grad_norm"].mean, 2) == grad
    zero = [u for row in optimizer for u in row.zero_grad_updates]
    assert zero == [66, 70, 82, 116, 140, 142, 156, 160]
    for row, expected in zip(reanalysis.rollout_rounds, SECTION_3_7_ROLLOUT):
        length, truncated, throughput, rollout_time = expected
        assert round(row.means["rollout/response_len/mean"], 1) == length
        assert round(row.means["rollout/truncated_ratio"], 3) == truncated
        assert round(row.means["perf/actor_train_tok_per_s"], 2) == throughput
        assert round(row.means["perf/rollout_time"], 1) == rollout_time


def test_gate_refits_reproduce_all_four_gates(reanalysis: ReleaseReanalysis) -> None:
    refits = reanalysis.gate_refits
    assert [(r.round, r.columns, r.observations) for r in refits] == [
        ("round-000", 16, 400), ("round-001", 13, 400), ("round-002", 11, 400), ("round-003", 12, 400)
    ]
    assert all(r.max_abs_diff <= 1e-9 and r.rank == r.columns for r in refits)


def test_tables_and_summary_of_the_reanalysis(reanalysis: ReleaseReanalysis) -> None:
    conditions = reanalysis.to_frame("conditions")
    assert list(conditions["arm"]) == list(ARMS)
    assert conditions["success_rate"].tolist() == [row.success_rate for row in reanalysis.conditions]
    paired = reanalysis.to_frame("comparisons").set_index("name")
    final = reanalysis.comparisons["final_skill"]
    success_ci = paired.loc["final_skill", ["success_lo", "success_hi"]].tolist()
    assert success_ci == list(final.metrics["r_success"].ci95)
    assert paired.loc["final_skill", "0->1"] == final.transitions["0->1"]
    rounds = reanalysis.to_frame("rounds")
    assert rounds["gate_delta_hi"].tolist() == [r.gate_delta.ci95[1] for r in reanalysis.rounds]
    assert reanalysis.to_frame("optimizer")["train/grad_norm mean"].tolist() == [
        r.metrics["train/grad_norm"].mean for r in reanalysis.optimizer_rounds
    ]
    assert reanalysis.to_frame("reconciliation").iloc[0].tolist() == [3118, 0.0]
    assert [len(reanalysis.to_frame(part)) for part in ("refits", "rollout")] == [4, 4]
    with pytest.raises(KeyError, match="part: expected one of"):
        reanalysis.to_frame("tests")
    text = reanalysis.summary()
    assert "10 -> 7 -> 5 -> 8 -> 8" in text and "3118 values" in text
    assert all(name in text for name in reanalysis.comparisons)


def test_release_compare_has_exactly_the_documented_shape(release_dir: Path) -> None:
    result = release_compare(release_dir, "base_free", "base_s0", samples=200).to_dict(arms=False)
    assert set(result) == {"pairs", "metrics", "transitions"}
    assert set(result["metrics"]) == {"reward", "r_success"}
    for metric in result["metrics"].values():
        assert set(metric) == {"a_mean", "b_mean", "mean_difference", "ci95"} and len(metric["ci95"]) == 2
    assert set(result["transitions"]) == {"0->1", "1->0", "1->1", "0->0"}
    with pytest.raises(ValueError, match="arm must be one of"):
        release_compare(release_dir, "base_free", "iter40_free")


def test_release_dir_resolution(release_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("INTRASKILL_RELEASE_DIR", raising=False)
    assert locate_release_dir().resolve() == release_dir.resolve()
    monkeypatch.setenv("INTRASKILL_RELEASE_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="INTRASKILL_RELEASE_DIR"):
        locate_release_dir()
    assert locate_release_dir(str(release_dir)) == release_dir


def test_cli_release_compare_json(release_dir: Path, reanalysis: ReleaseReanalysis) -> None:
    arguments = ["release", "compare", "--artifacts", str(release_dir)]
    result = CliRunner().invoke(app, [*arguments, "iter80_free", "iter80_st", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    final = reanalysis.to_dict()["comparisons"]["final_skill"]
    expected = {k: v for k, v in final.items() if k not in ("a", "b")}
    assert record == expected
    bad = CliRunner().invoke(app, [*arguments, "x", "iter80_st"])
    assert bad.exit_code != 0 and "unknown arm" in bad.output


@pytest.mark.e2e
def test_cli_release_reanalyse_json_and_table(release_dir: Path, reanalysis: ReleaseReanalysis) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["release", "reanalyse", "--artifacts", str(release_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == reanalysis.to_dict()
    table = runner.invoke(app, ["release", "reanalyse", "--artifacts", str(release_dir), "--samples", "100"])
    assert table.exit_code == 0, table.output
    assert "10 -> 7 -> 5 -> 8 -> 8" in table.output and "3118 values" in table.output
