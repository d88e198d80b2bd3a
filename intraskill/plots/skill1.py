"""Skill1 figures: training dynamics per step, Û over training, task–skill similarity and the map of the
library's embeddings. Inputs are the tables of :class:`~intraskill.analysis.skill1.Skill1Record`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, mark_boundaries, new_figure, round_starts

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SUCCESS_SERIES = (
    ("rollout/shopsim/success_rate", "s1_success_all", "#1b3a6b"),
    ("skill1/success_with_skill", "s1_success_with", "#55a868"),
    ("skill1/success_without_skill", "s1_success_without", "#8c8c8c"),
)
RANKING_SERIES = (
    ("skill1/ndcg_mean", "s1_ndcg", "#4c72b0"),
    ("skill1/selection_precision", "s1_precision", "#dd8452"),
)
DYNAMICS_COLUMNS = ("step", *(c for c, _, _ in SUCCESS_SERIES + RANKING_SERIES), "skill1/r_distill_mean",
                    "skill1/library_size", "skill1/admissions", "skill1/evictions")
"""The ``metrics.jsonl`` columns :func:`skill1_dynamics` draws."""
CANDIDATE_COLOR = "#4c72b0"
SELECTED_COLOR = "#d95f02"
ROUND_MARKERS = ("o", "^", "D", "v", "P", "X", "h", "<", ">", "p")
SEED_MARKER = "s"


def _series(axes: "Axes", table: "pd.DataFrame", series: Sequence[tuple[str, str, str]],
            labels: Labeller) -> None:
    # deferred: pandas is heavy to import
    import pandas as pd

    for column, key, color in series:
        axes.plot(table["step"], pd.to_numeric(table[column], errors="coerce"), marker="o", markersize=3.5,
                  color=color, label=labels(key))


def skill1_dynamics(steps: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en") -> "Figure":
    """Five panels over rollout steps: success (all rollouts, with a selected skill, without one), ranking
    (mean NDCG and selection precision), mean R_distill, the library's size, and each step's admissions (bars
    up) and evictions (bars down).

    ``steps``: one row per step with :data:`DYNAMICS_COLUMNS` (``metrics.jsonl`` of a Skill1 round; a missing
    value, e.g. no rollout without a skill, is a gap); an optional ``round`` column adds dashed boundaries.
    """
    # deferred: pandas and matplotlib are heavy to import
    import pandas as pd
    from matplotlib.ticker import MaxNLocator

    table = frame(steps, DYNAMICS_COLUMNS, "steps").sort_values("step")
    labels = Labeller.for_language(language)
    rounds = table["round"].tolist() if "round" in table else None
    boundaries = round_starts(table["step"].astype(float), rounds, 1)
    with labels.building():
        figure = new_figure(8.5, 10.5)
        success, ranking, distill, library, changes = figure.subplots(5, 1, sharex=True,
                                                                      height_ratios=(1, 1, 1, 0.8, 0.8))
        _series(success, table, SUCCESS_SERIES, labels)
        success.set_ylabel(labels("s1_success"))
        success.set_ylim(-0.05, 1.25)
        success.legend(loc="upper left", ncols=3)
        _series(ranking, table, RANKING_SERIES, labels)
        ranking.set_ylabel(labels("s1_ranking"))
        ranking.set_ylim(-0.05, 1.25)
        ranking.legend(loc="upper left", ncols=2)
        distill.axhline(0.0, color="grey", linewidth=0.8)
        distill.plot(table["step"], pd.to_numeric(table["skill1/r_distill_mean"], errors="coerce"), marker="o",
                     markersize=3.5, color=COLORS["smooth"])
        distill.set_ylabel(labels("s1_r_distill"))
        library.plot(table["step"], table["skill1/library_size"], marker="o", markersize=3.5,
                     color=COLORS["line"], label=labels("s1_library_size"))
        library.set_ylabel(labels("s1_library_size"))
        library.set_ylim(0, 1.15 * float(table["skill1/library_size"].max()) + 1)
        library.yaxis.set_major_locator(MaxNLocator(integer=True))
        changes.bar(table["step"], table["skill1/admissions"], width=0.6, color=COLORS["selected"],
                    label=labels("s1_admissions"))
        changes.bar(table["step"], -table["skill1/evictions"], width=0.6, color=COLORS["non_positive"],
                    label=labels("s1_evictions"))
        changes.axhline(0.0, color="grey", linewidth=0.6)
        most = max(1, int(table["skill1/admissions"].max()), int(table["skill1/evictions"].max()))
        changes.set_ylim(-1.2 * most, 1.6 * most)
        changes.yaxis.set_major_locator(MaxNLocator(integer=True))
        changes.set_ylabel(labels("s1_changes"))
        changes.legend(loc="upper left", ncols=2)
        for axes in (success, ranking, distill, library, changes):
            mark_boundaries(axes, boundaries)
        changes.set_xlabel(labels("step"))
        changes.xaxis.set_major_locator(MaxNLocator(integer=True))
        success.set_title(labels("title_skill1_dynamics"))
    return labels.finish(figure)


def utility_over_training(rollouts: "pd.DataFrame | Sequence[Mapping[str, Any]]",
                          library: "pd.DataFrame | Sequence[Mapping[str, Any]] | None" = None, *,
                          language: str = "en") -> "Figure":
    """Û per step over the rollouts that retrieved a skill: the mean (line), the interquartile range (band)
    and each rollout (dots); with ``library``, the library's mean U at the start of each step (dashed).

    ``rollouts``: ``step``, ``u_hat``, ``candidates`` (:attr:`Skill1Record.rollouts`); ``library``: ``step``,
    ``mean_utility`` after each step (:meth:`Skill1Record.library_by_step`), drawn at step + 1.
    """
    # deferred: matplotlib is heavy to import
    from matplotlib.ticker import MaxNLocator

    table = frame(rollouts, ("step", "u_hat", "candidates"), "rollouts")
    table = table[table["candidates"] > 0]
    if table.empty:
        raise ValueError("rollouts: no rollout retrieved a skill, so there is no Û to plot")
    labels = Labeller.for_language(language)
    per_step = table.groupby("step")["u_hat"]
    summary = per_step.agg(["mean"]).assign(q25=per_step.quantile(0.25), q75=per_step.quantile(0.75))
    with labels.building():
        figure = new_figure(7.5, 3.8)
        axes = figure.subplots()
        axes.scatter(table["step"], table["u_hat"], s=12, color=COLORS["line"], alpha=0.35,
                     label=labels("s1_rollouts"))
        axes.fill_between(summary.index, summary["q25"], summary["q75"], color=COLORS["line"], alpha=0.2,
                          label=labels("s1_iqr"))
        axes.plot(summary.index, summary["mean"], marker="o", color=COLORS["smooth"], linewidth=1.8,
                  label=labels("s1_mean"))
        if library is not None:
            after = frame(library, ("step", "mean_utility"), "library")
            start = after.assign(step=after["step"] + 1)
            start = start[start["step"].between(summary.index.min(), summary.index.max())]
            axes.plot(start["step"], start["mean_utility"], linestyle="--", color="black", linewidth=1.0,
                      label=labels("s1_library_mean_u"))
        axes.set_ylim(-0.03, 1.03)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlabel(labels("step"))
        axes.set_ylabel(labels("s1_u_hat"))
        axes.set_title(labels("title_u_hat"))
        axes.legend(loc="best", ncols=2)
    return labels.finish(figure)


def task_skill_similarity(candidates: "pd.DataFrame | Sequence[Mapping[str, Any]]", *,
                          language: str = "en", bins: int = 20) -> "Figure":
    """Cosine between each rollout's query and the skills it retrieved. Left: per step, the median and
    interquartile band over all retrieved candidates and over the selected skills. Right: both pooled over
    all steps as histograms.

    ``candidates``: ``step``, ``similarity``, ``selected`` (:attr:`Skill1Record.candidates`).
    """
    # deferred: numpy and matplotlib are heavy to import
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    table = frame(candidates, ("step", "similarity", "selected"), "candidates")
    labels = Labeller.for_language(language)
    selected = table[table["selected"].astype(bool)]
    groups = ((table, "s1_candidates", CANDIDATE_COLOR), (selected, "s1_selected", SELECTED_COLOR))
    low, high = float(table["similarity"].min()), float(table["similarity"].max())
    edges = np.linspace(low, high if high > low else low + 1e-6, bins + 1)
    with labels.building():
        figure = new_figure(10.0, 3.8)
        steps, pooled = figure.subplots(1, 2, width_ratios=(1.6, 1.0))
        for rows, key, color in groups:
            if rows.empty:
                continue
            per_step = rows.groupby("step")["similarity"]
            median, q25, q75 = per_step.median(), per_step.quantile(0.25), per_step.quantile(0.75)
            steps.fill_between(median.index, q25, q75, color=color, alpha=0.2)
            steps.plot(median.index, median, marker="o", markersize=3.5, color=color, label=labels(key))
            pooled.hist(rows["similarity"], bins=edges, color=color, alpha=0.5,
                        label=f"{labels(key)} (n = {len(rows)})")
        steps.xaxis.set_major_locator(MaxNLocator(integer=True))
        steps.set_xlabel(labels("step"))
        steps.set_ylabel(labels("s1_cosine"))
        steps.set_title(labels("title_similarity"), fontsize=9.5)
        steps.legend(loc="best")
        pooled.set_xlabel(labels("s1_cosine"))
        pooled.set_ylabel(labels("s1_count"))
        pooled.set_title(labels("title_similarity_pooled"), fontsize=9.5)
        pooled.legend(loc="best")
    return labels.finish(figure)


def marker_area(uses: "pd.Series") -> "pd.Series":
    """Scatter marker area (points²) of skills used ``uses`` times: 18·(n + 1)^0.75, area grows with n."""
    return 18.0 * (uses.astype(float) + 1.0) ** 0.75


def library_embedding_map(points: "pd.DataFrame | Sequence[Mapping[str, Any]]",
                          explained: tuple[float, float] = (0.0, 0.0), *, language: str = "en",
                          annotate_up_to: int = 25) -> "Figure":
    """The library's skills on the first two principal components of their ``desc`` embeddings: colour U,
    marker area the uses n, marker shape the round a skill was admitted in (squares: seed skills); evicted
    skills, when ``points`` has an ``evicted`` column, as grey crosses. Skill ids are written next to the
    points when there are at most ``annotate_up_to`` of them.

    ``points``: ``skill_id``, ``pc1``, ``pc2``, ``utility``, ``uses``, ``origin``, ``round``
    (:func:`~intraskill.analysis.skill1.library_map`); ``explained``: each component's share of the variance.
    """
    # deferred: matplotlib is heavy to import
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    table = frame(points, ("skill_id", "pc1", "pc2", "utility", "uses", "origin", "round"), "points")
    evicted = table["evicted"].astype(bool) if "evicted" in table else table["origin"].isna() & False
    labels = Labeller.for_language(language)
    norm, cmap = Normalize(0.0, 1.0), colormaps["viridis"]
    kept = table[~evicted]
    with labels.building():
        figure = new_figure(7.5, 5.6)
        axes = figure.subplots()
        groups = [("seed", kept[kept["origin"] == "seed"], SEED_MARKER, labels("s1_seed"))]
        rounds = sorted(int(r) for r in kept.loc[kept["origin"] != "seed", "round"].dropna().unique())
        groups += [(f"round-{r}", kept[(kept["origin"] != "seed") & (kept["round"] == r)],
                    ROUND_MARKERS[index % len(ROUND_MARKERS)], labels("s1_admitted_round", round=r))
                   for index, r in enumerate(rounds)]
        mappable = None
        for gid, rows, marker, name in groups:
            if rows.empty:
                continue
            mappable = axes.scatter(rows["pc1"], rows["pc2"], c=rows["utility"], cmap=cmap, norm=norm,
                                    s=marker_area(rows["uses"]), marker=marker, edgecolors="black",
                                    linewidths=0.4, label=name, gid=gid)
        gone = table[evicted]
        if not gone.empty:
            axes.scatter(gone["pc1"], gone["pc2"], s=marker_area(gone["uses"]), marker="x",
                         color=COLORS["retired"], linewidths=0.8, label=labels("s1_evicted"), gid="evicted")
        if len(table) <= annotate_up_to:
            for record in table.to_dict("records"):
                axes.annotate(str(record["skill_id"]), (record["pc1"], record["pc2"]), xytext=(4, 3),
                              textcoords="offset points", fontsize=7)
        axes.margins(0.12)
        figure.colorbar(mappable or ScalarMappable(norm=norm, cmap=cmap), ax=axes, label=labels("s1_utility"))
        axes.set_xlabel(labels("s1_pc", index=1, share=explained[0]))
        axes.set_ylabel(labels("s1_pc", index=2, share=explained[1]))
        axes.set_title(labels("title_library_map"))
        legend = axes.legend(loc="best", title=labels("s1_size_note"), title_fontsize=7.5)
        for handle, text in zip(legend.legend_handles, legend.get_texts()):  # shape only: U and n vary
            handle.set_sizes([36.0])
            if text.get_text() != labels("s1_evicted"):
                handle.set_array(None)
                handle.set_facecolor("#d0d0d0")
    return labels.finish(figure)
