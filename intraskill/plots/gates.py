"""Gate runs: per-gate val success (bare vs randomized masks), tidy contribution tables with CIs, the
validation scatter of gate β against ground-truth effects, and the heat map of the additivity test's
pairwise interactions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.gate.additivity import AdditivityTest
from intraskill.gate.contributions import load_contributions
from intraskill.layout import GateDir
from intraskill.plots.style import COLORS, Labeller, frame, new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def gate_tables(gate_dirs: Mapping[Any, str | Path]) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """``(contributions, outcomes)`` of finished gate directories keyed by round.

    ``contributions`` has one row per design column (``round, intervention_id, kind, status,
    coefficient, rank, ci_lo, ci_hi``, reward β with its 95 % CI) — the input of
    :func:`~intraskill.plots.chunk_contributions` and :func:`~intraskill.plots.skill_evolution`;
    ``outcomes`` one row per gate (``round, bare_success, masked_success, bare_reward, masked_reward,
    columns, selected``).
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    tables, outcomes = [], []
    for round_id, gate_dir in gate_dirs.items():
        gate = load_contributions(GateDir(gate_dir).contributions)
        table = gate.to_frame()[["intervention_id", "kind", "status", "coefficient", "rank", "ci_lo", "ci_hi"]]
        tables.append(table.assign(round=round_id))
        success, reward = gate.estimates["r_success"], gate.primary
        outcomes.append({"round": round_id, "bare_success": success.bare_mean,
                         "masked_success": success.masked_mean, "bare_reward": reward.bare_mean,
                         "masked_reward": reward.masked_mean, "columns": len(gate.columns),
                         "selected": gate.selected_count})
    columns = ["round", "intervention_id", "kind", "status", "coefficient", "rank", "ci_lo", "ci_hi"]
    contributions = pd.concat(tables, ignore_index=True)[columns] if tables else pd.DataFrame(columns=columns)
    return contributions, pd.DataFrame(outcomes)


def gate_outcomes(
    outcomes: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en"
) -> "Figure":
    """Paired bars per gate: val success of the bare run and of the randomized-mask run (same tasks).

    Parameters
    ----------
    outcomes : DataFrame or records with ``round``, ``bare_success``, ``masked_success`` (fractions).
    language : {"en", "zh"}
    """
    table = frame(outcomes, ("round", "bare_success", "masked_success"), "outcomes")
    labels = Labeller.for_language(language)
    positions = list(range(len(table)))
    with labels.building():
        figure = new_figure(1.4 * len(table) + 3.0, 3.4)
        axes = figure.subplots()
        for offset, column, key, color in ((-0.2, "bare_success", "gate_bare", COLORS["base_free"]),
                                           (0.2, "masked_success", "gate_masked", COLORS["base_s0"])):
            values = [100.0 * float(v) for v in table[column]]
            bars = axes.bar([p + offset for p in positions], values, width=0.38, color=color,
                            label=labels(key))
            axes.bar_label(bars, fmt="%.1f", fontsize=7.5)
        axes.set_xticks(positions, [str(r) for r in table["round"]])
        axes.set_xlabel(labels("gate_round"))
        axes.set_ylabel(labels("val_success_pct"))
        axes.set_ylim(0, 110)
        axes.legend(loc="lower right")
        axes.set_title(labels("title_gate_outcomes"))
    return labels.finish(figure)


def gate_validation(
    per_chunk: "pd.DataFrame | Sequence[Mapping[str, Any]]", *, language: str = "en"
) -> "Figure":
    """Gate β (with 95 % CI) against each chunk's true effect, one marker per (chunk, mask seed).

    Parameters
    ----------
    per_chunk : DataFrame or records with ``chunk``, ``truth``, ``beta``, ``ci_lo``, ``ci_hi`` and
        optionally ``mask_seed`` (one colour per seed).
    language : {"en", "zh"}
    """
    table = frame(per_chunk, ("chunk", "truth", "beta", "ci_lo", "ci_hi"), "per_chunk")
    labels = Labeller.for_language(language)
    seeds = sorted(table["mask_seed"].unique()) if "mask_seed" in table.columns else [None]
    with labels.building():
        figure = new_figure(5.6, 4.6)
        axes = figure.subplots()
        for index, seed in enumerate(seeds):
            part = table if seed is None else table[table["mask_seed"] == seed]
            jitter = 0.002 * (index - (len(seeds) - 1) / 2)
            axes.errorbar(part["truth"] + jitter, part["beta"],
                          yerr=[part["beta"] - part["ci_lo"], part["ci_hi"] - part["beta"]], fmt="o",
                          markersize=4, capsize=2, linewidth=0.8, color=f"C{index % 10}",
                          label=None if seed is None else f"mask seed {seed}")
        low = min(table["truth"].min(), table["ci_lo"].min())
        high = max(table["truth"].max(), table["ci_hi"].max())
        axes.plot([low, high], [low, high], color=COLORS["boundary"], linestyle="--", linewidth=0.8,
                  label=labels("identity_line"))
        first = table.drop_duplicates("chunk")
        anchors = list(zip(first["truth"], first["beta"]))
        span_x, span_y = (high - low) or 1.0, (table["ci_hi"].max() - table["ci_lo"].min()) or 1.0
        for name, (x, y), label_y in zip(first["chunk"], anchors, dodged(anchors, 0.25 * span_x, 0.045 * span_y)):
            axes.annotate(str(name), (x, y), xytext=(x + 0.01 * span_x, label_y), fontsize=7,
                          arrowprops=None if label_y == y else {"arrowstyle": "-", "linewidth": 0.4,
                                                                 "color": COLORS["boundary"]})
        axes.set_xlabel(labels("true_effect"))
        axes.set_ylabel(labels("gate_beta_success"))
        axes.legend(loc="upper left", fontsize=7.5)
        axes.set_title(labels("title_gate_validation"))
    return labels.finish(figure)


def interaction_heatmap(test: AdditivityTest, *, language: str = "en") -> "Figure":
    """The fitted interactions γ of an additivity test as a symmetric chunk × chunk heat map (blank where a pair
    was not fitted), titled with the test's p-value; ``ValueError`` when the test was not testable."""
    # deferred: numpy is heavy to import
    import numpy as np

    if not test.testable:
        raise ValueError(f"test: not testable ({test.reason}); there is no interaction to draw")
    labels = Labeller.for_language(language)
    index = {c: i for i, c in enumerate(test.chunks)}
    grid = np.full((len(index), len(index)), np.nan)
    for item in test.interactions:
        grid[index[item.a], index[item.b]] = grid[index[item.b], index[item.a]] = item.coef
    bound = float(np.nanmax(np.abs(grid))) or 1.0
    with labels.building():
        figure = new_figure(1.6 + 0.55 * len(index), 1.0 + 0.5 * len(index))
        axes = figure.subplots()
        image = axes.imshow(grid, cmap="RdBu", vmin=-bound, vmax=bound)
        axes.set_xticks(range(len(index)), list(index), rotation=45, ha="right", fontsize=7)
        axes.set_yticks(range(len(index)), list(index), fontsize=7)
        figure.colorbar(image, ax=axes, label=labels("interaction_gamma"))
        axes.set_title(f"{labels('title_gate_interactions')}\n{test.metric}: F({test.df_num}, {test.df_denom:g}) = "
                       f"{test.statistic:.2f}, p = {test.p_value:.3g}", fontsize=9)
    return labels.finish(figure)


def dodged(anchors: Sequence[tuple[float, float]], width: float, height: float) -> list[float]:
    """Label heights for points ``anchors`` (x, y): each label starts at its point and moves up until no
    label placed before it lies within ``width`` horizontally and ``height`` vertically.

    >>> dodged([(0.0, 0.0), (0.001, 0.001), (1.0, 0.0)], width=0.1, height=0.05)
    [0.0, 0.05, 0.0]
    """
    placed: list[tuple[float, float]] = []
    heights = [0.0] * len(anchors)
    for index in sorted(range(len(anchors)), key=lambda i: (anchors[i][1], anchors[i][0])):
        x, y = anchors[index]
        while hits := [py for px, py in placed if abs(x - px) < width and abs(y - py) < height * (1 - 1e-9)]:
            y = max(hits) + height
        placed.append((x, y))
        heights[index] = y
    return heights
