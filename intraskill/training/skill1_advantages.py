"""Skill1's objective as per-segment advantages for the clipped surrogate (docs/method.md §10.3).

J = J_util + λ1·J_rerank + λ2·J_distill, λ1 = λ2 = 0.3. Each generation type of a trajectory is its own
token segment (method §10.3) and gets the advantage of its term:

- ``query`` and ``act`` segments: the GRPO advantage of R_util = r over the G rollouts of the task (the query
  is "part of the rollout prefix", optimised by J_util);
- ``rerank`` segments: λ1·R_rerank, REINFORCE with no group baseline (candidate sets differ per rollout);
- ``distill`` segments: λ2 times the GRPO advantage of R_distill, normalised over the group separately.

R_rerank enters minus its baseline (``Skill1RolloutRewards.rerank_advantage``). Two aggregations
(``skill1.objective``):

- ``term_means`` (the paper's objective): each term is a mean over the update's E rollouts of the per-token mean
  of the rollout's segments of that term, J = J_util + λ1·J_rerank + λ2·J_distill. Every segment carries the
  weight c/(E·L) per token (c = 1, λ1 or λ2; L = the rollout's tokens in that term; query and act tokens form
  J_util's sample), so the trainer's weighted sum is J exactly, whatever the segments' lengths; a rollout with
  no candidates adds 0 to J_rerank (the mean is over all N·G rollouts, §A.3).
- ``token_mean``: the clipped surrogate is linear in the advantage, so the segment's advantage is scaled by λ
  and every token of the update weighs the same (the trainer's token mean): a segment weighs in proportion to
  its tokens, and the effective λ are not 0.3.

Plain GRPO (only ``act`` segments) gets exactly :func:`~intraskill.training.advantages.group_advantages`.
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

    @classmethod
    def of(cls, util: float, rerank: float | None, distill: float, lambda_rerank: float, lambda_distill: float,
           scale: bool) -> Skill1Advantages:
        """The advantages, times λ where ``scale`` (the ``token_mean`` objective)."""
        if not scale:
            return cls(util, rerank, distill)
        return cls(util, None if rerank is None else lambda_rerank * rerank, lambda_distill * distill)

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


Objective = Literal["token_mean", "term_means"]
_TERMS: dict[SegmentKind, str] = {"query": "util", "act": "util", "rerank": "rerank", "distill": "distill"}
"""Which objective term each segment kind belongs to (the query is part of the rollout prefix, J_util)."""


def skill1_group_advantages(
    rewards: Sequence[Skill1RolloutRewards],
    lambda_rerank: float = DEFAULT_LAMBDA_RERANK,
    lambda_distill: float = DEFAULT_LAMBDA_DISTILL,
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
    scale: bool = True,
    util_rewards: Mapping[str, float] | None = None,
) -> dict[str, Skill1Advantages]:
    """``{rollout_id: Skill1Advantages}`` of one group: two separate GRPO normalisations, R_rerank minus its
    baseline; λ applied where ``scale``. ``util_rewards`` replaces R_util = r (e.g. by r_strict)."""
    if lambda_rerank < 0 or lambda_distill < 0:
        raise ValueError(
            f"lambda_rerank and lambda_distill must be >= 0, got {lambda_rerank}, {lambda_distill}"
        )
    ids = [r.rollout_id for r in rewards]
    if len(set(ids)) != len(ids):
        raise ValueError(f"rollout ids repeat within a group: {ids}")
    r_util = {r.rollout_id: r.r_util if util_rewards is None else util_rewards[r.rollout_id] for r in rewards}
    util = group_advantages(r_util, normalize_std=normalize_std, eps=eps)
    distill = group_advantages(
        {r.rollout_id: r.r_distill for r in rewards}, normalize_std=normalize_std, eps=eps
    )
    return {
        r.rollout_id: Skill1Advantages.of(util[r.rollout_id], r.rerank_advantage, distill[r.rollout_id],
                                          lambda_rerank, lambda_distill, scale)
        for r in rewards
    }


def term_weights(segments: Sequence[Skill1Segment], episodes_per_update: int, lambda_rerank: float,
                 lambda_distill: float) -> list[float]:
    """Per-token weights of one rollout's segments under the ``term_means`` objective (module docstring)."""
    if episodes_per_update < 1:
        raise ValueError(f"episodes_per_update must be >= 1, got {episodes_per_update}")
    coefficient = {"util": 1.0, "rerank": lambda_rerank, "distill": lambda_distill}
    tokens: dict[str, int] = {}
    for segment in segments:
        term = _TERMS[segment.kind]
        tokens[term] = tokens.get(term, 0) + sum(segment.tokens.loss_mask)
    return [coefficient[_TERMS[segment.kind]] / (episodes_per_update * max(tokens[_TERMS[segment.kind]], 1))
            for segment in segments]


def skill1_train_samples(
    groups: Sequence[Skill1Group],
    segments_by_rollout: Mapping[str, Sequence[Skill1Segment]],
    lambda_rerank: float = DEFAULT_LAMBDA_RERANK,
    lambda_distill: float = DEFAULT_LAMBDA_DISTILL,
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
    objective: Objective = "token_mean",
    episodes_per_update: int | None = None,
    util_rewards: Mapping[str, float] | None = None,
) -> list[TrainSample]:
    """Trainer samples of Skill1 groups: each segment carries the advantage of its kind (module docstring).

    ``term_means`` weighs each segment for the trainer's weighted sum; ``episodes_per_update`` is E, the
    episodes of one optimizer update (``grpo.global_batch_size``; ``None``: every episode of ``groups``).
    """
    if objective not in ("token_mean", "term_means"):
        raise ValueError(f"objective must be 'token_mean' or 'term_means', got {objective!r}")
    if episodes_per_update is None:
        episodes_per_update = sum(len(group.rewards) for group in groups)
    samples: list[TrainSample] = []
    for group in groups:
        advantages = skill1_group_advantages(group.rewards, lambda_rerank, lambda_distill, normalize_std, eps,
                                             scale=objective == "token_mean", util_rewards=util_rewards)
        for rollout_id, advantage in advantages.items():
            segments = segments_by_rollout.get(rollout_id)
            if not segments:
                raise ValueError(
                    f"rollout {rollout_id!r} has no recorded segments; train with an in-process policy"
                )
            weights: Sequence[float | None] = (
                term_weights(segments, episodes_per_update, lambda_rerank, lambda_distill)
                if objective == "term_means" else [None] * len(segments))
            samples.extend(
                TrainSample.from_session_tokens(
                    segment.tokens,
                    advantage.for_kind(segment.kind, rollout_id),
                    group.group_index,
                    rollout_id,
                    weight,
                )
                for segment, weight in zip(segments, weights)
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
