"""The ranking check: does the gate's β ranking order fixed banks on validation? (top-K vs bottom-K vs random-K)

The release's appendix (docs/release.md §3.6) injected the gate's top-4, bottom-4 and one random 4
chunks as fixed banks and found top-4 51.75 % < bottom-4 55.00 % on test, without paired intervals. Here the
arms come from one gate's ranked survivors (:func:`ranking_arms`): ``top`` the K best ranks, ``bottom`` the K
worst, ``random-<seed>`` K survivors drawn by ``u64("seed:ranking:intervention_id")`` order, each bank in
design-column order. Given each arm's per-task values on the same val tasks as the gate's bare run,
:func:`ranking_check` reports every arm's mean and the task-paired bootstrap of top − bottom, top − random and
random − bottom (and of each arm against bare), with :func:`~intraskill.evaluate.bootstrap.paired_bootstrap_ci`.
Several random seeds are pooled: a task's random value is the mean of its random arms.

The masked rollouts cannot stand in for these runs: a random mask shows a chunk with half the others, never
inside the fixed top-K bank whose value the ranking is meant to predict. So the check costs
``(2 + random seeds) × tasks × m`` extra val episodes (:func:`intraskill.pipeline.gate_ranking.run_ranking_check`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.evaluate.bootstrap import TEST_SEED_BASE, BootstrapResult, paired_bootstrap_ci
from intraskill.gate.contributions import GateContributions
from intraskill.hashing import u64
from intraskill.params import RANKING_K, RANKING_RANDOM_SEED

RANDOM = "random"
BARE = "bare"
CONTRASTS = (("top", "bottom"), ("top", RANDOM), (RANDOM, "bottom"))
"""(b, a) pairs: each reports mean(b − a)."""


def ranking_arms(contributions: GateContributions, k: int = RANKING_K,
                 random_seeds: Sequence[int] = (RANKING_RANDOM_SEED,)) -> dict[str, tuple[str, ...]]:
    """``{"top": …, "bottom": …, "random-<seed>": …}``: K intervention ids each, in design-column order.

    Only ranked survivors count (rewrite losers have no rank); top and bottom must not overlap, so
    ``2·k`` may not exceed the survivors.
    """
    ranked = sorted((r for r in contributions.contributions if r.rank is not None), key=lambda r: r.rank or 0)
    ids = [r.intervention_id for r in ranked]
    if k < 1 or 2 * k > len(ids):
        raise ValueError(f"k: top-{k} and bottom-{k} need 2k <= {len(ids)} ranked survivors and k >= 1")
    if not random_seeds:
        raise ValueError("random_seeds: give at least one seed for the random arm")
    order = {c: i for i, c in enumerate(contributions.columns)}

    def bank(chosen: Sequence[str]) -> tuple[str, ...]:
        return tuple(sorted(chosen, key=order.__getitem__))

    arms = {"top": bank(ids[:k]), "bottom": bank(ids[-k:])}
    for seed in random_seeds:
        arms[f"{RANDOM}-{seed}"] = bank(sorted(ids, key=lambda c: u64(f"{seed}:ranking:{c}"))[:k])
    return arms


@dataclass(frozen=True)
class RankingCheck:
    """Fixed-bank val runs of the gate's top-K, bottom-K and random-K, with task-paired contrasts.

    ``means[metric][arm]`` holds every arm's mean (random seeds pooled as ``random``, ``bare`` when given);
    ``contrasts[metric]["top-bottom"]`` etc. are :class:`~intraskill.evaluate.bootstrap.BootstrapResult` of
    ``mean(b − a)``, plus ``<arm>-bare`` for each arm when the bare run is given.
    """

    k: int
    arms: dict[str, tuple[str, ...]]
    tasks: int
    means: dict[str, dict[str, float]]
    contrasts: dict[str, dict[str, BootstrapResult]]

    def ordered(self, metric: str) -> bool:
        """Whether the point estimates order top > random > bottom on ``metric``."""
        means = self.means[metric]
        return means["top"] > means[RANDOM] > means["bottom"]

    def summary(self) -> str:
        """One block per metric: arm means, then each contrast with its 95 % CI."""
        lines = [f"Ranking check: top-{self.k} vs bottom-{self.k} vs random-{self.k} on {self.tasks} val tasks"]
        for name, ids in self.arms.items():
            lines.append(f"  {name}: {', '.join(ids)}")
        for metric, means in self.means.items():
            arms = ", ".join(f"{arm} {value:.4f}" for arm, value in means.items())
            lines.append(f"{metric}: {arms}{'' if self.ordered(metric) else '  (not ordered top > random > bottom)'}")
            for name, result in self.contrasts[metric].items():
                low, high = result.ci95
                lines.append(f"  {name}: {result.mean_difference:+.4f} [{low:+.4f}, {high:+.4f}]")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The ``ranking_check.json`` record."""
        return {"k": self.k, "arms": {a: list(ids) for a, ids in self.arms.items()}, "tasks": self.tasks,
                "means": {m: dict(v) for m, v in self.means.items()},
                "ordered": {m: self.ordered(m) for m in self.means},
                "contrasts": {m: {n: r.to_dict() for n, r in c.items()} for m, c in self.contrasts.items()}}


def _pooled(values: Mapping[str, Mapping[int, float]], arms: Sequence[str], tasks: Sequence[int]) -> dict[int, float]:
    return {t: sum(values[a][t] for a in arms) / len(arms) for t in tasks}


def ranking_check(arms: Mapping[str, Sequence[str]], values: Mapping[str, Mapping[str, Mapping[int, float]]], *,
                  samples: int = 10_000, seed_base: int = TEST_SEED_BASE) -> RankingCheck:
    """Contrast the arms' per-task values, paired by task.

    Parameters
    ----------
    arms : :func:`ranking_arms`' result.
    values : metric → arm (every key of ``arms``, optionally ``"bare"``) → task id → value (a task's mean over
        its samples). Every arm must cover the same tasks.
    samples, seed_base : the bootstrap's resamples and seed base (seed ``u64(f"{seed_base}:{metric}")``).
    """
    randoms = [a for a in arms if a.startswith(f"{RANDOM}-")]
    if not {"top", "bottom"} <= set(arms) or not randoms:
        raise ValueError("arms: needs top, bottom and at least one random-<seed> arm")
    means: dict[str, dict[str, float]] = {}
    contrasts: dict[str, dict[str, BootstrapResult]] = {}
    tasks: list[int] = []
    for metric, per_arm in values.items():
        missing = [a for a in arms if a not in per_arm]
        if missing:
            raise ValueError(f"values[{metric!r}]: no per-task values for arm(s) {missing}")
        tasks = sorted(per_arm["top"])
        uneven = [a for a in per_arm if sorted(per_arm[a]) != tasks]
        if uneven:
            raise ValueError(f"values[{metric!r}]: arm(s) {uneven} cover other tasks than the top arm")
        series = {"top": per_arm["top"], "bottom": per_arm["bottom"], RANDOM: _pooled(per_arm, randoms, tasks)}
        if BARE in per_arm:
            series[BARE] = per_arm[BARE]
        means[metric] = {arm: sum(v.values()) / len(tasks) for arm, v in series.items()}
        pairs = list(CONTRASTS) + ([(arm, BARE) for arm in ("top", RANDOM, "bottom")] if BARE in series else [])
        contrasts[metric] = {
            f"{b}-{a}": paired_bootstrap_ci([series[a][t] for t in tasks], [series[b][t] for t in tasks], metric,
                                            samples=samples, seed_base=seed_base) for b, a in pairs}
    if not means:
        raise ValueError("values: no metric given")
    return RankingCheck(k=len(arms["top"]), arms={a: tuple(ids) for a, ids in arms.items()}, tasks=len(tasks),
                        means=means, contrasts=contrasts)
