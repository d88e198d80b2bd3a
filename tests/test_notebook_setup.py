"""The notebooks' set-up calls: parameter overrides, checkpoint or stand-in, and a stable run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from intraskill.hashing import sha256_json
from intraskill.params import load_params
from intraskill.paths import params_path
from intraskill.pipeline.notebook import (
    STAND_IN_MARK,
    CheckpointChoice,
    behaviour_runs,
    coevolve_evidence,
    four_conditions,
    notebook_params,
)
from intraskill.report.status import condition_name, model_name, status_note

CHOICES = {"base": CheckpointChoice("", "**/warmstart*", "expert:without:check_budget"),
           "trained": CheckpointChoice("", "**/round-*/checkpoint*", "expert")}


def test_notebook_params_applies_the_overrides(tmp_path: Path) -> None:
    stored = load_params(params_path("ci"))
    setup = notebook_params("ci", str(tmp_path), max_turns=5, repeats=3)
    assert setup.root == tmp_path and setup.params.experiment.run_root == str(tmp_path)
    assert (setup.params.sampling.max_turns, setup.params.evaluation.repeats) == (5, 3)
    kept = notebook_params("ci", str(tmp_path))
    assert kept.params.sampling == stored.sampling and kept.params.evaluation == stored.evaluation
    assert setup.with_spec("expert").model.spec == "expert" and setup.params.model.spec == stored.model.spec


def test_four_conditions_prefers_a_found_checkpoint_over_the_stand_in(tmp_path: Path) -> None:
    found = tmp_path / "cold" / "warmstart-ci" / "checkpoint"
    found.mkdir(parents=True)
    (found.parent / "config.json").write_text("{}", encoding="utf-8")
    chosen = four_conditions("ci", str(tmp_path), split="test", limit=6, max_turns=12, checkpoints=CHOICES,
                             banks={"S0": "bank.json", "St": ""})
    spec = chosen.params.model.spec
    assert chosen.models["base"].to_dict() == {"spec": spec, "checkpoint": str(found.parent), "label": "base"}
    assert chosen.models["trained"].to_dict() == {"spec": "expert", "checkpoint": None,
                                                  "label": "trained (stand-in)"}
    assert chosen.banks == {"S0": "bank.json", "St": None}
    digest = sha256_json([chosen.params.model_dump(), "test", 6,
                          {name: model.to_dict() for name, model in chosen.models.items()}, chosen.banks])
    assert chosen.out == tmp_path / f"eval-4c-test-{digest[:10]}"
    assert chosen.params.sampling.max_turns == 12
    assert chosen.model_params("trained").model.spec == "expert"
    assert chosen.model_params("base") == chosen.params


def test_four_conditions_keeps_an_explicit_folder_and_checkpoint(tmp_path: Path) -> None:
    choices = {**CHOICES, "trained": CheckpointChoice(str(tmp_path / "mine"), "**/none", "expert")}
    chosen = four_conditions("ci", str(tmp_path), split="val", limit=0, max_turns=0, checkpoints=choices,
                             banks={"S0": "", "St": ""}, out_dir=str(tmp_path / "out"))
    assert chosen.out == tmp_path / "out"
    assert chosen.models["trained"].checkpoint == str(tmp_path / "mine")
    assert chosen.models["base"].label == "base (stand-in)"
    assert chosen.params.sampling.max_turns == load_params(params_path("ci")).sampling.max_turns


def _coevolve_run(root: Path, *, final_chunks: int) -> Path:
    """The files a finished one-round co-evolve run leaves (plan, summary, S₀, checkpoint, selected bank)."""
    from intraskill.jsonl import write_json
    from intraskill.pipeline.coevolve import CoEvolveSummary, RoundSummary
    from intraskill.skills.bank import Skill, SkillBank, save_skillbank

    round_dir = root / "round-000"
    (round_dir / "checkpoint" / "model").mkdir(parents=True)
    (round_dir / "checkpoint" / "model" / "config.json").write_text("{}", encoding="utf-8")
    tidy = Skill("tidy", "### Be tidy\n- Click only listed values.", metadata={"estimated_effect": 0.05})
    save_skillbank(SkillBank("ci-s0", (tidy,)), round_dir / "skillbank.json")
    save_skillbank(SkillBank("selected", (tidy,)[:final_chunks]), round_dir / "gate" / "selected_skillbank.json")
    write_json(root / "plan.json", {"start": {"checkpoint": None, "curriculum_state_id": "c"}})
    CoEvolveSummary(fingerprint="f", rounds=[RoundSummary(
        round_index=0, root=str(round_dir), checkpoint=str(round_dir / "checkpoint" / "model"),
        pool_path=str(round_dir / "analysis" / "candidate_pool.json"), gate_status="complete", curriculum_path=None,
        gate_dir=str(round_dir / "gate"))]).write(root / "co_evolve_summary.json")
    return root


def test_coevolve_evidence_names_start_final_checkpoint_and_banks(tmp_path: Path) -> None:
    assert coevolve_evidence(tmp_path / "absent") is None
    run = _coevolve_run(tmp_path / "co-evolve", final_chunks=1)
    evidence = coevolve_evidence(run)
    assert evidence is not None and evidence.rounds == 1 and evidence.start_checkpoint is None
    assert evidence.final_checkpoint == run / "round-000" / "checkpoint" / "model"
    assert evidence.s0_bank == run / "round-000" / "skillbank.json"
    assert evidence.final_bank == run / "round-000" / "gate" / "selected_skillbank.json"
    chosen = four_conditions("ci", str(tmp_path), split="test", limit=6, max_turns=4, checkpoints=CHOICES,
                             banks={"S0": "", "St": ""}, coevolve_dir=str(run), allow_stand_ins=False)
    assert chosen.missing is None
    assert {name: (model.checkpoint, model.label) for name, model in chosen.models.items()} == {
        "base": (None, "start (untrained)"), "trained": (str(evidence.final_checkpoint), "co-evolve round 0")}
    assert chosen.banks == {"S0": str(evidence.s0_bank), "St": str(evidence.final_bank)}
    # the report's Chinese pages name these models and their conditions in Chinese (a model id stays as it is)
    names = {name: model_name(model.label, "zh") for name, model in chosen.models.items()}
    assert names == {"base": "起点（untrained）", "trained": "协同演化第 0 轮"}
    assert condition_name("warm start", None, "zh") == "热启动·无技能"
    assert condition_name("co-evolve round 1", "St", "zh") == "协同演化第 1 轮 + St"
    assert condition_name("warm start", None, "en") == "warm start, no skill"
    assert model_name("warm start + no skill", "zh") == "热启动 + 无技能"
    assert model_name("start (untrained) + S₀", "zh") == "起点（untrained） + S₀"  # notebook 05's arm a
    assert status_note(None, ["warm start", "co-evolve round 1"], coevolve_dir=str(run), params_name="ci",
                       language="zh") == "评估对象：**热启动**、**协同演化第 1 轮**。"
    empty = coevolve_evidence(_coevolve_run(tmp_path / "empty-gate", final_chunks=0))
    assert empty is not None and empty.final_bank is None  # the last gate kept nothing: no final bank


def test_report_set_up_states_what_is_missing_instead_of_a_stand_in(tmp_path: Path) -> None:
    absent = str(tmp_path / "co-evolve")
    chosen = four_conditions("ci", str(tmp_path), split="test", limit=6, max_turns=4, checkpoints=CHOICES,
                             banks={"S0": "", "St": ""}, coevolve_dir=absent)
    assert chosen.models == {} and chosen.missing == f"no co-evolve run at {absent}"
    note = status_note(chosen.missing, [], coevolve_dir=absent, params_name="organism", language="en")
    assert note.startswith(f"**No co-evolve run at `{absent}`.**") and "params/organism.yaml" in note
    assert "协同演化" in status_note(chosen.missing, [], coevolve_dir=absent, params_name="organism", language="zh")
    refused = four_conditions("ci", str(tmp_path), split="test", limit=6, max_turns=4, checkpoints=CHOICES,
                              banks={"S0": "", "St": ""}, allow_stand_ins=False)
    assert refused.models == {} and refused.missing.startswith("no base checkpoint matching **/warmstart*")
    assert STAND_IN_MARK not in status_note(refused.missing, [], coevolve_dir="", params_name="ci", language="en")
    behaviour = behaviour_runs("ci", str(tmp_path), split="val", limit=2, repeats=1, max_turns=4,
                               runs={"a": "", "b": ""}, stand_ins={"a": "expert", "b": "expert"},
                               labels={"a": "", "b": ""}, allow_stand_ins=False)
    assert behaviour.run_dirs == {} and behaviour.missing == "no run directory for arm(s) ['a', 'b']"
    teaching = four_conditions("ci", str(tmp_path), split="test", limit=6, max_turns=4, checkpoints=CHOICES,
                               banks={"S0": "", "St": ""})  # the notebooks' own default: labelled stand-ins
    labels = [model.label for model in teaching.models.values()]
    assert labels == ["base (stand-in)", "trained (stand-in)"]
    assert status_note(None, labels, coevolve_dir="", params_name="ci", language="en").startswith(
        "**Scripted stand-ins, not trained models:**")
    with pytest.raises(ValueError, match="language: expected one of"):
        status_note(None, labels, coevolve_dir="", params_name="ci", language="fr")
