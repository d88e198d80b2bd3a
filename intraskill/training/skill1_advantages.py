"""Skill1's objective as per-segment advantages for the clipped surrogate (docs/method.md §10.3).

J = J_util + λ1·J_rerank + λ2·J_distill, λ1 = λ2 = 0.3. Each generation type of a trajectory is its own
token segment (method §10.3) and gets the advantage of its term:

- ``query`` and ``act`` segments: the GRPO advantage of R_util = r over the G rollouts of the task (the query
  is "part of the rollout prefix", optimised by J_util);
- ``rerank`` segments: λ1·R_rerank, REINFORCE with no group baseline (candidate sets differ per rollout);
- ``distill`` segments: λ2 times the GRPO advantage of R_distill, normalised over the group separately.

Because the clipped surrogate is linear in the advantage, scaling a segment's advantage by λ scales its term
of the objective by λ; segments become ordinary :class:`~intraskill.training.batching.TrainSample` s, so the
trainer is unchanged and plain GRPO (only ``act`` segments) gets exactly
:func:`~intraskill.training.advantages.group_advantages`. Like every term of the trainer, each is a token mean
over the update, so a segment weighs in proportion to its tokens (the paper averages J_rerank per sample).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from intraskill.chat.base import SessionTokens
from intraskill.params import Skill1Params
from intraskill.training.advantages import GRPO_STD_EPS, group_advantages
from intraskill.training.batching import TrainSample
from intraskill.training.skill1_rewards import Skill1RolloutRewards

SegmentKind = Literal["query", "rerank", "act", "distill"]
SEGMENT_KINDS: tuple[SegmentKind, ...] = ("query", "rerank", "act", "distill")
_DEFAULTS = Skill1Params()
DEFAULT_LAMBDA_RERANK = _DEFAULTS.lambda_rerank
"""λ1 (method §10.3, §10.4)."""
DEFAULT_LAMBDA_DISTILL = _DEFAULTS.lambda_distill
"""λ2 (method §10.3, §10.4)."""


@dataclass(frozen=True)
class Skill1Advantages:
    """One rollout's segment advantages, λ weights applied; ``rerank`` is ``None`` without candidates."""

    util: float
    rerank: float | None
    distill: float

    def for_kind(self, kind: SegmentKind, rollout_id: str) -> float:
        if kind in ("query", "act"):
            return self.util
        if kind == "distill":
            return self.distill
        if kind == "rerank":
            if self.rerank is None:
                raise ValueError(f"rollout {rollout_id!r} has a rerank segment but retrieved no candidates")
            return self.rerank
        raise ValueError(f"rollout {rollout_id!r}: segment kind must be one of {SEGMENT_KINDS}, got {kind!r}")


@dataclass(frozen=True)
class Skill1Segment:
    """One token segment of a trajectory and the generation type it holds."""

    kind: SegmentKind
    tokens: SessionTokens


@dataclass(frozen=True)
class Skill1Group:
    """The G rollouts of one task (one GRPO group) and their rewards."""

    group_index: int
    rewards: tuple[Skill1RolloutRewards, ...]


def skill1_group_advantages(
    rewards: Sequence[Skill1RolloutRewards],
    lambda_rerank: float = DEFAULT_LAMBDA_RERANK,
    lambda_distill: float = DEFAULT_LAMBDA_DISTILL,
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
) -> dict[str, Skill1Advantages]:
    """``{rollout_id: Skill1Advantages}`` of one group: two separate GRPO normalisations, raw R_rerank."""
    if lambda_rerank < 0 or lambda_distill < 0:
        raise ValueError(
            f"lambda_rerank and lambda_distill must be >= 0, got {lambda_rerank}, {lambda_distill}"
        )
    ids = [r.rollout_id for r in rewards]
    if len(set(ids)) != len(ids):
        raise ValueError(f"rollout ids repeat within a group: {ids}")
    util = group_advantages({r.rollout_id: r.r_util for r in rewards}, normalize_std=normalize_std, eps=eps)
    distill = group_advantages(
        {r.rollout_id: r.r_distill for r in rewards}, normalize_std=normalize_std, eps=eps
    )
    return {
        r.rollout_id: Skill1Advantages(
            util[r.rollout_id],
            None if r.r_rerank is None else lambda_rerank * r.r_rerank,
            lambda_distill * distill[r.rollout_id],
        )
        for r in rewards
    }


def skill1_train_samples(
    groups: Sequence[Skill1Group],
    segments_by_rollout: Mapping[str, Sequence[Skill1Segment]],
    lambda_rerank: float = DEFAULT_LAMBDA_RERANK,
    lambda_distill: float = DEFAULT_LAMBDA_DISTILL,
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
) -> list[TrainSample]:
    """Trainer samples of Skill1 groups: each segment carries the advantage of its kind (module docstring)."""
    samples: list[TrainSample] = []
    for group in groups:
        advantages = skill1_group_advantages(group.rewards, lambda_rerank, lambda_distill, normalize_std, eps)
        for rollout_id, advantage in advantages.items():
            segments = segments_by_rollout.get(rollout_id)
            if not segments:
                raise ValueError(
                    f"rollout {rollout_id!r} has no recorded segments; train with an in-process policy"
                )
            samples.extend(
                TrainSample.from_session_tokens(
                    segment.tokens,
                    advantage.for_kind(segment.kind, rollout_id),
                    group.group_index,
                    rollout_id,
                )
                for segment in segments
            )
    return samples


def split_by_kind(tokens: SessionTokens, kinds: Sequence[SegmentKind | None]) -> list[Skill1Segment]:
    """Segment masks for one token stream that holds several generation types.

    ``kinds[t]`` names the type of model token ``t`` (``None`` where the loss mask is 0). Returns one segment
    per kind present, in :data:`SEGMENT_KINDS` order, each with the whole stream and the loss mask restricted
    to that kind, so the masks are disjoint and add up to the original one.
    """
    if len(kinds) != len(tokens.input_ids):
        raise ValueError(f"kinds has {len(kinds)} entries for {len(tokens.input_ids)} tokens")
    for position, (mask, kind) in enumerate(zip(tokens.loss_mask, kinds)):
        if (mask == 1) != (kind is not None) or (kind is not None and kind not in SEGMENT_KINDS):
            raise ValueError(
                f"token {position}: kind must be one of {SEGMENT_KINDS} on model tokens and None elsewhere, "
                f"got {kind!r} with loss_mask {mask}"
            )
    segments = []
    for kind in SEGMENT_KINDS:
        mask = [1 if k == kind else 0 for k in kinds]
        if any(mask):
            logprobs = [lp if m else 0.0 for lp, m in zip(tokens.logprobs, mask)]
            segments.append(Skill1Segment(kind, SessionTokens(list(tokens.input_ids), mask, logprobs)))
    return segments
