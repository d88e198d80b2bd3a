"""Whether a fresh organism-shaped model learns the lookup drill (``docs/testbed.md``, attempt 2), as JSON.

    python benchmarks/probe_lookup_drills.py --copy-steps 250 --lookup-steps 400 --queries 1
    python benchmarks/probe_lookup_drills.py --copy-steps 250 --lookup-steps 400 --queries 8

A random-init model of ``params``' organism shape (its vocabulary size, ids drawn from it) trains with the warm
start's loop (:func:`~intraskill.organism.cloning.behaviour_clone`: copy drills, then lookup drills, one
warm-up + cosine schedule) and prints the loss on the answer tokens every 10 steps. Scale: about 2.05 when the
model cannot tell whether the query key is on a line, 1.35 when it tells that but cannot find the line, ≈ 0 when
it looks up. One torch thread; about 1 s a step on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/organism_reader.yaml")
    parser.add_argument("--copy-steps", type=int, default=250)
    parser.add_argument("--lookup-steps", type=int, default=400)
    parser.add_argument("--queries", type=int, default=1, help="query-answer pairs per drill")
    parser.add_argument("--seed", type=int, default=20260901)
    args = parser.parse_args()

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from intraskill.organism.cloning import behaviour_clone
    from intraskill.organism.drills import LOOKUP_TOKENS, copy_drills, drill_count, lookup_drills
    from intraskill.params import load_params
    from intraskill.policy.organism import OrganismConfig

    torch.set_num_threads(1)
    params = load_params(args.params)
    shape, ws = OrganismConfig(**params.model.organism.model_dump()), params.warmstart
    vocabulary = range(10, shape.vocab_size)
    copies = copy_drills(vocabulary, drill_count(args.copy_steps, ws.batch_tokens), args.seed)
    tokens = LOOKUP_TOKENS + 3 * (args.queries - 1)
    lookups = lookup_drills(vocabulary, drill_count(args.lookup_steps, ws.batch_tokens, tokens), args.seed,
                            queries=args.queries)
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_heads, num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.head_dim, initializer_range=shape.initializer_range,
        max_position_embeddings=shape.max_position, tie_word_embeddings=True, pad_token_id=0))
    result = behaviour_clone(model, lookups, steps=0, drills=copies, drill_steps=args.copy_steps, lookups=lookups,
                             lookup_steps=args.lookup_steps, lr=ws.lr, warmup_steps=ws.warmup_steps,
                             lr_min_ratio=ws.lr_min_ratio, weight_decay=ws.weight_decay, grad_clip=ws.grad_clip,
                             batch_tokens=ws.batch_tokens, pad_id=0, seed=args.seed, progress=False)
    print(json.dumps({"params": args.params, "layers": shape.num_layers, "copy_steps": args.copy_steps,
                      "lookup_steps": args.lookup_steps, "queries": args.queries, "seconds": round(result.wall_s),
                      "losses": [[step, round(loss, 3)] for step, loss in result.losses]}))


if __name__ == "__main__":
    main()
