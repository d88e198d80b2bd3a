"""The set-up of the evaluation notebooks: one call from a notebook's parameters to what it runs.

:func:`four_conditions` resolves notebook 04's two models (a checkpoint found under the run root, or a
labelled stand-in) and its run folder; :func:`behaviour_runs` gives notebook 05 its two run directories,
producing a stand-in run for each arm that names none. Both start from :func:`notebook_params`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from intraskill.evaluate.runner import find_checkpoint, read_plan, run_eval
from intraskill.hashing import sha256_json
from intraskill.params import Params, load_params
from intraskill.paths import params_path, runs_root


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
    """Notebook 04's set-up: the parameters, the two models, the banks and the folder of the four runs."""

    setup: NotebookParams
    models: dict[str, EvalModel]
    banks: dict[str, str | None]
    out: Path

    @property
    def params(self) -> Params:
        return self.setup.params

    def model_params(self, name: str) -> Params:
        """The parameters that evaluate model ``name`` (its policy spec in ``model.spec``)."""
        return self.setup.with_spec(self.models[name].spec)

    def to_dict(self) -> dict[str, object]:
        return {"models": {name: model.to_dict() for name, model in self.models.items()},
                "banks": self.banks, "out": str(self.out)}


def four_conditions(params_name: str, run_root: str = "", *, split: str, limit: int, max_turns: int,
                    checkpoints: Mapping[str, CheckpointChoice], banks: Mapping[str, str],
                    out_dir: str = "") -> FourConditions:
    """Resolve notebook 04's models and run folder (default ``<run_root>/eval-4c-<split>-<hash>``, the
    hash of the parameters, split, limit, models and banks); empty bank paths mean none."""
    setup = notebook_params(params_name, run_root, max_turns=max_turns)
    models = {}
    for name, choice in checkpoints.items():
        checkpoint = Path(choice.explicit) if choice.explicit else find_checkpoint(setup.root, choice.pattern)
        models[name] = (EvalModel(setup.params.model.spec, str(checkpoint), name) if checkpoint is not None
                        else EvalModel(choice.stand_in, None, f"{name} (stand-in)"))
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
    """Notebook 05's two arms: run directory and display label of each."""

    run_dirs: dict[str, Path]
    labels: dict[str, str]

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {arm: {"run": str(path), "label": self.labels[arm]} for arm, path in self.run_dirs.items()}


def behaviour_runs(params_name: str, run_root: str = "", *, split: str, limit: int, repeats: int, max_turns: int,
                   runs: Mapping[str, str], stand_ins: Mapping[str, str],
                   labels: Mapping[str, str]) -> BehaviourRuns:
    """Each arm's given run directory, or a stand-in run of its ``stand_ins`` spec produced (or resumed)
    under ``<run_root>/behaviour-<split>-<hash>/<arm>``; labels default to :func:`run_label`."""
    setup = notebook_params(params_name, run_root, max_turns=max_turns, repeats=repeats)
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
            names[arm] = labels[arm] or f"{run_label(run_dirs[arm])} (stand-in)"
    return BehaviourRuns(run_dirs, names)
