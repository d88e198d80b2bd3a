"""The organism's warm start: the cloning loss by phase, and each chunk's measured (ground-truth) effect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from intraskill.plots.style import COLORS, Labeller, frame, new_figure
from intraskill.policy.warmstarts import GroundTruth

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

ROLE_COLORS = {"helpful": COLORS["selected"], "neutral": COLORS["retired"], "harmful": COLORS["non_positive"]}


def cloning_losses(losses: Sequence[Sequence[float]], *, drill_steps: int = 0, lm_steps: int = 0,
                   language: str = "en") -> "Figure":
    """The warm start's training loss per logged step, with the drill → next-token → cloning boundaries.

    Parameters
    ----------
    losses : ``(step, mean loss)`` pairs, as ``bc.losses`` of the warm start's manifest.
    drill_steps, lm_steps : lengths of the first two phases (``warmstart.drill_steps`` / ``lm_steps``).
    language : {"en", "zh"}
    """
    if not losses:
        raise ValueError("losses: no (step, loss) pairs")
    labels = Labeller.for_language(language)
    steps, values = zip(*((int(step), float(loss)) for step, loss in losses))
    with labels.building():
        figure = new_figure(7, 3.2)
        axes = figure.subplots()
        axes.plot(steps, values, color=COLORS["line"], linewidth=1.0)
        starts = [(0, "phase_drill"), (drill_steps, "phase_lm"), (drill_steps + lm_steps, "phase_bc")]
        lengths = [drill_steps, lm_steps, max(steps) - drill_steps - lm_steps]
        for (start, key), length in zip(starts, lengths):
            if length <= 0:
                continue
            if start:
                axes.axvline(start, color=COLORS["boundary"], linestyle="--", linewidth=0.8)
            axes.annotate(labels(key), (start, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                          textcoords="offset points", fontsize=8)
        axes.set(xlabel=labels("training_step"), ylabel=labels("training_loss"), title=labels("title_cloning"))
    return labels.finish(figure)


def chunk_effects(truth: "GroundTruth | pd.DataFrame | Sequence[Mapping[str, Any]]", *,
                  language: str = "en") -> "Figure":
    """Each chunk's effect on success (chunk alone − bare, 95 % paired CI), coloured by its planted role.

    Parameters
    ----------
    truth : a warm start's :class:`~intraskill.policy.warmstarts.GroundTruth`, or records with ``chunk``,
        ``effect``, ``ci_lo``, ``ci_hi`` and ``role``.
    language : {"en", "zh"}
    """
    if isinstance(truth, GroundTruth):
        truth = [{"chunk": chunk, "effect": entry.effect, "ci_lo": entry.ci95[0], "ci_hi": entry.ci95[1],
                  "role": entry.role} for chunk, entry in truth.chunks.items()]
    table = frame(truth, ("chunk", "effect", "ci_lo", "ci_hi", "role"), "truth")
    labels = Labeller.for_language(language)
    records = table.to_dict("records")
    with labels.building():
        figure = new_figure(6.4, 0.34 * len(records) + 1.6)
        axes = figure.subplots()
        seen: set[str] = set()
        for row, record in zip(range(len(records) - 1, -1, -1), records):
            role = str(record["role"])
            axes.errorbar(record["effect"], row, xerr=[[record["effect"] - record["ci_lo"]],
                                                       [record["ci_hi"] - record["effect"]]],
                          fmt="o", color=ROLE_COLORS.get(role, COLORS["line"]), capsize=2, markersize=4,
                          label=labels(f"role_{role}") if role not in seen else None)
            seen.add(role)
        axes.axvline(0, color=COLORS["boundary"], linewidth=0.8)
        axes.set_yticks(range(len(records) - 1, -1, -1), [str(r["chunk"]) for r in records])
        axes.set(xlabel=labels("true_effect"), title=labels("title_chunk_effects"))
        axes.legend(fontsize=7.5, loc="lower right")
    return labels.finish(figure)
