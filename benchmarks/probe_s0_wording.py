"""Skill banks deployed on one frozen checkpoint, paired on the same probe tasks, as JSON.

Does a warm start read what a chunk says or only the words it was cloned with? Each ``--bank NAME=PATH`` is
evaluated on the first ``--limit`` tasks of ``--split`` (default: all) with the parameter set's checkpoint, beside
one bare run on the same jobs and episode seeds; every bank is compared with bare and with the ``--reference`` bank
task by task (:func:`~intraskill.evaluate.compare.compare_runs`, 10,000 resamples). Runs resume, under
``--out``/``<split>``.

A probe, so never on test (which serves the declared claims): ``val`` by default, which the warm start never saw
(a bank selected by a gate on val — the cold start's induced S₀, Gate A on the first 200 val tasks — is favoured
there), or ``dev`` (train tasks the warm start was cloned on, which no gate sees).

    python benchmarks/probe_s0_wording.py --bank hand=params/organism_s0.json \\
        --bank paraphrased=params/organism_s0_paraphrased.json \\
        --bank induced=runs/organism/cold-start/selected_skillbank.json --reference hand
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _difference(comparison: Any) -> dict[str, Any]:
    """Success and reward ``b − a`` of a :class:`~intraskill.evaluate.records.PairedComparison`."""
    paired = comparison.paired
    return {name: {"mean": paired.metric(metric).mean_difference, "ci": list(paired.metric(metric).confidence_interval)}
            for name, metric in (("success", "r_success"), ("reward", "reward"))} | {
        "transitions": paired.success_transitions, "pairs": paired.pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--bank", action="append", required=True, metavar="NAME=PATH", help="a bank to deploy")
    parser.add_argument("--reference", default=None, help="the bank every other one is compared with")
    parser.add_argument("--split", default="val", choices=("val", "dev"), help="the probe's tasks (never test)")
    parser.add_argument("--limit", type=int, default=None, help="first tasks of the split (default: all)")
    parser.add_argument("--out", default="runs/organism/s0-wording")
    args = parser.parse_args()
    banks = dict(item.split("=", 1) for item in args.bank)
    if args.reference is not None and args.reference not in banks:
        parser.error(f"--reference {args.reference!r} is not among the banks ({', '.join(banks)})")

    from intraskill.evaluate.compare import compare_runs
    from intraskill.evaluate.runner import run_eval
    from intraskill.params import load_params
    from intraskill.policy.warmstarts import resolve_checkpoint
    from intraskill.skills.bank import load_skillbank

    params = load_params(args.params)
    checkpoint, _ = resolve_checkpoint(params)
    out = Path(args.out) / args.split
    runs: dict[str, Any] = {"bare": run_eval(params, args.split, checkpoint, None, out / "bare", limit=args.limit)}
    for name, path in banks.items():
        runs[name] = run_eval(params, args.split, checkpoint, load_skillbank(path), out / name, limit=args.limit)
    seed = params.evaluation.bootstrap_seed
    report: dict[str, Any] = {
        "checkpoint": checkpoint, "split": args.split, "banks": banks, "reference": args.reference,
        "runs": {name: {"success": run.summary.primary.success_rate, "reward": run.summary.primary.reward_mean,
                        "episodes": run.summary.counts.completed} for name, run in runs.items()},
        "minus_bare": {name: _difference(compare_runs(out / "bare", out / name, seed=seed)) for name in banks},
    }
    if args.reference is not None:
        report["minus_reference"] = {
            name: _difference(compare_runs(out / args.reference, out / name, kind="cross-checkpoint", seed=seed))
            for name in banks if name != args.reference}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
