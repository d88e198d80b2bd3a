"""End-to-end GRPO trainer step on a tiny random Qwen3 (CPU, real transformers and peft)."""

from __future__ import annotations

import copy
import dataclasses
import math
import random

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from intraskill.params import GRPOParams, LoraParams, SamplingParams
from intraskill.training.batching import TrainSample
from intraskill.training.grpo import GRPOTrainer

VOCAB = 128


@pytest.fixture(scope="module")
def base_model() -> Qwen3ForCausalLM:
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
    )
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        return Qwen3ForCausalLM(config)


@pytest.fixture
def model(base_model: Qwen3ForCausalLM) -> Qwen3ForCausalLM:
    return copy.deepcopy(base_model)


def make_samples(seed: int = 0, groups: int = 4, siblings: int = 2) -> list[TrainSample]:
    """SessionTokens-like samples: prompt (mask 0), then model turns (1) and observations (0)."""
    rng = random.Random(seed)
    samples = []
    for g in range(groups):
        for k in range(siblings):
            segments = 2 if k == 0 else 1  # the first sibling is forked into two segments
            for _ in range(segments):
                ids, mask = [], []
                ids += [rng.randrange(VOCAB) for _ in range(rng.randint(3, 8))]
                mask += [0] * len(ids)
                for _turn in range(rng.randint(1, 3)):
                    n_model, n_obs = rng.randint(2, 6), rng.randint(1, 5)
                    ids += [rng.randrange(VOCAB) for _ in range(n_model + n_obs)]
                    mask += [1] * n_model + [0] * n_obs
                old = [-rng.uniform(0.5, 6.0) if m else 0.0 for m in mask]
                advantage = 1.0 if k % 2 else -1.0
                samples.append(TrainSample(tuple(ids), tuple(mask), tuple(old), advantage, g, f"g{g}-r{k}"))
    return samples


def with_old(samples: list[TrainSample], old: list[list[float]]) -> list[TrainSample]:
    return [
        TrainSample(s.input_ids, s.loss_mask, tuple(o), s.advantage, s.group_index, s.rollout_id)
        for s, o in zip(samples, old)
    ]


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_train_step_changes_parameters_with_finite_loss(model: Qwen3ForCausalLM) -> None:
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = GRPOTrainer(model, GRPOParams(lr=1e-3, global_batch_size=4, micro_batch_tokens=64))
    metrics = trainer.train_step(make_samples())
    assert math.isfinite(metrics.loss) and math.isfinite(metrics.grad_norm) and metrics.grad_norm > 0
    assert metrics.updates == 2 and metrics.episodes == 8 and metrics.groups == 4 and metrics.samples == 12
    assert metrics.micro_batches >= 2 and 0 <= metrics.padding_waste < 1 and metrics.kl_ref is None
    assert metrics.real_tokens == sum(len(s) for s in make_samples()) <= metrics.padded_tokens
    assert 0 <= metrics.clipfrac <= 1 and metrics.entropy > 0 and metrics.tokens_per_s > 0
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert len(changed) == len(before)


def manual_update_gradients(model: torch.nn.Module, samples: list[TrainSample], temperature: float) -> dict:
    """Reference gradient: each sample alone (no padding), loss summed over mask tokens only."""
    model.zero_grad(set_to_none=True)
    total = sum(s.model_tokens for s in samples)
    for s in samples:
        ids = torch.tensor([s.input_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float() / temperature, -1)
        logp = logp.gather(-1, ids[0, 1:, None])[:, 0]
        loss = 0.0
        for t, m in enumerate(s.loss_mask[1:]):
            if m:
                ratio = torch.exp(logp[t] - s.old_logprobs[t + 1])
                clipped = ratio.clamp(0.8, 1.28)
                loss = loss - torch.minimum(ratio * s.advantage, clipped * s.advantage)
        (loss / total).backward()
    return grads(model)


def test_gradient_is_global_token_mean_over_mask_tokens_only(model: Qwen3ForCausalLM) -> None:
    samples = make_samples(seed=1)
    expected = manual_update_gradients(model, samples, temperature=0.6)
    trainer = GRPOTrainer(model, GRPOParams(micro_batch_tokens=48))
    model.zero_grad(set_to_none=True)
    totals = trainer.accumulate_update(samples)
    assert totals.micro_batches > 3  # several micro-batches, padded, accumulated
    got = grads(model)
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, atol=1e-6, rtol=1e-4)


def test_masked_old_logprobs_do_not_touch_gradients(model: Qwen3ForCausalLM) -> None:
    samples = make_samples(seed=2)
    trainer = GRPOTrainer(model, GRPOParams(micro_batch_tokens=64))
    model.zero_grad(set_to_none=True)
    trainer.accumulate_update(samples)
    clean = grads(model)
    rng = random.Random(5)
    garbage = [
        [o if m else rng.uniform(-1e6, 1e6) for o, m in zip(s.old_logprobs, s.loss_mask)] for s in samples
    ]
    poisoned = with_old(samples, garbage)
    model.zero_grad(set_to_none=True)
    trainer.accumulate_update(poisoned)
    for name, grad in grads(model).items():
        assert torch.equal(grad, clean[name]), name


def test_old_equals_new_gives_ratio_one(model: Qwen3ForCausalLM) -> None:
    trainer = GRPOTrainer(model, GRPOParams(global_batch_size=None, micro_batch_tokens=64))
    samples = make_samples(seed=3)
    samples = with_old(samples, trainer.compute_logprobs(samples))
    metrics = trainer.train_step(samples)
    assert metrics.clipfrac == 0.0 and abs(metrics.approx_kl) < 1e-6 and metrics.updates == 1
    token_mean_advantage = sum(s.advantage * s.model_tokens for s in samples) / metrics.model_tokens
    assert metrics.pg_loss == pytest.approx(-token_mean_advantage, abs=1e-5)


def test_compute_logprobs_uses_training_temperature(model: Qwen3ForCausalLM) -> None:
    sample = make_samples(seed=4)[0]
    got = GRPOTrainer(model, temperature=0.7).compute_logprobs([sample])[0]
    ids = torch.tensor([sample.input_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1] / 0.7, -1)
        logp = logp.gather(-1, ids[0, 1:, None])[:, 0]
    expected = [0.0] + [float(v) if m else 0.0 for v, m in zip(logp, sample.loss_mask[1:])]
    assert got == pytest.approx(expected, abs=1e-5)


def test_lora_trains_only_adapters(model: Qwen3ForCausalLM) -> None:
    grpo = GRPOParams(lr=1e-2, global_batch_size=4, lora=LoraParams(rank=4, alpha=8), kl_coef=0.1)
    trainer = GRPOTrainer(model, grpo)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    metrics = trainer.train_step(make_samples(seed=5))
    assert math.isfinite(metrics.loss) and metrics.kl_ref is not None and metrics.kl_ref >= 0
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all("lora_" in n for n in changed)
    assert any("lora_B" in n for n in changed)


def test_reference_kl_starts_at_zero_and_is_required_for_kl_coef(model: Qwen3ForCausalLM) -> None:
    ref = copy.deepcopy(model)
    trainer = GRPOTrainer(model, GRPOParams(kl_coef=0.05, global_batch_size=None), ref_model=ref)
    metrics = trainer.train_step(make_samples(seed=6))
    assert metrics.kl_ref is not None and abs(metrics.kl_ref) < 1e-6
    assert metrics.loss == pytest.approx(metrics.pg_loss + 0.05 * metrics.kl_ref, abs=1e-6)
    assert not any(p.requires_grad for p in ref.parameters())
    with pytest.raises(ValueError, match="pass ref_model"):
        GRPOTrainer(model, GRPOParams(kl_coef=0.1))


def test_update_split_must_hold_whole_groups(model: Qwen3ForCausalLM) -> None:
    trainer = GRPOTrainer(model, GRPOParams(global_batch_size=3))
    with pytest.raises(ValueError, match="global_batch_size"):
        trainer.train_step(make_samples())


def test_the_trainer_takes_the_grpo_section_and_refuses_greedy_temperature(model: Qwen3ForCausalLM) -> None:
    grpo = GRPOParams(lr=1e-4, weight_decay=0.0, betas=(0.8, 0.9))
    trainer = GRPOTrainer(model, grpo, temperature=0.9, pad_token_id=3)
    assert (trainer.grpo, trainer.temperature, trainer.pad_token_id) == (grpo, 0.9, 3)
    [decay, no_decay] = trainer.optimizer.param_groups
    assert (decay["lr"], decay["betas"], decay["weight_decay"], no_decay["weight_decay"]) == (1e-4, (0.8, 0.9), 0, 0)
    assert GRPOTrainer(model).temperature == SamplingParams().temperature
    with pytest.raises(ValueError, match="temperature: .* must be > 0"):
        GRPOTrainer(model, temperature=0.0)


@pytest.mark.parametrize("lr, poisoned, match", [
    (float("inf"), False, r"update 1 of this step made model\..* non-finite"),
    (1e-3, True, r"update 1 of this step: loss nan, gradient norm nan; stopped before the optimizer step"),
])
def test_a_non_finite_update_stops_before_the_weights_are_kept(model: Qwen3ForCausalLM, lr: float, poisoned: bool,
                                                              match: str) -> None:
    """An infinite learning rate (built around the params check) or a NaN loss stops the step with one error."""
    from intraskill.training.grpo import NonFiniteUpdateError

    samples = make_samples()
    if poisoned:
        samples = with_old(samples, [[float("nan")] * len(s) for s in samples])
    grpo = GRPOParams(global_batch_size=8, micro_batch_tokens=64).model_copy(update={"lr": lr})  # unvalidated
    trainer = GRPOTrainer(model, grpo)
    with pytest.raises(NonFiniteUpdateError, match=match):
        trainer.train_step(samples)


def test_weighted_samples_sum_their_weighted_token_losses(model: Qwen3ForCausalLM) -> None:
    # At ratio 1 (old = current log-probs) a weighted update's policy loss is −Σ_samples w·A·tokens, whatever
    # the micro-batch split; an update that mixes weighted and unweighted samples is refused.
    trainer = GRPOTrainer(model, GRPOParams(micro_batch_tokens=32))
    samples = make_samples(seed=3, groups=2)
    samples = with_old(samples, trainer.compute_logprobs(samples))
    weighted = [dataclasses.replace(s, weight=0.01 * (i + 1)) for i, s in enumerate(samples)]
    totals = trainer.accumulate_update(weighted)
    expected = -sum(s.weight * s.advantage * s.model_tokens for s in weighted)
    assert totals.pg_loss == pytest.approx(expected, abs=1e-5) and totals.micro_batches >= 2
    with pytest.raises(ValueError, match="mixes weighted and unweighted"):
        trainer.accumulate_update(weighted[:1] + samples[1:])
