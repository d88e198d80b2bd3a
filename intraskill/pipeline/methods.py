"""The training methods a round runs (``round.method``), behind one interface: :class:`TrainingMethod`.

A caller asks :func:`training_method` for the parameters' method and never branches on its name: the round
puts the method's entries in its plan, checks its starting point and runs its steps (:class:`MethodSteps`);
:func:`~intraskill.pipeline.prepare.prepare_round` gives a bank and curriculum only to a method that
:attr:`~TrainingMethod.uses_curriculum`; co-evolution evolves only such a method's bank, and carries a method's
committed :meth:`~TrainingMethod.library` from round to round, which the control matrix also deploys.

- ``intraskill`` (:class:`CurriculumMethod`): the curriculum's group-shared masks, full-skill retries and dynamic
  sampling (:func:`~intraskill.pipeline.rollout.run_rollout_step`); its bank may evolve between rounds.
- ``skill1`` (:class:`~intraskill.pipeline.skill1.Skill1Method`): query → retrieve → rank → act → distil over its
  own library (``docs/method.md`` §10), carried from round to round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from intraskill.params import METHOD_SPECS, MethodName, Params
from intraskill.pipeline.rollout import CurriculumStepRollout, RoundContext, StepRollout, run_rollout_step
from intraskill.pipeline.skill1 import Skill1Method
from intraskill.skills.curriculum import CurriculumState
from intraskill.training.batching import TrainSample, train_samples_from_groups
from intraskill.training.metrics import rollout_step_metrics


class MethodSteps(Protocol):
    """A method's side of one open round: each step's rollouts and trainer samples, and what it commits once the
    step's update is in the round's checkpoint."""

    def rollout(self, step: int, timing: dict[str, float]) -> tuple[StepRollout, list[TrainSample]]:
        """Run (or re-use) step ``step``'s rollouts: its ``rollout.json`` record and the trainer's samples; adds
        its ``rollout_s`` (and ``retry_s``) to ``timing``."""
        ...

    def commit(self, step: int) -> None:
        """Commit what step ``step`` changed beside the model (after its checkpoint; idempotent)."""
        ...

    def close(self) -> None:
        ...


class TrainingMethod(Protocol):
    """One training method: its name in ``round.method`` and what a round, its preparation, co-evolution and the
    control matrix ask of it."""

    name: MethodName
    uses_curriculum: bool
    """Whether its rounds train with a skill bank's curriculum (which co-evolution's analyst and gate evolve):
    :attr:`~intraskill.params.MethodSpec.uses_curriculum` of its :data:`~intraskill.params.METHOD_SPECS` entry."""
    rollout_record: type[StepRollout]
    """The record of its steps' ``rollout.json``."""

    def plan(self, params: Params, library_start: Path | None) -> dict[str, Any]:
        """Its entries in the round's fingerprinted plan (none for a method that predates the choice)."""
        ...

    def check_start(self, curriculum: CurriculumState | None, library_start: Path | None) -> None:
        """Refuse a starting point the method cannot use (``ValueError`` naming it)."""
        ...

    def open_steps(self, context: RoundContext) -> MethodSteps:
        """Its steps in the open round ``context``."""
        ...

    def library(self, round_root: Path) -> Path | None:
        """The library a finished round leaves (the next round's start, the deployed one), ``None`` without."""
        ...


@dataclass(frozen=True)
class CurriculumMethod:
    """IntraSkill's rollout step: GRPO groups under the curriculum's group-shared treatments (``docs/method.md``
    §2, §6), full-skill retries, triage and admission."""

    name: MethodName = "intraskill"
    uses_curriculum: bool = METHOD_SPECS["intraskill"].uses_curriculum
    rollout_record: type[StepRollout] = CurriculumStepRollout

    def plan(self, params: Params, library_start: Path | None) -> dict[str, Any]:
        return {}

    def check_start(self, curriculum: CurriculumState | None, library_start: Path | None) -> None:
        if library_start is not None:
            raise ValueError(f"library_start: a round.method: {self.name} round has no library")

    def open_steps(self, context: RoundContext) -> CurriculumSteps:
        return CurriculumSteps(context)

    def library(self, round_root: Path) -> Path | None:
        return None


class CurriculumSteps:
    """The curriculum method's steps: :func:`~intraskill.pipeline.rollout.run_rollout_step` (nothing to commit)."""

    def __init__(self, context: RoundContext) -> None:
        self.context = context

    def rollout(self, step: int, timing: dict[str, float]) -> tuple[CurriculumStepRollout, list[TrainSample]]:
        """Run the step's GRPO rollout; its ``rollout.json`` record and the admitted groups' samples."""
        run = self.context
        previous = run.files.step_dir(step - 1).rollout
        streak = CurriculumStepRollout.read(previous).unscored_streak if previous.exists() else 0
        result = run_rollout_step(run.policy, run.env_factory, run.curriculum, run.task_ids, run.params.round,
                                  run.runtime, run.files, seed=run.params.experiment.seed, round_index=run.round_index,
                                  step=step, unscored_streak=streak, on_event=run.emit)
        timing["rollout_s"], timing["retry_s"] = result.rollout_s, result.retry_s
        rollout = CurriculumStepRollout(
            round=run.round_index, step=step, admitted_groups=[g.group_index for g in result.admission.accepted],
            generated_episodes=result.generated_episodes,
            metrics=rollout_step_metrics(result, run.curriculum, run.params.round.q),
            decisions=list(result.admission.decisions), waves=result.waves,
            unscored_streak=result.admission.unscored_streak)
        return rollout, train_samples_from_groups(result.admission.accepted, result.tokens_by_rollout())

    def commit(self, step: int) -> None:
        return None

    def close(self) -> None:
        return None


METHODS: dict[str, TrainingMethod] = {method.name: method for method in (CurriculumMethod(), Skill1Method())}
"""Every ``round.method``, by name."""


def training_method(params: Params) -> TrainingMethod:
    """The method of ``params.round.method``."""
    return METHODS[params.round.method]
