"""Chunk contributions: β per intervention and gate round, with CIs where standard errors exist."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

Z_95 = 1.959963984540054
"""Two-sided 95% normal quantile, for CIs built from a standard error."""


def short_id(intervention_id: str) -> str:
    """``chunk-27a7e5bb9344`` → ``27a7e5bb``; ``online-ab35…`` → ``+ab35490e`` (candidates marked)."""
    prefix, _, tail = intervention_id.partition("-")
    if not tail:
        return intervention_id[:10]
    return ("+" if prefix == "online" else "") + tail[:8]


def _tick(record: Mapping[str, Any]) -> str:
    text = record.get("label")
    return text if isinstance(text, str) and text else short_id(str(record["intervention_id"]))


def _interval(record: Mapping[str, Any]) -> tuple[float, float] | None:
    low, high = record.get("ci_lo"), record.get("ci_hi")
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        return float(low), float(high)
    se = record.get("se")
    if se is not None and not math.isnan(se):
        beta = float(record["coefficient"])
        return beta - Z_95 * float(se), beta + Z_95 * float(se)
    return None


def chunk_contributions(
    contributions: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en"
) -> "Figure":
    """One panel per gate round: β of every design column, coloured by gate status.

    Parameters
    ----------
    contributions : DataFrame or records
        ``round``, ``intervention_id``, ``coefficient``, ``status``; optional ``label`` (tick text,
        default :func:`short_id`), and either ``ci_lo``/``ci_hi`` or ``se`` (HC3 or clustered standard
        error; the whisker is ±1.96·se). Rows without them get no whisker — the release gate files hold
        point estimates only.
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = frame(contributions, ("round", "intervention_id", "coefficient", "status"), "contributions")
    labels = Labeller.for_language(language)
    rounds = sorted(table["round"].unique())
    tallest = max(int((table["round"] == r).sum()) for r in rounds)
    with labels.building():
        figure = new_figure(3.0 * len(rounds) + 1.0, 0.28 * tallest + 1.8)
        axes_list = figure.subplots(1, len(rounds), squeeze=False)[0]
        seen: set[str] = set()
        whiskers = False
        for axes, round_id in zip(axes_list, rounds):
            records = table[table["round"] == round_id].to_dict("records")
            rows = list(range(len(records)))[::-1]
            for row, record in zip(rows, records):
                status = str(record["status"])
                color = COLORS.get(status, COLORS["line"])
                name = labels(f"status_{status}") if status not in seen else None
                seen.add(status)
                axes.barh(row, float(record["coefficient"]), color=color, label=name)
                interval = _interval(record)
                if interval is not None:
                    whiskers = True
                    beta = float(record["coefficient"])
                    axes.errorbar(beta, row, xerr=[[beta - interval[0]], [interval[1] - beta]],
                                  color="black", capsize=2, linewidth=0.8)
            axes.axvline(0.0, color="grey", linewidth=0.8)
            axes.set_yticks(rows, [_tick(record) for record in records], fontsize=7.5)
            axes.set_title(labels("round_n", round=round_id))
        for axes in axes_list:
            axes.set_xlabel(labels("beta") + (f"\n{labels('ci_note')}" if whiskers else ""))
        figure.legend(loc="outside lower center", ncols=5)
        figure.suptitle(labels("title_contributions"))
    return labels.finish(figure)
