"""Optimization: entropy, clip fraction and gradient norm per optimizer update, with round boundaries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, mark_boundaries, new_figure, round_starts

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

DEFAULT_UPDATE_METRICS = ("train/entropy_loss", "train/pg_clipfrac", "train/grad_norm")
GRAD_NORM_COLUMN = "train/grad_norm"


def optimization_curves(
    updates: "pd.DataFrame | Sequence[Mapping[str, Any]]",
    *,
    metrics: Sequence[str] = DEFAULT_UPDATE_METRICS,
    updates_per_round: int = 40,
    language: str = "en",
) -> "Figure":
    """One panel per optimizer metric against the update index; zero-gradient updates are marked.

    Parameters
    ----------
    updates : DataFrame or records
        One row per optimizer update: ``update`` and the metric columns (release
        ``analysis/wandb/optimizer_updates.csv`` names); optional ``round`` places the boundaries,
        otherwise they fall every ``updates_per_round`` updates (40 = 20 steps × 2 in the release).
        Updates with ``train/grad_norm == 0`` are marked in every panel.
    metrics : sequence of str
    updates_per_round : int
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    table = frame(updates, ("update", *metrics), "updates").sort_values("update")
    labels = Labeller.for_language(language)
    x = table["update"].astype(float)
    boundaries = round_starts(x, table["round"].tolist() if "round" in table else None, updates_per_round)
    zero = (
        table[pd.to_numeric(table[GRAD_NORM_COLUMN], errors="coerce") == 0.0]
        if GRAD_NORM_COLUMN in table
        else table.iloc[0:0]
    )
    with labels.building():
        figure = new_figure(8.5, 2.1 * len(metrics) + 0.6)
        axes_list = figure.subplots(len(metrics), 1, sharex=True, squeeze=False)[:, 0]
        for axes, column in zip(axes_list, metrics):
            values = pd.to_numeric(table[column], errors="coerce")
            axes.plot(x, values, color=COLORS["line"], linewidth=1.0, marker=".", markersize=3)
            marked = pd.to_numeric(zero[column], errors="coerce")
            axes.scatter(zero["update"].astype(float), marked, marker="x", color=COLORS["zero_grad"], zorder=3,
                         label=labels("zero_grad") if len(zero) else None)
            mark_boundaries(axes, boundaries)
            axes.set_ylabel(labels.metric("opt_", column.rsplit("/", 1)[-1]))
        if len(zero):
            axes_list[0].legend(loc="upper right")
        axes_list[0].set_title(labels("title_optimization"))
        axes_list[-1].set_xlabel(labels("update"))
    return labels.finish(figure)
