"""The set-up of the evaluation notebooks: one call from a notebook's parameters to what it runs.

:func:`four_conditions` resolves notebook 04's two models (a co-evolve run's start and final checkpoint, a
checkpoint found under the run root, or a labelled stand-in) and its run folder; :func:`behaviour_runs` gives
notebook 05 its two run directories, producing the co-evolve run's deployed runs or a stand-in run for each arm
that names none. Both start from :func:`notebook_params`. A stand-in's label carries :data:`STAND_IN_MARK`; with
``allow_stand_ins=False`` (the report pages) a missing model is named in ``missing``, never replaced (the report's
sentence for it is :func:`intraskill.report.status.status_note`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from intraskill.evaluate.runner import find_checkpoint, read_plan, run_eval
from intraskill.hashing import sha256_json
from intraskill.layout import RunDir
from intraskill.params import Params, load_params
from intraskill.paths import params_path, resolve_project_path, runs_root
from intraskill.pipeline.coevolve import CoEvolveSummary
from intraskill.skills.bank import load_skillbank

STAND_IN_MARK = "(stand-in)"
"""Carried by every stand-in's label; the report's pages refuse an embedded output that shows it."""


@dataclass(frozen=True)
class NotebookParams:
    """A parameter set with a notebook's run root and overrides applied."""

    params: Params
    root: Path

    def with_spec(self, spec: str) -> Params:
        """``params`` whose ``model.spec`` is ``spec`` (a stand-in, or the set's model on a checkpoint)."""
        return self.params.model_copy(update={"model": self.params.model.model_copy(update={"spec": spec})})


def notebook_params(params_name: str, run_root: str = "", *, max_turns: int = 0,
                    repeats: int = 0) -> NotebookParams:
    """Load ``params_name`` (a name in ``params/`` or a YAML path) with the notebook's overrides.

    ``run_root`` (empty: the set's ``experiment.run_root``) becomes the set's run root; ``max_turns``
    and ``repeats`` replace ``sampling.max_turns`` and ``evaluation.repeats`` unless 0.
    """
    params = load_params(params_path(params_name))
    root = runs_root(run_root or params.experiment.run_root)
    update = {"experiment": params.experiment.model_copy(update={"run_root": str(root)}),
              "sampling": params.sampling.model_copy(update={"max_turns": max_turns or params.sampling.max_turns})}
    if repeats:
        update["evaluation"] = params.evaluation.model_copy(update={"repeats": repeats})
    return NotebookParams(params.model_copy(update=update), root)


@dataclass(frozen=True)
class CoEvolveEvidence:
    """What a co-evolve run offers the evaluation notebooks: its start, its final round and both banks.

    ``start_checkpoint`` is ``None`` when the run started from the parameter set's model as configured (e.g. a
    random-init organism); ``final_bank`` is ``None`` when the last gate selected no chunk (or did not run).
    """

    run_dir: Path
    rounds: int
    start_checkpoint: str | None
    final_checkpoint: Path
    s0_bank: Path | None
    final_bank: Path | None

    def to_dict(self) -> dict[str, object]:
        return {key: str(value) if isinstance(value, Path) else value for key, value in self.__dict__.items()}


def coevolve_evidence(run_dir: str | Path) -> CoEvolveEvidence | None:
    """The finished rounds of the co-evolve run at ``run_dir`` (relative to the project root), or ``None`` when it
    has no plan or no finished round with a checkpoint."""
    root = resolve_project_path(run_dir)
    run = RunDir(root)
    plan, summary = run.plan, run.summary
    if not plan.is_file() or not summary.is_file():
        return None
    rounds = CoEvolveSummary.read(summary).rounds
    last = run.round(len(rounds) - 1)
    checkpoint = last.checkpoint.model
    if not rounds or not checkpoint.is_saved():
        return None
    selected = last.gate.selected_skillbank
    final_bank = selected if selected.is_file() and load_skillbank(selected).skills else None
    s0 = run.round(0).skillbank
    start = json.loads(plan.read_text(encoding="utf-8"))["start"]["checkpoint"]
    return CoEvolveEvidence(root, len(rounds), start and str(resolve_project_path(start)), checkpoint.root,
                            s0 if s0.is_file() else None, final_bank)


@dataclass(frozen=True)
class EvalModel:
    """One evaluated model of notebook 04: a checkpoint of the set's model, or a labelled stand-in."""

    spec: str
    checkpoint: str | None
    label: str

    def to_dict(self) -> dict[str, str | None]:
        return {"spec": self.spec, "checkpoint": self.checkpoint, "label": self.label}


@dataclass(frozen=True)
class CheckpointChoice:
    """Where a model's checkpoint comes from: ``explicit`` (a directory), else the newest ``pattern``
    match under the run root, else the ``stand_in`` policy spec."""

    explicit: str
    pattern: str
    stand_in: str


@dataclass(frozen=True)
class FourConditions:
    """Notebook 04's set-up: the parameters, the two models, the banks and the folder of the four runs.

    ``missing`` names what is absent when nothing is evaluated (no co-evolve run, or no checkpoint and
    stand-ins refused); ``models`` is then empty.
    """

    setup: NotebookParams
    models: dict[str, EvalModel]
    banks: dict[str, str | None]
    out: Path
    missing: str | None = None

    @property
    def params(self) -> Params:
        return self.setup.params

    def model_params(self, name: str) -> Params:
        """The parameters that evaluate model ``name`` (its policy spec in ``model.spec``)."""
        return self.setup.with_spec(self.models[name].spec)

    def to_dict(self) -> dict[str, object]:
        return {"models": {name: model.to_dict() for name, model in self.models.items()},
                "banks": self.banks, "out": str(self.out), "missing": self.missing}


def _coevolve_models(setup: NotebookParams, evidence: CoEvolveEvidence) -> dict[str, EvalModel]:
    spec = setup.params.model.spec
    start = "warm start" if evidence.start_checkpoint else f"start ({setup.params.model.checkpoint or spec})"
    return {"base": EvalModel(spec, evidence.start_checkpoint, start),
            "trained": EvalModel(spec, str(evidence.final_checkpoint), f"co-evolve round {evidence.rounds - 1}")}


def four_conditions(params_name: str, run_root: str = "", *, split: str, limit: int, max_turns: int,
                    checkpoints: Mapping[str, CheckpointChoice], banks: Mapping[str, str],
                    out_dir: str = "", coevolve_dir: str = "", allow_stand_ins: bool = True) -> FourConditions:
    """Resolve notebook 04's models and run folder (default ``<run_root>/eval-4c-<split>-<hash>``, the
    hash of the parameters, split, limit, models and banks); empty bank paths mean none.

    With ``coevolve_dir`` the models are that run's start and final checkpoint and the banks its S₀ and final
    bank (``checkpoints`` and ``banks`` are not used); a run that does not exist leaves ``missing`` set. Without
    ``allow_stand_ins`` a checkpoint that is not found is ``missing`` too, instead of a stand-in.
    """
    setup = notebook_params(params_name, run_root, max_turns=max_turns)
    if coevolve_dir:
        evidence = coevolve_evidence(coevolve_dir)
        if evidence is None:
            return FourConditions(setup, {}, {}, setup.root, f"no co-evolve run at {coevolve_dir}")
        models = _coevolve_models(setup, evidence)
        chosen = {"S0": str(evidence.s0_bank) if evidence.s0_bank else None,
                  "St": str(evidence.final_bank) if evidence.final_bank else None}
    else:
        models = {}
        for name, choice in checkpoints.items():
            checkpoint = Path(choice.explicit) if choice.explicit else find_checkpoint(setup.root, choice.pattern)
            if checkpoint is None and not allow_stand_ins:
                return FourConditions(setup, {}, {}, setup.root,
                                      f"no {name} checkpoint matching {choice.pattern} under {setup.root}")
            models[name] = (EvalModel(setup.params.model.spec, str(checkpoint), name) if checkpoint is not None
                            else EvalModel(choice.stand_in, None, f"{name} {STAND_IN_MARK}"))
        chosen = {name: path or None for name, path in banks.items()}
    digest = sha256_json([setup.params.model_dump(), split, limit,
                          {name: model.to_dict() for name, model in models.items()}, chosen])[:10]
    out = Path(out_dir) if out_dir else setup.root / f"eval-4c-{split}-{digest}"
    return FourConditions(setup, models, chosen, out)


def run_label(run_dir: str | Path) -> str:
    """``model_id (checkpoint_id)`` of an evaluation run directory's plan, plus its split."""
    plan = read_plan(run_dir)
    model = plan.model
    checkpoint = model.get("checkpoint_id")
    name = f"{model.get('model_id')} ({checkpoint})" if checkpoint else str(model.get("model_id"))
    return f"{name}, {plan.split}"


@dataclass(frozen=True)
class BehaviourRuns:
    """Notebook 05's two arms: run directory and display label of each (both empty, with ``missing`` naming
    what is absent, when there is nothing to compare)."""

    run_dirs: dict[str, Path]
    labels: dict[str, str]
    missing: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"arms": {arm: {"run": str(path), "label": self.labels[arm]} for arm, path in self.run_dirs.items()},
                "missing": self.missing}


def _coevolve_behaviour(setup: NotebookParams, evidence: CoEvolveEvidence, split: str, limit: int,
                        labels: Mapping[str, str]) -> BehaviourRuns:
    """Arm a: the run's start with S₀; arm b: its final checkpoint with the final bank (bare without one)."""
    models = _coevolve_models(setup, evidence)
    arms = {"a": (models["base"], evidence.s0_bank, "S₀"), "b": (models["trained"], evidence.final_bank, "S_T")}
    folder = setup.root / "behaviour-{}-{}".format(split, sha256_json(
        [setup.params.model_dump(), split, limit, {arm: [model.to_dict(), str(bank)] for arm, (model, bank, _)
                                                   in arms.items()}])[:10])
    run_dirs, names = {}, {}
    for arm, (model, bank, bank_name) in arms.items():
        run_dirs[arm] = run_eval(setup.params, split, model.checkpoint, bank, folder / arm, limit=limit or None,
                                 progress=False).run_dir
        names[arm] = labels[arm] or f"{model.label} + {bank_name if bank is not None else 'no skill'}"
    return BehaviourRuns(run_dirs, names)


def behaviour_runs(params_name: str, run_root: str = "", *, split: str, limit: int, repeats: int, max_turns: int,
                   runs: Mapping[str, str], stand_ins: Mapping[str, str], labels: Mapping[str, str],
                   coevolve_dir: str = "", allow_stand_ins: bool = True) -> BehaviourRuns:
    """Each arm's given run directory, or a stand-in run of its ``stand_ins`` spec produced (or resumed)
    under ``<run_root>/behaviour-<split>-<hash>/<arm>``; labels default to :func:`run_label`.

    With ``coevolve_dir`` the arms are that run's start with S₀ and its final checkpoint with the final bank,
    produced (or resumed) the same way; a run that does not exist leaves ``missing`` set. Without
    ``allow_stand_ins`` an arm that names no run is ``missing`` too, instead of a stand-in.
    """
    setup = notebook_params(params_name, run_root, max_turns=max_turns, repeats=repeats)
    if coevolve_dir:
        evidence = coevolve_evidence(coevolve_dir)
        if evidence is None:
            return BehaviourRuns({}, {}, f"no co-evolve run at {coevolve_dir}")
        return _coevolve_behaviour(setup, evidence, split, limit, labels)
    if not allow_stand_ins and not all(runs.values()):
        return BehaviourRuns({}, {}, f"no run directory for arm(s) {[arm for arm, given in runs.items() if not given]}")
    folder = setup.root / "behaviour-{}-{}".format(
        split, sha256_json([setup.params.model_dump(), split, limit, *stand_ins.values()])[:10])
    run_dirs, names = {}, {}
    for arm, given in runs.items():
        if given:
            run_dirs[arm] = Path(given)
            names[arm] = labels[arm] or run_label(given)
        else:
            run_dirs[arm] = run_eval(setup.with_spec(stand_ins[arm]), split, None, None, folder / arm,
                                     limit=limit, progress=False).run_dir
            names[arm] = labels[arm] or f"{run_label(run_dirs[arm])} {STAND_IN_MARK}"
    return BehaviourRuns(run_dirs, names)
