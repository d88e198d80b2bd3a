"""Failure-frontier triage of a finished GRPO group and the full-skill diagnostic retry.

Reference: ``docs/method.md`` §3.1–3.2. A group is *all wrong* when every sibling is scored
and none has ``r_success = 1``. Such a group gets one full-skill retry (every active chunk,
unmasked) when retries are enabled; the retry never reaches the trainer. Classes, in precedence:

- ``environment_or_runtime_error``: some sibling is unscored, or the retry is unscored;
- ``not_frontier``: at least one sibling succeeded;
- ``all_wrong_retry_disabled``: all wrong, retries off;
- ``model_internalization_deficit``: the retry succeeded;
- ``full_skill_failure_pending_analysis``: the retry failed (queued for analysis, not a verdict).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from intraskill.shop.reward import Reward
from intraskill.training.admission import FinishedGroup, ScoredOutcome

TRIAGE_SCHEMA = "shopsimrl-training-failure-triage-v1"
RETRY_EPISODE_SUFFIX = "-full-skill-retry"
RETRY_TRACE_NAME = "full-skill-retry.json"


class TriageClass(str, Enum):
    NOT_FRONTIER = "not_frontier"
    ENVIRONMENT_OR_RUNTIME_ERROR = "environment_or_runtime_error"
    MODEL_INTERNALIZATION_DEFICIT = "model_internalization_deficit"
    FULL_SKILL_FAILURE_PENDING_ANALYSIS = "full_skill_failure_pending_analysis"
    ALL_WRONG_RETRY_DISABLED = "all_wrong_retry_disabled"


def training_episode_id(group_index: int, sample_index: int, split: str = "train") -> str:
    """Episode id of a training rollout, ``<split>-group-<9 digits>-sample-<9 digits>``.

    The form follows the release's failure-card ids
    (``failure-train-group-…-sample-…-full-skill-retry-01``).

    >>> training_episode_id(12, 3)
    'train-group-000000012-sample-000000003'
    """
    return f"{split}-group-{group_index:09d}-sample-{sample_index:09d}"


def needs_full_skill_retry(group: FinishedGroup, retry_enabled: bool = True) -> bool:
    """Whether the group gets the diagnostic retry: all wrong and retries enabled."""
    return retry_enabled and group.all_wrong


def retry_sample_index(group: FinishedGroup) -> int:
    """The retry's sample index: the group's largest sibling index + 1."""
    return max(r.sample_index for r in group.rollouts) + 1


def retry_episode_id(group: FinishedGroup, split: str = "train") -> str:
    """The retry's episode id: the training id of :func:`retry_sample_index` plus ``-full-skill-retry``.

    >>> from intraskill.training.admission import RolloutOutcome
    >>> g = FinishedGroup(5, tuple(RolloutOutcome(str(k), k, str(k), None) for k in range(8)))
    >>> retry_episode_id(g)
    'train-group-000000005-sample-000000008-full-skill-retry'
    """
    return training_episode_id(group.group_index, retry_sample_index(group), split) + RETRY_EPISODE_SUFFIX


@dataclass(frozen=True)
class RetryOutcome(ScoredOutcome):
    """The full-skill retry of an all-wrong group; ``reward`` is ``None`` when it is unscored."""

    trace_path: str
    episode_id: str
    reward: Reward | None

    def __post_init__(self) -> None:
        if not self.episode_id.endswith(RETRY_EPISODE_SUFFIX):
            raise ValueError(
                f"retry episode_id must end with {RETRY_EPISODE_SUFFIX!r}, got {self.episode_id!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace_path": self.trace_path,
            "episode_id": self.episode_id,
            "reward": self.reward.to_dict() if self.reward is not None else None,
            "scored": self.scored,
        }


def classify_group(
    group: FinishedGroup, retry: RetryOutcome | None, retry_enabled: bool = True
) -> TriageClass:
    """The triage class of a finished group (see the module docstring for the precedence).

    Raises
    ------
    ValueError
        If an all-wrong group has retries enabled but no retry outcome (run the retry first), or a
        retry is given for a group that does not need one.
    """
    needs_retry = needs_full_skill_retry(group, retry_enabled)
    if retry is not None and not needs_retry:
        raise ValueError(
            f"group {group.group_index} got a full-skill retry but is not all-wrong with retries on"
        )
    if not group.scored:
        return TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR
    if not group.all_wrong:
        return TriageClass.NOT_FRONTIER
    if not retry_enabled:
        return TriageClass.ALL_WRONG_RETRY_DISABLED
    if retry is None:
        raise ValueError(
            f"group {group.group_index} is all wrong with retries enabled: run its full-skill retry first"
        )
    if not retry.scored:
        return TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR
    if retry.success:
        return TriageClass.MODEL_INTERNALIZATION_DEFICIT
    return TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS


@dataclass(frozen=True)
class TriageRecord:
    """One group's triage (``triage.json``, schema ``shopsimrl-training-failure-triage-v1``)."""

    group: FinishedGroup
    classification: TriageClass
    curriculum_identity: Mapping[str, Any]
    assignment: Mapping[str, Any]
    retry_enabled: bool
    full_skill_retry: RetryOutcome | None = None
    schema_version: str = field(default=TRIAGE_SCHEMA, init=False)

    @property
    def all_wrong(self) -> bool:
        return self.group.all_wrong

    def to_dict(self) -> dict[str, Any]:
        siblings = [
            {
                "sample_index": r.sample_index,
                "episode_id": r.episode_id,
                "reward": r.reward.to_dict() if r.reward is not None else None,
                "scored": r.scored,
            }
            for r in sorted(self.group.rollouts, key=lambda r: r.sample_index)
        ]
        return {
            "schema_version": self.schema_version,
            "group_index": self.group.group_index,
            "classification": self.classification.value,
            "all_wrong": self.all_wrong,
            "full_skill_retry_enabled": self.retry_enabled,
            "curriculum": {"identity": dict(self.curriculum_identity)},
            "assignment": dict(self.assignment),
            "siblings": siblings,
            "full_skill_retry": None if self.full_skill_retry is None else self.full_skill_retry.to_dict(),
        }


def triage_group(
    group: FinishedGroup,
    curriculum_identity: Mapping[str, Any],
    assignment: Mapping[str, Any],
    retry: RetryOutcome | None = None,
    retry_enabled: bool = True,
) -> TriageRecord:
    """Classify ``group`` and build its :class:`TriageRecord`."""
    classification = classify_group(group, retry, retry_enabled)
    return TriageRecord(group, classification, curriculum_identity, assignment, retry_enabled, retry)


def frontier_metrics(records: Sequence[TriageRecord]) -> dict[str, float | None]:
    """Frontier metrics over all generated groups of a step (release ``rollout/shopsim/`` names).

    ``all_wrong_group_rate`` is over groups whose siblings are all scored;
    ``full_skill_retry_success_rate`` over scored retries; the other rates over all groups. An empty
    denominator gives ``None``.
    """

    def rate(numerator: int, denominator: int) -> float | None:
        return numerator / denominator if denominator else None

    retries = [r.full_skill_retry for r in records if r.full_skill_retry is not None]
    scored_retries = [r for r in retries if r.scored]
    classes = [r.classification for r in records]
    n = len(records)
    return {
        "all_wrong_group_rate": rate(sum(r.all_wrong for r in records), sum(r.group.scored for r in records)),
        "full_skill_retry_rate": rate(len(retries), n),
        "full_skill_retry_success_rate": rate(sum(r.success for r in scored_retries), len(scored_retries)),
        "internalization_deficit_rate": rate(classes.count(TriageClass.MODEL_INTERNALIZATION_DEFICIT), n),
        "pending_analysis_rate": rate(classes.count(TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS), n),
        "runtime_error_group_rate": rate(classes.count(TriageClass.ENVIRONMENT_OR_RUNTIME_ERROR), n),
    }
