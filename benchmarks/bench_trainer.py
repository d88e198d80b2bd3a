"""Trainer throughput: first-fit-decreasing micro-batch packing vs naive padding.

Both arms run the same :class:`GRPOTrainer` steps on identical copies of an organism-sized Qwen3
(h256, 4 layers, vocabulary 2048) over the same synthetic multi-turn samples (prompt, then model
turns and observations with a long-tailed length mix). They differ only in how an update is cut
into micro-batches under the same padded-token budget: the packer sorts lengths (first-fit
decreasing), the naive arm takes samples in arrival order, ``budget // longest`` rows at a time.

Prints one JSON object: real tokens/s through forward and backward, padding waste and
micro-batch counts of each arm, and the speed-up.

    OMP_NUM_THREADS=2 python benchmarks/bench_trainer.py --samples 64 --steps 3
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
from collections.abc import Sequence
from typing import Any

from intraskill.hashing import seed32
from intraskill.params import GRPOParams
from intraskill.training.batching import TrainSample
from intraskill.training.grpo import GRPOTrainer, StepMetrics


class NaivePaddingTrainer(GRPOTrainer):
    """Arrival-order micro-batches with a fixed row count that fits the longest sample."""

    def micro_batches(self, samples: Sequence[TrainSample]) -> list[list[int]]:
        rows = max(1, self.grpo.micro_batch_tokens // max(len(s) for s in samples))
        return [list(range(i, min(i + rows, len(samples)))) for i in range(0, len(samples), rows)]


def synthetic_samples(n: int, vocab: int, max_len: int, rng: random.Random) -> list[TrainSample]:
    """``n`` samples: a prompt, then 1–8 (model turn, observation) pairs, up to ``max_len``."""
    samples = []
    for index in range(n):
        ids = [rng.randrange(vocab) for _ in range(rng.randint(24, 64))]
        mask = [0] * len(ids)
        for _ in range(rng.choice([1, 1, 2, 3, 4, 8])):
            n_model, n_obs = rng.randint(8, 48), rng.randint(16, 96)
            ids += [rng.randrange(vocab) for _ in range(n_model + n_obs)]
            mask += [1] * n_model + [0] * n_obs
        ids, mask = ids[:max_len], mask[:max_len]
        old = [-rng.uniform(0.5, 8.0) if m else 0.0 for m in mask]
        advantage = rng.choice([-1.0, 1.0])
        samples.append(TrainSample(tuple(ids), tuple(mask), tuple(old), advantage, index // 8, f"r{index}"))
    return samples


def summarize(metrics: list[StepMetrics]) -> dict[str, Any]:
    """Median per-step throughput (robust to a shared, noisy CPU) and the packing figures."""
    return {
        "tokens_per_s": statistics.median(m.tokens_per_s for m in metrics),
        "seconds_per_step": statistics.median(m.duration_s for m in metrics),
        "padding_waste": metrics[-1].padding_waste,
        "micro_batches_per_step": metrics[-1].micro_batches,
        "padded_tokens_per_step": metrics[-1].padded_tokens,
    }


def run_arms(arms: dict[str, GRPOTrainer], samples: list[TrainSample], steps: int) -> dict[str, Any]:
    """One warm-up step per arm, then ``steps`` timed steps with the arms interleaved."""
    for trainer in arms.values():
        trainer.train_step(samples)
    metrics: dict[str, list[StepMetrics]] = {name: [] for name in arms}
    for _ in range(steps):
        for name, trainer in arms.items():
            metrics[name].append(trainer.train_step(samples))
    return {name: summarize(values) for name, values in metrics.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64, help="samples per step (multiple of 8)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per arm (after one warm-up)")
    parser.add_argument("--max-len", type=int, default=1024, help="longest sample in tokens")
    parser.add_argument("--budget", type=int, default=8192, help="micro_batch_tokens (padded rows × length)")
    parser.add_argument("--device", default="auto", help="'auto', 'cpu' or 'cuda'")
    parser.add_argument("--seed", type=int, default=20260901)
    args = parser.parse_args()

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    shape = dict(
        vocab_size=2048, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, intermediate_size=768, max_position_embeddings=2 * args.max_len,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed32(f"{args.seed}:bench-trainer:init"))
        model = Qwen3ForCausalLM(Qwen3Config(**shape)).to(device)
    rng = random.Random(seed32(f"{args.seed}:samples"))
    samples = synthetic_samples(args.samples, 2048, args.max_len, rng)
    grpo = GRPOParams(global_batch_size=None, micro_batch_tokens=args.budget)
    arms = {
        "packed": GRPOTrainer(copy.deepcopy(model), grpo, temperature=1.0),
        "naive": NaivePaddingTrainer(copy.deepcopy(model), grpo, temperature=1.0),
    }
    results = run_arms(arms, samples, args.steps)
    result = {
        "benchmark": "trainer_packing",
        "device": device,
        "model": shape,
        "samples": args.samples,
        "real_tokens_per_step": sum(len(s) for s in samples),
        "model_tokens_per_step": sum(s.model_tokens for s in samples),
        "micro_batch_tokens": args.budget,
        "seed": args.seed,
        "steps": args.steps,
        **results,
        "speedup": results["packed"]["tokens_per_s"] / results["naive"]["tokens_per_s"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
