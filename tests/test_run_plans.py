"""Every run directory kind with a plan fails closed when the plan is deleted beside the outputs it made."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from intraskill.experiment.matrix import MatrixPlanMismatchError, write_matrix_plan
from intraskill.pipeline.coevolve import CoEvolvePlanMismatchError, write_coevolve_plan
from intraskill.pipeline.cold_start import ColdStartPlanMismatchError, write_cold_start_plan
from intraskill.pipeline.round import RoundPlanMismatchError, write_round_plan

PLAN = {"pipeline_version": "test", "lr": 1e-3}


KINDS: dict[str, tuple[Callable[[Path, dict], str], str, type[Exception], str, tuple[str, ...]]] = {
    # kind: (plan writer, plan file, error, an output, inputs that may precede the plan)
    "round": (write_round_plan, "plan.json", RoundPlanMismatchError, "steps/step-0001/traces.jsonl",
              ("skillbank.json", "curriculum.json", "val-before/summary.json")),
    "co-evolve": (write_coevolve_plan, "plan.json", CoEvolvePlanMismatchError, "round-000/plan.json",
                  ("round-000/skillbank.json",)),
    "cold start": (write_cold_start_plan, "plan.json", ColdStartPlanMismatchError, "success_cards.jsonl", ()),
    "matrix": (write_matrix_plan, "matrix.json", MatrixPlanMismatchError, "cells/grpo-0/cell.json", ()),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_deleted_plan_beside_outputs_is_refused_naming_the_file(tmp_path: Path, kind: str) -> None:
    writer, name, error, output, inputs = KINDS[kind]
    root = tmp_path / kind.replace(" ", "-")
    for entry in inputs:  # what a run's preparation writes before its plan is no reason to refuse
        (root / entry).parent.mkdir(parents=True, exist_ok=True)
        (root / entry).write_text("{}", encoding="utf-8")
    fingerprint = writer(root, PLAN)
    assert writer(root, PLAN) == fingerprint
    (root / output).parent.mkdir(parents=True, exist_ok=True)
    (root / output).write_text("{}", encoding="utf-8")
    (root / name).unlink()
    changed = {**PLAN, "lr": 1e-2}
    with pytest.raises(error, match=re.escape(f"{root / name} is missing but {root} holds")):
        writer(root, changed)
    assert not (root / name).exists()


def test_a_corrupt_plan_is_one_error_naming_the_file(tmp_path: Path) -> None:
    write_round_plan(tmp_path, PLAN)
    (tmp_path / "plan.json").write_text('{"fingerprint": ', encoding="utf-8")
    with pytest.raises(RoundPlanMismatchError, match=re.escape(f"{tmp_path / 'plan.json'}: truncated or corrupt")):
        write_round_plan(tmp_path, PLAN)
