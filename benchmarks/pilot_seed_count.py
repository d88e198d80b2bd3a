"""The seed count a pilot matrix gives (docs/preregistration.md, "Pilot and stopping rule").

Reads a finished pilot with the same loader as every matrix (:func:`intraskill.experiment.results.load_matrix`),
takes the primary contrast's per-seed mean differences (each seed's task-paired mean over the pilot's tasks) and
applies :func:`intraskill.experiment.inference.pilot_seed_count`: the fewest seeds with 80 % power for a
``--difference`` of 3 points at their SD, within [``--least``, ``--most``]. Prints one JSON object.

    python benchmarks/pilot_seed_count.py --matrix runs/reader/pilot --arms coevolve,grpo
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from intraskill.experiment.inference import pilot_seed_count
from intraskill.experiment.results import METRIC_LABELS, load_matrix


def main() -> None:
    """Parse the options, read the pilot and print the seed count with what it rests on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", required=True, help="the pilot's matrix directory (or its shipped records)")
    parser.add_argument("--arms", default="coevolve,grpo", help="comma-separated arms the pilot ran")
    parser.add_argument("--comparison", default="coevolve-grpo", help="the primary contrast, a-b")
    parser.add_argument("--condition", default="deployed", choices=["deployed", "bare"])
    parser.add_argument("--metric", default="success", choices=sorted(METRIC_LABELS.values()))
    parser.add_argument("--difference", type=float, default=0.03, help="the difference to detect (fraction)")
    parser.add_argument("--least", type=int, default=10)
    parser.add_argument("--most", type=int, default=20)
    args = parser.parse_args()
    result = load_matrix(args.matrix, arms=args.arms.split(","))
    found = [c for c in result.contrasts
             if c.key == (args.comparison, args.condition, args.metric)]
    if not found:
        raise SystemExit(f"--comparison: {args.comparison} ({args.condition}, {args.metric}) is not in "
                         f"{args.matrix}'s finished cells")
    contrast = found[0]
    count = pilot_seed_count([s.mean_difference for s in contrast.per_seed], args.difference, least=args.least,
                             most=args.most)
    print(json.dumps({"matrix": str(args.matrix), "comparison": contrast.name, "condition": args.condition,
                      "metric": args.metric, "tasks": contrast.across_seeds.n_tasks, **asdict(count)}, indent=2))


if __name__ == "__main__":
    main()
