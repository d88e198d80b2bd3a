"""Training dynamics per rollout step with round boundaries (release ``training_steps.csv`` columns)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, mark_boundaries, new_figure, round_starts

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

DEFAULT_STEP_METRICS = (
    "rollout/shopsim/reward_mean",
    "rollout/shopsim/success_rate",
    "rollout/shopsim/skill_free_group_rate",
)
"""Panels drawn by default: mean reward, success rate and skill-free group rate."""
Q_COLUMN = "rollout/shopsim/q"
SKILL_FREE_COLUMN = "rollout/shopsim/skill_free_group_rate"


def training_dynamics(
    steps: "pd.DataFrame | Sequence[Mapping[str, Any]]",
    *,
    metrics: Sequence[str] = DEFAULT_STEP_METRICS,
    steps_per_round: int = 20,
    window: int = 5,
    language: str = "en",
) -> "Figure":
    """One panel per metric: the per-step value, a trailing mean and dashed round boundaries.

    Parameters
    ----------
    steps : DataFrame or records
        One row per rollout step with a ``step`` column and the metric columns (release
        ``analysis/training_steps.csv`` names, e.g. ``rollout/shopsim/success_rate``; our per-step
        metrics JSONL uses the same names). Missing values mean "not logged" and are left as gaps.
        An optional ``round`` column places the boundaries; without it they fall every
        ``steps_per_round`` steps.
    metrics : sequence of str
        Columns to draw, one panel each.
    steps_per_round : int
        Rollout steps per round (20 in the release) when there is no ``round`` column.
    window : int
        Trailing-mean window in steps (no reset at round boundaries).
    language : {"en", "zh"}

    Returns
    -------
    matplotlib.figure.Figure
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    table = frame(steps, ("step", *metrics), "steps").sort_values("step")
    labels = Labeller.for_language(language)
    x = table["step"].astype(float)
    boundaries = round_starts(x, table["round"].tolist() if "round" in table else None, steps_per_round)
    with labels.building():
        figure = new_figure(8.5, 2.2 * len(metrics) + 0.6)
        axes_list = figure.subplots(len(metrics), 1, sharex=True, squeeze=False)[:, 0]
        for axes, column in zip(axes_list, metrics):
            values = pd.to_numeric(table[column], errors="coerce")
            axes.plot(x, values, color=COLORS["line"], alpha=0.35, linewidth=1.0, label=labels("per_step"))
            smooth = values.rolling(window, min_periods=1).mean()
            axes.plot(x, smooth, color=COLORS["smooth"], linewidth=1.8, label=labels("trailing_mean", window=window))
            if column == SKILL_FREE_COLUMN and Q_COLUMN in table:
                q_values = pd.to_numeric(table[Q_COLUMN], errors="coerce").dropna().unique()
                if len(q_values) == 1:
                    axes.axhline(q_values[0], color="black", linestyle=":", linewidth=1.0,
                                 label=labels("q_reference", q=f"{q_values[0]:g}"))
            mark_boundaries(axes, boundaries)
            axes.set_ylabel(labels.metric("metric_", column.rsplit("/", 1)[-1]))
        axes_list[0].legend(loc="lower right", ncols=3)
        axes_list[0].set_title(labels("title_training"))
        axes_list[-1].set_xlabel(labels("step"))
    return labels.finish(figure)
