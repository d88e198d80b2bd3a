"""GRPO advantages over the unique rollouts of a group (``docs/method.md`` §3.5).

One episode may be split into several token-contiguous segments that share a ``rollout_id``. The
advantage is computed once per unique rollout of a group,

    A_k = (r_k - mean(r)) / (std(r) + eps),   std unbiased (n - 1), eps = 1e-6,

and broadcast to every segment of rollout ``k``. Segments of one rollout that carry different
rewards are a hard error. With ``normalize_std=False`` (slime's ``--disable-grpo-std-normalization``)
or a single rollout only the mean is removed; with ``center=False`` (``rewards_normalization`` off)
the raw rewards are the advantages.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

GRPO_STD_EPS = 1e-6


def unique_rollout_rewards(segments: Iterable[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """Collapse ``(rollout_id, reward)`` segment pairs to one reward per rollout, in first-seen order.

    Raises
    ------
    ValueError
        If two segments of one rollout carry different rewards, or a reward is not finite.

    Examples
    --------
    >>> unique_rollout_rewards([("a", 1.0), ("a", 1.0), ("b", 0.0)])
    {'a': 1.0, 'b': 0.0}
    """
    rewards: dict[Hashable, float] = {}
    for rollout_id, reward in segments:
        value = float(reward)
        if not math.isfinite(value):
            raise ValueError(f"reward of rollout {rollout_id!r} is not finite: {reward!r}")
        if rollout_id in rewards and rewards[rollout_id] != value:
            raise ValueError(
                f"segments of rollout {rollout_id!r} carry different rewards "
                f"({rewards[rollout_id]!r} vs {value!r}); every segment of one episode must share its reward"
            )
        rewards.setdefault(rollout_id, value)
    return rewards


def group_advantages(
    rewards_by_rollout: Mapping[Hashable, float] | Iterable[tuple[Hashable, float]],
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
    center: bool = True,
) -> dict[Hashable, float]:
    """Advantages of one GRPO group, one per unique rollout.

    Parameters
    ----------
    rewards_by_rollout
        ``{rollout_id: reward}`` or an iterable of ``(rollout_id, reward)`` segment pairs (deduplicated
        with :func:`unique_rollout_rewards`, which raises on mismatched segment rewards).
    normalize_std
        Divide by ``std + eps`` (unbiased std); skipped when there is a single rollout.
    eps
        Added to the std (default 1e-6, the release value).
    center
        Subtract the group mean; ``False`` returns the raw rewards (no normalisation at all).

    Returns
    -------
    dict
        ``{rollout_id: advantage}`` in first-seen order.

    Examples
    --------
    The fan-out case of the release tests: two rollouts with rewards 0 and 1 give ±1/√2.

    >>> adv = group_advantages({"a": 0.0, "b": 1.0})
    >>> round(adv["a"], 6), round(adv["b"], 6)
    (-0.707106, 0.707106)
    """
    items = rewards_by_rollout.items() if isinstance(rewards_by_rollout, Mapping) else rewards_by_rollout
    rewards = unique_rollout_rewards(items)
    if not rewards:
        raise ValueError("group_advantages needs at least one rollout reward")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if not center:
        return dict(rewards)
    n = len(rewards)
    mean = math.fsum(rewards.values()) / n
    centered = {key: value - mean for key, value in rewards.items()}
    if not normalize_std or n == 1:
        return centered
    std = math.sqrt(math.fsum(c * c for c in centered.values()) / (n - 1))
    return {key: c / (std + eps) for key, c in centered.items()}


def segment_advantages(
    segments: Sequence[tuple[int, Hashable, float]],
    normalize_std: bool = True,
    eps: float = GRPO_STD_EPS,
    center: bool = True,
) -> list[float]:
    """Per-segment advantages of a batch of ``(group_index, rollout_id, reward)`` segments.

    Groups are keyed by ``group_index``; rollouts are unique by ``(group_index, rollout_id)``. Each
    segment receives its rollout's advantage, in input order.

    Examples
    --------
    >>> adv = segment_advantages([(0, "a", 0.0), (0, "a", 0.0), (0, "b", 1.0), (1, "c", 0.5)])
    >>> [round(a, 6) for a in adv]
    [-0.707106, -0.707106, 0.707106, 0.0]
    """
    by_group: dict[int, list[tuple[Hashable, float]]] = {}
    for group_index, rollout_id, reward in segments:
        by_group.setdefault(group_index, []).append((rollout_id, reward))
    advantages = {
        group_index: group_advantages(pairs, normalize_std=normalize_std, eps=eps, center=center)
        for group_index, pairs in by_group.items()
    }
    return [advantages[group_index][rollout_id] for group_index, rollout_id, _ in segments]
