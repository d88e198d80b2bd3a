"""Per-step metrics of a training round under the release's W&B names, and the round's ``metrics.jsonl`` record.

Reference: ``docs/method.md`` §2.4 (treatment metrics over all generated groups), §3.4
(outcome and filter metrics) and ``docs/release.md`` (``training_steps.csv`` columns
``rollout/shopsim/*`` and ``rollout/dynamic_filter/*``; ``optimizer_updates.csv`` columns
``train/*``). Outcome, treatment and frontier metrics cover every generated group; ``train_*``
counts describe the admitted ones. A rate with an empty denominator is ``None`` (not logged).

A ``metrics.jsonl`` line is one flat object per step (:class:`RoundStepMetrics`): ``round``, ``step``, the training
method's rollout metrics (``rollout/shopsim/*``, ``rollout/dynamic_filter/*`` and Skill1's ``skill1/*``: an open set
of names, e.g. ``rollout/shopsim/chunk/<id>/inclusion_rate``, kept as a typed mapping), the fixed ``train/*``
(:class:`TrainStepMetrics`) and ``time/*`` (:class:`StepTiming`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer, model_validator

from intraskill.agent.skill1_episode import Skill1Episode, protocol_error_counts
from intraskill.jsonl import iter_jsonl
from intraskill.record import Record
from intraskill.skills.curriculum import (
    MODE_ASSISTED,
    MODE_ASSISTED_EMPTY,
    MODE_SKILL_FREE,
    CurriculumState,
    GroupAssignment,
)
from intraskill.training.admission import TECHNICAL_DROP_REASON, ZERO_STD_DROP_REASON, admission_metrics
from intraskill.training.grpo import StepMetrics
from intraskill.training.skill1_rewards import Skill1StepResult
from intraskill.training.triage import frontier_metrics

ROLLOUT_PREFIX = "rollout/shopsim/"
FILTER_PREFIX = "rollout/dynamic_filter/"
SKILL1_PREFIX = "skill1/"
TRAIN_PREFIX = "train/"
TIME_PREFIX = "time/"
METHOD_PREFIXES = (ROLLOUT_PREFIX, FILTER_PREFIX, SKILL1_PREFIX)
"""The names a training method's rollout metrics carry (:attr:`RoundStepMetrics.rollout`)."""

MetricValue = int | float | None
"""A rollout metric: a count, a rate or mean, or ``None`` (an empty denominator)."""

TRAIN_METRIC_NAMES = {
    "loss": "loss",
    "pg_loss": "pg_loss",
    "clipfrac": "pg_clipfrac",
    "approx_kl": "ppo_kl",
    "entropy": "entropy_loss",
    "kl_ref": "kl_loss",
    "grad_norm": "grad_norm",
    "lr": "lr",
    "updates": "updates",
    "model_tokens": "model_tokens",
    "padding_waste": "padding_waste",
    "tokens_per_s": "tokens_per_s",
}
"""``StepMetrics`` field → ``train/<name>`` (release names where they exist: ``pg_clipfrac``,
``ppo_kl``, ``entropy_loss``; ``lr`` is the single parameter group's rate)."""


class TrainStepMetrics(Record):
    """A step's ``train/*`` metrics: the trainer's :data:`TRAIN_METRIC_NAMES` and the global batch size (``None``:
    not recorded, ``kl_loss`` without a reference model)."""

    loss: float | None = None
    pg_loss: float | None = None
    pg_clipfrac: float | None = None
    ppo_kl: float | None = None
    entropy_loss: float | None = None
    kl_loss: float | None = None
    grad_norm: float | None = None
    lr: float | None = None
    updates: int | None = None
    model_tokens: int | None = None
    padding_waste: float | None = None
    tokens_per_s: float | None = None
    global_batch_size: int | None = None


class StepTiming(Record):
    """A step's ``time/*``: seconds of rollouts, full-skill retries, the trainer update and file I/O (0 for a
    phase a resumed step did not run again)."""

    rollout_s: float = 0.0
    retry_s: float = 0.0
    train_s: float = 0.0
    io_s: float = 0.0

    @property
    def total_s(self) -> float:
        return math.fsum((self.rollout_s, self.retry_s, self.train_s, self.io_s))


class RoundStepMetrics(Record):
    """One ``metrics.jsonl`` line: the round and step, the method's rollout metrics (full names, see the module),
    ``train/*`` and ``time/*``; written and read as the flat object trackers log."""

    round: int
    step: int
    rollout: dict[str, MetricValue]
    train: TrainStepMetrics
    time: StepTiming

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        """Group a flat line by prefix (a name under no known prefix stays at the top, refused as extra)."""
        if not isinstance(data, Mapping) or "rollout" in data:
            return data
        grouped: dict[str, Any] = {"rollout": {}, "train": {}, "time": {}}
        for key, value in data.items():
            if key.startswith(TRAIN_PREFIX):
                grouped["train"][key.removeprefix(TRAIN_PREFIX)] = value
            elif key.startswith(TIME_PREFIX):
                grouped["time"][key.removeprefix(TIME_PREFIX)] = value
            elif key.startswith(METHOD_PREFIXES):
                grouped["rollout"][key] = value
            else:
                grouped[key] = value
        return grouped

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {"round": data["round"], "step": data["step"], **data["rollout"],
                **{TRAIN_PREFIX + key: value for key, value in data["train"].items()},
                **{TIME_PREFIX + key: value for key, value in data["time"].items()}}


def read_step_metrics(path: str | Path) -> list[RoundStepMetrics]:
    """A round's ``metrics.jsonl``, one record per finished step (``[]`` before the first; ``ValueError`` naming the
    file and the field of a bad line)."""
    return [RoundStepMetrics.from_dict(line, str(path)) for line in iter_jsonl(path)]


def _rate(numerator: float, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def treatment_metrics(
    assignments: Sequence[GroupAssignment], curriculum: CurriculumState | None, q: float
) -> dict[str, float | None]:
    """Mask-sampling metrics of the generated groups (§2.4), without the prefix.

    ``skills_per_assisted_group_mean`` and each ``chunk/<id>/inclusion_rate`` are over assisted
    plus assisted-empty groups; ``q`` and the ρ summary come from the curriculum.
    """
    modes = [a.mode for a in assignments]
    assisted = [a for a in assignments if a.mode in (MODE_ASSISTED, MODE_ASSISTED_EMPTY)]
    chunks = curriculum.chunks if curriculum is not None else ()
    rhos = [c.inclusion_probability for c in chunks]
    metrics: dict[str, float | None] = {
        "q": curriculum.skill_free_probability if curriculum is not None else q,
        "rho_min": min(rhos) if rhos else None,
        "rho_mean": math.fsum(rhos) / len(rhos) if rhos else None,
        "rho_max": max(rhos) if rhos else None,
        "skill_free_group_rate": _rate(modes.count(MODE_SKILL_FREE), len(modes)),
        "assisted_empty_group_rate": _rate(modes.count(MODE_ASSISTED_EMPTY), len(modes)),
        "skills_per_assisted_group_mean": _rate(sum(len(a.skill_ids) for a in assisted), len(assisted)),
    }
    for chunk in chunks:
        included = sum(chunk.skill_id in a.skill_ids for a in assisted)
        metrics[f"chunk/{chunk.skill_id}/inclusion_rate"] = _rate(included, len(assisted))
        metrics[f"chunk/{chunk.skill_id}/target_rho"] = chunk.inclusion_probability
    return metrics


def behaviour_metrics(traces: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Episode behaviour over all generated trajectories: turns, protocol errors, completion tokens."""
    turns = [t.get("counts", {}).get("model_steps", 0) for t in traces]
    errors = [t.get("counts", {}).get("protocol_errors", 0) for t in traces]
    completion = [t.get("tokens", {}).get("completion", 0) for t in traces]
    total_turns = sum(turns)
    return {
        "model_steps_mean": _rate(total_turns, len(turns)),
        "protocol_error_rate": _rate(sum(errors), total_turns),
        "completion_tokens_mean": _rate(sum(completion), len(completion)),
    }


def rollout_step_metrics(result: Any, curriculum: CurriculumState | None, q: float) -> dict[str, MetricValue]:
    """All ``rollout/shopsim/*`` and ``rollout/dynamic_filter/*`` metrics of a rollout step.

    ``result`` is a :class:`~intraskill.pipeline.rollout.RolloutStepResult`.
    """
    admission = result.admission
    assignments = [result.groups[g.group_index].assignment for g in admission.generated]
    traces = [result.records[r.episode_id].trace for g in admission.generated for r in g.rollouts]
    offered = {g.group_index for g in admission.generated}
    triage = [t for t in result.triage if t.group.group_index in offered]
    values: dict[str, Any] = {
        **admission_metrics(admission),
        **treatment_metrics(assignments, curriculum, q),
        **frontier_metrics(triage),
        **behaviour_metrics(traces),
        "wave_count": result.waves,
    }
    metrics = {ROLLOUT_PREFIX + key: value for key, value in values.items()}
    metrics[FILTER_PREFIX + "drop_" + TECHNICAL_DROP_REASON] = admission.drop_count(TECHNICAL_DROP_REASON)
    metrics[FILTER_PREFIX + "drop_" + ZERO_STD_DROP_REASON] = admission.drop_count(ZERO_STD_DROP_REASON)
    return metrics


def train_step_metrics(step_metrics: StepMetrics, global_batch_size: int | None) -> TrainStepMetrics:
    """``train/*`` metrics of the trainer's step."""
    return TrainStepMetrics(global_batch_size=global_batch_size,
                            **{name: getattr(step_metrics, field) for field, name in TRAIN_METRIC_NAMES.items()})


def skill1_step_metrics(episodes: Sequence[Skill1Episode], step: Skill1StepResult, library_size: int, *,
                        trained: int) -> dict[str, MetricValue]:
    """``skill1/*`` and ``rollout/shopsim/*`` metrics of a Skill1 rollout step; ``trained``: the rollouts of the
    groups the step trains on (with ``skill1.oversample``, fewer than it played).

    Rewards (Û, R_distill, NDCG, selection) cover the scored rollouts and use the U of the start of the step;
    ``selection_precision`` is the share of rollouts with candidates whose chosen skill has the highest U among
    them; ``rerank_advantage_mean`` is R_rerank minus its baseline (``skill1.rerank_baseline``), over them; ``success_with_skill`` / ``success_without_skill`` split the scored rollouts by whether a skill was
    selected; ``protocol_error_rate/<kind>`` is per reply of that kind (``act``: per model turn).
    """
    rewards = {reward.rollout_id: reward for reward in step.rewards}
    scored = [e for e in episodes if e.job.episode_id in rewards]
    ranked = [(e, rewards[e.job.episode_id]) for e in scored if e.candidates]
    precise = sum(r.utilities[e.retrieved.index(r.selected)] == max(r.utilities) for e, r in ranked)
    with_skill = [e.success for e in scored if e.selected is not None]
    without = [e.success for e in scored if e.selected is None]
    errors = protocol_error_counts(episodes)
    replies = {"query": len(episodes), "rank": sum(e.rank is not None for e in episodes),
               "act": sum(e.result.model_steps for e in episodes),
               "distill": sum(e.distill is not None for e in episodes)}
    values: dict[str, Any] = {
        "library_size": library_size,
        "admissions": len(step.admissions),
        "evictions": sum(a.evicted is not None for a in step.admissions),
        "retrieved_rate": _rate(len(ranked), len(scored)),
        "selection_precision": _rate(precise, len(ranked)),
        "ndcg_mean": _rate(math.fsum(r.r_rerank for _, r in ranked), len(ranked)),
        "rerank_advantage_mean": _rate(math.fsum(r.rerank_advantage for _, r in ranked), len(ranked)),
        "u_hat_mean": _rate(math.fsum(r.u_hat for r in rewards.values()), len(rewards)),
        "r_distill_mean": _rate(math.fsum(r.r_distill for r in rewards.values()), len(rewards)),
        "success_with_skill": _rate(sum(with_skill), len(with_skill)),
        "success_without_skill": _rate(sum(without), len(without)),
        **{f"protocol_error_rate/{kind}": _rate(errors[kind], replies[kind]) for kind in replies},
    }
    metrics = {SKILL1_PREFIX + key: value for key, value in values.items()}
    metrics[ROLLOUT_PREFIX + "success_rate"] = _rate(sum(bool(e.success) for e in scored), len(scored))
    metrics[ROLLOUT_PREFIX + "scored_rate"] = _rate(len(scored), len(episodes))
    metrics[ROLLOUT_PREFIX + "train_trajectory_count"] = trained
    traces = [{"counts": e.result.trace.counts, "tokens": e.result.trace.tokens}
              for e in episodes if e.result.trace is not None]
    metrics.update({ROLLOUT_PREFIX + key: value for key, value in behaviour_metrics(traces).items()})
    return metrics
