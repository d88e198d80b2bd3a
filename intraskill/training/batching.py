"""Train samples, optimizer-update splitting by whole groups, and token-budget micro-batch packing.

A :class:`TrainSample` is one token-contiguous segment of one episode, exactly as recorded at
rollout (``SessionTokens``): no text is re-tokenised. One rollout step's admitted samples are
split into ``updates_per_step`` optimizer updates of ``global_batch_size`` episodes each, always by
whole GRPO groups (release: 128 admitted episodes → 2 updates of 64 = 8 groups,
``docs/method.md`` §6.3; docs/slime.md §3). Each update is then packed into
micro-batches whose padded size ``rows × longest row`` stays within a token budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from intraskill.chat.base import SessionTokens
from intraskill.training.admission import FinishedGroup
from intraskill.training.advantages import GRPO_STD_EPS, group_advantages

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TrainSample:
    """One trainable segment: the exact rollout tokens, their sampling log-probs and the advantage.

    Parameters
    ----------
    input_ids
        Token ids of the whole stream (prompt, model turns, observations).
    loss_mask
        1 on model-sampled tokens, 0 on prompt, observation, tool-result and template tokens. Token 0
        has no prefix to be predicted from, so its mask must be 0.
    old_logprobs
        Log-prob each token was sampled with (log-softmax of temperature-scaled logits); read only
        where the mask is 1.
    advantage
        The rollout's GRPO advantage, broadcast to every segment of the rollout.
    group_index
        GRPO group (prompt) index.
    rollout_id
        Episode identity shared by all segments of one rollout.
    weight
        ``None``: the sample's tokens enter the update's token mean (the trainer's default). A number: each of
        its loss-mask tokens weighs this much in a weighted sum, so an objective of several terms, each a mean
        over samples, is exact (:mod:`intraskill.training.skill1_advantages`); an update takes weights on all
        of its samples or on none.
    """

    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    old_logprobs: tuple[float, ...]
    advantage: float
    group_index: int
    rollout_id: str
    weight: float | None = None

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        if not n == len(self.loss_mask) == len(self.old_logprobs):
            raise ValueError(
                f"TrainSample {self.rollout_id!r}: input_ids, loss_mask and old_logprobs must have equal "
                f"lengths, got {n}, {len(self.loss_mask)}, {len(self.old_logprobs)}"
            )
        if n < 2:
            raise ValueError(f"TrainSample {self.rollout_id!r}: input_ids needs at least 2 tokens, got {n}")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError(f"TrainSample {self.rollout_id!r}: loss_mask values must be 0 or 1")
        if self.loss_mask[0] != 0:
            raise ValueError(
                f"TrainSample {self.rollout_id!r}: loss_mask[0] must be 0 (the first token has no prefix)"
            )
        if not math.isfinite(self.advantage):
            raise ValueError(
                f"TrainSample {self.rollout_id!r}: advantage must be finite, got {self.advantage}"
            )
        if self.weight is not None and not (math.isfinite(self.weight) and self.weight >= 0):
            raise ValueError(f"TrainSample {self.rollout_id!r}: weight must be finite and >= 0, got {self.weight}")

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def model_tokens(self) -> int:
        """Number of loss-mask tokens."""
        return sum(self.loss_mask)

    @classmethod
    def from_session_tokens(
        cls, tokens: SessionTokens, advantage: float, group_index: int, rollout_id: str,
        weight: float | None = None,
    ) -> TrainSample:
        """Wrap a policy's recorded :class:`SessionTokens` (no re-tokenisation)."""
        return cls(
            tuple(tokens.input_ids),
            tuple(tokens.loss_mask),
            tuple(float(x) for x in tokens.logprobs),
            float(advantage),
            group_index,
            rollout_id,
            None if weight is None else float(weight),
        )


def train_samples_from_groups(
    groups: Sequence[FinishedGroup],
    tokens_by_rollout: Mapping[str, Sequence[SessionTokens]],
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
) -> list[TrainSample]:
    """Trainer samples of admitted groups: GRPO advantages of ``reward`` broadcast to every segment.

    Parameters
    ----------
    groups
        Admitted groups (every rollout scored), e.g. ``AdmissionResult.accepted``.
    tokens_by_rollout
        ``rollout_id -> segments`` recorded by an in-process policy (one or more per episode).
    normalize_std, eps
        As in :func:`~intraskill.training.advantages.group_advantages`.

    Raises
    ------
    ValueError
        If a rollout is unscored or has no recorded segments (remote backends record none).
    """
    samples: list[TrainSample] = []
    for group in groups:
        rewards = {}
        for rollout in group.rollouts:
            if rollout.reward is None:
                raise ValueError(
                    f"rollout {rollout.rollout_id!r} is unscored; only admitted groups are trainable"
                )
            if not tokens_by_rollout.get(rollout.rollout_id):
                raise ValueError(
                    f"rollout {rollout.rollout_id!r} has no recorded SessionTokens; "
                    "train with an in-process policy"
                )
            rewards[rollout.rollout_id] = rollout.reward.reward
        advantages = group_advantages(rewards, normalize_std=normalize_std, eps=eps)
        for rollout in group.rollouts:
            advantage = advantages[rollout.rollout_id]
            samples.extend(
                TrainSample.from_session_tokens(segment, advantage, group.group_index, rollout.rollout_id)
                for segment in tokens_by_rollout[rollout.rollout_id]
            )
    return samples


def split_updates(samples: Sequence[TrainSample], global_batch_size: int) -> list[list[TrainSample]]:
    """Split one rollout step's samples into optimizer updates of ``global_batch_size`` episodes.

    Groups keep their first-seen order and are never split; an episode is a unique
    ``(group_index, rollout_id)`` whatever its segment count. Every update must hold exactly
    ``global_batch_size`` episodes.

    Raises
    ------
    ValueError
        If whole groups cannot fill the updates exactly (fix ``global_batch_size`` so that it is a
        multiple of the group size and divides the admitted episode count).

    Examples
    --------
    >>> s = [TrainSample((1, 2), (0, 1), (0.0, -1.0), 0.0, g, f"r{g}{k}") for g in range(4) for k in range(2)]
    >>> [len(u) for u in split_updates(s, 4)]
    [4, 4]
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size must be >= 1, got {global_batch_size}")
    groups: dict[int, list[TrainSample]] = {}
    for sample in samples:
        groups.setdefault(sample.group_index, []).append(sample)
    updates: list[list[TrainSample]] = []
    current: list[TrainSample] = []
    episodes = 0
    for group_index, members in groups.items():
        group_episodes = len({s.rollout_id for s in members})
        if episodes + group_episodes > global_batch_size:
            raise ValueError(
                f"group {group_index} ({group_episodes} episodes) does not fit the "
                f"{global_batch_size - episodes} episodes left in an update of "
                f"global_batch_size={global_batch_size}; make global_batch_size a multiple of the group size"
            )
        current.extend(members)
        episodes += group_episodes
        if episodes == global_batch_size:
            updates.append(current)
            current, episodes = [], 0
    if current:
        raise ValueError(
            f"{episodes} episodes are left over after {len(updates)} full update(s) of global_batch_size="
            f"{global_batch_size}; admit a multiple of global_batch_size episodes per step"
        )
    return updates


def pack_micro_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """First-fit-decreasing packing of sequences into padded micro-batches.

    A micro-batch costs ``rows × longest row`` tokens once right-padded; that cost must stay within
    ``token_budget``. Sequences are visited longest first and each goes into the first micro-batch
    with room. Since the first (longest) sequence of a micro-batch fixes its row length, a
    micro-batch fills up before the next opens, so each holds a run of similar lengths.

    Returns
    -------
    list[list[int]]
        Indices into ``lengths``, every index exactly once.

    Raises
    ------
    ValueError
        If one sequence alone exceeds the budget (raise ``token_budget`` to at least its length).

    Examples
    --------
    >>> pack_micro_batches([5, 9, 3, 8, 2], token_budget=18)
    [[1, 3], [0, 2, 4]]
    """
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    for index in order:
        length = lengths[index]
        if length > token_budget:
            raise ValueError(
                f"sequence {index} has {length} tokens, more than the micro-batch token budget "
                f"{token_budget}; raise micro_batch_tokens to at least {length}"
            )
        for members in bins:
            if (len(members) + 1) * lengths[members[0]] <= token_budget:
                members.append(index)
                break
        else:
            bins.append([index])
    return bins


def padding_waste(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> tuple[int, int, float]:
    """``(real_tokens, padded_tokens, waste)`` of right-padded micro-batches; waste = 1 - real / padded.

    Examples
    --------
    >>> padding_waste([4, 2], [[0, 1]])
    (6, 8, 0.25)
    """
    real = sum(lengths[i] for batch in batches for i in batch)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches if batch)
    return real, padded, (1.0 - real / padded) if padded else 0.0


def sample_weighting(samples: Sequence[TrainSample]) -> bool:
    """Whether ``samples`` (one update) carry :attr:`TrainSample.weight` s; a mix of both is an error."""
    weighted = {s.weight is not None for s in samples}
    if len(weighted) > 1:
        raise ValueError("an update mixes weighted and unweighted TrainSamples; weight all of them or none")
    return weighted == {True}


@dataclass
class MicroBatch:
    """Right-padded tensors of one micro-batch, all ``(B, T)``; padding has loss mask 0 and follows every real token,
    so causal attention alone keeps it out of them. ``loss_weights`` holds each token's :attr:`TrainSample.weight`
    (``None`` for unweighted samples)."""

    input_ids: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    loss_weights: torch.Tensor | None = None

    @property
    def model_tokens(self) -> int:
        return int(self.loss_mask.sum())


def collate(
    samples: Sequence[TrainSample], device: torch.device | str = "cpu", pad_id: int = 0
) -> MicroBatch:
    """Right-pad ``samples`` into a :class:`MicroBatch` on ``device`` (advantages broadcast per token)."""
    # deferred: torch is heavy to import
    import torch

    width = max(len(s) for s in samples)
    rows = len(samples)
    input_ids = torch.full((rows, width), pad_id, dtype=torch.long)
    loss_mask = torch.zeros((rows, width), dtype=torch.float32)
    old = torch.zeros((rows, width), dtype=torch.float32)
    for row, sample in enumerate(samples):
        n = len(sample)
        input_ids[row, :n] = torch.tensor(sample.input_ids, dtype=torch.long)
        loss_mask[row, :n] = torch.tensor(sample.loss_mask, dtype=torch.float32)
        old[row, :n] = torch.tensor(sample.old_logprobs, dtype=torch.float32)
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32).unsqueeze(-1) * loss_mask
    tensors = (input_ids, loss_mask, old, advantages)
    weights = None
    if sample_weighting(samples):
        weights = (torch.tensor([s.weight for s in samples], dtype=torch.float32).unsqueeze(-1) * loss_mask).to(device)
    return MicroBatch(*(tensor.to(device) for tensor in tensors), loss_weights=weights)
