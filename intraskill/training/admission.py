"""Episode admission of one rollout step: the dynamic sampling filter and its metrics.

Reference: ``docs/method.md`` §3.4. Groups are offered in completion order:

1. a group with any unscored (technical) rollout is always dropped
   (``shopsim_unscored_technical_group``); ``max_consecutive_unscored`` (8) such groups in a row
   raise :class:`UnscoredStreakError`;
2. a group whose unique-rollout rewards spread by more than 1e-6 (max - min) is accepted;
3. a zero-spread group is dropped (``shopsim_zero_std_group``) only while spares remain,
   ``remaining = submitted - dropped > target``; otherwise it is accepted (slime's
   ``keep_when_insufficient``);
4. once ``target`` groups are accepted, further finished groups are discarded.

A new wave of groups is needed only when ``remaining < target`` (in practice after technical
drops). With 32 submitted and 16 targeted this keeps at most 16 zero-spread drops, hence the
late-run ``zero_std_group_drop_rate`` of 0.5 in the release.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from intraskill.shop.reward import Reward

TECHNICAL_DROP_REASON = "shopsim_unscored_technical_group"
ZERO_STD_DROP_REASON = "shopsim_zero_std_group"
ZERO_SPREAD_TOLERANCE = 1e-6
MAX_CONSECUTIVE_UNSCORED_GROUPS = 8


class UnscoredStreakError(RuntimeError):
    """Too many consecutive groups with an unscored rollout: the environment or runtime is broken."""


class EpisodeOutcome(Protocol):
    """What admission reads from an agent-runtime ``EpisodeResult``."""

    episode_id: str
    reward: Reward | None


class ScoredOutcome:
    """An episode's outcome: ``reward`` is ``None`` when the episode went unscored (a technical failure)."""

    reward: Reward | None

    @property
    def scored(self) -> bool:
        return self.reward is not None

    @property
    def success(self) -> bool:
        return self.reward is not None and self.reward.success


@dataclass(frozen=True)
class RolloutOutcome(ScoredOutcome):
    """One rollout (episode) of a GRPO group.

    Parameters
    ----------
    rollout_id
        Identity shared by every trainer segment of the episode (the episode id by default).
    sample_index
        Sibling index within the group.
    episode_id
        The episode id written in traces.
    reward
        The validated :class:`~intraskill.shop.reward.Reward`, or ``None`` when the episode is
        unscored (a technical failure).
    """

    rollout_id: str
    sample_index: int
    episode_id: str
    reward: Reward | None

    @classmethod
    def from_episode(cls, result: EpisodeOutcome, sample_index: int) -> RolloutOutcome:
        """From an agent-runtime ``EpisodeResult`` (the episode id is the rollout id)."""
        return cls(result.episode_id, sample_index, result.episode_id, result.reward)


@dataclass(frozen=True)
class FinishedGroup:
    """All sibling rollouts of one GRPO group (unique rollout ids, unique sample indices)."""

    group_index: int
    rollouts: tuple[RolloutOutcome, ...]

    def __post_init__(self) -> None:
        if not self.rollouts:
            raise ValueError(f"group {self.group_index} has no rollouts")
        for attribute in ("rollout_id", "sample_index"):
            values = [getattr(r, attribute) for r in self.rollouts]
            if len(set(values)) != len(values):
                raise ValueError(f"group {self.group_index} repeats a {attribute}: {values}")

    @property
    def scored(self) -> bool:
        """Every sibling is scored."""
        return all(r.scored for r in self.rollouts)

    @property
    def all_wrong(self) -> bool:
        """Every sibling scored and none succeeded (the strict frontier trigger, §3.1)."""
        return self.scored and not any(r.success for r in self.rollouts)

    @property
    def reward_spread(self) -> float:
        """``max - min`` of the scored rollouts' ``reward`` (0 when fewer than two are scored)."""
        rewards = [r.reward.reward for r in self.rollouts if r.reward is not None]
        return max(rewards) - min(rewards) if rewards else 0.0


class Decision(str, Enum):
    ACCEPTED = "accepted"
    DROPPED = "dropped"
    DISCARDED = "discarded"


@dataclass(frozen=True)
class GroupDecision:
    """What happened to one finished group; ``reason`` names the filter for drops."""

    group_index: int
    decision: Decision
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"group_index": self.group_index, "decision": self.decision.value, "reason": self.reason}


@dataclass
class GroupAdmission:
    """The incremental admission controller (one per rollout step).

    Call :meth:`submit` for each wave of generated groups and :meth:`offer` for each finished group,
    in completion order; stop generating when :attr:`done`, start a new wave when :attr:`needs_wave`.
    ``unscored_streak`` carries over between steps (the release keeps it module-global).
    """

    target: int
    max_consecutive_unscored: int = MAX_CONSECUTIVE_UNSCORED_GROUPS
    unscored_streak: int = 0
    submitted: int = 0
    accepted: list[FinishedGroup] = field(default_factory=list)
    decisions: list[GroupDecision] = field(default_factory=list)
    offered: list[FinishedGroup] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.target < 1:
            raise ValueError(f"target must be >= 1 group, got {self.target}")
        if self.max_consecutive_unscored < 1:
            raise ValueError(f"max_consecutive_unscored must be >= 1, got {self.max_consecutive_unscored}")

    @property
    def dropped(self) -> int:
        return sum(d.decision is Decision.DROPPED for d in self.decisions)

    @property
    def remaining(self) -> int:
        """Submitted groups not dropped (accepted, in flight or discarded)."""
        return self.submitted - self.dropped

    @property
    def done(self) -> bool:
        return len(self.accepted) >= self.target

    @property
    def needs_wave(self) -> bool:
        """A new wave is due: too few groups can still be admitted."""
        return not self.done and self.remaining < self.target

    def submit(self, groups: int) -> None:
        """Record a wave of ``groups`` newly submitted groups."""
        if groups < 1:
            raise ValueError(f"a wave must submit >= 1 group, got {groups}")
        self.submitted += groups

    def offer(self, group: FinishedGroup) -> GroupDecision:
        """Decide one finished group (it must have been counted by :meth:`submit`)."""
        if len(self.offered) >= self.submitted:
            raise ValueError(
                f"group {group.group_index} was offered but only {self.submitted} groups were submitted; "
                "call submit() for each wave (or pass wave_size) before offering its groups"
            )
        self.offered.append(group)
        decision = self._decide(group)
        self.decisions.append(decision)
        if decision.decision is Decision.ACCEPTED:
            self.accepted.append(group)
        return decision

    def _decide(self, group: FinishedGroup) -> GroupDecision:
        if self.done:
            return GroupDecision(group.group_index, Decision.DISCARDED)
        if not group.scored:
            self.unscored_streak += 1
            if self.unscored_streak >= self.max_consecutive_unscored:
                raise UnscoredStreakError(
                    f"{self.unscored_streak} consecutive groups had an unscored rollout (last: group "
                    f"{group.group_index}); check the store service and the policy backend"
                )
            return GroupDecision(group.group_index, Decision.DROPPED, TECHNICAL_DROP_REASON)
        self.unscored_streak = 0
        if group.reward_spread <= ZERO_SPREAD_TOLERANCE and self.remaining > self.target:
            return GroupDecision(group.group_index, Decision.DROPPED, ZERO_STD_DROP_REASON)
        return GroupDecision(group.group_index, Decision.ACCEPTED)


@dataclass(frozen=True)
class AdmissionResult:
    """Outcome of one step's admission: accepted groups (in completion order) and every decision."""

    accepted: tuple[FinishedGroup, ...]
    decisions: tuple[GroupDecision, ...]
    generated: tuple[FinishedGroup, ...]
    submitted: int
    complete: bool
    unscored_streak: int

    def drop_count(self, reason: str) -> int:
        return sum(d.decision is Decision.DROPPED and d.reason == reason for d in self.decisions)


def admit_groups(
    groups: Sequence[FinishedGroup],
    target: int,
    wave_size: int | None = None,
    unscored_streak: int = 0,
    max_consecutive_unscored: int = MAX_CONSECUTIVE_UNSCORED_GROUPS,
) -> AdmissionResult:
    """Run admission over finished groups in completion order.

    Parameters
    ----------
    groups
        Finished groups in completion order (later waves after earlier ones).
    target
        Groups to admit (release ``rollout_batch_size`` 16).
    wave_size
        Groups per submitted wave (release ``over_sampling_batch_size`` 32); a new wave is counted
        whenever :attr:`GroupAdmission.needs_wave`. ``None`` = all of ``groups`` form one wave.
    unscored_streak
        Consecutive unscored groups carried over from earlier steps.

    Returns
    -------
    AdmissionResult
        ``complete`` is False when the groups ran out before ``target`` were admitted.

    Examples
    --------
    >>> def g(i, *rewards):
    ...     reward = lambda r: Reward(1.0, 1.0, 1.0, 1.0, r, r, float(r == 1))
    ...     rollouts = [RolloutOutcome(f"{i}-{k}", k, f"{i}-{k}", reward(r)) for k, r in enumerate(rewards)]
    ...     return FinishedGroup(i, tuple(rollouts))
    >>> result = admit_groups([g(0, 0, 0), g(1, 0, 1), g(2, 1, 1), g(3, 0, 1)], target=2)
    >>> [d.decision.value for d in result.decisions]
    ['dropped', 'accepted', 'dropped', 'accepted']
    """
    admission = GroupAdmission(target, max_consecutive_unscored, unscored_streak)
    admission.submit(wave_size if wave_size is not None else max(len(groups), 1))
    for group in groups:
        admission.offer(group)
        if admission.needs_wave and wave_size is not None:
            admission.submit(wave_size)
    return AdmissionResult(
        accepted=tuple(admission.accepted),
        decisions=tuple(admission.decisions),
        generated=tuple(admission.offered),
        submitted=admission.submitted,
        complete=admission.done,
        unscored_streak=admission.unscored_streak,
    )


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def admission_metrics(result: AdmissionResult) -> dict[str, float | int | None]:
    """Outcome, training and filter metrics of one step under the release's ``rollout/shopsim/`` names.

    Outcome metrics use every generated (finished) group: ``scored_rate`` over all trajectories,
    ``reward_mean``/``strict_reward_mean``/``success_rate`` over scored ones. ``train_*`` counts
    describe the admitted groups. Each drop rate is drops / (accepted + those drops). A rate with
    an empty denominator is ``None`` (not logged).
    """
    rollouts = [r for group in result.generated for r in group.rollouts]
    scored = [r.reward for r in rollouts if r.reward is not None]
    accepted = len(result.accepted)
    technical = result.drop_count(TECHNICAL_DROP_REASON)
    zero_std = result.drop_count(ZERO_STD_DROP_REASON)
    return {
        "trajectory_count": len(rollouts),
        "group_count": len(result.generated),
        "scored_rate": _rate(len(scored), len(rollouts)),
        "reward_mean": _mean([r.reward for r in scored]),
        "strict_reward_mean": _mean([r.r_strict for r in scored]),
        "success_rate": _mean([r.r_success for r in scored]),
        "train_group_count": accepted,
        "train_trajectory_count": sum(len(group.rollouts) for group in result.accepted),
        "technical_group_drop_count": technical,
        "technical_group_drop_rate": _rate(technical, accepted + technical),
        "zero_std_group_drop_count": zero_std,
        "zero_std_group_drop_rate": _rate(zero_std, accepted + zero_std),
    }
