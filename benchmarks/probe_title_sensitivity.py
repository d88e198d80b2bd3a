"""How much each chunk's title steers a warm-start organism: ``delta_j`` per chunk, as JSON.

Plays ``--demos`` fresh expert demonstrations on val tasks with the warm start's own gate (its
``p_with``/``p_without`` and chunk-mask probability, a mask seed of their own), then scores every
``--checkpoint`` on them with :func:`intraskill.organism.sensitivity.title_sensitivity`: the log-likelihood
the checkpoint gives the expert's replies with a chunk shown minus without it, per chunk.

    python benchmarks/probe_title_sensitivity.py [--params params/organism.yaml] [--demos 200] \\
        [--checkpoint runs/warmstart/checkpoint ...]

With ``--continue-steps N`` the first checkpoint goes on behaviour cloning on the warm start's own
demonstrations (``--train-demos``, assistant tokens, the warm start's batch size) for ``N`` steps in
``--segments`` segments at a constant ``--lr``, and is scored after each: does longer cloning
teach the organism to read the titles? Segment checkpoints are saved as ``--out``/continued-<steps>/checkpoint;
``--ground-truth`` then measures the last one's chunk-alone ground truth on val (as the warm start does,
:func:`intraskill.organism.warmstart.measure_ground_truth`), so that directory can be passed to
``bench_gate_validation.py --warmstart``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--demos", type=int, default=200, help="expert demonstrations on val tasks")
    parser.add_argument("--checkpoint", nargs="*", default=None,
                        help="checkpoints to score (default: the params' warm start)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--continue-steps", type=int, default=0, help="more cloning steps of the first checkpoint")
    parser.add_argument("--segments", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--train-demos", default=None, help="default: demos.jsonl next to the checkpoint")
    parser.add_argument("--out", default="runs/title-sensitivity")
    parser.add_argument("--ground-truth", action="store_true", help="measure the last segment's ground truth")
    args = parser.parse_args()
    if args.ground_truth and not args.continue_steps:
        parser.error("--ground-truth measures the last continued segment: it needs --continue-steps")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intraskill.agent.env import InProcessEnvironment
    from intraskill.organism.cloning import BCExample, behaviour_clone
    from intraskill.organism.demos import (
        collect_demonstrations,
        demo_jobs,
        read_demonstrations,
        teacher_law,
        tokenize_demonstration,
    )
    from intraskill.organism.sensitivity import title_sensitivity
    from intraskill.organism.shipped import ensure_warmstart
    from intraskill.organism.truth import measure_ground_truth
    from intraskill.params import load_params
    from intraskill.shop.build import open_engine
    from intraskill.skills.bank import load_skillbank

    torch.set_num_threads(args.threads)
    params = load_params(args.params)
    ws = params.warmstart
    checkpoints = args.checkpoint or [str(ensure_warmstart(params) / "checkpoint")]
    bank = load_skillbank(ws.skills)
    skills = bank.enabled_skills()
    store = open_engine(params.store, "train", run_root=params.experiment.run_root)
    started = time.monotonic()
    try:
        val_ids = list(store.catalog.task_ids("val"))
        jobs = demo_jobs(val_ids, args.demos, skills, ws.mask_probability, seed=ws.seed + 1)
        demos = collect_demonstrations(lambda: InProcessEnvironment(store.engine), jobs,
                                       teacher_law(bank, ws), seed=ws.seed + 1,
                                       max_turns=params.sampling.max_turns, max_actions=params.store.max_actions,
                                       language=params.store.language, view=params.model.view, slip_rate=0.0,
                                       plan=ws.plan, progress=False)
    finally:
        store.engine.index.close()
    demos_s = time.monotonic() - started

    def score(model, tokenizer, label: str, **extra) -> dict:
        started = time.monotonic()
        result = title_sensitivity(model, tokenizer, demos, skills, params.model.view, params.store.language)
        return {"checkpoint": label, **extra, "wall_s": round(time.monotonic() - started, 1),
                "chunks": [r.to_dict() for r in result]}

    scored = []
    for checkpoint in checkpoints:
        model = AutoModelForCausalLM.from_pretrained(checkpoint).float().eval()
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        scored.append(score(model, tokenizer, checkpoint))
    if args.continue_steps:
        model = AutoModelForCausalLM.from_pretrained(checkpoints[0]).float()
        tokenizer = AutoTokenizer.from_pretrained(checkpoints[0])
        train_demos = args.train_demos or str(Path(checkpoints[0]).parent / "demos.jsonl")
        examples = [BCExample(*tokenize_demonstration(d.segments, tokenizer)) for d in read_demonstrations(train_demos)]
        per_segment = args.continue_steps // args.segments
        for segment in range(1, args.segments + 1):
            started = time.monotonic()
            behaviour_clone(model, examples, steps=per_segment, lr=args.lr, warmup_steps=0, lr_min_ratio=1.0,
                            weight_decay=ws.weight_decay, grad_clip=ws.grad_clip, batch_tokens=ws.batch_tokens,
                            pad_id=int(tokenizer.pad_token_id), seed=ws.seed + segment, progress=False)
            out = Path(args.out) / f"continued-{segment * per_segment}"
            model.save_pretrained(str(out / "checkpoint"))
            tokenizer.save_pretrained(str(out / "checkpoint"))
            scored.append(score(model, tokenizer, str(out / "checkpoint"), extra_steps=segment * per_segment,
                                lr=args.lr, train_s=round(time.monotonic() - started, 1)))
            print(json.dumps(scored[-1]), file=sys.stderr, flush=True)
        if args.ground_truth:
            store = open_engine(params.store, "train", run_root=params.experiment.run_root)
            try:
                metrics, _ = measure_ground_truth(params, out / "checkpoint", out, bank, store, progress=False)
            finally:
                store.engine.index.close()
            scored[-1]["val"] = {"bare": metrics.bare.success, "s0": metrics.s0.success,
                                 "alone": {k: v.success for k, v in metrics.alone.items()}}
    print(json.dumps({"benchmark": "title_sensitivity", "params": args.params, "split": "val",
                      "demos": len(demos), "demo_mask_seed": ws.seed + 1, "demos_s": round(demos_s, 1),
                      "threads": args.threads, "checkpoints": scored}))


if __name__ == "__main__":
    main()
