"""Is the gate's additive model adequate? A test of the pairwise interactions of the selected chunks.

The gate fits ``R_i − B_i = C_iᵀβ + ε_i``: every chunk adds its own β whatever else is shown. Where chunks
are complements or substitutes, β is an average over the other chunks' random masks and differs from what
a chunk does alone or inside the selected bank (docs/method.md §9 item 4). The diagnostic refits the
same rows with the pairwise products ``C_ij·C_il`` of the selected chunks added,

``R_i − B_i = C_iᵀβ + Σ_{j<l} γ_jl C_ij C_il + ε_i``

(still no intercept: the gate's model is the restricted one), and tests ``γ = 0`` by a Wald test under the
gate's covariance — HC3, or clustered by task when tasks repeat — reported as an F statistic with q and
``n − p`` (HC3) or ``G − 1`` (G task clusters) degrees of freedom. With q ≈ 10–30 restrictions on a few
hundred binary-outcome rows that F reference over-rejects (about 10 % at a nominal 5 % in simulation), so the
decision uses the **wild bootstrap** p-value of the same statistic under the null: the restricted fit's
residuals flipped by one Rademacher sign per task (per row under HC3), :data:`BOOTSTRAP_DRAWS` draws from
``seed32(f"{seed}:additivity:{metric}")``. The F reference's p-value is kept as ``p_value_f``.

**Which pairs.** A pair enters only when each cell of its 2×2 table — both shown, only one, only the other,
neither — holds at least :data:`MIN_PAIR_CELL` rows: mutually exclusive versions (a rewrite family) and pairs
the masks rarely separate are left out and listed. **Not testable** (typed, with its reason): fewer than two
selected chunks, no pair passing the cell rule, an interaction design without full column rank or with no
more rows than columns, fewer task clusters than interactions (``G − 1 < q``), or a singular bootstrap
covariance. One masked rollout per task identifies the interactions (the masks vary across tasks); more
rollouts per task add power, and their rows are clustered by task. The measured level and power on the
organisms' teachers are in ``docs/gate-validation.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from intraskill.gate.ols import fit_paired_delta
from intraskill.hashing import seed32
from intraskill.params import RELEASE_SEED

MIN_PAIR_CELL = 10
"""Rows each of a pair's four (shown, not shown) cells needs before its interaction is fitted."""
ALPHA = 0.05
"""Level of the additivity test."""
LARGEST = 5
"""Interactions the summary lists (largest |γ| first)."""
BOOTSTRAP_DRAWS = 999
BOOTSTRAP_SEED = RELEASE_SEED
"""Draws and seed of the wild bootstrap p-value (recorded in every test)."""


@dataclass(frozen=True)
class Interaction:
    """One fitted pairwise interaction γ of chunks ``a`` and ``b`` (in design-column order); its CI and
    p-value are the robust fit's own, unadjusted for the other interactions."""

    a: str
    b: str
    coef: float
    std_err: float
    ci95: tuple[float, float]
    p_value: float
    together: int
    """Rows showing both chunks."""

    def to_dict(self) -> dict[str, Any]:
        """``{a, b, coef, std_err, ci95, p_value, together}``."""
        return {"a": self.a, "b": self.b, "coef": self.coef, "std_err": self.std_err, "ci95": list(self.ci95),
                "p_value": self.p_value, "together": self.together}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Interaction":
        """Parse :meth:`to_dict`'s record."""
        low, high = data["ci95"]
        return cls(a=str(data["a"]), b=str(data["b"]), coef=float(data["coef"]), std_err=float(data["std_err"]),
                   ci95=(float(low), float(high)), p_value=float(data["p_value"]), together=int(data["together"]))


@dataclass(frozen=True)
class AdditivityTest:
    """The additivity diagnostic of one gate metric.

    ``testable`` is False with a ``reason`` when the design cannot identify the interactions; the test fields
    are then ``None`` and ``interactions`` is empty. ``interactions`` holds every fitted pair, largest |γ|
    first; ``skipped_pairs`` the pairs that failed the cell rule. ``p_value`` is the wild bootstrap's (it
    decides ``rejected``), ``p_value_f`` the F reference's.
    """

    metric: str
    chunks: tuple[str, ...]
    testable: bool
    reason: str | None = None
    statistic: float | None = None
    df_num: int | None = None
    df_denom: float | None = None
    p_value: float | None = None
    p_value_f: float | None = None
    cov_type: str | None = None
    interactions: tuple[Interaction, ...] = ()
    skipped_pairs: tuple[tuple[str, str], ...] = ()
    alpha: float = ALPHA
    min_cell: int = MIN_PAIR_CELL
    bootstrap_draws: int = BOOTSTRAP_DRAWS
    bootstrap_seed: int = BOOTSTRAP_SEED

    @property
    def rejected(self) -> bool:
        """Additivity rejected at ``alpha`` (False when not testable)."""
        return self.testable and self.p_value is not None and self.p_value < self.alpha

    def largest(self, count: int = LARGEST) -> list[Interaction]:
        """The ``count`` interactions of largest |γ|."""
        return list(self.interactions[:count])

    def summary_lines(self) -> list[str]:
        """The lines the gate summary prints: the test, a warning when rejected, the largest interactions."""
        if not self.testable:
            return [f"additivity ({self.metric}): not testable: {self.reason}"]
        lines = [(f"additivity ({self.metric}, {len(self.interactions)} pairwise interactions of "
                  f"{len(self.chunks)} selected chunks, {self.cov_type}): F({self.df_num}, {self.df_denom:g}) = "
                  f"{self.statistic:.3f}, wild-bootstrap p = {self.p_value:.4g} (F reference p = {self.p_value_f:.4g})")]
        if self.rejected:
            lines.append(f"WARNING: additivity rejected at alpha = {self.alpha}: the chunks interact, so beta is an "
                         "average over the other chunks' masks, not each chunk's effect within the selected bank")
        for item in self.largest():
            lines.append(f"  {item.a} x {item.b}: {item.coef:+.4f} [{item.ci95[0]:+.4f}, {item.ci95[1]:+.4f}] "
                         f"p = {item.p_value:.3g} ({item.together} rows together)")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (``rejected`` included)."""
        return {"metric": self.metric, "chunks": list(self.chunks), "testable": self.testable, "reason": self.reason,
                "statistic": self.statistic, "df_num": self.df_num, "df_denom": self.df_denom,
                "p_value": self.p_value, "p_value_f": self.p_value_f, "alpha": self.alpha, "rejected": self.rejected,
                "cov_type": self.cov_type, "min_cell": self.min_cell,
                "bootstrap": {"method": "wild_rademacher_restricted", "draws": self.bootstrap_draws,
                              "seed": self.bootstrap_seed},
                "interactions": [i.to_dict() for i in self.interactions],
                "skipped_pairs": [list(p) for p in self.skipped_pairs]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AdditivityTest":
        """Parse :meth:`to_dict`'s record (``rejected`` is recomputed)."""
        return cls(metric=str(data["metric"]), chunks=tuple(data["chunks"]), testable=bool(data["testable"]),
                   reason=data.get("reason"), statistic=data.get("statistic"), df_num=data.get("df_num"),
                   df_denom=data.get("df_denom"), p_value=data.get("p_value"), p_value_f=data.get("p_value_f"),
                   cov_type=data.get("cov_type"),
                   interactions=tuple(Interaction.from_dict(i) for i in data.get("interactions", [])),
                   skipped_pairs=tuple((str(a), str(b)) for a, b in data.get("skipped_pairs", [])),
                   alpha=float(data.get("alpha", ALPHA)), min_cell=int(data.get("min_cell", MIN_PAIR_CELL)),
                   bootstrap_draws=int(data.get("bootstrap", {}).get("draws", BOOTSTRAP_DRAWS)),
                   bootstrap_seed=int(data.get("bootstrap", {}).get("seed", BOOTSTRAP_SEED)))


def _pairs(matrix: Any, columns: Sequence[str], chunks: Sequence[str],
           min_cell: int) -> tuple[list[tuple[int, int]], list[tuple[str, str]]]:
    """Column-index pairs passing the cell rule, and the named pairs failing it."""
    index = {c: j for j, c in enumerate(columns)}
    kept, skipped = [], []
    for a, b in combinations(chunks, 2):
        x, y = matrix[:, index[a]], matrix[:, index[b]]
        cells = [((x == u) & (y == v)).sum() for u in (0, 1) for v in (0, 1)]
        if min(cells) >= min_cell:
            kept.append((index[a], index[b]))
        else:
            skipped.append((a, b))
    return kept, skipped


def _wild_bootstrap_p(design: Any, outcome: Any, k: int, groups: Any, clustered: bool, draws: int,
                      seed: int) -> float:
    """Wild bootstrap p-value of the Wald statistic of the last ``p − k`` columns = 0.

    The statistic is ``γ̂ᵀ (R V Rᵀ)⁻¹ γ̂`` with V the HC3 sandwich, or the CR0 sandwich by ``groups`` when
    clustered (the small-sample factor is a constant and leaves the p-value unchanged). Bootstrap outcomes
    are the restricted fit plus its residuals times one Rademacher sign per group.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    # deferred: scipy is heavy to import
    from scipy.sparse import csr_matrix

    hat = np.linalg.solve(design.T @ design, design.T)  # (p, n): β̂ = hat @ y
    scale = np.ones(len(outcome)) if clustered else 1.0 / (1.0 - np.einsum("ij,ji->i", design, hat))
    main = design[:, :k]
    restricted = main @ np.linalg.lstsq(main, outcome, rcond=None)[0]
    residual = outcome - restricted
    count = int(groups.max()) + 1
    members = csr_matrix((np.ones(len(outcome)), (groups, np.arange(len(outcome)))), shape=(count, len(outcome)))
    weights = hat[k:].T  # (n, q): row i's weight in γ̂
    q = weights.shape[1]

    def wald(y: Any) -> Any:
        """Statistics of the outcome columns ``y`` (n × draws)."""
        errors = (y - design @ (hat @ y)) * scale[:, None]
        gamma = (hat[k:] @ y).T  # (draws, q)
        draws = y.shape[1]
        scores = members @ (weights[:, :, None] * errors[:, None, :]).reshape(len(outcome), q * draws)
        scores = np.ascontiguousarray(np.asarray(scores).reshape(count, q, draws).transpose(2, 1, 0))  # (draws, q, G)
        middle = np.matmul(scores, scores.transpose(0, 2, 1))  # (draws, q, q): R V Rᵀ up to a constant
        return np.einsum("dq,dq->d", gamma, np.linalg.solve(middle, gamma[:, :, None])[:, :, 0])

    observed = wald(outcome[:, None])[0]
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(count, draws))[groups]
    boot = np.concatenate([wald(restricted[:, None] + residual[:, None] * signs[:, i:i + 100])
                           for i in range(0, draws, 100)])
    return float((1 + np.sum(boot >= observed * (1 - 1e-12))) / (draws + 1))


def fit_additivity(
    X: Any,
    y: Sequence[float],
    columns: Sequence[str],
    chunks: Sequence[str],
    *,
    clusters: Sequence[Any] | None = None,
    metric: str = "reward",
    alpha: float = ALPHA,
    min_cell: int = MIN_PAIR_CELL,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = BOOTSTRAP_SEED,
) -> AdditivityTest:
    """Test the gate's additive model against its pairwise interactions among ``chunks``.

    Parameters
    ----------
    X, y, columns, clusters : the gate's design, paired deltas, column ids and task ids per row, as given to
        :func:`~intraskill.gate.ols.fit_paired_delta` (the covariance follows the same HC3/cluster rule).
    chunks : the chunks whose pairwise interactions are tested (the gate's selected ones); kept in column order.
    metric : the outcome's name, recorded.
    alpha : level of the test (``rejected`` is ``p < alpha``).
    min_cell : rows each of a pair's four cells needs (see the module docstring).
    draws, seed : the wild bootstrap's draws and seed base (the generator is ``seed32(f"{seed}:additivity:{metric}")``).

    Examples
    --------
    >>> rows = [[a, b] for a in (0, 1) for b in (0, 1)] * 10
    >>> deltas = [0.2 * a + 0.1 * b + 0.3 * a * b + 0.01 * (i % 3 - 1) for i, (a, b) in enumerate(rows)]
    >>> test = fit_additivity(rows, deltas, ["a", "b"], ["a", "b"])
    >>> round(test.interactions[0].coef, 2), test.rejected
    (0.3, True)
    """
    # deferred: numpy is heavy to import
    import numpy as np

    # deferred: statsmodels is heavy to import
    import statsmodels.api as sm

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}")
    if draws < 99:
        raise ValueError(f"draws: the wild bootstrap needs at least 99 draws, got {draws}")
    unknown = [c for c in chunks if c not in columns]
    if unknown:
        raise ValueError(f"chunks: {unknown} are not design columns")
    main = fit_paired_delta(X, y, columns, clusters=clusters)  # validates X, y and clusters
    ordered = tuple(c for c in columns if c in set(chunks))
    matrix, outcome = np.asarray(X, dtype=float), np.asarray(y, dtype=float)

    def untestable(reason: str, skipped: Sequence[tuple[str, str]] = ()) -> AdditivityTest:
        return AdditivityTest(metric=metric, chunks=ordered, testable=False, reason=reason,
                              skipped_pairs=tuple(skipped), alpha=alpha, min_cell=min_cell, bootstrap_draws=draws,
                              bootstrap_seed=seed)

    if len(ordered) < 2:
        return untestable(f"{len(ordered)} selected chunk(s); interactions need at least two")
    pairs, skipped = _pairs(matrix, columns, ordered, min_cell)
    if not pairs:
        return untestable(f"no pair of the {len(ordered)} selected chunks has >= {min_cell} rows in each of its "
                          "four (shown, not shown) cells", skipped)
    design = np.column_stack([matrix] + [matrix[:, a] * matrix[:, b] for a, b in pairs])
    n, p = design.shape
    if n <= p or np.linalg.matrix_rank(design) < p:
        return untestable(f"the interaction design ({n} rows, {p} columns) does not have full column rank", skipped)
    base = sm.OLS(outcome, design, hasconst=False).fit()
    clustered = main.cov_type == "cluster"
    groups = np.arange(n)
    if clustered and clusters is not None:
        groups = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
    if clustered:
        if groups.max() < len(pairs):
            return untestable(f"{groups.max() + 1} task clusters cannot test {len(pairs)} interactions "
                              "(needs clusters - 1 >= interactions)", skipped)
        robust = base.get_robustcov_results(cov_type="cluster", groups=groups, use_t=True)
    else:
        robust = base.get_robustcov_results(cov_type="HC3", use_t=True)
    q, k = len(pairs), matrix.shape[1]
    restriction = np.zeros((q, p))
    restriction[np.arange(q), k + np.arange(q)] = 1.0
    wald = robust.f_test(restriction)
    bounds = robust.conf_int(alpha=0.05)
    interactions = [
        Interaction(a=columns[j], b=columns[l], coef=float(robust.params[k + i]), std_err=float(robust.bse[k + i]),
                    ci95=(float(bounds[k + i][0]), float(bounds[k + i][1])), p_value=float(robust.pvalues[k + i]),
                    together=int((matrix[:, j] * matrix[:, l]).sum()))
        for i, (j, l) in enumerate(pairs)]
    interactions.sort(key=lambda item: (-abs(item.coef), item.a, item.b))
    statistic, p_value_f = float(np.squeeze(wald.fvalue)), float(wald.pvalue)
    if not (math.isfinite(statistic) and math.isfinite(p_value_f)):
        return untestable("the residuals vanish: no error variance to test against", skipped)
    try:
        p_value = _wild_bootstrap_p(design, outcome, k, groups, clustered, draws,
                                    seed32(f"{seed}:additivity:{metric}"))
    except np.linalg.LinAlgError:
        return untestable("a bootstrap draw's interaction covariance is singular (too few task clusters)", skipped)
    return AdditivityTest(metric=metric, chunks=ordered, testable=True, statistic=statistic, df_num=int(wald.df_num),
                          df_denom=float(wald.df_denom), p_value=p_value, p_value_f=p_value_f,
                          cov_type=main.cov_type, interactions=tuple(interactions), skipped_pairs=tuple(skipped),
                          alpha=alpha, min_cell=min_cell, bootstrap_draws=draws, bootstrap_seed=seed)
