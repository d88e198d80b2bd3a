"""Micro-batch packing, update splitting by whole groups, and TrainSample validation."""

from __future__ import annotations

import math
import random

import pytest
import torch
from reward_helpers import strict_reward

from intraskill.chat.base import SessionTokens
from intraskill.training.admission import FinishedGroup, RolloutOutcome
from intraskill.training.batching import (
    TrainSample,
    collate,
    pack_micro_batches,
    padding_waste,
    split_updates,
    train_samples_from_groups,
)


def _sample(group: int, rollout: str, n: int = 4, advantage: float = 0.0) -> TrainSample:
    mask = (0,) + (1,) * (n - 1)
    return TrainSample(tuple(range(n)), mask, tuple(-0.5 * m for m in mask), advantage, group, rollout)


@pytest.mark.parametrize("seed", range(5))
def test_packer_respects_budget_and_packs_each_sample_once(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 300) for _ in range(rng.randint(1, 80))]
    budget = rng.choice([300, 512, 1024, 4096])
    bins = pack_micro_batches(lengths, budget)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    for b in bins:
        assert len(b) * max(lengths[i] for i in b) <= budget
        # first-fit decreasing: each micro-batch is led by its longest sequence
        assert lengths[b[0]] == max(lengths[i] for i in b)


def test_packer_opens_a_new_batch_only_when_none_has_room() -> None:
    assert pack_micro_batches([5, 9, 3, 8, 2], token_budget=18) == [[1, 3], [0, 2, 4]]
    assert pack_micro_batches([4, 4, 4, 4], token_budget=16) == [[0, 1, 2, 3]]
    assert pack_micro_batches([], token_budget=16) == []


def test_packer_rejects_sequence_over_budget() -> None:
    with pytest.raises(ValueError, match="raise micro_batch_tokens to at least 33"):
        pack_micro_batches([10, 33], token_budget=32)


def test_padding_waste_and_packer_beats_arrival_order() -> None:
    assert padding_waste([4, 2, 2], [[0], [1, 2]]) == (8, 8, 0.0)
    rng = random.Random(11)
    lengths = [rng.choice([rng.randint(20, 60), rng.randint(400, 500)]) for _ in range(64)]
    packed = padding_waste(lengths, pack_micro_batches(lengths, 2048))[2]
    naive = padding_waste(lengths, [list(range(i, i + 4)) for i in range(0, 64, 4)])[2]
    assert packed < 0.15 and naive > 0.4


def test_split_updates_by_whole_groups_counts_episodes_not_segments() -> None:
    samples = []
    for group in range(16):
        for k in range(8):
            samples.append(_sample(group, f"g{group}-r{k}"))
            if k == 0:  # a forked episode: a second segment of the same rollout
                samples.append(_sample(group, f"g{group}-r{k}"))
    updates = split_updates(samples, global_batch_size=64)
    assert len(updates) == 2
    for update in updates:
        assert len({(s.group_index, s.rollout_id) for s in update}) == 64
        assert len({s.group_index for s in update}) == 8
    assert {s.group_index for s in updates[0]} == set(range(8))


def test_split_updates_rejects_partial_groups_and_leftovers() -> None:
    samples = [_sample(g, f"{g}-{k}") for g in range(3) for k in range(8)]
    with pytest.raises(ValueError, match="multiple of the group size"):
        split_updates(samples, global_batch_size=12)
    with pytest.raises(ValueError, match="left over"):
        split_updates(samples, global_batch_size=16)


def test_train_sample_validation_names_the_problem() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        TrainSample((1, 2, 3), (0, 1), (0.0, 0.0), 0.0, 0, "r")
    with pytest.raises(ValueError, match=r"loss_mask\[0\] must be 0"):
        TrainSample((1, 2), (1, 1), (0.0, 0.0), 0.0, 0, "r")
    with pytest.raises(ValueError, match="0 or 1"):
        TrainSample((1, 2), (0, 2), (0.0, 0.0), 0.0, 0, "r")
    with pytest.raises(ValueError, match="advantage must be finite"):
        TrainSample((1, 2), (0, 1), (0.0, 0.0), float("inf"), 0, "r")


def test_from_session_tokens_keeps_exact_ids_and_logprobs() -> None:
    tokens = SessionTokens([5, 6, 7, 8], [0, 1, 1, 0], [0.0, -0.25, -1.5, 0.0])
    sample = TrainSample.from_session_tokens(tokens, 0.5, 3, "ep-1")
    assert sample.input_ids == (5, 6, 7, 8) and sample.old_logprobs == (0.0, -0.25, -1.5, 0.0)
    assert sample.model_tokens == 2 and len(sample) == 4


def test_collate_right_pads_with_zero_masks() -> None:
    batch = collate([_sample(0, "a", 5, advantage=2.0), _sample(0, "b", 3, advantage=-1.0)], pad_id=9)
    assert batch.input_ids[1].tolist() == [0, 1, 2, 9, 9]
    assert batch.loss_mask[1].tolist() == [0, 1, 1, 0, 0]
    assert torch.equal(batch.advantages[1], torch.tensor([0.0, -1.0, -1.0, 0.0, 0.0]))
    assert batch.model_tokens == 6


def test_train_samples_from_groups_broadcasts_advantage_to_segments() -> None:
    def outcome(rid: str, k: int, r: float) -> RolloutOutcome:
        return RolloutOutcome(rid, k, rid, strict_reward(r))

    group = FinishedGroup(7, (outcome("a", 0, 0.0), outcome("b", 1, 1.0)))
    seg = SessionTokens([1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.2])
    samples = train_samples_from_groups([group], {"a": [seg, seg], "b": [seg]})
    half = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert [(s.rollout_id, s.group_index) for s in samples] == [("a", 7), ("a", 7), ("b", 7)]
    assert [s.advantage for s in samples] == pytest.approx([-half, -half, half], abs=1e-15)
    with pytest.raises(ValueError, match="no recorded SessionTokens"):
        train_samples_from_groups([group], {"a": [seg]})
