"""The run-directory layout: the file names old run directories and the shipped records carry, pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

from intraskill.layout import (
    GATE_A,
    ONLINE,
    ColdStartDir,
    EvalDir,
    GateDir,
    MatrixDir,
    RoundDir,
    RunDir,
    ValidationDir,
    WarmstartDir,
)

ROOT = Path(__file__).resolve().parents[1]


def relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def test_a_round_keeps_the_names_its_records_were_written_under(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    round_dir = run.round(2)
    names = {
        run.plan: "plan.json", run.summary: "co_evolve_summary.json",
        round_dir.plan: "round-002/plan.json", round_dir.metrics: "round-002/metrics.jsonl",
        round_dir.curriculum: "round-002/curriculum.json", round_dir.next_curriculum: "round-002/next_curriculum.json",
        round_dir.step(7).traces: "round-002/steps/step-0007/traces.jsonl",
        round_dir.step(7).rollout: "round-002/steps/step-0007/rollout.json",
        round_dir.checkpoint.state: "round-002/checkpoint/state.json",
        round_dir.checkpoint.model.config: "round-002/checkpoint/model/config.json",
        round_dir.val_before.summary: "round-002/val-before/summary.json",
        round_dir.val_compare.comparison: "round-002/val-compare/comparison.json",
        round_dir.analysis.pool: "round-002/analysis/candidate_pool.json",
        round_dir.gate.selected_skillbank: "round-002/gate/selected_skillbank.json",
        round_dir.gate.manifest(ONLINE): "round-002/gate/online_gate_manifest.json",
        round_dir.library.snapshot: "round-002/library/snapshot.json",
    }
    assert {relative(path, tmp_path): name for path, name in names.items()} == {name: name for name in names.values()}


def test_steps_and_rounds_are_found_in_order(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for index in (1, 0):
        for step in (2, 1, 3):
            run.round(index).step(step).root.mkdir(parents=True)
    run.round(0).step(3).done.touch()
    run.round(0).step(1).done.touch()
    assert [r.root.name for r in run.round_dirs()] == ["round-000", "round-001"]
    assert run.round(0).finished_steps() == [1, 3]
    assert [s.index for s in run.round(1).step_dirs()] == [1, 2, 3]


def test_paths_are_values_and_accept_strings(tmp_path: Path) -> None:
    assert EvalDir(str(tmp_path)) == EvalDir(tmp_path)
    assert EvalDir(tmp_path) != GateDir(tmp_path)
    with pytest.raises(AttributeError):
        EvalDir(tmp_path).root = tmp_path  # type: ignore[misc]


def test_the_shipped_records_sit_where_the_layout_names_them() -> None:
    validation = ValidationDir(ROOT / "data/results/organism_additive/gate-validation-organism")
    gate = validation.gate(2, 20260901)
    assert gate.contributions.is_file() and gate.manifest(GATE_A).is_file()
    assert validation.bare_val(1).tasks.is_file()
    assert validation.warmstart.ground_truth.is_file() and validation.warmstart.manifest.is_file()
    release = ROOT / "data/intraskill-release"
    assert RoundDir(release / "round-000").gate.contributions.is_file()
    assert RoundDir(release / "round-000").analysis.summary.is_file()
    assert ColdStartDir(release / "cold-start").s0.is_file()
    assert EvalDir(release / "eval/qwen35-4b-test-iter80-st").summary.is_file()


def test_matrix_and_warm_start_names(tmp_path: Path) -> None:
    matrix = MatrixDir(tmp_path)
    assert relative(matrix.cell("grpo/seed-1").result, tmp_path) == "cells/grpo/seed-1/cell.json"
    assert relative(matrix.baseline(1).record, tmp_path) == "baselines/seed-1/baseline.json"
    assert relative(matrix.val_before(0).plan, tmp_path) == "shared/val-before-seed-0/plan.json"
    assert (relative(matrix.plan, tmp_path), relative(matrix.warmstart, tmp_path)) == \
        ("matrix.json", "shared/warmstart.json")
    matrix.cell("grpo/seed-1").root.mkdir(parents=True)
    matrix.cell("grpo/seed-1").result.write_text("{}", encoding="utf-8")
    assert matrix.cell_results() == [matrix.cell("grpo/seed-1").result]
    assert relative(WarmstartDir(tmp_path).checkpoint.config, tmp_path) == "checkpoint/config.json"
