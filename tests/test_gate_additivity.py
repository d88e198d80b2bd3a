"""Gate diagnostics: the additivity test on planted outcomes, its not-testable cases, and the ranking check."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from intraskill.gate.additivity import AdditivityTest, fit_additivity
from intraskill.gate.contributions import load_contributions, save_contributions
from intraskill.gate.ranking import ranking_arms, ranking_check
from intraskill.hashing import seed32
from intraskill.paths import release_data_dir

COLUMNS = [f"chunk-{i}" for i in range(6)]
BETA = np.array([0.15, 0.10, 0.05, 0.0, -0.05, -0.10])


def planted_rows(key: str, tasks: int = 400, samples: int = 1, interaction: float = 0.0):
    """Bernoulli(0.5) masks and binary paired deltas R − B with main effects BETA (+ chunk-0 × chunk-1)."""
    rng = np.random.default_rng(seed32(key))
    task_ids = np.repeat(np.arange(tasks), samples)
    masks = rng.integers(0, 2, size=(tasks * samples, len(COLUMNS)))
    success = 0.35 + masks @ BETA + interaction * masks[:, 0] * masks[:, 1]
    masked = (rng.random(len(task_ids)) < success).astype(float)
    bare = (rng.random(tasks) < 0.35).astype(float)[task_ids]
    return masks, masked - bare, task_ids


@pytest.mark.parametrize("samples", [1, 2])
def test_additive_outcomes_are_not_rejected_in_most_seeds(samples: int) -> None:
    rows = [planted_rows(f"additive:{samples}:{s}", samples=samples) for s in range(20)]
    tests = [fit_additivity(masks, deltas, COLUMNS, COLUMNS, clusters=tasks, draws=199) for masks, deltas, tasks in rows]
    assert all(t.testable and t.df_num == 15 for t in tests)
    assert {t.cov_type for t in tests} == {"HC3" if samples == 1 else "cluster"}
    rejected = sum(t.rejected for t in tests)
    assert rejected <= 3  # nominal 5 %: 1 of 20 expected, P(>= 4) < 2 % under the null
    p_values = [t.p_value for t in tests]
    assert max(p_values) > 0.5 and min(p_values) < 0.5  # p-values spread over (0, 1) under the null
    assert all(0 < t.p_value_f < 1 and t.bootstrap_draws == 199 for t in tests)


def test_a_planted_interaction_is_rejected_and_recovered_with_a_covering_ci() -> None:
    masks, deltas, tasks = planted_rows("complements", tasks=600, samples=2, interaction=0.35)
    test = fit_additivity(masks, deltas, COLUMNS, COLUMNS, clusters=tasks, metric="r_success", draws=199)
    assert test.testable and test.rejected and test.p_value == 1 / 200 and test.p_value_f < 1e-4
    assert test.cov_type == "cluster" and test.df_denom == 599  # G − 1 task clusters
    top = test.largest(1)[0]
    assert (top.a, top.b) == ("chunk-0", "chunk-1")
    assert top.ci95[0] <= 0.35 <= top.ci95[1] and top.ci95[0] > 0
    assert top.together == int((masks[:, 0] * masks[:, 1]).sum())
    lines = test.summary_lines()
    assert lines[0].startswith("additivity (r_success, 15 pairwise interactions of 6 selected chunks, cluster)")
    assert lines[1].startswith("WARNING: additivity rejected")
    assert "chunk-0 x chunk-1: +0.3" in lines[2]
    assert AdditivityTest.from_dict(json.loads(json.dumps(test.to_dict()))) == test
    again = fit_additivity(masks, deltas, COLUMNS, COLUMNS, clusters=tasks, metric="r_success", draws=199)
    assert again == test  # the bootstrap's draws come from the recorded seed


def test_only_the_selected_chunks_and_identifiable_pairs_are_tested() -> None:
    masks, deltas, tasks = planted_rows("subset")
    test = fit_additivity(masks, deltas, COLUMNS, ["chunk-3", "chunk-0", "chunk-1"], draws=99)
    assert test.chunks == ("chunk-0", "chunk-1", "chunk-3") and test.df_num == 3
    # versions of one rewrite family are never shown together: their pair is skipped, the rest tested
    family = masks.copy()
    family[:, 1] = np.where(family[:, 0] == 1, 0, family[:, 1])
    test = fit_additivity(family, deltas, COLUMNS, COLUMNS[:3], draws=99)
    assert test.skipped_pairs == (("chunk-0", "chunk-1"),) and test.df_num == 2


def test_designs_that_cannot_identify_interactions_are_typed_not_testable() -> None:
    masks, deltas, tasks = planted_rows("untestable", tasks=60)
    one = fit_additivity(masks, deltas, COLUMNS, ["chunk-2"])
    assert not one.testable and not one.rejected and "need at least two" in one.reason
    assert one.statistic is None and one.interactions == ()
    exclusive = masks.copy()
    exclusive[:, 1] = np.where(exclusive[:, 0] == 1, 0, exclusive[:, 1])
    never = fit_additivity(exclusive, deltas, COLUMNS, COLUMNS[:2])
    assert not never.testable and "four (shown, not shown) cells" in never.reason
    assert never.skipped_pairs == (("chunk-0", "chunk-1"),)
    few = fit_additivity(masks[:24], deltas[:24], COLUMNS, COLUMNS, min_cell=1)
    assert not few.testable and "full column rank" in few.reason  # 24 rows for 6 + 15 columns
    clustered = fit_additivity(masks, deltas, COLUMNS, COLUMNS, clusters=np.arange(60) // 10, min_cell=5)
    assert not clustered.testable and "6 task clusters cannot test 15 interactions" in clustered.reason
    assert "not testable" in clustered.summary_lines()[0]
    with pytest.raises(ValueError, match="at least 99 draws"):
        fit_additivity(masks, deltas, COLUMNS, COLUMNS, draws=10)
    with pytest.raises(ValueError, match="not design columns"):
        fit_additivity(masks, deltas, COLUMNS, ["chunk-9", "chunk-0"])


def test_the_gate_records_its_additivity_test_in_json_and_summary(tmp_path: Path) -> None:
    release = load_contributions(release_data_dir() / "round-002" / "gate" / "contributions.json")
    assert release.additivity is None  # the release files stay byte-for-byte; the rows still allow the test
    test = release.additivity_test()
    assert test.testable and test.chunks == tuple(release.selected_intervention_ids) and test.df_num == 28
    assert test.cov_type == "HC3" and not test.rejected
    with_test = replace(release, additivity=test)
    loaded = load_contributions(save_contributions(with_test, tmp_path / "contributions.json"))
    assert loaded.additivity == test
    text = loaded.summary()
    assert "additivity (reward, 28 pairwise interactions of 8 selected chunks, HC3)" in text
    assert "WARNING" not in text
    flagged = replace(test, p_value=0.001)
    assert "WARNING: additivity rejected" in replace(release, additivity=flagged).summary()


def test_ranking_arms_follow_the_gate_ranking() -> None:
    gate = load_contributions(release_data_dir() / "round-003" / "gate" / "contributions.json")
    ranked = [r.intervention_id for r in sorted((r for r in gate.contributions if r.rank), key=lambda r: r.rank)]
    arms = ranking_arms(gate, 4, random_seeds=(20260907, 1))
    assert set(arms["top"]) == set(ranked[:4]) and set(arms["bottom"]) == set(ranked[-4:])
    assert list(arms) == ["top", "bottom", "random-20260907", "random-1"]
    assert all(len(ids) == 4 and set(ids) <= set(ranked) for ids in arms.values())
    assert arms["random-20260907"] != arms["random-1"]
    assert list(arms["top"]) == [c for c in gate.columns if c in arms["top"]]  # design-column order
    with pytest.raises(ValueError, match="2k"):
        ranking_arms(gate, 6)


def test_ranking_check_pairs_the_arms_by_task() -> None:
    tasks = range(8)
    top = {t: 1.0 if t < 6 else 0.0 for t in tasks}
    bottom = {t: 1.0 if t < 2 else 0.0 for t in tasks}
    random_a = {t: 1.0 if t < 4 else 0.0 for t in tasks}
    random_b = {t: 1.0 if t < 2 else 0.0 for t in tasks}
    bare = {t: 0.0 for t in tasks}
    arms = {"top": ("a",), "bottom": ("d",), "random-1": ("b",), "random-2": ("c",)}
    values = {"r_success": {"top": top, "bottom": bottom, "random-1": random_a, "random-2": random_b, "bare": bare}}
    check = ranking_check(arms, values, samples=2000)
    assert check.tasks == 8 and check.k == 1
    assert check.means["r_success"] == {"top": 0.75, "bottom": 0.25, "random": 0.375, "bare": 0.0}
    assert check.ordered("r_success")
    contrasts = check.contrasts["r_success"]
    assert list(contrasts) == ["top-bottom", "top-random", "random-bottom", "top-bare", "random-bare",
                               "bottom-bare"]
    top_bottom = contrasts["top-bottom"]
    assert top_bottom.mean_difference == pytest.approx(0.5) and top_bottom.pairs == 8
    # the deltas are 0,0,1,1,1,1,0,0: the resampled mean stays inside [0, 1] and brackets 0.5
    assert 0.0 <= top_bottom.ci95[0] < 0.5 < top_bottom.ci95[1] <= 1.0
    assert contrasts["top-bare"].ci95[0] > 0
    record = check.to_dict()
    assert record["ordered"] == {"r_success": True} and record["contrasts"]["r_success"]["top-bottom"]["pairs"] == 8
    assert "top-bottom: +0.5000" in check.summary()
    with pytest.raises(ValueError, match="cover other tasks"):
        ranking_check(arms, {"r_success": {**values["r_success"], "bottom": {0: 1.0}}})
    with pytest.raises(ValueError, match="no per-task values"):
        ranking_check(arms, {"r_success": {"top": top}})


def test_interaction_heatmap_and_gate_show_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from intraskill.cli import app
    from intraskill.plots.gates import interaction_heatmap

    masks, deltas, tasks = planted_rows("heatmap", interaction=0.35)
    test = fit_additivity(masks, deltas, COLUMNS, COLUMNS[:4], draws=99)
    figure = interaction_heatmap(test, language="zh")
    assert figure.axes and "F(6" in figure.axes[0].get_title()
    with pytest.raises(ValueError, match="not testable"):
        interaction_heatmap(fit_additivity(masks, deltas, COLUMNS, COLUMNS[:1]))
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    (gate_dir / "contributions.json").write_text(
        (release_data_dir() / "round-001" / "gate" / "contributions.json").read_text())
    shown = CliRunner().invoke(app, ["gate", "show", str(gate_dir), "--json"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.output)
    assert record["additivity"]["df_num"] == 10 and record["ranking_check"] is None
    text = CliRunner().invoke(app, ["gate", "show", str(gate_dir)]).output
    assert "additivity (reward, 10 pairwise interactions of 5 selected chunks, HC3)" in text


@pytest.mark.e2e
def test_the_gate_on_the_interaction_teacher_rejects_additivity(small_store_root: Path, tmp_path: Path) -> None:
    """End to end: Gate A over S₀ played by the interaction organism's teacher (a planted complement, here 0.6 so
    that the small store's 40 val tasks suffice) records a rejected additivity test led by the planted pair."""
    from intraskill.organism.gate_validation import validate_on_teacher
    from intraskill.params import load_params, params_from_dict

    root = Path(__file__).resolve().parents[1]
    ci, organism = load_params(root / "params" / "ci.yaml"), load_params(root / "params" / "organism_interaction.yaml")
    warmstart = organism.warmstart.model_dump()
    warmstart["interactions"] = [{"chunks": ["persona-query", "persona-options"], "weight": 0.6}]
    params = params_from_dict({**ci.model_dump(), "warmstart": warmstart})
    report = validate_on_teacher(params, tmp_path, seeds=[7], samples_per_task=4, task_limit=40, truth_tasks=8,
                                 store_root=small_store_root, progress=False)
    assert report.policy == "teacher"
    gate = load_contributions(tmp_path / "m4" / "seed-7" / "contributions.json")
    test = gate.additivity_test("reward", None)
    assert test.testable and test.rejected and test.cov_type == "cluster"
    top = test.largest(1)[0]
    assert {top.a, top.b} == {"persona-query", "persona-options"} and top.ci95[0] > 0
