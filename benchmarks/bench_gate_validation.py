"""Validation of Gate A against known per-chunk effects (prints one JSON line).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gate_validation.py \
        [--params params/organism_additive.yaml] [--policy organism|teacher] [--warmstart DIR] \
        [--seeds 20260901,1,2] [--samples 1,2] [--task-limit N] [--truth-tasks N] [--out DIR] [--device cpu] \
        [--ship data/results/organism_additive/gate-validation-organism]

``organism``: Gate A with Bernoulli(0.5) masks over S₀ on val with the warm-start checkpoint, against the
warm start's ``ground_truth.json`` (default directory: the one
:func:`~intraskill.organism.shipped.ensure_warmstart` finds). ``teacher``: the same with the S₀-gated
scripted expert (the organism's teacher) and a ground truth measured the same way (fast; no
checkpoint). For each m in ``--samples`` the line holds Spearman's ρ, the 95 % CI coverage and the
attainable ρ (what an unbiased gate with these standard errors would reach against this truth) per
mask seed and their means, against the target (ρ ≥ 0.8, coverage ≥ 90 %), and the true effects
compared (``truth``: ties among them cap ρ). ``--ship DIR`` (organism only) then writes the finished gates'
records into DIR (:func:`~intraskill.organism.gate_validation.ship_validation`: what notebook 03 reads when
``runs/`` holds no validation of its own; finished gates are loaded, not re-run).
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    from intraskill.organism.gate_validation import TARGET, validate_on_teacher, validate_on_warmstart
    from intraskill.params import load_params
    from intraskill.paths import runs_root

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism_additive.yaml")
    parser.add_argument("--policy", choices=("organism", "teacher"), default="organism")
    parser.add_argument("--warmstart", default=None)
    parser.add_argument("--seeds", default="20260901,1,2")
    parser.add_argument("--samples", default="1")
    parser.add_argument("--task-limit", type=int, default=None)
    parser.add_argument("--truth-tasks", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--device", default=None, help="Override model.device (cpu, cuda, auto).")
    parser.add_argument("--ship", default=None, help="Write the finished gates' records into this directory.")
    args = parser.parse_args()
    if args.ship and args.policy != "organism":
        parser.error("--ship: only the organism's validation ships (the teacher's runs in seconds)")
    params = load_params(args.params)
    if args.device:
        params = params.model_copy(update={"model": params.model.model_copy(update={"device": args.device})})
    seeds = [int(s) for s in args.seeds.split(",")]
    default_out = runs_root(params.experiment.run_root) / params.experiment.name / f"gate-validation-{args.policy}"
    out = args.out or str(default_out)
    results = []
    truth = warmstart = None
    if args.policy == "teacher":
        from intraskill.organism.gate_validation import teacher_truth
        from intraskill.paths import resolve_project_path
        from intraskill.skills.bank import load_skillbank

        draft = load_skillbank(resolve_project_path(params.warmstart.skills))
        truth = teacher_truth(params, draft, tasks=args.truth_tasks)
    for m in (int(s) for s in args.samples.split(",")):
        started = time.monotonic()
        if truth is not None:
            report = validate_on_teacher(params, out, seeds=seeds, samples_per_task=m,
                                         task_limit=args.task_limit, truth=truth, progress=False)
        else:
            from intraskill.organism.shipped import ensure_warmstart

            warmstart = args.warmstart or ensure_warmstart(params, progress=False)
            report = validate_on_warmstart(params, warmstart, out, seeds=seeds, samples_per_task=m,
                                           task_limit=args.task_limit, progress=False)
        report = report.to_dict()
        keys = ("samples_per_task", "spearman_mean", "coverage_mean", "attainable_spearman_mean", "meets_target",
                "truth_episodes_per_arm")
        per_seed = [{k: s[k] for k in ("mask_seed", "observations", "spearman", "coverage", "attainable_spearman")}
                    for s in report["per_seed"]]
        truth_effects = {c: p["truth"] for c, p in report["per_seed"][0]["per_chunk"].items()}
        results.append({**{key: report[key] for key in keys}, "truth": truth_effects, "per_seed": per_seed,
                        "wall_s": round(time.monotonic() - started, 1)})
    if args.ship:
        from intraskill.organism.gate_validation import ship_validation

        ship_validation(out, warmstart, args.ship, seeds=seeds, samples=[r["samples_per_task"] for r in results])
    print(json.dumps({"policy": args.policy, "params": args.params, "task_limit": args.task_limit,
                      "target": TARGET, "out": out, "shipped": args.ship, "results": results}))


if __name__ == "__main__":
    main()
