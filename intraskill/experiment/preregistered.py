"""The declared analysis of a pre-registered matrix, as tables: the primary contrast with the companions its
registration reports beside it, the secondary family with Holm's adjustment, the per-seed differences, and what an
arm's deployment adds to its own final checkpoint.

Each table reads a complete :class:`~intraskill.experiment.results.MatrixResult` (loaded with the matrix's declared
family); :func:`~intraskill.experiment.progress.matrix_progress` says first whether the matrix may be read.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from intraskill.experiment.baselines import BASELINES
from intraskill.experiment.results import PRIMARY, SECONDARY, Contrast, MatrixResult, PairedRuns

if TYPE_CHECKING:
    import pandas as pd

CLAIM_COLUMNS = ("comparison", "condition", "family_role", "contrast", "ci_low", "ci_high", "contrast90", "ci90_low",
                 "ci90_high", "p_value", "p_holm", "seeds", "tasks", "verdict")
DEPLOYMENT_COLUMNS = ("seed_index", "deployed_success", "bare_success", "deployment_effect", "ci_low", "ci_high")


def primary_contrast(result: MatrixResult) -> Contrast:
    """The declared primary contrast (``matrix.family.primary``) of ``result``."""
    found = [c for c in result.contrasts if c.role == PRIMARY]
    if not found:
        raise ValueError(f"{result.out_dir}: the declared primary contrast {result.family.primary.key} was not "
                         "computed (an arm of it has no finished cell)")
    return found[0]


def companions(result: MatrixResult) -> list[Contrast]:
    """The primary contrast, then on the same metric: the same arms bare and the primary's reference arm's final
    checkpoint deployed with the method's skills (the deployment baselines ``<a>-grpo+s0`` and
    ``<a>-grpo+coevolve_bank``), which separate what training did from what the deployed skills do."""
    primary = primary_contrast(result)
    wanted = [(primary.name, "bare")] + [(f"{primary.a}-{name}", "deployed") for name in BASELINES]
    rest = [c for key in wanted for c in result.contrasts
            if (c.name, c.condition) == key and c.metric == primary.metric]
    return [primary, *rest]


def claims_table(contrasts: list[Contrast]) -> pd.DataFrame:
    """One row per contrast: difference and 95 % interval, the difference again with its 90 % equivalence interval
    where a margin is declared (``contrast90``, ``ci90_*``; else empty), p, Holm p, seeds × tasks, role and verdict
    (fractions of the metric)."""
    # deferred: pandas is heavy to import and only the frame needs it
    import pandas as pd

    rows = []
    for c in contrasts:
        r, e = c.across_seeds, c.equivalence
        rows.append({"comparison": c.name, "condition": c.condition, "family_role": c.role, "contrast": r.mean,
                     "ci_low": r.low, "ci_high": r.high, "contrast90": r.mean if e else None,
                     "ci90_low": e.low if e else None,
                     "ci90_high": e.high if e else None, "p_value": r.p_value, "p_holm": c.p_holm,
                     "seeds": r.n_seeds, "tasks": r.n_tasks, "verdict": c.verdict})
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))


def family_contrasts(result: MatrixResult) -> list[Contrast]:
    """The secondary family's members that were computed, in the matrix's order."""
    return [c for c in result.contrasts if c.role == SECONDARY]


def per_seed_table(contrasts: list[Contrast]) -> pd.DataFrame:
    """One row per contrast (comparison, condition), one column per seed index: that seed's mean paired difference
    over the tasks (fractions of the metric)."""
    # deferred: pandas is heavy to import and only the frame needs it
    import pandas as pd

    seeds = max((c.across_seeds.n_seeds for c in contrasts), default=0)
    rows = [{"comparison": c.name, "condition": c.condition,
             **dict(zip(range(seeds), [*c.across_seeds.per_seed, *[None] * (seeds - c.across_seeds.n_seeds)]))}
            for c in contrasts]
    return pd.DataFrame(rows, columns=["comparison", "condition", *range(seeds)])


def deployment_table(effect: PairedRuns) -> pd.DataFrame:
    """One row per seed index (the arm's deployed and bare success, their difference and its task bootstrap
    interval), then one ``all`` row: the means over seeds with the crossed seeds × tasks interval (fractions)."""
    # deferred: pandas is heavy to import and only the frame needs it
    import pandas as pd

    rows = [{"seed_index": str(i), "deployed_success": r.b_mean, "bare_success": r.a_mean,
             "deployment_effect": r.mean_difference, "ci_low": r.ci95[0], "ci_high": r.ci95[1]}
            for i, r in zip(effect.seeds, effect.per_seed)]
    across = effect.across_seeds
    rows.append({"seed_index": "all", "deployed_success": statistics.fmean(r.b_mean for r in effect.per_seed),
                 "bare_success": statistics.fmean(r.a_mean for r in effect.per_seed), "deployment_effect": across.mean,
                 "ci_low": across.low, "ci_high": across.high})
    return pd.DataFrame(rows, columns=list(DEPLOYMENT_COLUMNS))
