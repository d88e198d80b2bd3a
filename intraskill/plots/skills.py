"""Skill evolution: bank size per gate and the gate's decisions (statuses) per round."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

STATUS_ORDER = ("selected", "retired", "non_positive", "rewrite_loser", "budget_excluded")
"""Gate statuses, bottom to top in the stacked bars (release ``chunk_contributions.csv`` values)."""


def bank_sizes(contributions: "pd.DataFrame") -> list[int]:
    """Chunks per bank S₀, S₁, …: the first round's current chunks, then each round's selected count."""
    rounds = sorted(contributions["round"].unique())
    first = contributions[(contributions["round"] == rounds[0]) & (contributions["kind"] == "current")]
    selected = [int((contributions[contributions["round"] == r]["status"] == "selected").sum()) for r in rounds]
    return [len(first), *selected]


def skill_evolution(
    contributions: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en"
) -> "Figure":
    """Bank size S₀…S_T (left) and per-round gate decisions, statuses stacked (right).

    Parameters
    ----------
    contributions : DataFrame or records
        One row per gate design column: ``round``, ``kind`` (``current``/``candidate``) and ``status``
        (``selected``, ``retired``, ``non_positive``, ``rewrite_loser``, ``budget_excluded``), e.g. the
        release ``analysis/chunk_contributions.csv`` or a gate's ``contributions`` list.
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    table = frame(contributions, ("round", "kind", "status"), "contributions")
    unknown = sorted(set(table["status"]) - set(STATUS_ORDER))
    if unknown:
        raise ValueError(f"contributions: unknown status value(s) {unknown}; expected {STATUS_ORDER}")
    # deferred: matplotlib is heavy to import
    from matplotlib.ticker import MaxNLocator

    labels = Labeller.for_language(language)
    sizes = bank_sizes(table)
    rounds = sorted(table["round"].unique())
    with labels.building():
        figure = new_figure(10.0, 3.8)
        left, right = figure.subplots(1, 2)
        names = [labels("bank_label", index=index if index < len(sizes) - 1 else "T") for index in range(len(sizes))]
        left.plot(range(len(sizes)), sizes, color=COLORS["line"], marker="o")
        for index, size in enumerate(sizes):
            left.annotate(str(size), (index, size), xytext=(0, 6), textcoords="offset points", ha="center")
        left.set_xticks(range(len(sizes)), names)
        left.set_ylim(0, max(sizes) * 1.3)
        left.yaxis.set_major_locator(MaxNLocator(integer=True))
        right.yaxis.set_major_locator(MaxNLocator(integer=True))
        left.set_ylabel(labels("chunks_in_bank"))
        left.set_title(labels("title_skill_size"))

        bottoms = [0] * len(rounds)
        for status in STATUS_ORDER:
            counts = [int(((table["round"] == r) & (table["status"] == status)).sum()) for r in rounds]
            if not any(counts):
                continue
            right.bar([str(r) for r in rounds], counts, bottom=bottoms, color=COLORS[status],
                      label=labels(f"status_{status}"))
            bottoms = [b + c for b, c in zip(bottoms, counts)]
        for position, r in enumerate(rounds):
            current = int(((table["round"] == r) & (table["kind"] == "current")).sum())
            right.annotate(f"{current} → {sizes[position + 1]}", (position, bottoms[position]),
                           xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
        right.set_ylim(0, max(bottoms) * 1.2)
        right.set_xlabel(labels("gate_round"))
        right.set_ylabel(labels("interventions"))
        right.set_title(labels("title_gate_decisions"))
        right.legend(loc="upper right", ncols=2)
    return labels.finish(figure)
