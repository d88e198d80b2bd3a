"""Restate the published cross-seed comparisons from their recorded per-seed mean differences.

The run directories of the organism's control matrix (2026-12-02, ``96da334``) and of the cold-start comparison
(2026-12-04, ``e6fa4fe`` / ``db4581c``) are not kept; docs/results.md and docs/cold-start.md record each
comparison's per-seed mean differences (points, two decimals). This script passes them to
:func:`intraskill.experiment.inference.contrast_interval` as one value per seed — which makes it the t interval on
the seed means with S − 1 degrees of freedom, since the shared task component needs the per-task tables — reads
them with the family each matrix declares by default (``matrix.family``; Holm over the secondary members), and
gives the power of the primary contrast's measured seed spread for a +3 point difference.

The t interval on seed means misses the task component every seed shares. Its conservative bound adds one seed's
whole task noise w² (the variance of a seed's mean over its tasks, which holds that component): the variance
s²/S + w², S − 1 degrees of freedom. w comes from the comparison's pooled fixed / broken counts where they are
recorded ((discordant share − mean²) / tasks), else the smallest such w among the recorded comparisons. A
verdict is restated only where both intervals support it. Prints one JSON object, or Markdown tables with
``--markdown``.

    python benchmarks/restate_recorded_contrasts.py --markdown
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

from scipy import stats

from intraskill.experiment.inference import contrast_interval, holm, power, seeds_needed
from intraskill.params import DEFAULT_CONFIDENCE, FamilyParams

CONTROLS_ARMS = ("coevolve", "grpo", "fixed", "nomask", "uniform")
CONTROLS = {  # (comparison, condition, metric): per-seed mean difference a − b, points (docs/results.md)
    ("coevolve-grpo", "deployed", "success"): (-2.50, -3.75, 1.00),
    ("coevolve-grpo", "deployed", "reward"): (-2.78, -3.56, 1.12),
    ("coevolve-grpo", "bare", "success"): (-3.25, -3.75, 0.00),
    ("coevolve-grpo", "bare", "reward"): (-3.38, -3.25, 0.06),
    ("fixed-grpo", "deployed", "success"): (-2.50, -0.25, 0.75),
    ("fixed-grpo", "deployed", "reward"): (-1.88, 0.50, 0.62),
    ("fixed-grpo", "bare", "success"): (-14.50, -7.75, -7.75),
    ("fixed-grpo", "bare", "reward"): (-12.09, -6.84, -6.59),
    ("nomask-grpo", "deployed", "success"): (-2.00, -0.50, 0.25),
    ("nomask-grpo", "deployed", "reward"): (-1.44, -0.25, 0.00),
    ("nomask-grpo", "bare", "success"): (-13.25, -6.50, -8.00),
    ("nomask-grpo", "bare", "reward"): (-11.50, -5.78, -6.34),
    ("uniform-grpo", "deployed", "success"): (-2.75, -3.00, -0.25),
    ("uniform-grpo", "deployed", "reward"): (-1.50, -2.56, 0.12),
    ("uniform-grpo", "bare", "success"): (-4.00, -3.25, -2.00),
    ("uniform-grpo", "bare", "reward"): (-2.62, -3.00, -1.59),
    ("coevolve-fixed", "deployed", "success"): (0.00, -3.50, 0.25),
    ("coevolve-fixed", "deployed", "reward"): (-0.91, -4.06, 0.50),
    ("coevolve-fixed", "bare", "success"): (11.25, 4.00, 7.75),
    ("coevolve-fixed", "bare", "reward"): (8.72, 3.59, 6.66),
    ("coevolve-nomask", "deployed", "success"): (-0.50, -3.25, 0.75),
    ("coevolve-nomask", "deployed", "reward"): (-1.34, -3.31, 1.12),
    ("coevolve-nomask", "bare", "success"): (10.00, 2.75, 8.00),
    ("coevolve-nomask", "bare", "reward"): (8.12, 2.53, 6.41),
    ("coevolve-uniform", "deployed", "success"): (0.25, -0.75, 1.25),
    ("coevolve-uniform", "deployed", "reward"): (-1.28, -1.00, 1.00),
    ("coevolve-uniform", "bare", "success"): (0.75, -0.50, 2.00),
    ("coevolve-uniform", "bare", "reward"): (-0.75, -0.25, 1.66),
}
TASKS = 400
TRANSITIONS = {  # (comparison, condition): success tasks fixed / broken by a, pooled over the 3 seeds
    ("coevolve-grpo", "deployed"): (24, 45), ("coevolve-grpo", "bare"): (18, 46),
    ("fixed-grpo", "deployed"): (20, 28), ("fixed-grpo", "bare"): (4, 124),
    ("nomask-grpo", "deployed"): (22, 31), ("nomask-grpo", "bare"): (6, 117),
    ("uniform-grpo", "deployed"): (16, 40), ("uniform-grpo", "bare"): (7, 44),
    ("coevolve-fixed", "deployed"): (28, 41), ("coevolve-fixed", "bare"): (108, 16),
    ("coevolve-nomask", "deployed"): (29, 41), ("coevolve-nomask", "bare"): (101, 18),
    ("coevolve-uniform", "deployed"): (33, 30), ("coevolve-uniform", "bare"): (34, 25),
}
COLD_START_ARMS = ("coevolve", "induced", "grpo")
COLD_START = {  # per-seed test success differences, points, from the per-cell rates in docs/cold-start.md
    ("coevolve-grpo", "deployed", "success"): (66.50 - 63.75, 68.00 - 65.50, 66.00 - 64.00),
    ("coevolve-grpo", "bare", "success"): (57.25 - 63.75, 61.50 - 65.50, 61.75 - 64.00),
    ("induced-grpo", "deployed", "success"): (61.75 - 63.75, 66.25 - 65.50, 65.25 - 64.00),
    ("induced-grpo", "bare", "success"): (58.50 - 63.75, 62.50 - 65.50, 62.75 - 64.00),
    ("coevolve-induced", "deployed", "success"): (66.50 - 61.75, 68.00 - 66.25, 66.00 - 65.25),
    ("coevolve-induced", "bare", "success"): (57.25 - 58.50, 61.50 - 62.50, 61.75 - 62.75),
}
DIFFERENCE = 3.0


def task_noise(comparison: str, condition: str, mean: float) -> float | None:
    """One seed's standard error over its tasks (fraction) from the pooled transitions, where recorded."""
    if (comparison, condition) not in TRANSITIONS:
        return None
    fixed, broken = TRANSITIONS[comparison, condition]
    return math.sqrt(((fixed + broken) / (3 * TASKS) - mean ** 2) / TASKS)


def task_noise_floor() -> float:
    """The smallest recorded task noise (fraction)."""
    return min(task_noise(c, d, statistics.fmean(CONTROLS[c, d, "success"]) / 100) for c, d in TRANSITIONS)


def restate(recorded: dict[tuple[str, str, str], tuple[float, ...]], arms: tuple[str, ...]) -> list[dict[str, object]]:
    """Each recorded comparison's t interval, conservative bound, p-value, role in the default family, Holm p and
    verdict."""
    primary, secondary = FamilyParams().members(arms)
    intervals = {key: contrast_interval([[v / 100] for v in values]) for key, values in recorded.items()}
    adjusted = holm({k: r.p_value for k, r in intervals.items() if k in secondary}, family_size=len(secondary))
    rows = []
    for key, r in intervals.items():
        role = "primary" if key == primary else "secondary" if key in secondary else "exploratory"
        noise = task_noise(key[0], key[1], r.mean) if key[2] == "success" else None
        noise = noise if noise is not None else task_noise_floor()
        spread = math.sqrt(statistics.variance(recorded[key]) / 1e4 / len(recorded[key]) + noise ** 2)
        half = stats.t.ppf((1 + DEFAULT_CONFIDENCE) / 2, len(recorded[key]) - 1) * spread
        bound = (r.mean - half, r.mean + half)
        supported = r.excludes_zero() and (role == "primary" or (role == "secondary" and adjusted[key] < 0.05))
        supported = supported and (bound[0] > 0 or bound[1] < 0)
        a, b = key[0].split("-", 1)
        verdict = "exploratory" if role == "exploratory" else (
            (f"{a} > {b}" if r.mean > 0 else f"{a} < {b}") if supported else "unresolved")
        rows.append({"comparison": key[0], "condition": key[1], "metric": key[2], "per_seed": list(recorded[key]),
                     "mean": 100 * r.mean, "low": 100 * r.low, "high": 100 * r.high, "p_value": r.p_value,
                     "task_noise": 100 * noise, "bound_low": 100 * bound[0], "bound_high": 100 * bound[1],
                     "role": role, "p_holm": adjusted.get(key), "verdict": verdict, "method": r.method})
    return rows


def markdown(rows: list[dict[str, object]]) -> str:
    header = ("| Comparison (a − b) | Condition | Metric | Per seed | Mean, points [95 % t CI] | With task noise w "
              "| p | Role | Holm p | Verdict |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        seeds = ", ".join(f"{v:+.2f}" for v in row["per_seed"])
        holm_p = "—" if row["p_holm"] is None else f"{row['p_holm']:.3f}"
        lines.append(f"| {row['comparison']} | {row['condition']} | {row['metric']} | {seeds} | "
                     f"{row['mean']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}] | "
                     f"[{row['bound_low']:+.2f}, {row['bound_high']:+.2f}] (w {row['task_noise']:.2f}) | {row['p_value']:.3f} | "
                     f"{row['role']} | {holm_p} | {row['verdict']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables instead of JSON")
    args = parser.parse_args()
    spread = statistics.stdev(CONTROLS[("coevolve-grpo", "deployed", "success")])
    record = {
        "confidence": DEFAULT_CONFIDENCE,
        "controls": restate(CONTROLS, CONTROLS_ARMS),
        "cold_start": restate(COLD_START, COLD_START_ARMS),
        "power": {"difference_points": DIFFERENCE, "seed_sd_points": spread,
                  "by_seeds": {n: power(DIFFERENCE, seed_sd=spread, seeds=n) for n in (3, 5, 10)},
                  "seeds_for_80": seeds_needed(DIFFERENCE, 0.8, seed_sd=spread),
                  "seeds_for_90": seeds_needed(DIFFERENCE, 0.9, seed_sd=spread)},
    }
    if not args.markdown:
        print(json.dumps(record))
        return
    print(markdown(record["controls"]), "\n")
    print(markdown(record["cold_start"]), "\n")
    print(json.dumps(record["power"]))


if __name__ == "__main__":
    main()
