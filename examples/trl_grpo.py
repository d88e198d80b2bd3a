"""Train a model on the store with TRL's GRPOTrainer (the recipe of ``docs/trl.md``).

The organism's warm start by default (``params/organism.yaml``: a Qwen3-architecture Hugging Face directory that
TRL loads with its tokenizer), on CPU; ``--model`` trains another Hugging Face directory with the parameter set's
settings, and ``--params params/smollm2.yaml`` SmolLM2 (loaded as the package loads it), on a GPU when
``model.device`` finds one. ``--skills`` puts S0's chunks in the prompts with
group-shared masks (the round's curriculum); without it every episode is bare. ``--env-url`` plays the episodes
through the store served as an OpenEnv environment instead of an engine in this process (the same pages and
rewards; the task ids still come from the parameter set's store). Prints one JSON object per step and a summary
(seconds, rewards, the saved model).

    pip install -e ".[trl]"
    OMP_NUM_THREADS=2 python examples/trl_grpo.py --steps 3 --out runs/trl-grpo
    python examples/trl_grpo.py --params params/smollm2.yaml --steps 3     # on a GPU
    python examples/trl_grpo.py --steps 3 --env-url http://127.0.0.1:5700  # through OpenEnv (the openenv extra)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from intraskill.integrations.trl.recipe import build_trainer, round_tasks, store_rollout
from intraskill.organism.shipped import resolve_checkpoint
from intraskill.params import load_params
from intraskill.pipeline.prepare import prepare_round
from intraskill.pipeline.round import open_train_store
from intraskill.policy.factory import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--model", default=None, help="a Hugging Face model directory (default: the params')")
    parser.add_argument("--steps", type=int, default=3, help="rollout steps (one optimizer update each)")
    parser.add_argument("--skills", action="store_true", help="S0's chunks in the prompts, group-shared masks")
    parser.add_argument("--store-root", default=None, help="the built store (default: the params' cached store)")
    parser.add_argument("--env-url", default=None,
                        help="play the store served over OpenEnv at this URL (intraskill env serve --protocol openenv "
                             "--root <the params' store>; the openenv extra) instead of an engine in this process")
    parser.add_argument("--out", default="runs/trl-grpo", help="output directory (TRL's files and the model)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.model is not None and not (Path(args.model) / "config.json").is_file():
        parser.error(f"--model: {args.model} is not a Hugging Face model directory (no config.json)")
    if args.threads is not None:
        # deferred: torch is heavy to import
        import torch

        torch.set_num_threads(args.threads)
    params = load_params(args.params)
    out = Path(args.out)
    curriculum = prepare_round(params, out_dir=out).curriculum if args.skills else None
    tokenizer = None
    if args.model is not None:
        model = Path(args.model)
    elif params.model.spec == "organism":
        checkpoint = resolve_checkpoint(params)[0]
        if checkpoint is None:
            parser.error("--params: model.checkpoint is untrained (no weights); pass --model")
        model = Path(checkpoint)
    else:  # smollm2 or a model directory, loaded as the package loads it
        model, tokenizer, _, _ = load_model(params.model.spec, checkpoint=params.model.checkpoint)
    start = time.perf_counter()
    store = open_train_store(params, args.store_root)
    rollout = (store_rollout(params, curriculum=curriculum, env_url=args.env_url) if args.env_url
               else store_rollout(params, store.engine, curriculum))
    trainer = build_trainer(params, model, rollout, round_tasks(params, store.task_ids, args.steps),
                            out / "trainer", args.steps, tokenizer=tokenizer)
    trainer.train()
    trainer.save_model(str(out / "model"))
    store.close()
    for step, stats in enumerate(rollout.stats, start=1):
        print(json.dumps({"step": step, "episodes": stats.episodes,
                          "success_rate": stats.successes / stats.episodes,
                          "rollout_s": round(stats.seconds, 2), "store_s": round(stats.store_seconds, 3)}))
    logs = [row for row in trainer.state.log_history if "reward" in row]
    print(json.dumps({"model": str(args.model or params.model.checkpoint or params.model.spec),
                      "steps": args.steps, "skills": curriculum is not None,
                      "seconds": round(time.perf_counter() - start, 1),
                      "reward_per_step": [row["reward"] for row in logs],
                      "saved": str(out / "model")}))


if __name__ == "__main__":
    main()
