"""Rejection rate of the gate's additivity test over mask seeds, on one organism (prints one JSON line).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gate_additivity.py \
        [--params params/organism.yaml] [--policy organism|teacher] [--warmstart DIR] [--seeds 20260901,1,2] \
        [--samples 1] [--task-limit N] [--truth-tasks N] [--ranking-k K] [--out DIR] [--device cpu]

For each mask seed, Gate A over S₀ on val with the warm start's checkpoint (``organism``) or with the organism's
teacher, the S₀-gated scripted expert (``teacher``: fast, and its interactions are known by construction), as
``benchmarks/bench_gate_validation.py`` runs it (the same directories: complete gates are reused, not re-run),
then the additivity test (:mod:`intraskill.gate.additivity`) of its rows: on ``reward`` over the gate's
selected chunks (what the gate stage records), and on ``r_success`` over the selected chunks and over all
chunks. The line holds each test's statistic, wild-bootstrap and F-reference p-values and largest interactions
per seed, and the share of seeds that reject additivity at 5 %, with the gate validation's Spearman and
coverage beside them. With ``--ranking-k K`` the first seed's gate also gets the ranking check (top-K, bottom-K
and random-K fixed banks on the same val tasks: 3 × tasks × m more episodes). The rate over mask seeds is what the validation states: it should be high on the default
organism (interacting chunks) and on the interaction organism (``params/organism_interaction.yaml``, a planted
complement), low on the additive one (``params/organism_additive.yaml``).
"""

from __future__ import annotations

import argparse
import json
import time

VARIANTS = (("reward", "selected"), ("r_success", "selected"), ("r_success", "all"))


def main() -> None:
    from intraskill.gate.contributions import load_contributions
    from intraskill.organism.gate_validation import (
        teacher_policy,
        teacher_truth,
        validate_on_teacher,
        validate_on_warmstart,
    )
    from intraskill.organism.shipped import ensure_warmstart
    from intraskill.params import load_params
    from intraskill.paths import resolve_project_path, runs_root
    from intraskill.pipeline.gate_run import run_ranking_check
    from intraskill.skills.bank import load_skillbank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--policy", choices=("organism", "teacher"), default="organism")
    parser.add_argument("--warmstart", default=None)
    parser.add_argument("--truth-tasks", type=int, default=None)
    parser.add_argument("--ranking-k", type=int, default=None, help="Also run the ranking check on the first seed.")
    parser.add_argument("--seeds", default="20260901,1,2")
    parser.add_argument("--samples", default="1")
    parser.add_argument("--task-limit", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--device", default=None, help="Override model.device (cpu, cuda, auto).")
    args = parser.parse_args()
    params = load_params(args.params)
    if args.device:
        params = params.model_copy(update={"model": params.model.model_copy(update={"device": args.device})})
    seeds = [int(s) for s in args.seeds.split(",")]
    default_out = runs_root(params.experiment.run_root) / params.experiment.name / f"gate-validation-{args.policy}"
    out = args.out or str(default_out)
    draft = load_skillbank(resolve_project_path(params.warmstart.skills))
    if args.policy == "teacher":
        warmstart = None
        truth = teacher_truth(params, draft, tasks=args.truth_tasks)
    else:
        warmstart = args.warmstart or ensure_warmstart(params, progress=False)
    results = []
    for m in (int(s) for s in args.samples.split(",")):
        started = time.monotonic()
        if warmstart is None:
            report = validate_on_teacher(params, out, seeds=seeds, samples_per_task=m, task_limit=args.task_limit,
                                         truth=truth, progress=False)
        else:
            report = validate_on_warmstart(params, warmstart, out, seeds=seeds, samples_per_task=m,
                                           task_limit=args.task_limit, progress=False)
        gates_s = time.monotonic() - started
        per_seed, rates = [], {}
        for seed in seeds:
            gate = load_contributions(f"{out}/m{m}/seed-{seed}/contributions.json")
            tests = {}
            for metric, chunks in VARIANTS:
                test = gate.additivity_test(metric, None if chunks == "selected" else gate.columns)
                record = {k: test.to_dict()[k] for k in ("testable", "reason", "statistic", "df_num", "df_denom",
                                                          "p_value", "p_value_f", "rejected")}
                record["largest"] = [i.to_dict() for i in test.largest(3)]
                tests[f"{metric}/{chunks}"] = record
            per_seed.append({"mask_seed": seed, "selected": list(gate.selected_intervention_ids), "tests": tests})
        for name in per_seed[0]["tests"]:
            tested = [s["tests"][name] for s in per_seed if s["tests"][name]["testable"]]
            rates[name] = {"rejected": sum(t["rejected"] for t in tested), "testable": len(tested),
                           "rate": sum(t["rejected"] for t in tested) / len(tested) if tested else None}
        tests_s = time.monotonic() - started - gates_s
        ranking = None
        if args.ranking_k:
            started = time.monotonic()
            check = run_ranking_check(
                params, f"{out}/m{m}/seed-{seeds[0]}", {c.skill_id: c for c in draft.enabled_skills()},
                k=args.ranking_k, checkpoint=None if warmstart is None else f"{warmstart}/checkpoint",
                policy=teacher_policy(params, draft) if warmstart is None else None, progress=False)
            ranking = {**check.to_dict(), "wall_s": round(time.monotonic() - started, 1)}
        results.append({"samples_per_task": m, "rejection_rate": rates, "spearman_mean": report.spearman_mean,
                        "coverage_mean": report.coverage_mean, "per_seed": per_seed, "ranking_check": ranking,
                        "gates_wall_s": round(gates_s, 1), "tests_wall_s": round(tests_s, 1)})
    print(json.dumps({"params": args.params, "policy": args.policy, "warmstart": warmstart and str(warmstart), "task_limit": args.task_limit,
                      "seeds": seeds, "alpha": 0.05, "out": out, "results": results}))


if __name__ == "__main__":
    main()
