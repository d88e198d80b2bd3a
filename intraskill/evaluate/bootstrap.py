"""Task-level paired percentile bootstrap, as used for every published IntraSkill CI.

Two RNG conventions exist in the release and both are reproduced here exactly:

* :func:`paired_bootstrap_ci` — the test / gate CIs (docs/method.md §7, docs/release.md
  §3.2): pure-Python ``random.Random`` seeded with the first 8 bytes of ``sha256(f"{seed_base}:{metric}")``,
  10,000 resamples, linearly interpolated percentiles at ``p·(B−1)``. The draws replay that exact
  Mersenne Twister stream with numpy (:func:`resample_means`), bit-identical to the published loop
  (:func:`resample_means_reference`) and about ten times faster.
* :func:`numpy_paired_bootstrap` — the behaviour CIs (docs/release.md §3.5): ``numpy.random.default_rng``
  seeded with the first 4 bytes of ``sha256(f"20260909:{metric}")``, 5,000 resamples, ``np.quantile``.

Across training seeds the control experiment uses :func:`intraskill.experiment.inference.contrast_interval`
(the release had one seed); with one seed it falls back to :func:`paired_bootstrap_ci`.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

from intraskill.hashing import seed32, u64
from intraskill.params import EvaluationParams

if TYPE_CHECKING:
    import numpy as np

TEST_SEED_BASE = EvaluationParams().bootstrap_seed
"""Seed base of the test and gate CIs (``compare_runs`` / ``analyze_training.paired``)."""
BEHAVIOR_SEED_BASE = 20260909
"""Seed base of the behaviour CIs (``analyze_behavior``)."""


@dataclass(frozen=True)
class BootstrapResult:
    """A paired bootstrap of the mean difference ``mean(b − a)``.

    Attributes
    ----------
    a_mean, b_mean : float
        Arithmetic means of the reference arm ``a`` and the treatment arm ``b``.
    mean_difference : float
        ``mean(b_i − a_i)``.
    ci95 : tuple[float, float]
        Percentile interval at the requested confidence (0.95 by default, hence the name).
    pairs : int
        Number of aligned pairs n.
    samples : int
        Number of bootstrap resamples B.
    seed : int
        The integer seed actually given to the RNG.
    method : str
        ``task_level_paired_percentile`` (pure Python) or ``task_level_paired_percentile_numpy``.
    """

    a_mean: float
    b_mean: float
    mean_difference: float
    ci95: tuple[float, float]
    pairs: int
    samples: int
    seed: int
    method: str = "task_level_paired_percentile"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``ci95`` becomes a two-element list."""
        record = asdict(self)
        record["ci95"] = list(self.ci95)
        return record


def _paired_deltas(a: Sequence[float], b: Sequence[float]) -> list[float]:
    if len(a) != len(b):
        raise ValueError(f"paired arms differ in length: a has {len(a)} values, b has {len(b)}")
    return _finite_deltas([float(y) - float(x) for x, y in zip(a, b)])


def _finite_deltas(deltas: Sequence[float]) -> list[float]:
    """``deltas`` as floats; at least one, all finite."""
    values = [float(d) for d in deltas]
    if not values:
        raise ValueError("paired arms are empty: need at least one (a, b) pair")
    if not all(math.isfinite(d) for d in values):
        raise ValueError("paired arms contain a non-finite value")
    return values


def _tails(confidence: float) -> tuple[float, float]:
    """Percentile levels ``((1−c)/2, (1+c)/2)``, rounded so that 0.95 gives exactly 0.025 and 0.975."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return round((1.0 - confidence) / 2.0, 12), round((1.0 + confidence) / 2.0, 12)


def percentile_linear(sorted_values: Sequence[float], p: float) -> float:
    """Percentile of already-sorted values, linearly interpolated at position ``p·(len−1)``.

    >>> percentile_linear([0.0, 1.0, 2.0, 3.0], 0.5)
    1.5
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    position = p * (len(sorted_values) - 1)
    lower = math.floor(position)
    upper = math.ceil(position)
    if lower == upper:
        return float(sorted_values[lower])
    weight = position - lower
    return float(sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * weight)


def resample_means_reference(deltas: Sequence[float], seed: int, samples: int) -> list[float]:
    """The published resampling loop, verbatim: the specification :func:`resample_means` must match.

    ``rng = random.Random(seed)``; each resample mean is
    ``sum(delta[rng.randrange(n)] for _ in range(n)) / n``.
    """
    n = len(deltas)
    rng = random.Random(seed)
    return [sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples)]


def _mersenne_indices(seed: int, n: int, count: int) -> "np.ndarray":
    """The first ``count`` values ``random.Random(seed).randrange(n)`` would return, drawn with numpy.

    CPython's ``randrange(n)`` draws ``getrandbits(k)`` with ``k = n.bit_length()`` (for ``k <= 32`` the top
    k bits of one 32-bit MT19937 output) and rejects values ``>= n``. numpy's ``MT19937`` continues the exact
    same stream once given the state of ``random.Random(seed).getstate()``.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    bits = n.bit_length()
    state = random.Random(seed).getstate()[1]
    generator = np.random.MT19937()
    generator.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.asarray(state[:624], dtype=np.uint32), "pos": state[624]},
    }
    accepted: list[np.ndarray] = []
    missing = count
    while missing > 0:
        draws = generator.random_raw(int(missing * (1 << bits) / n * 1.02) + 64) >> np.uint64(32 - bits)
        kept = draws[draws < n][:missing]
        accepted.append(kept.astype(np.int64))
        missing -= kept.size
    return np.concatenate(accepted)


def resample_means(deltas: Sequence[float], seed: int, samples: int) -> list[float]:
    """Bootstrap resample means, bit-identical to :func:`resample_means_reference` but vectorised.

    Indices come from :func:`_mersenne_indices`; each mean is accumulated left to right, as Python's
    ``sum`` does, so every float rounds exactly as in the reference loop.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    n = len(deltas)
    if n.bit_length() > 32:
        return resample_means_reference(deltas, seed, samples)
    values = np.asarray(deltas, dtype=float)
    indices = _mersenne_indices(seed, n, n * samples).reshape(samples, n)
    totals = np.zeros(samples)
    for column in range(n):
        totals += values[indices[:, column]]
    return (totals / n).tolist()


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    metric: str,
    *,
    samples: int = 10_000,
    seed_base: int = TEST_SEED_BASE,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Task-level paired percentile bootstrap of ``mean(b − a)`` (the published test CI method).

    Parameters
    ----------
    a, b : sequence of float
        Per-task values of the reference and treatment arm, aligned by task (length n each).
    metric : str
        Metric name; it selects the seed, ``u64(f"{seed_base}:{metric}")`` (e.g. ``reward``, ``r_success``).
    samples : int
        Resamples B (default 10,000).
    seed_base : int
        Seed base (default :data:`TEST_SEED_BASE`).
    confidence : float
        Two-sided level; the interval is the ``(1−c)/2`` and ``(1+c)/2`` percentiles.

    Returns
    -------
    BootstrapResult

    Examples
    --------
    >>> r = paired_bootstrap_ci([0, 0, 1, 1], [1, 0, 1, 1], "r_success", samples=200)
    >>> r.mean_difference
    0.25
    """
    lower, upper = _tails(confidence)
    if samples < 1:
        raise ValueError(f"samples must be positive, got {samples}")
    deltas = _paired_deltas(a, b)
    n = len(deltas)
    seed = u64(f"{seed_base}:{metric}")
    means = sorted(resample_means(deltas, seed, samples))
    return BootstrapResult(
        a_mean=sum(float(x) for x in a) / n,
        b_mean=sum(float(y) for y in b) / n,
        mean_difference=sum(deltas) / n,
        ci95=(percentile_linear(means, lower), percentile_linear(means, upper)),
        pairs=n,
        samples=samples,
        seed=seed,
    )


def paired_bootstrap_p_value(
    deltas: Sequence[float],
    metric: str,
    *,
    samples: int = 10_000,
    seed_base: int = TEST_SEED_BASE,
) -> float:
    """Two-sided percentile-bootstrap p-value of ``mean(deltas) = 0`` from the draws
    :func:`paired_bootstrap_ci` makes for the same ``metric`` and ``seed_base``: twice the smaller share of
    resample means on either side of 0 (at most 1), so the interval excludes 0 exactly when p < 1 − confidence,
    up to the percentiles' interpolation.

    >>> paired_bootstrap_p_value([1, 1, 1, 1], "r_success", samples=200)
    0.0
    """
    if samples < 1:
        raise ValueError(f"samples must be positive, got {samples}")
    means = resample_means(_finite_deltas(deltas), u64(f"{seed_base}:{metric}"), samples)
    below, above = sum(m <= 0.0 for m in means), sum(m >= 0.0 for m in means)
    return min(1.0, 2.0 * min(below, above) / samples)


def numpy_paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    metric: str,
    *,
    samples: int = 5000,
    seed_base: int = BEHAVIOR_SEED_BASE,
    confidence: float = 0.95,
) -> BootstrapResult:
    """The behaviour CI method (docs/release.md §3.5): vectorised numpy paired bootstrap.

    ``rng = default_rng(seed32(f"{seed_base}:{metric}"))``;
    ``boot = delta[rng.integers(0, n, size=(samples, n))].mean(axis=1)``; the interval is
    ``np.quantile(boot, [.025, .975])`` at the default confidence (numpy's default linear method).
    """
    # deferred: numpy is heavy to import
    import numpy as np

    lower, upper = _tails(confidence)
    if samples < 1:
        raise ValueError(f"samples must be positive, got {samples}")
    deltas = np.asarray(_paired_deltas(a, b), dtype=float)
    n = deltas.size
    seed = seed32(f"{seed_base}:{metric}")
    rng = np.random.default_rng(seed)
    boot = deltas[rng.integers(0, n, size=(samples, n))].mean(axis=1)
    lo, hi = np.quantile(boot, [lower, upper])
    return BootstrapResult(
        a_mean=float(np.mean(np.asarray(a, dtype=float))),
        b_mean=float(np.mean(np.asarray(b, dtype=float))),
        mean_difference=float(deltas.mean()),
        ci95=(float(lo), float(hi)),
        pairs=n,
        samples=samples,
        seed=seed,
        method="task_level_paired_percentile_numpy",
    )


def success_transitions(a: Sequence[int | float], b: Sequence[int | float]) -> dict[str, int]:
    """Count per-task success transitions from arm ``a`` to arm ``b``.

    Returns ``{"0->1", "1->0", "1->1", "0->0"}`` counts; values must be 0 or 1.

    >>> success_transitions([0, 1, 1, 0], [1, 0, 1, 0])
    {'0->1': 1, '1->0': 1, '1->1': 1, '0->0': 1}
    """
    if len(a) != len(b):
        raise ValueError(f"paired arms differ in length: a has {len(a)} values, b has {len(b)}")
    counts = {"0->1": 0, "1->0": 0, "1->1": 0, "0->0": 0}
    for index, (x, y) in enumerate(zip(a, b)):
        if x not in (0, 1) or y not in (0, 1):
            raise ValueError(f"success values must be 0 or 1; pair {index} is ({x!r}, {y!r})")
        counts[f"{int(x)}->{int(y)}"] += 1
    return counts
