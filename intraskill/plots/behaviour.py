"""Behaviour: paired metric differences with CIs, and per-turn statistics by page phase."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

DECREASE, INCREASE = "#4c72b0", "#dd8452"
"""Colours of differences whose CI lies wholly below / above zero (others grey)."""
PHASE_ORDER = ("search_home", "search_results", "product_detail", "protocol_repair")
"""Page phases of the release behaviour analysis, in workflow order."""


def behaviour_deltas(
    paired: "pd.DataFrame | Sequence[Mapping[str, Any]]",
    *,
    a_name: str = "Base",
    b_name: str = "Iter80",
    language: str = "en",
) -> "Figure":
    """Paired differences ``b − a`` per behaviour metric, as a percentage of the reference mean ``a``.

    Metrics live on different scales (tokens vs. pagination clicks), so each difference and its CI are
    divided by the same reference mean; the annotation gives the raw difference and both means.

    Parameters
    ----------
    paired : DataFrame or records
        ``metric``, ``a_mean``, ``b_mean``, ``difference``, ``ci_lo``, ``ci_hi`` (e.g. the release
        ``behavior.json`` ``paired.fixed_val_all.metrics``, a = Base, b = Iter80). Rows with
        ``a_mean == 0`` cannot be scaled and are left out.
    a_name, b_name : str
        Names of the reference and the compared cohort, shown in the title.
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = frame(paired, ("metric", "a_mean", "b_mean", "difference", "ci_lo", "ci_hi"), "paired")
    table = table[table["a_mean"].astype(float) != 0.0].reset_index(drop=True)
    if table.empty:
        raise ValueError("paired: every row has a_mean == 0; nothing can be scaled")
    labels = Labeller.for_language(language)
    base = table["a_mean"].astype(float).abs()
    diff = 100.0 * table["difference"].astype(float) / base
    low = 100.0 * table["ci_lo"].astype(float) / base
    high = 100.0 * table["ci_hi"].astype(float) / base
    rows = list(range(len(table)))[::-1]
    with labels.building():
        figure = new_figure(9.0, 0.32 * len(table) + 1.6)
        axes = figure.subplots()
        colors = [DECREASE if h < 0 else INCREASE if lo > 0 else COLORS["retired"] for lo, h in zip(low, high)]
        for row, value, lo, hi, color in zip(rows, diff, low, high, colors):
            axes.errorbar(value, row, xerr=[[value - lo], [hi - value]], fmt="o", color=color, capsize=2.5,
                          markersize=4)
        axes.axvline(0.0, color="grey", linewidth=0.8)
        for row, record, upper in zip(rows, table.to_dict("records"), high):
            axes.annotate(
                f"{record['difference']:+.4g}  ({record['a_mean']:.4g} → {record['b_mean']:.4g})",
                (upper, row), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7,
            )
        axes.set_yticks(rows, [labels.metric("behaviour_", str(m)) for m in table["metric"]])
        axes.margins(x=0.3)
        axes.set_xlabel(labels("relative_delta"))
        axes.set_title(labels("title_behaviour", a=a_name, b=b_name))
    return labels.finish(figure)


def behaviour_phases(
    phases: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en"
) -> "Figure":
    """Grouped bars of the per-turn mean by page phase and round, with the p90 as a marker.

    Parameters
    ----------
    phases : DataFrame or records
        ``round``, ``phase``, ``mean``, ``p90``; optional ``n`` (turns), printed under each group
        (e.g. the release ``behavior.json`` ``phases`` records).
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = frame(phases, ("round", "phase", "mean", "p90"), "phases")
    labels = Labeller.for_language(language)
    present = [p for p in PHASE_ORDER if p in set(table["phase"])]
    present += sorted(set(table["phase"]) - set(PHASE_ORDER))
    rounds = sorted(table["round"].unique())
    width = 0.8 / len(rounds)
    palette = ("#c6dbef", "#6baed6", "#2171b5", "#08306b", "#041a3a")
    with labels.building():
        figure = new_figure(9.0, 3.8)
        axes = figure.subplots()
        for offset, round_id in enumerate(rounds):
            part = table[table["round"] == round_id].set_index("phase")
            xs = [i + (offset - (len(rounds) - 1) / 2) * width for i, p in enumerate(present) if p in part.index]
            kept = [p for p in present if p in part.index]
            color = palette[offset % len(palette)]
            axes.bar(xs, part.loc[kept, "mean"].astype(float), width=width * 0.95, color=color,
                     label=labels("round_n", round=round_id))
            axes.scatter(xs, part.loc[kept, "p90"].astype(float), marker="_", s=120, color="black", zorder=3)
        axes.set_xticks(range(len(present)), [labels.metric("phase_", p) for p in present])
        axes.set_ylabel(labels("phase_value"))
        axes.set_title(labels("title_phases"))
        axes.legend(ncols=len(rounds), loc="upper left")
    return labels.finish(figure)
