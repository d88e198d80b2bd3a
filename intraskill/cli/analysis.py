"""``intraskill release …``: recompute the public release's headline numbers from its files."""

from __future__ import annotations

from typing import Any, Optional

import typer

from intraskill.cli.common import JSON_OPTION, default, emit, fail
from intraskill.params import EvaluationParams

app = typer.Typer(
    help="Re-analyse the public IntraSkill release (test CIs, gates, W&B reconciliation).",
    no_args_is_help=True,
)

SAMPLES_OPTION = typer.Option(default(EvaluationParams, "bootstrap_samples"), "--samples", min=1,
                              help="Bootstrap resamples.")
ARTIFACTS_HELP = (
    "Release artifacts folder (default: $INTRASKILL_RELEASE_DIR or the shipped data/intraskill-release)."
)


def _resolve(artifacts: Optional[str]) -> Any:
    # deferred: a verb loads its stage only when it runs
    from intraskill.analysis.release import locate_release_dir

    try:
        return locate_release_dir(artifacts)
    except FileNotFoundError as error:
        fail(f"--artifacts: {error}")


@app.command()
def compare(
    a: str = typer.Argument(..., metavar="A", help="Reference arm A: base_free, base_s0, iter80_free or iter80_st."),
    b: str = typer.Argument(..., metavar="B", help="Treatment arm B; differences are B − A."),
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = SAMPLES_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Paired bootstrap comparison of two test arms (reward, r_success, success transitions)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.analysis.release import ARMS, release_compare

    for name, arm in (("A", a), ("B", b)):
        if arm not in ARMS:
            fail(f"{name}: unknown arm {arm!r}; choose one of {', '.join(ARMS)}")
    result = release_compare(_resolve(artifacts), a, b, samples=samples)
    emit(result.to_dict(arms=False), as_json, result.summary())


@app.command()
def reanalyse(
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = SAMPLES_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Recompute the test table, all six comparisons, gate rounds, W&B reconciliation and OLS refits."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.analysis.release import reanalyse_release

    result = reanalyse_release(_resolve(artifacts), samples=samples)
    emit(result.to_dict(), as_json, result.summary())
