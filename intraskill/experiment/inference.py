"""Inference across training seeds: one interval for a paired difference, its p-value, Holm's adjustment over a
declared family, and the power of a seed count.

Every cell of a control matrix is tested on the same tasks with the same episode seeds, so the per-task
differences ``d[s, t]`` (arm a − arm b, seed s, task t) form a crossed seeds × tasks table. The mean's variance
is the variance of the seed means plus the tasks' spread shared by every seed, estimated from the two-way ANOVA
mean squares (as in the two-way cluster-robust variance of Cameron, Gelbach and Miller, 2011):

    V = MS_S / (S·T) + σ̂²_task / T,   σ̂²_task = max(MS_T − MS_E, 0) / S,

with Satterthwaite's degrees of freedom (at least S − 1) and scipy's t quantiles. The interval is the wider of
that one and the t interval on the seed means (S − 1 degrees of freedom), the p-value the larger of theirs: with no
task component it is the t interval on the seed means, exact for normal seed effects; with one it stays valid
where that interval does not (``benchmarks/bench_interval_coverage.py`` measures both, and the percentile
hierarchical bootstrap this replaced, docs/results.md). With one seed there is no seed variance to estimate: the interval is
the release's task-paired bootstrap (:func:`~intraskill.evaluate.bootstrap.paired_bootstrap_ci`) and ``method``
says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from intraskill.evaluate.bootstrap import TEST_SEED_BASE, paired_bootstrap_ci, paired_bootstrap_p_value
from intraskill.params import DEFAULT_CONFIDENCE, EvaluationParams

CROSSED_T = "seeds_x_tasks_crossed_t"
"""``method`` of an interval over two or more seeds."""
ONE_SEED_BOOTSTRAP = "one_seed_task_paired_bootstrap"
"""``method`` of an interval over one seed: it holds no training-seed variance."""
BOOTSTRAP_SAMPLES = EvaluationParams().bootstrap_samples
Name = TypeVar("Name", bound=Hashable)


@dataclass(frozen=True)
class ContrastInterval:
    """The mean paired difference over seeds and tasks with its interval and two-sided p-value.

    ``per_seed`` holds each seed's mean difference; ``df`` and ``se`` are the t interval's (``None`` for the
    one-seed bootstrap).
    """

    mean: float
    low: float
    high: float
    p_value: float
    method: str
    n_seeds: int
    n_tasks: int
    per_seed: tuple[float, ...]
    confidence: float
    df: float | None
    se: float | None

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``mean``, ``ci_low``, ``ci_high``, ``p_value``, ``method``, ``seeds``, ``tasks``, ..."""
        return {"mean": self.mean, "ci_low": self.low, "ci_high": self.high, "p_value": self.p_value,
                "method": self.method, "seeds": self.n_seeds, "tasks": self.n_tasks,
                "per_seed_means": list(self.per_seed), "confidence": self.confidence, "df": self.df, "se": self.se}


def contrast_interval(diffs: Sequence[Sequence[float]], confidence: float = DEFAULT_CONFIDENCE, *,
                      metric: str = "r_success", samples: int = BOOTSTRAP_SAMPLES,
                      seed_base: int = TEST_SEED_BASE) -> ContrastInterval:
    """The interval of the mean of ``diffs`` (one row per training seed of per-task paired differences, task j
    the same task in every row).

    Two or more seeds: the crossed seeds × tasks t interval (module docstring); given one value per seed (the
    seed means alone) it is the t interval on the seed means. One seed: the task-paired percentile bootstrap,
    seeded by ``metric``, ``samples`` and ``seed_base`` as the release's test CIs are.

    >>> r = contrast_interval([[1, 0, 0, 1], [1, 1, 0, 0], [0, 1, 1, 1]])
    >>> round(r.mean, 4), r.n_seeds, r.method
    (0.5833, 3, 'seeds_x_tasks_crossed_t')
    """
    # deferred: numpy and scipy are heavy to import
    import numpy as np
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rows = [np.asarray(row, dtype=float) for row in diffs]
    if not rows or not all(row.ndim == 1 and row.size for row in rows):
        raise ValueError("diffs: need at least one seed, each a non-empty 1-D array of per-task differences")
    if len({row.size for row in rows}) != 1:
        raise ValueError(f"diffs: every seed needs the same tasks, got lengths {[row.size for row in rows]}")
    table = np.vstack(rows)
    if not np.isfinite(table).all():
        raise ValueError("diffs: a difference is not finite")
    seeds, tasks = table.shape
    seed_means = table.mean(axis=1)
    mean = float(seed_means.mean())
    per_seed = tuple(float(v) for v in seed_means)
    if seeds == 1:
        zero = [0.0] * tasks
        single = paired_bootstrap_ci(zero, rows[0].tolist(), metric, samples=samples, seed_base=seed_base,
                                     confidence=confidence)
        return ContrastInterval(mean, single.ci95[0], single.ci95[1],
                                paired_bootstrap_p_value(rows[0].tolist(), metric, samples=samples,
                                                         seed_base=seed_base),
                                ONE_SEED_BOOTSTRAP, 1, tasks, per_seed, confidence, None, None)
    task_means = table.mean(axis=0)
    ms_seeds = tasks * float(((seed_means - mean) ** 2).sum()) / (seeds - 1)
    residual = table - seed_means[:, None] - task_means[None, :] + mean
    ms_error = float((residual ** 2).sum()) / ((seeds - 1) * (tasks - 1)) if tasks > 1 else 0.0
    ms_tasks = seeds * float(((task_means - mean) ** 2).sum()) / (tasks - 1) if tasks > 1 else 0.0
    # crossed: V·S·T = MS_S + b·(MS_T − MS_E), b = 1 where the shared task component is positive
    keep_tasks = float(ms_tasks > ms_error)
    terms = [(ms_seeds, seeds - 1), (keep_tasks * ms_tasks, max(tasks - 1, 1)),
             (-keep_tasks * ms_error, max((seeds - 1) * (tasks - 1), 1))]
    scaled = sum(term for term, _ in terms)
    if scaled <= 0.0:
        return ContrastInterval(mean, mean, mean, 1.0 if mean == 0.0 else 0.0, CROSSED_T, seeds, tasks, per_seed,
                                confidence, float(seeds - 1), 0.0)
    # the wider of the crossed interval (Satterthwaite's df, at least S − 1) and the t interval on the seed means
    candidates = [(math.sqrt(scaled / (seeds * tasks)),
                   max(float(seeds - 1), scaled ** 2 / sum(t ** 2 / d for t, d in terms if t))),
                  (math.sqrt(ms_seeds / (seeds * tasks)), float(seeds - 1))]
    se, df = max(candidates, key=lambda c: float(stats.t.ppf((1.0 + confidence) / 2.0, c[1])) * c[0])
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, df)) * se
    p_value = max(float(2.0 * stats.t.sf(abs(mean) / s, d)) if s > 0 else float(mean == 0.0) for s, d in candidates)
    return ContrastInterval(mean, mean - half, mean + half, p_value, CROSSED_T, seeds, tasks, per_seed, confidence,
                            df, se)


def holm(p_values: Mapping[Name, float], alpha: float = 1.0 - DEFAULT_CONFIDENCE,
         family_size: int | None = None) -> dict[Name, float]:
    """Holm-adjusted p-values (statsmodels ``multipletests(method="holm")``) by name. ``family_size`` counts
    declared members that have no p-value yet (a contrast not run) as p = 1, so a partial family is adjusted as
    strictly as the whole."""
    # deferred: statsmodels is heavy to import
    from statsmodels.stats.multitest import multipletests

    names = list(p_values)
    missing = (family_size if family_size is not None else len(names)) - len(names)
    if missing < 0:
        raise ValueError(f"holm: {len(names)} p-values for a family of {family_size}")
    if not names:
        return {}
    adjusted = multipletests([p_values[n] for n in names] + [1.0] * missing, alpha=alpha, method="holm")[1]
    return {name: float(p) for name, p in zip(names, adjusted)}


def power(difference: float, *, seed_sd: float, seeds: int, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Probability that the two-sided t test on ``seeds`` seed means rejects 0 at ``confidence`` when the true
    difference is ``difference`` and the per-seed mean differences scatter with standard deviation ``seed_sd``
    (training seeds and the tasks' noise together, as measured across seeds); scipy's noncentral t."""
    # deferred: scipy is heavy to import
    from scipy import stats

    if seeds < 2 or seed_sd <= 0:
        raise ValueError(f"power: need at least 2 seeds and a positive seed_sd, got {seeds} and {seed_sd}")
    shift = difference * math.sqrt(seeds) / seed_sd
    critical = stats.t.ppf((1.0 + confidence) / 2.0, seeds - 1)
    return float(stats.nct.sf(critical, seeds - 1, shift) + stats.nct.cdf(-critical, seeds - 1, shift))


def seeds_needed(difference: float, target: float = 0.8, *, seed_sd: float, confidence: float = DEFAULT_CONFIDENCE,
                 most: int = 1000) -> int:
    """The fewest seeds whose :func:`power` reaches ``target``."""
    for seeds in range(2, most + 1):
        if power(difference, seed_sd=seed_sd, seeds=seeds, confidence=confidence) >= target:
            return seeds
    raise ValueError(f"seeds_needed: more than {most} seeds for power {target}")


@dataclass(frozen=True)
class SeedCount:
    """A pilot's seed-count rule applied (docs/preregistration.md): the per-seed differences it measured, their
    SD, the fewest seeds with ``target`` power for ``difference`` at that SD, and the count within
    [``least``, ``most``]."""

    per_seed: tuple[float, ...]
    seed_sd: float
    difference: float
    target: float
    needed: int
    seeds: int


def pilot_seed_count(per_seed: Sequence[float], difference: float, *, least: int, most: int,
                     target: float = 0.8) -> SeedCount:
    """The seed count a pilot's per-seed mean differences give: :func:`seeds_needed` at their SD (``ddof`` 1),
    at least ``least`` and at most ``most``; an SD of 0 needs ``least``."""
    if len(per_seed) < 2:
        raise ValueError(f"pilot_seed_count: need at least 2 pilot seeds, got {len(per_seed)}")
    if not 2 <= least <= most:
        raise ValueError(f"pilot_seed_count: need 2 <= least <= most, got {least} and {most}")
    sd = statistics.stdev(per_seed)
    needed = seeds_needed(difference, target, seed_sd=sd, most=10 ** 6) if sd > 0 else least
    return SeedCount(tuple(float(v) for v in per_seed), sd, difference, target, needed, min(most, max(least, needed)))
