"""Figures for notebooks and the report: each function takes tidy data and returns a
``matplotlib.figure.Figure`` (no pyplot state); :func:`save_figure` writes reproducible SVG + PNG.

Every plotting function takes ``language="en" | "zh"``; Chinese labels need a CJK font and degrade to
English with a logged warning when none is installed.
"""

from intraskill.plots.behaviour import behaviour_deltas, behaviour_phases
from intraskill.plots.contributions import chunk_contributions
from intraskill.plots.controls import control_learning_curves, control_outcomes
from intraskill.plots.optimization import optimization_curves
from intraskill.plots.results import four_condition_results
from intraskill.plots.skill1 import (
    library_embedding_map,
    skill1_dynamics,
    task_skill_similarity,
    utility_over_training,
)
from intraskill.plots.skills import skill_evolution
from intraskill.plots.style import Labeller, find_cjk_font, save_figure
from intraskill.plots.training import training_dynamics
from intraskill.plots.warmstart import chunk_effects, cloning_losses

__all__ = [
    "Labeller",
    "behaviour_deltas",
    "behaviour_phases",
    "chunk_contributions",
    "chunk_effects",
    "cloning_losses",
    "control_learning_curves",
    "control_outcomes",
    "find_cjk_font",
    "library_embedding_map",
    "optimization_curves",
    "save_figure",
    "skill1_dynamics",
    "skill_evolution",
    "task_skill_similarity",
    "four_condition_results",
    "training_dynamics",
    "utility_over_training",
]
