"""Closed-form checks of the token log-probs, clipped surrogate and k3 KL."""

from __future__ import annotations

import math

import pytest
import torch

from intraskill.training.loss import (
    clipped_surrogate,
    k3_kl,
    masked_sum_mean,
    scored_tokens,
    token_entropy,
    token_logprobs,
)

RATIOS = [1.1, 1.5, 0.5]  # inside, above 1 + 0.28, below 1 - 0.2


def _surrogate_inputs(advantage: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    logp_old = torch.tensor([[0.0, -1.0, -2.0, -0.5]])
    logp_new = (logp_old + torch.tensor([[0.0] + [math.log(r) for r in RATIOS]])).requires_grad_(True)
    mask = torch.tensor([[0, 1, 1, 1]])
    return logp_new, logp_old, torch.tensor([advantage]), mask


def test_token_logprobs_shift_and_temperature() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, 7, generator=gen)
    ids = torch.randint(0, 7, (2, 5), generator=gen)
    got = token_logprobs(logits, ids, temperature=0.6)
    assert got.shape == (2, 5)
    assert torch.all(got[:, 0] == 0)
    for b in range(2):
        for t in range(1, 5):
            expected = torch.log_softmax(logits[b, t - 1] / 0.6, dim=-1)[ids[b, t]]
            assert float(got[b, t]) == pytest.approx(float(expected), abs=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(logits, ids, temperature=0.0)


def test_scored_tokens_keep_exactly_each_rows_loss_mask_tokens() -> None:
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 6, 9, generator=gen)
    ids = torch.randint(0, 9, (2, 6), generator=gen)
    mask = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 0]])
    scored = scored_tokens(mask)
    assert [r.tolist() for r in scored] == [[0, 0, 1], [1, 2, 3]]
    kept = logits[scored]
    assert kept.shape == (3, 9)
    full_logp, full_entropy = token_logprobs(logits, ids, 0.6), token_entropy(logits, 0.6)
    got_logp = token_logprobs(kept, ids, 0.6, scored)
    got_entropy = token_entropy(kept, 0.6, scored, shape=(2, 6))
    where = mask.bool()
    assert torch.allclose(got_logp[where], full_logp[where]) and torch.all(got_logp[~where] == 0)
    assert torch.allclose(got_entropy[where], full_entropy[where]) and torch.all(got_entropy[~where] == 0)
    with pytest.raises(ValueError, match="scored"):
        token_logprobs(logits, ids, 0.6, scored)
    with pytest.raises(ValueError, match="batch shape"):
        token_entropy(kept, 0.6, scored)


def test_entropy_of_uniform_is_log_vocab() -> None:
    ent = token_entropy(torch.zeros(1, 3, 16), temperature=0.7)
    assert ent[0, 1:].tolist() == pytest.approx([math.log(16)] * 2, abs=1e-6)


def test_positive_advantage_clips_only_above_one_plus_eps_high() -> None:
    logp_new, logp_old, adv, mask = _surrogate_inputs(1.0)
    loss, clipfrac, approx_kl = clipped_surrogate(logp_new, logp_old, adv, mask, 0.2, 0.28)
    # per token: -min(r, clip(r)) = -1.1, -1.28, -0.5
    assert float(loss.detach()) == pytest.approx((-1.1 - 1.28 - 0.5) / 3, abs=1e-6)
    assert float(clipfrac) == pytest.approx(1 / 3)
    assert float(approx_kl) == pytest.approx(-sum(math.log(r) for r in RATIOS) / 3, abs=1e-6)
    loss.backward()
    # d(-r*A)/dlogp = -r*A where unclipped, 0 where the clipped branch is active
    assert logp_new.grad[0].tolist() == pytest.approx([0.0, -1.1 / 3, 0.0, -0.5 / 3], abs=1e-6)


def test_negative_advantage_clips_only_below_one_minus_eps_low() -> None:
    logp_new, logp_old, adv, mask = _surrogate_inputs(-1.0)
    loss, clipfrac, _ = clipped_surrogate(logp_new, logp_old, adv, mask, 0.2, 0.28)
    # per token: -min(-r, -clip(r)) = 1.1, 1.5, 0.8
    assert float(loss.detach()) == pytest.approx((1.1 + 1.5 + 0.8) / 3, abs=1e-6)
    assert float(clipfrac) == pytest.approx(1 / 3)
    loss.backward()
    assert logp_new.grad[0].tolist() == pytest.approx([0.0, 1.1 / 3, 1.5 / 3, 0.0], abs=1e-6)


def test_gradient_flows_only_through_logp_new() -> None:
    logp_new, logp_old, adv, mask = _surrogate_inputs(0.7)
    logp_old.requires_grad_(True)
    adv.requires_grad_(True)
    loss, _, _ = clipped_surrogate(logp_new, logp_old, adv, mask, 0.2, 0.28)
    loss.backward()
    assert logp_new.grad is not None
    assert logp_old.grad is None and adv.grad is None


def test_masked_tokens_do_not_change_loss_or_gradient() -> None:
    logp_new, logp_old, adv, mask = _surrogate_inputs(1.0)
    base, _, _ = clipped_surrogate(logp_new, logp_old, adv, mask)
    base.backward()
    grad = logp_new.grad.clone()
    logp_new.grad = None
    poisoned = logp_old.clone()
    poisoned[0, 0] = -1e9  # a masked (prompt) position with an absurd old log-prob
    loss, clipfrac, approx_kl = clipped_surrogate(logp_new, poisoned, adv, mask)
    loss.backward()
    assert float(loss.detach()) == float(base.detach())
    assert torch.equal(logp_new.grad, grad)
    assert math.isfinite(float(approx_kl)) and math.isfinite(float(clipfrac))


def test_ratio_one_gives_minus_mean_advantage_and_no_clipping() -> None:
    logp = torch.tensor([[0.0, -0.3, -1.2, -0.1]])
    adv = torch.tensor([[0.0, 2.0, -1.0, 0.5]])
    mask = torch.tensor([[0, 1, 1, 1]])
    loss, clipfrac, approx_kl = clipped_surrogate(logp, logp, adv, mask)
    assert float(loss.detach()) == pytest.approx(-(2.0 - 1.0 + 0.5) / 3)
    assert float(clipfrac) == 0.0 and float(approx_kl) == 0.0


def test_global_denominator_makes_micro_batches_sum_to_token_mean() -> None:
    gen = torch.Generator().manual_seed(7)
    new, old = torch.randn(4, 6, generator=gen), torch.randn(4, 6, generator=gen)
    adv = torch.randn(4, generator=gen)
    mask = (torch.rand(4, 6, generator=gen) > 0.4).long()
    mask[:, 0] = 0
    full, _, _ = clipped_surrogate(new, old, adv, mask)
    total = float(mask.sum())
    halves = (slice(0, 1), slice(1, 4))
    parts = [clipped_surrogate(new[s], old[s], adv[s], mask[s], denominator=total)[0] for s in halves]
    assert float(sum(parts)) == pytest.approx(float(full), abs=1e-6)


def test_k3_kl_closed_form_and_gradient() -> None:
    logp_new = torch.tensor([[0.0, -1.0, -0.5, -2.0]], requires_grad=True)
    logp_ref = torch.tensor([[5.0, -1.0, -0.2, -2.5]])
    mask = torch.tensor([[0, 1, 1, 1]])
    kl = k3_kl(logp_new, logp_ref, mask)
    deltas = [0.0, 0.3, -0.5]
    assert float(kl.detach()) == pytest.approx(sum(math.exp(d) - d - 1 for d in deltas) / 3, abs=1e-6)
    kl.backward()
    # d/dlogp_new of exp(ref - new) - (ref - new) - 1 = 1 - exp(ref - new)
    expected = [0.0] + [(1 - math.exp(d)) / 3 for d in deltas]
    assert logp_new.grad[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert float(k3_kl(logp_ref, logp_ref, mask)) == 0.0


def test_masked_sum_mean_rejects_bad_denominator() -> None:
    with pytest.raises(ValueError, match="denominator"):
        masked_sum_mean(torch.ones(2), torch.ones(2), denominator=0.0)
