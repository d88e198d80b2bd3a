"""The notebooks' set-up calls: parameter overrides, checkpoint or stand-in, and a stable run folder."""

from __future__ import annotations

from pathlib import Path

from intraskill.hashing import sha256_json
from intraskill.params import load_params
from intraskill.paths import params_path
from intraskill.pipeline.notebook import CheckpointChoice, four_conditions, notebook_params

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
