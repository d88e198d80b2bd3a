"""First-reply plans of a plan warm start against its teacher's, by chunk context (prints one JSON line).

A warm start cloned with ``warmstart.plan`` opens every reply with the competences it means to use
(:func:`intraskill.policy.expert_policy.plan_line`). This probe plays the first turn of ``--tasks`` val tasks
in each context the ground truth and the gate use — bare, each chunk alone, all of S₀ and every other
chunk — with the checkpoint and with its teacher (the S₀-gated expert), and prints how often each
competence is planned: does the clone plan like its teacher, in the contexts where its effects are
measured?

    python benchmarks/probe_plans.py [--params params/organism.yaml] [--checkpoint DIR] [--tasks 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--checkpoint", default=None, help="default: the params' warm start")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    from intraskill.agent.env import InProcessEnvironment
    from intraskill.agent.runtime import RuntimeConfig
    from intraskill.layout import WarmstartDir
    from intraskill.organism.gate_validation import teacher_policy
    from intraskill.organism.shipped import ensure_warmstart
    from intraskill.organism.truth import run_arm
    from intraskill.params import load_params
    from intraskill.paths import resolve_project_path
    from intraskill.pipeline.round import open_train_store
    from intraskill.policy.expert_policy import PLAN_WORDS, planned
    from intraskill.policy.factory import load_policy
    from intraskill.skills.bank import load_skillbank

    params = load_params(args.params)
    if not params.warmstart.plan:
        parser.error(f"{args.params}: warmstart.plan is off, the warm start writes no plans")
    checkpoint = args.checkpoint or str(WarmstartDir(ensure_warmstart(params, progress=False)).checkpoint.root)
    bank = load_skillbank(resolve_project_path(params.warmstart.skills))
    skills = bank.enabled_skills()
    contexts = {"bare": (), **{f"alone:{s.skill_id}": (s,) for s in skills}, "s0": tuple(skills),
                "every_other": tuple(skills[::2])}
    policies = {"organism": load_policy("organism", checkpoint=checkpoint, device=args.device, max_batch=100),
                "teacher": teacher_policy(params, bank)}
    runtime = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    config = dataclasses.replace(runtime, max_turns=1)
    store = open_train_store(params, None, split="val")
    started = time.monotonic()
    rates: dict[str, dict[str, dict[str, float]]] = {}
    try:
        task_ids = list(store.task_ids[:args.tasks])
        for context, shown in contexts.items():
            rates[context] = {}
            for name, policy in policies.items():
                results = run_arm(policy, lambda: InProcessEnvironment(store.engine), task_ids, shown,
                                  params.warmstart.seed, config, 100)
                plans = [planned(r.trace.turns[0].raw_output) if r.trace and r.trace.turns else None
                         for r in results]
                rates[context][name] = {c: round(sum(c in (p or ()) for p in plans) / len(plans), 3)
                                        for c in PLAN_WORDS}
                rates[context][name]["no_plan"] = round(sum(p is None for p in plans) / len(plans), 3)
    finally:
        store.close()
    gaps = {context: round(max(abs(r["organism"][c] - r["teacher"][c]) for c in PLAN_WORDS), 3)
            for context, r in rates.items()}
    print(json.dumps({"params": args.params, "checkpoint": checkpoint, "tasks": len(task_ids),
                      "max_abs_gap": gaps, "rates": rates, "wall_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
