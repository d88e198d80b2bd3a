"""Test results: the four-condition bars and the paired differences with their bootstrap CIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.labels import LABELS
from intraskill.plots.style import COLORS, Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

METRIC_SCALE = {"success": 100.0, "reward": 1.0}
"""Display scale per metric: success in percentage points, reward as is."""


def _arm_label(labels: Labeller, arm: str) -> str:
    key = f"arm_{arm}"
    return labels(key) if key in LABELS else arm


def four_condition_results(
    conditions: "pd.DataFrame | Sequence[Mapping[str, Any]]",
    comparisons: "pd.DataFrame | Sequence[Mapping[str, Any]]",
    *,
    metric: str = "success",
    language: str = "en",
) -> "Figure":
    """Four-condition bars (left) and paired differences ``b − a`` with 95% CI whiskers (right).

    Parameters
    ----------
    conditions : DataFrame or records
        One row per arm: ``arm``, ``success_rate`` (0–1), ``reward_mean``; optional ``n``.
    comparisons : DataFrame or records
        One row per paired comparison: ``a``, ``b`` (arm names), ``<metric>_diff``, ``<metric>_lo``,
        ``<metric>_hi`` (success as a 0–1 difference, reward as is); optional transition counts
        ``0->1`` and ``1->0``, annotated next to each point.
    metric : {"success", "reward"}
        Which difference the right panel shows.
    language : {"en", "zh"}
        Label language (``zh`` degrades to English without a CJK font).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = four_condition_results([{"arm": "base_free", "success_rate": .5, "reward_mean": .5}],
    ...                    [{"a": "base_free", "b": "iter80_free", "success_diff": .3,
    ...                      "success_lo": .25, "success_hi": .35}])
    """
    if metric not in METRIC_SCALE:
        raise ValueError(f"metric must be one of {tuple(METRIC_SCALE)}, got {metric!r}")
    arms = frame(conditions, ("arm", "success_rate", "reward_mean"), "conditions")
    pairs = frame(comparisons, ("a", "b", f"{metric}_diff", f"{metric}_lo", f"{metric}_hi"), "comparisons")
    labels = Labeller.for_language(language)
    scale = METRIC_SCALE[metric]
    with labels.building():
        figure = new_figure(11.0, 4.2)
        left, right = figure.subplots(1, 2, width_ratios=(1.0, 1.25))
        names = [_arm_label(labels, arm) for arm in arms["arm"]]
        heights = 100.0 * arms["success_rate"].astype(float)
        bars = left.bar(names, heights, color=[COLORS.get(arm, COLORS["line"]) for arm in arms["arm"]])
        for bar, success, reward in zip(bars, heights, arms["reward_mean"].astype(float)):
            left.annotate(
                f"{success:.2f}%\nr = {reward:.4f}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        left.set_ylim(0, max(100.0, float(heights.max()) * 1.15))
        left.set_ylabel(labels("success_pct"))
        n = int(arms["n"].iloc[0]) if "n" in arms else None
        left.set_title(labels("title_test", n=n if n is not None else "—"))
        left.tick_params(axis="x", labelrotation=12)

        diff = scale * pairs[f"{metric}_diff"].astype(float)
        low = scale * pairs[f"{metric}_lo"].astype(float)
        high = scale * pairs[f"{metric}_hi"].astype(float)
        rows = list(range(len(pairs)))[::-1]
        right.errorbar(diff, rows, xerr=[diff - low, high - diff], fmt="o", capsize=3, color=COLORS["smooth"])
        right.axvline(0.0, color="grey", linewidth=0.8)
        for row, value, lo, hi, record in zip(rows, diff, low, high, pairs.to_dict("records")):
            note = f"{value:+.2f} [{lo:+.2f}, {hi:+.2f}]" if metric == "success" else f"{value:+.4f}"
            if "0->1" in record and "1->0" in record:
                note += f"  ↑{int(record['0->1'])} ↓{int(record['1->0'])}"
            right.annotate(note, (hi, row), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7.5)
        right.set_yticks(
            rows, [f"{_arm_label(labels, b)} − {_arm_label(labels, a)}" for a, b in zip(pairs["a"], pairs["b"])]
        )
        right.margins(x=0.35)
        right.set_xlabel(labels("delta_success" if metric == "success" else "delta_reward"))
        right.set_title(labels("title_paired"))
    return labels.finish(figure)
