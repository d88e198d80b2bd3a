"""Skill1's three advantages on token segments, against hand-computed values (docs/method.md §10.3)."""

from __future__ import annotations

import math

import pytest
import torch
from reward_helpers import strict_reward

from intraskill.chat.base import SessionTokens
from intraskill.training.admission import FinishedGroup, RolloutOutcome
from intraskill.training.batching import collate, train_samples_from_groups
from intraskill.training.loss import clipped_surrogate
from intraskill.training.skill1_advantages import (
    Skill1Group,
    Skill1Segment,
    skill1_group_advantages,
    skill1_train_samples,
    split_by_kind,
)
from intraskill.training.skill1_rewards import Skill1RolloutRewards

EPS = 1e-6


def _rewards(rid: str, r: float, u_hat: float, r_rerank: float | None) -> Skill1RolloutRewards:
    return Skill1RolloutRewards(rid, None, (), r, u_hat, r - u_hat, r_rerank)


# r = (1, 0, 1, 1); Û = (0, 0, 0.5, 0.5) so R_distill = (1, 0, 0.5, 0.5); R_rerank = (—, 0.5, 1, 0).
GROUP = (
    _rewards("a", 1.0, 0.0, None),
    _rewards("b", 0.0, 0.0, 0.5),
    _rewards("c", 1.0, 0.5, 1.0),
    _rewards("d", 1.0, 0.5, 0.0),
)
# J_util: mean 0.75, centred (0.25, −0.75, 0.25, 0.25), unbiased std sqrt(0.75 / 3) = 0.5.
UTIL = [c / (0.5 + EPS) for c in (0.25, -0.75, 0.25, 0.25)]
# J_distill, normalised separately: mean 0.5, centred (0.5, −0.5, 0, 0), std sqrt(0.5 / 3).
DISTILL = [0.3 * c / (math.sqrt(0.5 / 3) + EPS) for c in (0.5, -0.5, 0.0, 0.0)]
# J_rerank: REINFORCE, no baseline: λ1·R_rerank.
RERANK = [None, 0.15, 0.3, 0.0]


def test_group_advantages_hand_computed() -> None:
    adv = skill1_group_advantages(GROUP)
    assert [adv[k].util for k in "abcd"] == pytest.approx(UTIL, abs=1e-12)
    assert [adv[k].distill for k in "abcd"] == pytest.approx(DISTILL, abs=1e-12)
    assert DISTILL[0] == pytest.approx(0.3 * math.sqrt(1.5), abs=1e-5)
    assert adv["a"].rerank is None
    assert [adv[k].rerank for k in "bcd"] == pytest.approx(RERANK[1:], abs=1e-12)


def test_lambda_weights_scale_only_their_term() -> None:
    base = skill1_group_advantages(GROUP, lambda_rerank=1.0, lambda_distill=1.0)
    zero = skill1_group_advantages(GROUP, lambda_rerank=0.0, lambda_distill=0.0)
    for k in "abcd":
        assert zero[k].util == base[k].util and zero[k].distill == 0.0
    assert [base[k].rerank for k in "bcd"] == [0.5, 1.0, 0.0]


def _tokens(n_model: int, start: int = 5) -> SessionTokens:
    return SessionTokens(
        list(range(start, start + n_model + 1)), [0] + [1] * n_model, [0.0] + [-0.5] * n_model
    )


def test_segments_get_the_advantage_of_their_kind() -> None:
    kinds = ("query", "rerank", "act", "act", "distill")
    segments = {
        k: [Skill1Segment(kind, _tokens(2)) for kind in kinds if not (k == "a" and kind == "rerank")]
        for k in "abcd"
    }
    samples = skill1_train_samples([Skill1Group(3, GROUP)], segments)
    got = [(s.rollout_id, s.advantage) for s in samples]
    expected = []
    for i, k in enumerate("abcd"):
        by_kind = {"query": UTIL[i], "rerank": RERANK[i], "act": UTIL[i], "distill": DISTILL[i]}
        expected += [(k, by_kind[kind]) for kind in kinds if not (k == "a" and kind == "rerank")]
    assert [r for r, _ in got] == [r for r, _ in expected]
    assert [a for _, a in got] == pytest.approx([a for _, a in expected], abs=1e-12)
    assert {s.group_index for s in samples} == {3}
    with pytest.raises(ValueError, match="rerank segment but retrieved no candidates"):
        skill1_train_samples(
            [Skill1Group(3, GROUP)], {**segments, "a": [Skill1Segment("rerank", _tokens(2))]}
        )


def test_plain_grpo_is_unchanged() -> None:
    rewards = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    group = FinishedGroup(
        0, tuple(RolloutOutcome(k, i, k, strict_reward(r)) for i, (k, r) in enumerate(rewards.items()))
    )
    seg = _tokens(3)
    plain = train_samples_from_groups([group], {k: [seg, seg] for k in rewards})
    skill1 = skill1_train_samples(
        [Skill1Group(0, GROUP)], {k: [Skill1Segment("act", seg), Skill1Segment("act", seg)] for k in rewards}
    )
    assert skill1 == plain


def test_segment_masks_equal_per_token_advantages_in_the_surrogate() -> None:
    # One stream: prompt, 2 query tokens, observation, 1 rerank token, 3 act tokens, 2 distill tokens.
    mask = [0, 1, 1, 0, 1, 1, 1, 1, 1, 1]
    kinds = [None, "query", "query", None, "rerank", "act", "act", "act", "distill", "distill"]
    stream = SessionTokens(list(range(10)), mask, [-0.1 * m for m in mask])
    segments = split_by_kind(stream, kinds)
    assert [s.kind for s in segments] == ["query", "rerank", "act", "distill"]
    assert [sum(s.tokens.loss_mask) for s in segments] == [2, 1, 3, 2]
    assert [sum(col) for col in zip(*(s.tokens.loss_mask for s in segments))] == mask
    samples = skill1_train_samples([Skill1Group(0, GROUP[2:3] + GROUP[1:2])], {"c": segments, "b": segments})
    batch = collate(samples)
    old = batch.old_logprobs
    loss, _, _ = clipped_surrogate(old.clone(), old, batch.advantages, batch.loss_mask)
    # ratio = 1, so the loss is −(Σ per-token advantages) / model tokens, over both rollouts' streams.
    adv = skill1_group_advantages(GROUP[2:3] + GROUP[1:2])
    per_token = {k: [0.0 if kind is None else adv[k].for_kind(kind, k) for kind in kinds] for k in "cb"}
    expected = -sum(sum(v) for v in per_token.values()) / 16
    assert float(loss) == pytest.approx(expected, abs=1e-6)
    assert adv["c"].util == pytest.approx(1 / math.sqrt(2), abs=1e-5)  # r = (1, 0): ±1/√2
    assert torch.isfinite(loss)
    with pytest.raises(ValueError, match="token 1: kind must be one of"):
        split_by_kind(stream, [None] * 10)


def _term_loss(samples: list) -> float:
    """The trainer's policy loss at ratio 1 (old = new) over ``samples``, weighted as they ask."""
    batch = collate(samples)
    old = batch.old_logprobs
    return float(clipped_surrogate(old.clone(), old, batch.advantages, batch.loss_mask,
                                   weights=batch.loss_weights)[0])


@pytest.mark.parametrize("act_tokens", [3, 40])
def test_term_means_objective_holds_whatever_the_segment_lengths(act_tokens: int) -> None:
    # J = J_util + λ1·J_rerank + λ2·J_distill, each a mean over the E = 4 rollouts of its per-token mean:
    # at ratio 1 the loss is −(mean A_util + 0.3·Σ A_rerank / 4 + 0.3·mean A_distill), act segments long or short.
    kinds = ("query", "rerank", "act", "distill")
    lengths = {"query": 2, "rerank": 1, "act": act_tokens, "distill": 5}
    segments = {k: [Skill1Segment(kind, _tokens(lengths[kind])) for kind in kinds
                    if not (k == "a" and kind == "rerank")] for k in "abcd"}
    samples = skill1_train_samples([Skill1Group(0, GROUP)], segments, objective="term_means")
    raw = skill1_group_advantages(GROUP, scale=False)
    expected = -(sum(raw[k].util for k in "abcd") / 4 + 0.3 * sum(raw[k].rerank for k in "bcd") / 4
                 + 0.3 * sum(raw[k].distill for k in "abcd") / 4)
    assert _term_loss(samples) == pytest.approx(expected, abs=1e-6)
    # The effective weight of each term, summed over its tokens: 1, λ1 (× the share with candidates), λ2.
    share = {"util": 0.0, "rerank": 0.0, "distill": 0.0}
    for sample, (k, kind) in zip(samples, [(k, s.kind) for k in "abcd" for s in segments[k]]):
        share["util" if kind in ("query", "act") else kind] += sample.weight * sample.model_tokens
    assert share == pytest.approx({"util": 1.0, "rerank": 0.3 * 3 / 4, "distill": 0.3})
    # The token mean instead weighs a term by its tokens: with long episodes the distillation term shrinks.
    token = skill1_train_samples([Skill1Group(0, GROUP)], segments)
    tokens = {kind: sum(s.model_tokens for s, (_, kd) in zip(token, [(k, s.kind) for k in "abcd"
                                                                      for s in segments[k]]) if kd == kind)
              for kind in kinds}
    distill_weight = 0.3 * tokens["distill"] / sum(tokens.values()) * 4  # per rollout-mean unit
    assert (distill_weight < 0.3) == (act_tokens == 40)
    assert all(s.weight is None for s in token)


def test_term_means_normalise_by_the_update_size() -> None:
    segments = {k: [Skill1Segment("act", _tokens(3)), Skill1Segment("distill", _tokens(2))] for k in "abcd"}
    group = [Skill1Group(0, tuple(_rewards(k, r, 0.0, None) for k, r in zip("abcd", (1.0, 0.0, 1.0, 0.0))))]
    whole = skill1_train_samples(group, segments, objective="term_means")
    halves = skill1_train_samples(group, segments, objective="term_means", episodes_per_update=8)
    assert [2 * h.weight for h in halves] == pytest.approx([w.weight for w in whole])
    with pytest.raises(ValueError, match="objective must be"):
        skill1_train_samples(group, segments, objective="per_token")
