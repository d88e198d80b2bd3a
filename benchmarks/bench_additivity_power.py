"""Power of the gate's interaction test at a given size: how large a pairwise chunk interaction must be to be seen.

Simulates the gate's rows as the organism makes them: 8 chunks under Bernoulli(0.5) masks, a masked and a bare
binary outcome per row (bare success 40 %, each chunk +1.5 points, one planted interaction γ between chunks 0 and 1
on the masked success probability), and fits the gate's model with that one interaction added (no intercept, HC3,
statsmodels). Prints one JSON object: for each rows × γ, the share of seeded data sets whose 1-df test of the
planted interaction rejects at α = 0.05. A single pre-named pair is the most favourable case; the gate's joint test
of every selected pair spreads the same data over up to 28 restrictions (docs/gate-validation.md).

    python benchmarks/bench_additivity_power.py --rows 400,1600,3200 --gammas 0.08,0.15,0.3 --reps 400
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import statsmodels.api as sm

CHUNKS, BARE, PER_CHUNK = 8, 0.40, 0.015


def rejection_rate(rows: int, gamma: float, reps: int, seed: int) -> float:
    """Share of ``reps`` simulated gates of ``rows`` rows whose HC3 test of the planted interaction rejects."""
    rng = np.random.default_rng([seed, rows, round(gamma * 1e6)])
    rejected = 0
    for _ in range(reps):
        masks = rng.integers(0, 2, (rows, CHUNKS)).astype(float)
        pair = masks[:, 0] * masks[:, 1]
        masked = rng.random(rows) < np.clip(BARE + PER_CHUNK * masks.sum(1) + gamma * pair, 0.0, 1.0)
        bare = rng.random(rows) < BARE
        fit = sm.OLS(masked.astype(float) - bare, np.column_stack([masks, pair])).fit(cov_type="HC3")
        rejected += bool(fit.pvalues[-1] < 0.05)
    return rejected / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="400,1600,3200", help="gate rows (tasks × masked rollouts per task)")
    parser.add_argument("--gammas", default="0.08,0.15,0.3", help="planted interactions (success probability)")
    parser.add_argument("--reps", type=int, default=400, help="simulated gates per cell")
    parser.add_argument("--seed", type=int, default=20260901)
    args = parser.parse_args()
    start = time.perf_counter()
    cells = [{"rows": rows, "gamma": gamma, "rejection_rate": rejection_rate(rows, gamma, args.reps, args.seed)}
             for rows in map(int, args.rows.split(",")) for gamma in map(float, args.gammas.split(","))]
    print(json.dumps({"reps": args.reps, "seed": args.seed, "alpha": 0.05, "cells": cells,
                      "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
