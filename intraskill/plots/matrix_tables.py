"""A control matrix's tables as report tables in English or Chinese: the declared claims with their intervals and
verdicts (:mod:`intraskill.experiment.preregistered`), the per-seed differences, what an arm's deployment adds to its
own final checkpoint, every comparison, the four-condition table and the compute per arm and round."""

from __future__ import annotations

from typing import TYPE_CHECKING

from intraskill.experiment.preregistered import claims_table, deployment_table, per_seed_table
from intraskill.plots.tables import format_table

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from intraskill.experiment.results import Contrast, MatrixResult, PairedRuns

EQUIVALENCE_COLUMNS = ["contrast90", "ci90_low", "ci90_high"]


def claims_view(contrasts: list[Contrast], language: str) -> Styler:
    """The contrasts' differences with their 95 % intervals (and the 90 % equivalence interval where one of them
    declares a margin), p, Holm p, role and verdict (points of success)."""
    equivalence = any(c.equivalence is not None for c in contrasts)
    ci = {"contrast": ("ci_low", "ci_high"), **({"contrast90": ("ci90_low", "ci90_high")} if equivalence else {})}
    return format_table(claims_table(contrasts), language, signed=["contrast", "contrast90"], decimals=4, ci=ci,
                        hide=[] if equivalence else EQUIVALENCE_COLUMNS,
                        values={"condition": "condition_", "family_role": "family_", "verdict": "control_verdict_"})


def per_seed_view(contrasts: list[Contrast], language: str) -> Styler:
    """Seed index × contrast: each seed's mean paired difference (fractions of the metric)."""
    table = per_seed_table(contrasts)
    seeds = [column for column in table.columns if isinstance(column, int)]
    return format_table(table, language, signed=seeds, decimals=4, values={"condition": "condition_"})


def deployment_view(effect: PairedRuns, language: str) -> Styler:
    """Per seed and over seeds: an arm's final checkpoint deployed and bare, and the difference in points."""
    return format_table(deployment_table(effect), language, percent=["deployed_success", "bare_success",
                                                                     "deployment_effect"],
                        signed=["deployment_effect"], ci={"deployment_effect": ("ci_low", "ci_high")},
                        values={"seed_index": "seed_index_"})


def comparisons_view(result: MatrixResult, language: str) -> Styler:
    """Every comparison a − b with its 95 % interval, the test, its role in the declared family and the verdict."""
    return format_table(result.comparisons().rename(columns={"mean": "contrast", "role": "family_role"}), language,
                        signed=["contrast"], ci={"contrast": ("ci_low", "ci_high")}, decimals=4,
                        values={"condition": "condition_", "metric": "metric_", "method": "method_",
                                "family_role": "family_", "verdict": "control_verdict_"})


def conditions_view(result: MatrixResult, language: str) -> Styler:
    """The four-condition table per arm: means over seeds with their standard deviation across seeds."""
    return format_table(result.four_conditions().rename(columns={"arm": "training_arm", "steps": "steps_mean"}),
                        language, percent=["success", "success_sd"], decimals=3, values={"condition": "condition_"})


COMPUTE_COLUMNS = ["rollout_episodes", "retry_episodes", "generated_tokens", "trained_episodes", "trained_tokens",
                   "gate_episodes", "train_seconds"]


def compute_view(result: MatrixResult, language: str) -> Styler:
    """Per arm and round, summed over seeds: episodes and tokens generated and trained, gate episodes, training
    time; and each cell's wall time."""
    compute = result.compute()
    table = compute.groupby(["arm", "round_index"], sort=False)[COMPUTE_COLUMNS].sum()
    table["cell_wall_minutes"] = compute.groupby(["arm", "round_index"], sort=False)["cell_wall_seconds"].mean() / 60
    return format_table(table.rename_axis(index={"arm": "training_arm"}), language, decimals=1)
