"""Skill1's record reader (intraskill.analysis.skill1) and figures (intraskill.plots.skill1): the library history
of a real store by step, the data each figure draws, and a real ci Skill1 round read back against its metrics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.patches import Rectangle

from intraskill.analysis.skill1 import committed_history, library_map, read_skill1_round
from intraskill.params import load_params, with_overrides
from intraskill.paths import project_root
from intraskill.pipeline.round import run_round
from intraskill.pipeline.skill1_conditions import CONDITIONS, PAIRS, run_skill1_conditions
from intraskill.plots import (
    library_embedding_map,
    skill1_dynamics,
    task_skill_similarity,
    utility_over_training,
)
from intraskill.plots.skill1 import marker_area
from intraskill.policy.warmstarts import resolve_checkpoint
from intraskill.report.build import MANIFEST_PATH, load_manifest
from intraskill.skills.library import LibraryStore, SkillProvenance
from intraskill.skills.retrieval import SentenceEncoder

QUICK = next(spec for spec in load_manifest(project_root() / MANIFEST_PATH).notebooks if spec.name == "09_skill1")
CI_SKILL1 = ["round.method=skill1", *(s.strip() for s in QUICK.overrides(quick=True)["overrides"].split(";"))]
"""Notebook 09's quick build: the ci parameters shrunk to a 2-step Skill1 round over the ci seed library (the
reader's test runs one step of it)."""


def _distilled(step: int) -> SkillProvenance:
    return SkillProvenance("distilled", task_id=5, round=0, step=step)


def test_library_history_by_step_drops_an_aborted_step_and_keeps_evicted_skills(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.json"
    seeds.write_text(json.dumps([{"desc": "shoes", "strat": "check the size", "utility": 0.8},
                                 {"desc": "cups", "strat": "check the price", "utility": 0.1}]), encoding="utf-8")
    directory = tmp_path / "round" / "library"
    with LibraryStore.open(directory, capacity=3, seed_path=seeds) as store:
        store.library.update(0, 1.0)
        store.library.admit("lamps", "read the bullets", 1.0, _distilled(1))
        store.commit(1)
        store.library.update(1, 0.0)  # step 2, killed before its commit
    with LibraryStore.open(directory, capacity=3) as store:  # the reopening discards and records an abort
        store.library.update(0, 0.0)
        admission = store.library.admit("pans", "compare sizes", 1.0, _distilled(2))
        store.commit(2)
    assert admission.evicted is not None and admission.evicted.skill_id == 1

    rows = committed_history(directory / "history.jsonl")
    assert [(r["step"], r["event"], r["skill_id"]) for r in rows] == [
        (0, "admit", 0), (0, "admit", 1), (1, "update", 0), (1, "admit", 2),
        (2, "update", 0), (2, "evict", 1), (2, "admit", 3)]
    record = read_skill1_round(tmp_path / "round")
    assert record.steps.empty and record.rollouts.empty and record.library_step == 2
    by_step = record.library_by_step()
    assert by_step[["step", "size", "admissions", "evictions", "updates"]].values.tolist() == [
        [0, 2, 2, 0, 0], [1, 3, 1, 0, 1], [2, 3, 1, 1, 1]]
    u0 = 0.95 * 0.8 + 0.05
    assert by_step["mean_utility"].tolist() == pytest.approx([0.45, (u0 + 0.1 + 0.5) / 3, (0.95 * u0 + 0.5 + 0.5) / 3])
    skills = record.skills()
    assert skills[["skill_id", "evicted"]].values.tolist() == [[0, False], [2, False], [3, False], [1, True]]
    assert skills.set_index("skill_id").loc[1, "utility"] == pytest.approx(0.1)  # the aborted update is not applied
    with pytest.raises(FileNotFoundError, match="no Skill1 library snapshot"):
        read_skill1_round(tmp_path)


STEPS = pd.DataFrame({
    "round": [0, 0, 1, 1], "step": [1, 2, 3, 4],
    "rollout/shopsim/success_rate": [0.25, 0.5, 0.5, 0.75], "skill1/success_with_skill": [0.5, 0.5, 2 / 3, 1.0],
    "skill1/success_without_skill": [0.0, None, 0.0, 0.5], "skill1/ndcg_mean": [0.6, 0.7, 0.8, 0.9],
    "skill1/selection_precision": [0.5, 0.5, 0.75, 1.0], "skill1/r_distill_mean": [-0.3, -0.1, 0.0, 0.2],
    "skill1/library_size": [3, 4, 4, 5], "skill1/admissions": [0, 2, 1, 1], "skill1/evictions": [0, 1, 1, 0],
})


def _line(axes, label: str) -> np.ndarray:
    return next(line for line in axes.get_lines() if line.get_label() == label).get_ydata()


def test_dynamics_draws_each_metric_with_gaps_and_library_changes() -> None:
    figure = skill1_dynamics(STEPS)
    success, ranking, distill, library, changes = figure.axes
    assert np.allclose(_line(success, "all rollouts"), [0.25, 0.5, 0.5, 0.75])
    without = np.asarray(_line(success, "without a skill"), dtype=float)
    assert math.isnan(without[1]) and without[[0, 2, 3]].tolist() == [0.0, 0.0, 0.5]
    assert np.allclose(_line(ranking, "selection precision"), [0.5, 0.5, 0.75, 1.0])
    distilled = [line for line in distill.get_lines() if line.get_marker() == "o"]
    assert len(distilled) == 1 and np.allclose(distilled[0].get_ydata(), [-0.3, -0.1, 0.0, 0.2])
    assert np.allclose(_line(library, "library size"), [3, 4, 4, 5])
    heights = [bar.get_height() for bar in changes.patches if isinstance(bar, Rectangle)]
    assert heights == [0, 2, 1, 1, 0, -1, -1, 0]  # admissions up, evictions down
    boundary = [line for line in success.get_lines() if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in boundary] == [2.5]  # the round boundary
    zh = skill1_dynamics(STEPS, language="zh")
    assert len(zh.axes) == 5


def test_utility_and_similarity_draw_means_bands_and_the_selected_skill() -> None:
    rollouts = pd.DataFrame({"step": [1, 1, 1, 2, 2, 3], "u_hat": [0.2, 0.6, 0.0, 0.4, 0.8, 0.0],
                             "candidates": [2, 2, 0, 2, 2, 0]})
    library = pd.DataFrame({"step": [0, 1, 2, 3], "mean_utility": [0.5, 0.45, 0.4, 0.42]})
    figure = utility_over_training(rollouts, library)
    axes = figure.axes[0]
    assert np.allclose(_line(axes, "mean"), [0.4, 0.6])  # rollouts without candidates left out, step 3 empty
    assert np.allclose(_line(axes, "library mean U at the step's start"), [0.5, 0.45])
    dots = next(c for c in axes.collections if isinstance(c, PathCollection))
    assert dots.get_offsets().tolist() == [[1, 0.2], [1, 0.6], [2, 0.4], [2, 0.8]]
    band = next(c for c in axes.collections if isinstance(c, PolyCollection))
    assert band.get_paths()[0].vertices[:, 1].min() == pytest.approx(0.3)
    with pytest.raises(ValueError, match="no rollout retrieved a skill"):
        utility_over_training(rollouts[rollouts.candidates == 0])

    candidates = pd.DataFrame({"step": [1, 1, 1, 1, 2, 2], "similarity": [0.1, 0.3, 0.2, 0.6, 0.5, 0.7],
                               "selected": [True, False, False, True, True, False]})
    figure = task_skill_similarity(candidates, bins=4)
    steps, pooled = figure.axes
    assert np.allclose(_line(steps, "retrieved candidates"), [0.25, 0.6])
    assert np.allclose(_line(steps, "selected skill"), [0.35, 0.5])
    counts = [bar.get_height() for bar in pooled.patches]
    assert sum(counts[:4]) == 6 and sum(counts[4:]) == 3


def test_library_map_colours_utility_sizes_uses_and_marks_rounds() -> None:
    points = pd.DataFrame({"skill_id": [0, 1, 2, 3], "pc1": [0.1, -0.2, 0.3, 0.0], "pc2": [0.0, 0.1, -0.1, 0.2],
                           "utility": [0.9, 0.2, 0.5, 0.4], "uses": [10, 3, 0, 7],
                           "origin": ["seed", "seed", "distilled", "distilled"], "round": [None, None, 0, 0],
                           "evicted": [False, False, False, True]})
    figure = library_embedding_map(points, (0.6, 0.3), language="en")
    axes = figure.axes[0]
    scatters = {c.get_gid(): c for c in axes.collections if isinstance(c, PathCollection)}
    assert set(scatters) == {"seed", "round-0", "evicted"}
    assert scatters["seed"].get_offsets().tolist() == [[0.1, 0.0], [-0.2, 0.1]]
    assert scatters["seed"].get_array().tolist() == [0.9, 0.2]  # colour = U
    assert np.allclose(scatters["seed"].get_sizes(), marker_area(pd.Series([10, 3])))
    assert scatters["round-0"].get_offsets().tolist() == [[0.3, -0.1]]
    assert scatters["evicted"].get_offsets().tolist() == [[0.0, 0.2]]
    assert axes.get_xlabel() == "PC1 (60% of variance)"
    assert sorted(t.get_text() for t in axes.texts) == ["0", "1", "2", "3"]


@pytest.mark.e2e
def test_a_ci_skill1_round_reads_back_as_its_metrics(tmp_path: Path, small_store_root: Path) -> None:
    params = with_overrides(load_params(project_root() / "params" / "ci.yaml"),
                            [*CI_SKILL1, "round.rollout_steps=1", f"experiment.run_root={tmp_path / 'runs'}"])
    result = run_round(params, 0, out_dir=tmp_path / "round", store_root=small_store_root, progress=False)
    record = read_skill1_round(result.root)

    assert record.steps["step"].tolist() == [1] and record.round_index == 0
    assert len(record.rollouts) == 4 and len(record.candidates) == int(record.rollouts["candidates"].sum()) == 8
    per_step = record.rollouts.groupby("step")
    for column, metric in (("u_hat", "u_hat_mean"), ("r_distill", "r_distill_mean"), ("ndcg", "ndcg_mean"),
                           ("selected_best", "selection_precision"), ("success", "success_with_skill")):
        assert per_step[column].mean().tolist() == pytest.approx(record.steps[f"skill1/{metric}"].tolist()), metric
    assert (record.candidates.groupby("episode_id")["selected"].sum() == 1).all()
    by_step = record.library_by_step()
    assert by_step["size"].tolist() == [4, 4] and by_step["updates"].tolist() == [0, 8]
    assert record.library_table()["uses"].sum() == 8

    encoder = SentenceEncoder()
    mapped = library_map(record.skills(), encoder)
    assert 1.0 >= sum(mapped.explained) and mapped.explained[0] >= mapped.explained[1] > 0
    again = library_map(record.skills().iloc[::-1], encoder)  # the same points whatever the row order
    assert np.allclose(again.points.sort_values("skill_id")[["pc1", "pc2"]], mapped.points[["pc1", "pc2"]],
                       atol=1e-5)
    for figure in (skill1_dynamics(record.steps), utility_over_training(record.rollouts, by_step),
                   task_skill_similarity(record.candidates), library_embedding_map(mapped.points, mapped.explained)):
        assert figure.axes

    # the four deployed conditions: the same jobs and seed in every run, the library's runs with the selected
    # skills, four paired comparisons; a second call resumes them without running an episode
    start = resolve_checkpoint(params)[0]
    conditions = run_skill1_conditions(params, result.root, start, limit=2, progress=False,
                                       store_root=small_store_root)
    plans = {name: run.plan for name, run in conditions.runs.items()}
    assert list(plans) == list(CONDITIONS) and len({(p.jobs, p.seed) for p in plans.values()}) == 1
    assert {name: p.skills["provider"] for name, p in plans.items()} == {
        "start-bare": "none", "start-library": "skill1-library", "trained-bare": "none",
        "trained-library": "skill1-library"}
    assert plans["start-bare"].model != plans["trained-bare"].model
    lines = {name: (run.run_dir / "traces.jsonl").read_text() for name, run in conditions.runs.items()}
    deployed = [json.loads(line)["provenance"]["selected_skills"] for line in lines["trained-library"].splitlines()]
    assert deployed and all(len(s) <= 1 for s in deployed)
    paired = conditions.paired(samples=200, seed=3)
    assert [tuple(r) for r in paired[["a", "b", "kind"]].values] == [tuple(p) for p in PAIRS]
    assert (paired["pairs"] == 2).all() and (conditions.table()["n"] == 2).all()
    assert (result.root / "deployed" / "trained-library" / "vs-trained-bare" / "comparison.json").is_file()
    again = run_skill1_conditions(params, result.root, start, limit=2, progress=False, store_root=small_store_root)
    assert {name: (run.run_dir / "traces.jsonl").read_text() for name, run in again.runs.items()} == lines
    with pytest.raises(FileNotFoundError, match="the round's committed library is missing"):
        run_skill1_conditions(params, tmp_path, start, limit=2, progress=False, store_root=small_store_root)
