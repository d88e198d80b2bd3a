"""Behaviour-cloning throughput of the organism shape of a parameter file (prints one JSON object).

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_warmstart.py [params/organism.yaml] [steps]``.
Times ``steps`` AdamW steps on random token batches of ``warmstart.batch_tokens`` tokens in
episode-length rows (2,048 tokens, the organism's typical demonstration length with 5-result pages).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import torch

    from intraskill.organism.cloning import bc_loss
    from intraskill.params import load_params
    from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

    params = load_params(sys.argv[1] if len(sys.argv) > 1 else "params/organism.yaml")
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tokenizer = train_tokenizer(protocol_corpus() * 4, params.model.organism.vocab_size)
    model = build_organism(OrganismConfig(**params.model.organism.model_dump()), tokenizer).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    row = 2048
    rows = max(1, params.warmstart.batch_tokens // row)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, len(tokenizer), (rows, row), generator=generator)
    labels = ids.clone()
    timings = []
    for _ in range(steps + 1):
        started = time.perf_counter()
        loss = bc_loss(model, ids, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        timings.append(time.perf_counter() - started)
    per_step = sum(timings[1:]) / steps  # the first step warms up allocators
    print(json.dumps({"params": sys.argv[1] if len(sys.argv) > 1 else "params/organism.yaml",
                      "threads": torch.get_num_threads(), "batch": [rows, row],
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "step_s": round(per_step, 3), "train_tokens_per_s": round(rows * row / per_step, 1)}))


if __name__ == "__main__":
    main()
