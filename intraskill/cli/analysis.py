"""``intraskill release …``: recompute the public release's headline numbers from its files."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer

app = typer.Typer(
    help="Re-analyse the public IntraSkill release (test CIs, gates, W&B reconciliation).",
    no_args_is_help=True,
)

ARTIFACTS_HELP = (
    "Release artifacts folder (default: $INTRASKILL_RELEASE_DIR or the shipped data/intraskill-release)."
)


def _resolve(artifacts: Optional[str]) -> Any:
    from intraskill.analysis.release import locate_release_dir

    try:
        return locate_release_dir(artifacts)
    except FileNotFoundError as error:
        raise typer.BadParameter(str(error), param_hint="--artifacts") from error


@app.command()
def compare(
    a: str = typer.Option(..., "--a", help="Reference arm: base_free, base_s0, iter80_free or iter80_st."),
    b: str = typer.Option(..., "--b", help="Treatment arm; differences are b − a."),
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = typer.Option(10_000, "--samples", min=1, help="Bootstrap resamples."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Paired bootstrap comparison of two test arms (reward, r_success, success transitions)."""
    from intraskill.analysis.release import ARMS, release_compare

    for hint, arm in (("--a", a), ("--b", b)):
        if arm not in ARMS:
            raise typer.BadParameter(f"unknown arm {arm!r}; choose one of {', '.join(ARMS)}", param_hint=hint)
    result = release_compare(_resolve(artifacts), a, b, samples=samples)
    if as_json:
        typer.echo(json.dumps(result.to_dict(arms=False)))
        return
    typer.echo(result.summary())


@app.command()
def reanalyse(
    artifacts: Optional[str] = typer.Option(None, "--artifacts", help=ARTIFACTS_HELP),
    samples: int = typer.Option(10_000, "--samples", min=1, help="Bootstrap resamples."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Recompute the test table, all six comparisons, gate rounds, W&B reconciliation and OLS refits."""
    from intraskill.analysis.release import reanalyse_release

    result = reanalyse_release(_resolve(artifacts), samples=samples)
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
        return
    typer.echo(result.summary())
