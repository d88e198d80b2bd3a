"""Rollout metrics under the release names (``rollout/shopsim/*``) from two slime hooks.

Reference: ``docs/method.md`` §2.4 (treatment metrics over ALL generated groups, de-duplicated
by (group_index, rollout_id)) and §3.4 (outcome metrics over all generated trajectories, ``train_*``
over admitted ones, drop rates = drops / (accepted + drops)); ``docs/release.md``
(``training_steps.csv`` columns). slime calls, per rollout step and in this order:

1. ``rollout_all_samples_process(args, all_samples, data_source)`` with every finished group
   (filtered ones included) — :func:`record_generated_rollout_groups` keeps their summary;
2. ``custom_rollout_log(rollout_id, args, samples, rollout_extra_metrics, rollout_time) -> bool``
   with the admitted samples — :func:`enrich_rollout_metrics` joins both, adds the metrics to
   ``rollout_extra_metrics`` (slime's default logger starts from that dict), appends them to
   ``<output>/rollout_metrics.jsonl`` and returns ``False`` so slime's own logging still runs.

A generated group that was not admitted is a technical drop when it has an unscored rollout, a
zero-std drop when its rewards do not spread, and otherwise surplus (discarded after the batch
filled). The metric functions are the CPU tier's (``intraskill.training.metrics``/``admission``/``triage``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.integrations.slime.config import SlimeRunConfig, load_checked_curriculum
from intraskill.integrations.slime.filters import decide_group
from intraskill.integrations.slime.generate import close_open_groups
from intraskill.integrations.slime.rewards import (
    META_ASSIGNMENT,
    META_GROUP_TRIAGE,
    finished_group,
    iter_samples,
)
from intraskill.jsonl import JsonlWriter
from intraskill.shop.reward import parse_reward
from intraskill.skills.curriculum import GroupAssignment
from intraskill.training.admission import (
    AdmissionResult,
    Decision,
    FinishedGroup,
    GroupDecision,
    RolloutOutcome,
    admission_metrics,
)
from intraskill.training.metrics import ROLLOUT_PREFIX, treatment_metrics
from intraskill.training.triage import RetryOutcome, TriageClass, TriageRecord, frontier_metrics

LOGGER = logging.getLogger(__name__)
METRICS_FILE = "rollout_metrics.jsonl"


@dataclass(frozen=True)
class GeneratedGroup:
    """What the metrics need of one generated group."""

    group: FinishedGroup
    assignment: GroupAssignment | None
    triage: TriageRecord | None


def triage_from_dict(data: Mapping[str, Any]) -> TriageRecord:
    """Rebuild a :class:`TriageRecord` from its ``to_dict()`` form (the leader's sample metadata)."""
    siblings = tuple(RolloutOutcome(s["episode_id"], s["sample_index"], s["episode_id"], parse_reward(s["reward"]))
                     for s in data["siblings"])
    retry = data.get("full_skill_retry")
    return TriageRecord(
        group=FinishedGroup(data["group_index"], siblings),
        classification=TriageClass(data["classification"]),
        curriculum_identity=data["curriculum"]["identity"],
        assignment=data["assignment"],
        retry_enabled=data["full_skill_retry_enabled"],
        full_skill_retry=None if retry is None else RetryOutcome(retry["trace_path"], retry["episode_id"],
                                                                 parse_reward(retry["reward"])),
    )


def summarize_group(samples: Sequence[Any]) -> GeneratedGroup:
    """One group's rollouts (unique by rollout ID), its treatment and the leader's triage, if any."""
    flat = list(iter_samples(samples))
    metadata = [sample.metadata or {} for sample in flat]
    assignments = [GroupAssignment.from_dict(m[META_ASSIGNMENT]) for m in metadata if m.get(META_ASSIGNMENT)]
    triages = [triage_from_dict(m[META_GROUP_TRIAGE]) for m in metadata if m.get(META_GROUP_TRIAGE)]
    assignment = assignments[0] if assignments else None
    triage = triages[0] if triages else None
    return GeneratedGroup(finished_group(flat), assignment, triage)


def _by_group_index(samples: Sequence[Any]) -> list[list[Any]]:
    groups: dict[Any, list[Any]] = {}
    for sample in iter_samples(samples):
        groups.setdefault(sample.group_index, []).append(sample)
    return list(groups.values())


_GENERATED: list[GeneratedGroup] | None = None


def record_generated_rollout_groups(args: Any, samples: list[Any], data_source: Any) -> None:
    """``--rollout-all-samples-process-path`` hook: remember every generated group of this step.

    Groups are de-duplicated by ``group_index`` and rollouts within a group by ``rollout_id``. slime calls it
    once the step's generation has stopped, so it also discards the generate hook's unfinished groups
    (:func:`~intraskill.integrations.slime.generate.close_open_groups`).
    """
    global _GENERATED
    close_open_groups(SlimeRunConfig.from_args(args))
    seen: dict[Any, GeneratedGroup] = {}
    for group in samples:
        summary = summarize_group(group if isinstance(group, (list, tuple)) else [group])
        seen.setdefault(summary.group.group_index, summary)
    _GENERATED = list(seen.values())


def _decision(generated: GeneratedGroup, admitted: set[Any]) -> GroupDecision:
    group = generated.group
    if group.group_index in admitted:
        return GroupDecision(group.group_index, Decision.ACCEPTED)
    verdict = decide_group(group)
    if verdict.keep:
        return GroupDecision(group.group_index, Decision.DISCARDED)
    return GroupDecision(group.group_index, Decision.DROPPED, verdict.reason)


def step_metrics(generated: Sequence[GeneratedGroup], admitted: Sequence[GeneratedGroup],
                 curriculum: Any) -> dict[str, Any]:
    """All ``rollout/shopsim/*`` metrics of one step (``None`` values — empty denominators — left out)."""
    admitted_ids = {g.group.group_index for g in admitted}
    result = AdmissionResult(
        accepted=tuple(g.group for g in admitted),
        decisions=tuple(_decision(g, admitted_ids) for g in generated),
        generated=tuple(g.group for g in generated),
        submitted=len(generated),
        complete=True,
        unscored_streak=0,
    )
    assignments = [g.assignment for g in generated if g.assignment is not None]
    values = {
        **admission_metrics(result),
        **treatment_metrics(assignments, curriculum, curriculum.skill_free_probability),
        **frontier_metrics([g.triage for g in generated if g.triage is not None]),
    }
    return {ROLLOUT_PREFIX + key: value for key, value in values.items() if value is not None}


def enrich_rollout_metrics(rollout_id: int, args: Any, samples: list[Any],
                           rollout_extra_metrics: dict[str, Any] | None, rollout_time: float) -> bool:
    """``--custom-rollout-log-function-path`` hook: add the step's metrics; ``False`` keeps slime's logging.

    Uses the groups recorded by :func:`record_generated_rollout_groups` this step (the admitted
    groups alone when that hook is not configured).
    """
    global _GENERATED
    config = SlimeRunConfig.from_args(args)
    curriculum = load_checked_curriculum(config.curriculum_path, config.skillbank_path)
    admitted = [summarize_group(group) for group in _by_group_index(samples)]
    generated = _GENERATED if _GENERATED is not None else admitted
    _GENERATED = None
    metrics = step_metrics(generated, admitted, curriculum)
    if isinstance(rollout_extra_metrics, dict):
        rollout_extra_metrics.update(metrics)
    else:
        LOGGER.info("rollout %s metrics: %s", rollout_id, metrics)
    with JsonlWriter(config.output_dir / METRICS_FILE) as writer:
        writer.append({"rollout_id": rollout_id, "rollout_time": rollout_time, "metrics": metrics})
    return False
