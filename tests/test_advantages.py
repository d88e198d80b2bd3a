"""Closed-form GRPO advantages over unique rollouts (docs/method.md §3.5)."""

from __future__ import annotations

import math

import pytest
import torch

from intraskill.training.advantages import group_advantages, segment_advantages, unique_rollout_rewards


def test_fan_out_two_rollouts_give_plus_minus_one_over_sqrt_two() -> None:
    # Rollout "a" was forked into three segments; it still counts once.
    segments = [("a", 0.0), ("a", 0.0), ("b", 1.0), ("a", 0.0)]
    adv = group_advantages(segments)
    expected = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert adv == {"a": pytest.approx(-expected, abs=1e-15), "b": pytest.approx(expected, abs=1e-15)}
    assert adv["b"] == pytest.approx(1 / math.sqrt(2), abs=2e-6)


def test_unbiased_std_matches_torch_default() -> None:
    rewards = {"r0": 0.0, "r1": 0.5, "r2": 1.0, "r3": 1.0, "r4": 0.25}
    values = torch.tensor(list(rewards.values()), dtype=torch.float64)
    expected = (values - values.mean()) / (values.std() + 1e-6)  # torch.std is unbiased by default
    adv = group_advantages(rewards)
    assert list(adv.values()) == pytest.approx(expected.tolist(), abs=1e-12)


def test_hand_computed_four_rollouts() -> None:
    # mean 0.625, squared deviations sum 0.6875, unbiased variance 0.6875 / 3
    std = math.sqrt(0.6875 / 3)
    adv = group_advantages({"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.0})
    assert adv["a"] == pytest.approx(-0.625 / (std + 1e-6), abs=1e-12)
    assert adv["b"] == pytest.approx(-0.125 / (std + 1e-6), abs=1e-12)
    assert adv["c"] == adv["d"] == pytest.approx(0.375 / (std + 1e-6), abs=1e-12)


def test_no_std_division_when_disabled_or_single_rollout() -> None:
    assert group_advantages({"a": 0.0, "b": 1.0, "c": 1.0}, normalize_std=False) == pytest.approx(
        {"a": -2 / 3, "b": 1 / 3, "c": 1 / 3}
    )
    assert group_advantages({"only": 0.7}) == {"only": 0.0}


def test_center_off_returns_raw_rewards() -> None:
    assert group_advantages({"a": 0.2, "b": 0.9}, center=False) == {"a": 0.2, "b": 0.9}


def test_tied_group_has_zero_advantages() -> None:
    assert group_advantages({"a": 1.0, "b": 1.0, "c": 1.0}) == {"a": 0.0, "b": 0.0, "c": 0.0}


def test_segment_reward_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="rollout 'a' carry different rewards"):
        group_advantages([("a", 0.0), ("b", 1.0), ("a", 1.0)])


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="at least one rollout"):
        group_advantages({})
    with pytest.raises(ValueError, match="not finite"):
        unique_rollout_rewards([("a", float("nan"))])


def test_segment_advantages_broadcast_per_group() -> None:
    segments = [(0, "x", 0.0), (1, "x", 1.0), (0, "x", 0.0), (0, "y", 1.0), (1, "z", 1.0)]
    adv = segment_advantages(segments)
    half = 0.5 / (math.sqrt(0.5) + 1e-6)
    # Rollout ids are unique per group: "x" in group 0 and "x" in group 1 are different rollouts.
    assert adv == pytest.approx([-half, 0.0, -half, half, 0.0], abs=1e-15)
