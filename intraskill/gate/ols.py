"""The gate estimator ``paired_delta_ols_main_effects_no_intercept`` (docs/method.md §5.4).

``R_i − B_i = C_iᵀβ + ε_i``: y is the masked-minus-bare outcome of the same validation task, X the 0/1
mask of which interventions were injected. Plain unweighted OLS, no intercept, no centering; an all-zero
mask is a valid row. Coefficients with ``|β| ≤ 1e-12`` are zeroed. Selection uses the point estimates only;
the HC3 (or task-clustered) standard errors reported here are diagnostics, as the reference suggests.

The design is checked for full column rank *before* any rollout (:func:`check_design_rank`), so a singular
mask assignment aborts early with ``rank deficient; use a different mask seed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.shop.reward import PRIMARY_REWARD

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

ESTIMATOR_NAME = "paired_delta_ols_main_effects_no_intercept"
ZERO_TOLERANCE = 1e-12
"""Coefficients with ``|β| <= ZERO_TOLERANCE`` are reported as exactly 0.0 (reference §5.4)."""


class RankDeficientDesignError(ValueError):
    """The mask design does not have full column rank (or has no more rows than columns)."""


def _design_matrix(X: Any, columns: Sequence[str]) -> "np.ndarray":
    # deferred: numpy is heavy to import
    import numpy as np

    matrix = np.asarray(X, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"X must be a 2-D (n, k) mask matrix, got shape {matrix.shape}")
    if matrix.shape[1] != len(columns):
        raise ValueError(f"X has {matrix.shape[1]} columns but `columns` names {len(columns)}")
    if len(set(columns)) != len(columns):
        raise ValueError("`columns` contains duplicate intervention ids")
    if not np.isin(matrix, (0.0, 1.0)).all():
        raise ValueError("X must contain only 0/1 mask entries")
    return matrix


def check_design_rank(X: Any, columns: Sequence[str]) -> int:
    """Validate a 0/1 mask design before any rollout; return its rank (= k).

    Parameters
    ----------
    X : array-like, shape (n, k)
        Mask matrix, one row per (task, sample), one 0/1 column per intervention version.
    columns : sequence of str
        The k intervention ids, in column order.

    Raises
    ------
    RankDeficientDesignError
        If ``n <= k`` or ``rank(X) < k`` (all-zero columns are named in the message).
    ValueError
        If the shape, the column names or the entries are malformed.
    """
    # deferred: numpy is heavy to import
    import numpy as np

    matrix = _design_matrix(X, columns)
    n, k = matrix.shape
    if n <= k:
        raise RankDeficientDesignError(
            f"design has n={n} rows for k={k} columns (n must exceed k): "
            "rank deficient; use a different mask seed"
        )
    rank = int(np.linalg.matrix_rank(matrix))
    if rank < k:
        empty = [columns[j] for j in range(k) if not matrix[:, j].any()]
        detail = f"; all-zero columns: {empty}" if empty else ""
        raise RankDeficientDesignError(
            f"design of shape ({n}, {k}) has rank {rank}{detail}: rank deficient; use a different mask seed"
        )
    return rank


@dataclass(frozen=True)
class PairedDeltaResult:
    """Fit of the paired-delta OLS, shaped like a statsmodels results object.

    Attributes
    ----------
    columns : tuple of str
        Intervention ids in design-column order.
    params : dict
        Column → β (``|β| <= 1e-12`` zeroed).
    bse : dict
        Column → robust standard error under ``cov_type``.
    bse_hc3 : dict
        Column → HC3 standard error (equals ``bse`` when ``cov_type == "HC3"``).
    cov_type : str
        ``"HC3"``, or ``"cluster"`` when task clusters repeat.
    nobs, rank : int
        Rows used and the design rank (= k).
    """

    columns: tuple[str, ...]
    params: dict[str, float]
    bse: dict[str, float]
    bse_hc3: dict[str, float]
    cov_type: str
    nobs: int
    rank: int
    _robust: Any = field(repr=False, compare=False)

    def conf_int(self, alpha: float = 0.05) -> dict[str, tuple[float, float]]:
        """Column → (lower, upper) interval at level ``1 − alpha``: ``β ± t·bse`` under ``cov_type``.

        The t quantile has ``n − k`` degrees of freedom for HC3 and ``G − 1`` (task clusters) when
        clustered.
        """
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        bounds = self._robust.conf_int(alpha=alpha)
        return {name: (float(lo), float(hi)) for name, (lo, hi) in zip(self.columns, bounds)}

    def summary(self) -> "pd.DataFrame":
        """One row per column: ``coef, std_err, ci_lower, ci_upper`` (95%)."""
        # deferred: pandas is heavy to import
        import pandas as pd

        intervals = self.conf_int()
        return pd.DataFrame(
            {
                "coef": [self.params[c] for c in self.columns],
                "std_err": [self.bse[c] for c in self.columns],
                "ci_lower": [intervals[c][0] for c in self.columns],
                "ci_upper": [intervals[c][1] for c in self.columns],
            },
            index=pd.Index(self.columns, name="intervention_id"),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (``intercept`` is the 0.0 metadata field of the release format)."""
        return {
            "estimator": ESTIMATOR_NAME,
            "intercept": 0.0,
            "columns": list(self.columns),
            "params": dict(self.params),
            "bse": dict(self.bse),
            "bse_hc3": dict(self.bse_hc3),
            "conf_int_95": {c: list(ci) for c, ci in self.conf_int().items()},
            "cov_type": self.cov_type,
            "nobs": self.nobs,
            "rank": self.rank,
        }


def fit_paired_delta(
    X: Any, y: Sequence[float], columns: Sequence[str], *, clusters: Sequence[Any] | None = None
) -> PairedDeltaResult:
    """Fit ``y = Xβ + ε`` by OLS without intercept (statsmodels), with HC3 or task-clustered errors.

    Parameters
    ----------
    X : array-like, shape (n, k)
        0/1 mask matrix; checked with :func:`check_design_rank`.
    y : sequence of float, length n
        Paired deltas ``R_i − B_i``.
    columns : sequence of str
        Intervention ids in column order.
    clusters : sequence, optional
        Task ids per row. When any task repeats (several samples or rounds share a bare run), the
        covariance is clustered by task; otherwise HC3 is used.

    Examples
    --------
    >>> fit = fit_paired_delta([[1, 0], [0, 1], [1, 1], [0, 0]], [0.3, -0.2, 0.1, 0.0], ["a", "b"])
    >>> round(fit.params["a"], 6), round(fit.params["b"], 6)
    (0.3, -0.2)
    """
    # deferred: numpy is heavy to import
    import numpy as np

    # deferred: statsmodels is heavy to import
    import statsmodels.api as sm

    matrix = _design_matrix(X, columns)
    outcome = np.asarray(y, dtype=float)
    if outcome.shape != (matrix.shape[0],):
        raise ValueError(f"y has shape {outcome.shape}, expected ({matrix.shape[0]},) to match X")
    if not np.isfinite(outcome).all():
        raise ValueError("y contains a non-finite value")
    rank = check_design_rank(matrix, columns)
    base = sm.OLS(outcome, matrix, hasconst=False).fit()
    hc3 = base.get_robustcov_results(cov_type="HC3", use_t=True)
    robust, cov_type = hc3, "HC3"
    if clusters is not None:
        if len(clusters) != matrix.shape[0]:
            raise ValueError(f"clusters has {len(clusters)} entries, expected {matrix.shape[0]}")
        if len(set(clusters)) < len(clusters):
            groups = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
            robust = base.get_robustcov_results(cov_type="cluster", groups=groups, use_t=True)
            cov_type = "cluster"
    names = tuple(columns)
    params = {c: (0.0 if abs(b) <= ZERO_TOLERANCE else float(b)) for c, b in zip(names, base.params)}
    return PairedDeltaResult(
        columns=names,
        params=params,
        bse={c: float(s) for c, s in zip(names, robust.bse)},
        bse_hc3={c: float(s) for c, s in zip(names, hc3.bse)},
        cov_type=cov_type,
        nobs=int(base.nobs),
        rank=rank,
        _robust=robust,
    )


@dataclass(frozen=True)
class RefitReport:
    """Refit of one gate ``contributions.json`` against its stored estimates.

    ``max_abs_diff`` is the largest ``|β_refit − β_stored|`` over every metric and column;
    ``metric_max_abs_diff`` breaks it down per metric.
    """

    columns: tuple[str, ...]
    observations: int
    rank: int
    max_abs_diff: float
    metric_max_abs_diff: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """``{"rounds": 1, "columns": k, "observations": n, "max_abs_diff": x, ...}``."""
        return {
            "rounds": 1,
            "columns": len(self.columns),
            "observations": self.observations,
            "max_abs_diff": self.max_abs_diff,
            "rank": self.rank,
            "metrics": dict(self.metric_max_abs_diff),
            "column_ids": list(self.columns),
        }


def design_from_contributions(contributions: Mapping[str, Any]) -> tuple[list[str], list[list[int]]]:
    """Columns (key order of ``estimates.reward.coefficients``) and the ``observations_table`` masks."""
    try:
        columns = list(contributions["estimates"][PRIMARY_REWARD]["coefficients"])
        rows = contributions["observations_table"]
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"contributions lacks the field {error}; expected estimates.reward and observations_table"
        ) from error
    masks = []
    for index, row in enumerate(rows):
        mask = row.get("mask")
        if not isinstance(mask, list) or len(mask) != len(columns):
            raise ValueError(f"observations_table[{index}].mask must be a list of {len(columns)} 0/1 values")
        masks.append(mask)
    return columns, masks


def _outcomes(rows: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    if metric == PRIMARY_REWARD:
        return [float(row["delta_reward"]) for row in rows]
    try:
        return [float(row["delta_reward_detail"][metric]) for row in rows]
    except KeyError as error:
        raise ValueError(f"observations_table row lacks delta_reward_detail[{metric!r}]") from error


def refit_contributions(contributions: Mapping[str, Any]) -> RefitReport:
    """Refit every metric of a gate ``contributions.json`` and compare with its stored coefficients.

    X is the ``observations_table[*].mask`` matrix, y is ``delta_reward`` for ``reward`` and
    ``delta_reward_detail[m]`` for every other metric in ``estimates``.
    """
    columns, masks = design_from_contributions(contributions)
    rows = contributions["observations_table"]
    clusters = [row.get("task_id") for row in rows]
    per_metric: dict[str, float] = {}
    rank = 0
    for metric, estimate in contributions["estimates"].items():
        stored = estimate["coefficients"]
        if list(stored) != columns:
            raise ValueError(f"estimates.{metric}.coefficients keys differ from the reward column order")
        fit = fit_paired_delta(masks, _outcomes(rows, metric), columns, clusters=clusters)
        rank = fit.rank
        per_metric[metric] = max(abs(fit.params[c] - float(stored[c])) for c in columns)
    return RefitReport(
        columns=tuple(columns),
        observations=len(rows),
        rank=rank,
        max_abs_diff=max(per_metric.values()),
        metric_max_abs_diff=per_metric,
    )


def refit_path(path: str | Path) -> dict[str, Any]:
    """Refit one ``contributions.json``, or every ``round-*/gate/contributions.json`` under a directory.

    Returns the single-file :meth:`RefitReport.to_dict`, or for a directory
    ``{"rounds": [names], "columns": [k…], "observations": [n…], "max_abs_diff": max,
    "per_round": {…}}``.
    """
    target = Path(path)
    if target.is_file():
        return refit_contributions(json.loads(target.read_text(encoding="utf-8"))).to_dict()
    files = sorted(target.glob("round-*/gate/contributions.json"))
    if not files:
        raise FileNotFoundError(f"{target} is neither a contributions.json nor a folder with round-*/gate/")
    reports = {
        f.parent.parent.name: refit_contributions(json.loads(f.read_text(encoding="utf-8"))) for f in files
    }
    return {
        "rounds": list(reports),
        "columns": [len(r.columns) for r in reports.values()],
        "observations": [r.observations for r in reports.values()],
        "max_abs_diff": max(r.max_abs_diff for r in reports.values()),
        "per_round": {name: r.to_dict() for name, r in reports.items()},
    }
