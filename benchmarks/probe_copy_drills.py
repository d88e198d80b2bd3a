"""Does copying emerge from copy drills, and after how many steps? (JSON lines)

Trains a fresh organism (``params/organism.yaml``'s shape, a tokenizer trained on the recorded
demonstrations) on :func:`intraskill.organism.drills.copy_drills` (random tokens of its vocabulary)
only and reports, every
``--eval-every`` steps, the teacher-forced accuracy and loss on the repeated span of 300 held-out
drills, with the elapsed seconds. An induction head shows as a jump of the accuracy towards 1; a
model that only learns token frequencies stays near the unigram rate.

    OMP_NUM_THREADS=1 python benchmarks/probe_copy_drills.py --batch-tokens 1024 --steps 1500 \\
        [--layers 2] [--lr 3e-3] [--demos runs/warmstart/demos.jsonl] [--device auto]

``--layers`` overrides the organism's depth (2 layers form the head sooner than 4). ``--lookup-steps N``
continues with N steps of :func:`~intraskill.organism.drills.lookup_drills` and reports the held-out lookup
accuracy too, split into drills answered from a line and drills whose answer is "none".
"""

from __future__ import annotations

import argparse
import json
import random
import time

from intraskill.hashing import seed32
from intraskill.organism.cloning import bc_loss, collate, learning_rate, pack_batches
from intraskill.organism.demos import read_demonstrations
from intraskill.organism.drills import LOOKUP_TOKENS, copy_drills, drill_count, lookup_drills, ordinary_tokens
from intraskill.params import load_params
from intraskill.policy.factory import resolve_device
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer


def drill_accuracy(model, drills, pad_id: int, device: str) -> tuple[float, float]:
    """Teacher-forced (argmax accuracy, loss) on the drills' masked tokens."""
    import torch

    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for start in range(0, len(drills), 50):
            ids, labels = (t.to(device) for t in collate(drills[start:start + 50], pad_id))
            logits = model(input_ids=ids).logits[:, :-1]
            targets = labels[:, 1:]
            keep = targets != -100
            correct += int((logits.argmax(-1) == targets)[keep].sum())
            total += int(keep.sum())
            loss_sum += float(torch.nn.functional.cross_entropy(logits[keep], targets[keep], reduction="sum"))
    return correct / max(1, total), loss_sum / max(1, total)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--demos", default="runs/warmstart/demos.jsonl")
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--lookup-steps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (CUDA when present)")
    args = parser.parse_args()

    params = load_params(args.params)
    demos = read_demonstrations(args.demos)[:1500]
    tokenizer = train_tokenizer([d.text for d in demos[:params.warmstart.vocab_corpus_demos]] + protocol_corpus(),
                                params.model.organism.vocab_size)
    vocabulary = ordinary_tokens(tokenizer)
    drills = copy_drills(vocabulary, drill_count(args.steps, args.batch_tokens), args.seed)
    heldout = copy_drills(vocabulary, 300, args.seed + 1)
    lookups = lookup_drills(vocabulary, drill_count(args.lookup_steps, args.batch_tokens, LOOKUP_TOKENS), args.seed)
    heldout_lookups = lookup_drills(vocabulary, 400, args.seed + 1)
    answered = [d for d in heldout_lookups if d.input_ids[-1] in d.input_ids[:-4]]
    unanswered = [d for d in heldout_lookups if d.input_ids[-1] not in d.input_ids[:-4]]
    shape = params.model.organism.model_dump()
    shape["num_layers"] = args.layers or shape["num_layers"]
    config = OrganismConfig(**shape, seed=seed32(f"{args.seed}:probe-init"))
    device = resolve_device(args.device)
    model = build_organism(config, tokenizer).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    rng = random.Random(args.seed)
    queue: list[list[int]] = []
    pad = int(tokenizer.pad_token_id)
    started = time.monotonic()
    total = args.steps + args.lookup_steps
    for step in range(total):
        source = drills if step < args.steps else lookups
        if not queue or step == args.steps:
            queue = pack_batches([len(d.input_ids) for d in source], args.batch_tokens, rng)
        ids, labels = (t.to(device) for t in collate([source[k] for k in queue.pop()], pad))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total, args.lr, args.warmup, 1.0)
        model.train()
        loss = bc_loss(model, ids, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % args.eval_every == 0 or step + 1 == total:
            model.eval()
            accuracy, heldout_loss = drill_accuracy(model, heldout, pad, device)
            lookup = {}
            if args.lookup_steps:
                lookup = {"lookup_accuracy_answered": round(drill_accuracy(model, answered, pad, device)[0], 4),
                          "lookup_accuracy_none": round(drill_accuracy(model, unanswered, pad, device)[0], 4)}
            print(json.dumps({**lookup, "step": step + 1, "seconds": round(time.monotonic() - started, 1),
                              "batch_tokens": args.batch_tokens, "lr": args.lr, "device": str(device),
                              "layers": config.num_layers,
                              "copy_accuracy": round(accuracy, 4), "copy_loss": round(heldout_loss, 4)}),
                  flush=True)


if __name__ == "__main__":
    main()
