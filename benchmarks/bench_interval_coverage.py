"""Coverage of the across-seed intervals of a paired difference, by simulation.

Each replication draws a seeds × tasks table of per-task paired differences d ∈ {−1, 0, +1} (arm a's success
minus arm b's on the same task and episode seed), as a control matrix produces them: every seed plays the same
tasks. Task t of seed s differs on average by μ = Δ + α_s + γ_t, with α_s ~ N(0, seed SD) the training seed's
effect and γ_t ~ N(0, task SD) a task's own effect, shared by every seed; the two arms disagree on a task with
probability c₀ + |μ| (c₀ = 3 %, so that at 400 tasks a seed's mean has a standard error of about 1.2 points, as
on the organism) and the mean is exactly Δ. Coverage is the share of replications whose 95 % interval holds Δ.

Methods: ``crossed_t`` — :func:`intraskill.experiment.inference.contrast_interval` itself (seeds × tasks
variance, Satterthwaite df); ``t_seed_means`` — the t interval on the seed means with S − 1 df;
``hierarchical_percentile`` — the percentile bootstrap over seeds, then tasks, that the matrix used before
(resampling tasks with replacement from values in {−1, 0, +1} is drawing multinomial counts, done here with two
binomials); ``studentized_seeds`` — a bootstrap-t over the seed means. Prints one JSON object.

    python benchmarks/bench_interval_coverage.py --json
    python benchmarks/bench_interval_coverage.py --json --reps 400 --seeds 3 --tasks 400 --seed-sds 4
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
from scipy import stats

from intraskill.experiment.inference import contrast_interval

DISAGREEMENT = 0.03
DIFFERENCE = 0.05
CONFIDENCE = 0.95
METHODS = ("crossed_t", "t_seed_means", "hierarchical_percentile", "studentized_seeds")


def simulate(rng: np.random.Generator, reps: int, seeds: int, tasks: int, seed_sd: float,
             task_sd: float, difference: float = DIFFERENCE) -> np.ndarray:
    """``reps`` × ``seeds`` × ``tasks`` paired differences in {−1, 0, +1} with mean ``difference`` (module
    docstring); SDs and the difference are fractions (0.02 = 2 points)."""
    effect = (difference + rng.normal(0.0, seed_sd, (reps, seeds, 1)) + rng.normal(0.0, task_sd, (reps, 1, tasks)))
    disagree = DISAGREEMENT + np.abs(effect)
    better, worse = (disagree + effect) / 2.0, (disagree - effect) / 2.0
    draw = rng.random((reps, seeds, tasks))
    return (draw < better).astype(np.int8) - ((draw >= better) & (draw < better + worse)).astype(np.int8)


def intervals(table: np.ndarray, rng: np.random.Generator, resamples: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every method's (low, high) per replication of ``table`` (reps × seeds × tasks)."""
    reps, seeds, tasks = table.shape
    means = table.mean(axis=2)
    grand = means.mean(axis=1)
    se = means.std(axis=1, ddof=1) / np.sqrt(seeds)
    quantile = stats.t.ppf((1 + CONFIDENCE) / 2, seeds - 1)
    crossed = [contrast_interval(rows) for rows in table]
    drawn = rng.integers(0, seeds, (reps, resamples, seeds))
    # hierarchical: per drawn seed, its tasks resampled = counts of +1 and −1 among `tasks` draws
    share_up, share_down = (table == 1).mean(axis=2), (table == -1).mean(axis=2)
    up = np.take_along_axis(share_up[:, None, :], drawn, 2)
    down = np.take_along_axis(share_down[:, None, :], drawn, 2)
    count_up = rng.binomial(tasks, up)
    count_down = rng.binomial(tasks - count_up, np.divide(down, 1 - up, out=np.zeros_like(down), where=up < 1))
    boot = ((count_up - count_down) / tasks).mean(axis=2)
    tails = ((1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2)
    low, high = np.quantile(boot, tails, axis=1)
    # bootstrap-t over seed means (a resample of identical seeds has no spread: its t is 0)
    resampled = np.take_along_axis(means[:, None, :], drawn, 2)
    spread = resampled.std(axis=2, ddof=1) / np.sqrt(seeds)
    t_star = np.divide(resampled.mean(axis=2) - grand[:, None], spread, out=np.zeros_like(spread), where=spread > 0)
    t_low, t_high = np.quantile(t_star, tails, axis=1)
    return {"crossed_t": (np.array([c.low for c in crossed]), np.array([c.high for c in crossed])),
            "t_seed_means": (grand - quantile * se, grand + quantile * se),
            "hierarchical_percentile": (low, high),
            "studentized_seeds": (grand - t_high * se, grand - t_low * se)}


def coverage_cell(seeds: int, tasks: int, seed_sd: float, task_sd: float, reps: int, resamples: int,
                  seed: int) -> dict[str, object]:
    """One grid cell: each method's coverage of the true difference and median width (points)."""
    rng = np.random.default_rng([seed, seeds, tasks, round(seed_sd * 1e4), round(task_sd * 1e4)])
    table = simulate(rng, reps, seeds, tasks, seed_sd, task_sd)
    found = intervals(table, rng, resamples)
    return {"seeds": seeds, "tasks": tasks, "seed_sd_points": 100 * seed_sd, "task_sd_points": 100 * task_sd,
            "coverage": {m: float(np.mean((lo <= DIFFERENCE) & (DIFFERENCE <= hi))) for m, (lo, hi) in found.items()},
            "median_width_points": {m: float(100 * np.median(hi - lo)) for m, (lo, hi) in found.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="3,5,10")
    parser.add_argument("--tasks", default="200,400")
    parser.add_argument("--seed-sds", default="0,2,4", help="between-seed SD of the difference, points")
    parser.add_argument("--task-sds", default="0,10", help="SD of a task's own difference (shared by seeds), points")
    parser.add_argument("--reps", type=int, default=2000, help="replications per cell")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per replication")
    parser.add_argument("--seed", type=int, default=20260901)
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default prints a table)")
    args = parser.parse_args()
    start = time.perf_counter()
    cells = [coverage_cell(s, t, sd / 100, tsd / 100, args.reps, args.resamples, args.seed)
             for tsd in map(float, args.task_sds.split(",")) for s in map(int, args.seeds.split(","))
             for t in map(int, args.tasks.split(",")) for sd in map(float, args.seed_sds.split(","))]
    record = {"difference_points": 100 * DIFFERENCE, "confidence": CONFIDENCE, "reps": args.reps,
              "resamples": args.resamples, "seed": args.seed, "coverage_se_at_095": (0.95 * 0.05 / args.reps) ** 0.5,
              "machine": platform.node(), "cells": cells, "seconds": round(time.perf_counter() - start, 1)}
    if args.json:
        print(json.dumps(record))
        return
    print(f"{'S':>3} {'T':>4} {'seedSD':>6} {'taskSD':>6}  " + "  ".join(f"{m:>24}" for m in METHODS))
    for cell in cells:
        print(f"{cell['seeds']:>3} {cell['tasks']:>4} {cell['seed_sd_points']:>6.0f} {cell['task_sd_points']:>6.0f}  "
              + "  ".join(f"{cell['coverage'][m]:>12.3f} ({cell['median_width_points'][m]:5.1f} pt)" for m in METHODS))


if __name__ == "__main__":
    main()
