"""Interactive training curves (plotly): zoom, hover and series toggled from the legend.

:func:`round_curves` draws a round's per-step metrics (``metrics.jsonl``, :func:`~intraskill.plots.tidy.read_step_metrics`)
in the panels people read a GRPO run by: reward and success, admitted groups, token entropy, clipping, gradient
norm, KL, and the time of each phase. The result is an :class:`InteractiveFigure`, which a notebook shows as
plotly's own output (JupyterLab) and, for the report, as an HTML fragment that loads plotly.js from the page
(the static site ships one copy of it, :data:`PLOTLY_SCRIPT`), so pages stay small and work offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.plots.labels import label

if TYPE_CHECKING:
    import pandas as pd
    from plotly.graph_objects import Figure

PLOTLY_SCRIPT = "plotly.min.js"
"""The file name plotly.js has in the static site's ``assets/`` folder."""
PLOTLY_MARKER = "plotly-graph-div"
"""The class of the element an interactive figure's HTML fragment draws into (pages holding one load plotly.js)."""


@dataclass(frozen=True)
class Panel:
    """One panel: its title key and the metric columns it draws (those present are drawn)."""

    title: str
    metrics: tuple[str, ...]


ROUND_PANELS: tuple[Panel, ...] = (
    Panel("panel_outcome", ("rollout/shopsim/reward_mean", "rollout/shopsim/strict_reward_mean",
                            "rollout/shopsim/success_rate")),
    Panel("panel_groups", ("rollout/shopsim/train_group_count", "rollout/shopsim/zero_std_group_drop_count",
                           "rollout/shopsim/technical_group_drop_count")),
    Panel("panel_entropy", ("train/entropy_loss",)),
    Panel("panel_clip", ("train/pg_clipfrac",)),
    Panel("panel_grad_norm", ("train/grad_norm",)),
    Panel("panel_kl", ("train/ppo_kl", "train/kl_loss")),
    Panel("panel_time", ("time/rollout_s", "time/retry_s", "time/train_s", "time/io_s")),
    Panel("panel_skill1", ("skill1/library_size", "skill1/ndcg_mean", "skill1/selection_precision")),
)
"""The panels of :func:`round_curves`; a panel with none of its metrics in the table is left out."""


@dataclass(frozen=True)
class InteractiveFigure:
    """A plotly figure that shows itself in notebooks (plotly's mimetype) and in the report (HTML)."""

    figure: Figure

    def html(self) -> str:
        """The figure as an HTML fragment without plotly.js (the page provides it)."""
        return self.figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"application/vnd.plotly.v1+json": self.figure.to_plotly_json(), "text/html": self.html()}


def plotly_script_path() -> Path:
    """plotly.js as shipped inside the plotly package (offline)."""
    # deferred: plotly is heavy to import
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / PLOTLY_SCRIPT
    if not path.is_file():
        raise FileNotFoundError(f"the installed plotly has no {path}; reinstall plotly")
    return path


def round_curves(steps: pd.DataFrame, *, language: str = "en",
                 panels: Sequence[Panel] = ROUND_PANELS) -> InteractiveFigure:
    """Per-step metrics of one or more rounds, one panel per :class:`Panel` with data, sharing the step axis;
    each series can be hidden from the legend, and hovering shows every value at a step."""
    # deferred: plotly is heavy to import
    from plotly.subplots import make_subplots

    if "step" not in steps.columns:
        raise KeyError("round_curves: the table has no 'step' column")
    shown = [panel for panel in panels if any(m in steps.columns and steps[m].notna().any() for m in panel.metrics)]
    if not shown:
        raise ValueError("round_curves: none of the panels' metrics is in the table")
    figure = make_subplots(rows=len(shown), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                           subplot_titles=[label(panel.title, language) for panel in shown])
    for row, panel in enumerate(shown, start=1):
        for metric in panel.metrics:
            if metric not in steps.columns or not steps[metric].notna().any():
                continue
            figure.add_scatter(x=steps["step"], y=steps[metric], mode="lines+markers", name=metric,
                               legendgroup=panel.title, legendgrouptitle_text=label(panel.title, language),
                               row=row, col=1, hovertemplate=f"{metric}<br>step %{{x}}: %{{y:.4g}}<extra></extra>")
    figure.update_xaxes(title_text=label("step", language), row=len(shown), col=1)
    figure.update_layout(height=220 * len(shown) + 80, hovermode="x unified", template="plotly_white",
                         margin={"l": 60, "r": 20, "t": 40, "b": 40}, legend={"groupclick": "toggleitem"})
    return InteractiveFigure(figure)
