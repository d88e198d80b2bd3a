"""Sample rewards, group views over slime samples, and the GRPO reward post-process hook.

Reference: ``docs/method.md`` §3.5 (advantages over unique rollouts of a group, unbiased std
+ 1e-6, broadcast to every segment, mismatched segment rewards are an error) and §6.2 item 6 (the
``reward`` dict; slime reads ``--reward-key reward``). slime calls the post-process hook as
``custom_reward_post_process_func(args, samples)`` on the flattened admitted samples and expects
``(raw_rewards, rewards)``, one value per sample (``slime/ray/rollout.py``; contract test
``tests/plugin_contracts/test_plugin_runtime_hook_contracts.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from intraskill.shop.reward import Reward
from intraskill.training.admission import FinishedGroup, RolloutOutcome
from intraskill.training.advantages import segment_advantages

META_ASSIGNMENT = "intraskill_assignment"
META_REWARD = "intraskill_reward"
META_SCORED = "intraskill_scored"
META_TRACE_PATH = "intraskill_trace_path"
META_EPISODE_ID = "intraskill_episode_id"
META_GROUP_TRIAGE = "intraskill_group_triage"
DEFAULT_REWARD_KEY = "reward"


def iter_samples(group: Iterable[Any]) -> Iterator[Any]:
    """The samples of a group whose entries are samples or fan-out lists of segments."""
    for entry in group:
        if isinstance(entry, (list, tuple)):
            yield from entry
        else:
            yield entry


def rollout_key(sample: Any) -> Any:
    """The rollout a segment belongs to: ``rollout_id``, else ``index`` (slime's own fallback)."""
    rollout_id = getattr(sample, "rollout_id", None)
    return sample.index if rollout_id is None else rollout_id


def reward_value(args: Any, sample: Any) -> float:
    """The scalar slime trains on: ``sample.reward[args.reward_key]`` (``reward``) or a float reward."""
    reward = sample.reward
    if isinstance(reward, Mapping):
        key = getattr(args, "reward_key", None) or DEFAULT_REWARD_KEY
        if key not in reward:
            raise KeyError(f"sample {sample.index}: reward dict has no {key!r} (--reward-key)")
        return float(reward[key])
    if reward is None:
        raise ValueError(f"sample {sample.index}: reward is None")
    return float(reward)


def scored_reward(sample: Any) -> Reward | None:
    """The validated reward the generate hook stored, or ``None`` for an unscored sample."""
    metadata = sample.metadata or {}
    return Reward.from_dict(metadata[META_REWARD]) if metadata.get(META_SCORED) is True else None


def finished_group(samples: Sequence[Any]) -> FinishedGroup:
    """One GRPO group of slime samples as a :class:`FinishedGroup`, one rollout per unique rollout ID.

    Raises if the samples span several ``group_index`` values or if segments of one rollout
    disagree on being scored or on their reward.
    """
    flat = list(iter_samples(samples))
    groups = {sample.group_index for sample in flat}
    if len(groups) != 1:
        raise ValueError(f"a group's samples must share one group_index, got {sorted(groups, key=str)}")
    rollouts: dict[Any, RolloutOutcome] = {}
    for sample in flat:
        key = rollout_key(sample)
        episode_id = (sample.metadata or {}).get(META_EPISODE_ID, str(key))
        outcome = RolloutOutcome(str(key), sample.index, episode_id, scored_reward(sample))
        if key in rollouts and rollouts[key].reward != outcome.reward:
            raise ValueError(f"segments of rollout {key!r} in group {groups.pop()} disagree on their reward")
        rollouts.setdefault(key, outcome)
    return FinishedGroup(groups.pop(), tuple(rollouts.values()))


def normalize_grpo_by_prompt_and_rollout(args: Any, samples: list[Any]) -> tuple[list[float], list[float]]:
    """``--custom-reward-post-process-path`` hook: per-group GRPO advantages over unique rollouts.

    Groups are keyed by ``group_index`` and rollouts by ``rollout_id`` (§3.5). With
    ``args.rewards_normalization`` off the raw rewards are returned; the std division applies only
    when ``args.grpo_std_normalization`` is on (both default on, as in slime).

    Returns
    -------
    (raw_rewards, rewards)
        One value per sample, in input order.

    Examples
    --------
    >>> from types import SimpleNamespace as S
    >>> seg = lambda i, rid, r: S(index=i, group_index=0, rollout_id=rid, reward={"reward": r})
    >>> raw, adv = normalize_grpo_by_prompt_and_rollout(S(), [seg(0, 0, 0.0), seg(1, 0, 0.0), seg(2, 1, 1.0)])
    >>> raw, [round(a, 6) for a in adv]
    ([0.0, 0.0, 1.0], [-0.707106, -0.707106, 0.707106])
    """
    flat = list(iter_samples(samples))
    raw = [reward_value(args, sample) for sample in flat]
    advantages = segment_advantages(
        [(sample.group_index, rollout_key(sample), value) for sample, value in zip(flat, raw)],
        normalize_std=bool(getattr(args, "grpo_std_normalization", True)),
        center=bool(getattr(args, "rewards_normalization", True)),
    )
    return raw, advantages
