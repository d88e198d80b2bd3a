"""The control experiment: learning curves per arm with seed bands, each arm's test level and the paired
arm differences with their seeds × tasks intervals and the declared family's verdicts."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

ARM_COLORS = {"coevolve": "#d95f02", "grpo": "#7f7f7f", "fixed": "#4c72b0", "nomask": "#55a868",
              "uniform": "#b07aa1", "skill1": "#8c564b"}
"""One colour per built-in arm (others cycle through matplotlib's default colours)."""
METRIC_SCALE = {"success": 100.0, "reward": 1.0}


def arm_color(arm: str, index: int) -> str:
    return ARM_COLORS.get(arm, f"C{index % 10}")


def control_learning_curves(curves: "pd.DataFrame | Sequence[Mapping[str, Any]]", *,
                            language: str = "en") -> "Figure":
    """Bare val success at the warm start and after each round, per arm: the mean over seeds (line), the
    seeds' range (band) and each seed (thin line).

    ``curves``: one row per (``arm``, ``seed``, ``point``) with ``val_success`` (0–1); point 0 is the warm
    start, point r the end of round r − 1 (:meth:`~intraskill.experiment.results.MatrixResult.learning_curves`).
    """
    data = frame(curves, ("arm", "seed", "point", "val_success"), "curves")
    labels = Labeller.for_language(language)
    with labels.building():
        figure = new_figure(7.5, 4.2)
        axes = figure.subplots()
        for index, (arm, rows) in enumerate(data.groupby("arm", sort=False)):
            color = arm_color(str(arm), index)
            table = rows.pivot_table(index="point", columns="seed", values="val_success") * 100.0
            for seed in table.columns:
                axes.plot(table.index, table[seed], color=color, linewidth=0.6, alpha=0.35)
            axes.fill_between(table.index, table.min(axis=1), table.max(axis=1), color=color, alpha=0.15)
            axes.plot(table.index, table.mean(axis=1), marker="o", color=color, linewidth=2.0,
                      label=f"{arm} (n = {table.shape[1]})")
        points = sorted(data["point"].unique())
        axes.set_xticks(points, [labels("curve_warmstart") if p == 0 else labels("curve_after_round", round=p - 1)
                                 for p in points])
        axes.set_ylabel(labels("val_success_pct"))
        axes.set_title(labels("title_control_curves"))
        axes.legend(loc="lower right")
    return labels.finish(figure)


def control_outcomes(levels: "pd.DataFrame | Sequence[Mapping[str, Any]]",
                     comparisons: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, metric: str = "success",
                     condition: str = "deployed", language: str = "en") -> "Figure":
    """Left: each arm's test level (mean over seeds and tasks, 95 % CI, each seed as a dot).
    Right: the paired differences ``a − b`` with their 95 % CI and verdict (``a > b`` / ``a < b`` where the declared
    family supports it, "no difference of m points or more" where the primary contrast's declared equivalence
    holds (``equivalent``, its ``margin`` m), else ``unresolved`` or ``exploratory``).

    ``levels`` as :meth:`~intraskill.experiment.results.MatrixResult.arm_intervals`, ``comparisons`` as
    :meth:`~intraskill.experiment.results.MatrixResult.comparisons`; both are filtered to ``metric`` and
    ``condition``.
    """
    if metric not in METRIC_SCALE:
        raise ValueError(f"metric must be one of {tuple(METRIC_SCALE)}, got {metric!r}")
    level = frame(levels, ("arm", "condition", "metric", "mean", "ci_low", "ci_high", "per_seed"), "levels")
    pairs = frame(comparisons, ("comparison", "condition", "metric", "mean", "ci_low", "ci_high", "verdict"),
                  "comparisons")
    level = level[(level.metric == metric) & (level.condition == condition)]
    pairs = pairs[(pairs.metric == metric) & (pairs.condition == condition)]
    labels = Labeller.for_language(language)
    scale = METRIC_SCALE[metric]
    with labels.building():
        figure = new_figure(11.0, max(3.2, 0.45 * max(len(level), len(pairs)) + 1.6))
        left, right = figure.subplots(1, 2, width_ratios=(1.0, 1.3))
        rows = list(range(len(level)))[::-1]
        for row, (index, record) in zip(rows, enumerate(level.to_dict("records"))):
            color = arm_color(record["arm"], index)
            mean, low, high = (scale * record[k] for k in ("mean", "ci_low", "ci_high"))
            left.errorbar([mean], [row], xerr=[[mean - low], [high - mean]], fmt="o", capsize=3, color=color)
            left.scatter([scale * v for v in record["per_seed"]], [row + 0.18] * len(record["per_seed"]), marker="v",
                         s=28, color=color, alpha=0.7)
            left.annotate(f"{mean:.1f}" if metric == "success" else f"{mean:.3f}", (high, row), xytext=(4, 0),
                          textcoords="offset points", va="center", fontsize=8)
        left.set_yticks(rows, list(level["arm"]))
        left.margins(x=0.25)
        left.set_xlabel(labels(f"control_metric_{metric}"))
        left.set_title(_wrapped(labels("title_control_levels", metric=labels(f"control_metric_{metric}"),
                                       condition=labels(f"control_condition_{condition}")), language), fontsize=9.5)
        rows = list(range(len(pairs)))[::-1]
        mean, low, high = (scale * pairs[k].astype(float) for k in ("mean", "ci_low", "ci_high"))
        right.errorbar(mean, rows, xerr=[mean - low, high - mean], fmt="o", capsize=3, color="#1b3a6b")
        right.axvline(0.0, color="grey", linewidth=0.8)
        margins = pairs["margin"] if "margin" in pairs else [None] * len(pairs)
        for row, value, lo, hi, verdict, margin in zip(rows, mean, low, high, pairs["verdict"], margins):
            note = f"{value:+.1f} [{lo:+.1f}, {hi:+.1f}]" if metric == "success" else f"{value:+.3f}"
            word = labels("control_verdict_within", margin=f"{100 * margin:g}") if verdict == "equivalent" else \
                labels(f"control_verdict_{verdict}") if verdict in ("unresolved", "exploratory") else verdict
            right.annotate(f"{note}  {word}", (hi, row), xytext=(4, 0), textcoords="offset points",
                           va="center", fontsize=7.5)
        right.set_yticks(rows, list(pairs["comparison"]))
        right.margins(x=0.45)
        right.set_xlabel(labels(f"control_delta_{metric}"))
        right.set_title(_wrapped(labels("title_control_contrasts", condition=labels(f"control_condition_{condition}")),
                                 language), fontsize=9.5)
    return labels.finish(figure)


TITLE_WIDTH = {"en": 56, "zh": 28}
"""Characters per title line (a CJK character is about two Latin ones wide)."""


def _wrapped(title: str, language: str) -> str:
    """A panel title broken into lines that fit its half of the figure."""
    return textwrap.fill(title, TITLE_WIDTH[language])
