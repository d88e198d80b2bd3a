"""Gate estimator: release refits, planted-coefficient recovery, rank checks and the ``gate refit`` CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.gate.ols import (
    RankDeficientDesignError,
    check_design_rank,
    fit_paired_delta,
    refit_contributions,
    refit_path,
)
from intraskill.hashing import seed32

COLUMNS_PER_ROUND = {"round-000": 16, "round-001": 13, "round-002": 11, "round-003": 12}


@pytest.fixture(scope="module")
def round0(release_dir: Path) -> dict:
    return json.loads((release_dir / "round-000" / "gate" / "contributions.json").read_text())


def t_quantile(p: float, df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


def planted_design(n: int, k: int, key: str) -> np.ndarray:
    rng = np.random.default_rng(seed32(key))
    return rng.integers(0, 2, size=(n, k))


@pytest.mark.parametrize("round_name", sorted(COLUMNS_PER_ROUND))
def test_refit_reproduces_every_stored_coefficient(release_dir: Path, round_name: str) -> None:
    contributions = json.loads((release_dir / round_name / "gate" / "contributions.json").read_text())
    report = refit_contributions(contributions)
    assert len(report.columns) == report.rank == COLUMNS_PER_ROUND[round_name]
    assert report.observations == 400
    assert set(report.metric_max_abs_diff) == {
        "reward", "r_strict", "r_success", "r_att", "r_loose", "r_option", "r_price", "r_type"
    }
    assert report.max_abs_diff <= 1e-9
    assert report.max_abs_diff < 1e-14  # lstsq-level agreement (published: ~1e-16)


def test_refit_detects_a_tampered_coefficient(round0: dict) -> None:
    tampered = copy.deepcopy(round0)
    column = next(iter(tampered["estimates"]["r_success"]["coefficients"]))
    tampered["estimates"]["r_success"]["coefficients"][column] += 1e-3
    report = refit_contributions(tampered)
    assert report.metric_max_abs_diff["r_success"] == pytest.approx(1e-3, rel=1e-6)
    assert report.metric_max_abs_diff["reward"] < 1e-14


def test_refit_rejects_a_mask_of_the_wrong_length(round0: dict) -> None:
    broken = copy.deepcopy(round0)
    broken["observations_table"][7]["mask"] = broken["observations_table"][7]["mask"][:-1]
    with pytest.raises(ValueError, match=r"observations_table\[7\]\.mask"):
        refit_contributions(broken)


def test_planted_coefficients_are_recovered_with_covering_hc3_intervals() -> None:
    X = planted_design(400, 4, "test_gate_ols:planted:design")
    beta = np.array([0.3, -0.2, 0.0, 0.1])
    noise = np.random.default_rng(seed32("test_gate_ols:planted:noise")).normal(0.0, 0.15, size=400)
    fit = fit_paired_delta(X, X @ beta + noise, ["a", "b", "c", "d"])
    assert fit.cov_type == "HC3" and fit.nobs == 400 and fit.rank == 4
    assert fit.params["a"] == pytest.approx(0.3, abs=0.04)
    assert fit.params["b"] == pytest.approx(-0.2, abs=0.04)
    intervals = fit.conf_int()
    for name, truth in zip("abcd", beta):
        lo, hi = intervals[name]
        assert lo < truth < hi
        assert hi - lo == pytest.approx(2 * t_quantile(0.975, 400 - 4) * fit.bse_hc3[name], rel=1e-9)
    wider = fit.conf_int(alpha=0.01)
    assert wider["a"][0] < intervals["a"][0] and wider["a"][1] > intervals["a"][1]
    frame = fit.summary()
    assert list(frame.columns) == ["coef", "std_err", "ci_lower", "ci_upper"]
    assert list(frame.index) == ["a", "b", "c", "d"]
    assert json.loads(json.dumps(fit.to_dict()))["params"]["a"] == fit.params["a"]


def test_no_intercept_is_fitted() -> None:
    X = planted_design(200, 2, "test_gate_ols:intercept")
    fit = fit_paired_delta(X, np.full(200, 0.5) + X @ np.array([0.1, 0.2]), ["a", "b"])
    # A constant shift must be absorbed by the chunk columns, never by a hidden intercept.
    plain = np.linalg.lstsq(X, np.full(200, 0.5) + X @ np.array([0.1, 0.2]), rcond=None)[0]
    assert [fit.params["a"], fit.params["b"]] == pytest.approx(plain.tolist(), abs=1e-12)
    assert fit.to_dict()["intercept"] == 0.0


def test_tiny_coefficients_are_zeroed() -> None:
    X = planted_design(120, 3, "test_gate_ols:zero")
    fit = fit_paired_delta(X, X @ np.array([0.25, 0.0, -0.5]), ["a", "b", "c"])
    assert fit.params["b"] == 0.0
    assert fit.params["a"] == pytest.approx(0.25, abs=1e-12)


def test_repeated_tasks_switch_to_task_clustered_errors() -> None:
    X = planted_design(300, 3, "test_gate_ols:cluster")
    noise = np.random.default_rng(seed32("test_gate_ols:cluster:y")).normal(0, 0.1, 300)
    y = X @ np.array([0.2, -0.1, 0.05]) + noise
    unique = fit_paired_delta(X, y, ["a", "b", "c"], clusters=list(range(300)))
    clustered = fit_paired_delta(X, y, ["a", "b", "c"], clusters=[i // 3 for i in range(300)])
    assert unique.cov_type == "HC3" and unique.bse == unique.bse_hc3
    assert clustered.cov_type == "cluster"
    assert clustered.params == unique.params
    assert clustered.bse != clustered.bse_hc3


def test_rank_deficient_designs_are_rejected_before_any_rollout() -> None:
    X = planted_design(50, 3, "test_gate_ols:rank")
    duplicated = np.column_stack([X, X[:, 0]])
    with pytest.raises(RankDeficientDesignError, match="rank deficient; use a different mask seed"):
        check_design_rank(duplicated, ["a", "b", "c", "a-copy"])
    empty = np.column_stack([X, np.zeros(50, dtype=int)])
    with pytest.raises(RankDeficientDesignError, match=r"all-zero columns: \['never'\]"):
        check_design_rank(empty, ["a", "b", "c", "never"])
    with pytest.raises(RankDeficientDesignError, match="n must exceed k"):
        check_design_rank(X[:3], ["a", "b", "c"])
    with pytest.raises(RankDeficientDesignError):
        fit_paired_delta(duplicated, np.zeros(50), ["a", "b", "c", "a-copy"])
    assert check_design_rank(X, ["a", "b", "c"]) == 3


def test_malformed_designs_name_the_problem() -> None:
    with pytest.raises(ValueError, match="only 0/1"):
        check_design_rank([[0, 2], [1, 0], [1, 1]], ["a", "b"])
    with pytest.raises(ValueError, match="names 3"):
        check_design_rank([[0, 1], [1, 0], [1, 1]], ["a", "b", "c"])
    with pytest.raises(ValueError, match="duplicate"):
        check_design_rank([[0, 1], [1, 0], [1, 1]], ["a", "a"])
    with pytest.raises(ValueError, match="y has shape"):
        fit_paired_delta([[0, 1], [1, 0], [1, 1]], [0.1, 0.2], ["a", "b"])


def test_own_contributions_file_of_the_release_schema_round_trips(tmp_path: Path) -> None:
    columns = ["chunk-a", "chunk-b", "online-c"]
    X = planted_design(80, 3, "test_gate_ols:own")
    noise = np.random.default_rng(seed32("test_gate_ols:own:noise")).normal(0, 0.05, 80)
    delta = X @ np.array([0.1, -0.05, 0.2]) + noise
    fit = fit_paired_delta(X, delta, columns)
    rows = [
        {"task_id": i, "mask": X[i].tolist(), "delta_reward": float(delta[i]), "delta_reward_detail": {}}
        for i in range(80)
    ]
    own = {"estimates": {"reward": {"coefficients": fit.params}}, "observations_table": rows}
    path = tmp_path / "contributions.json"
    path.write_text(json.dumps(own))
    report = refit_path(path)
    assert report["rounds"] == 1 and report["columns"] == 3 and report["observations"] == 80
    assert report["max_abs_diff"] == 0.0


def test_gate_refit_cli_on_one_file_and_on_the_release_folder(release_dir: Path) -> None:
    runner = CliRunner()
    one_file = release_dir / "round-001" / "gate" / "contributions.json"
    single = runner.invoke(app, ["gate", "refit", str(one_file), "--json"])
    assert single.exit_code == 0, single.output
    record = json.loads(single.output)
    assert (record["rounds"], record["columns"], record["observations"]) == (1, 13, 400)
    assert record["max_abs_diff"] <= 1e-9
    folder = runner.invoke(app, ["gate", "refit", str(release_dir), "--json"])
    assert folder.exit_code == 0, folder.output
    record = json.loads(folder.output)
    assert record["rounds"] == sorted(COLUMNS_PER_ROUND)
    assert record["columns"] == [16, 13, 11, 12]
    assert record["observations"] == [400] * 4
    assert record["max_abs_diff"] <= 1e-9
    readable = runner.invoke(app, ["gate", "refit", str(release_dir)])
    assert readable.exit_code == 0 and "round-003" in readable.output
