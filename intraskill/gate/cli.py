"""``intraskill gate …``: the paired validation gate's commands."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(
    help="The paired validation gate: OLS refits, selection and gate runs.", no_args_is_help=True
)


@app.command()
def refit(
    contributions: Path = typer.Argument(
        ...,
        exists=True,
        help="A gate contributions.json, or a folder holding round-*/gate/contributions.json.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Refit the no-intercept paired-delta OLS and report the max |Δβ| against the stored coefficients."""
    from intraskill.gate.ols import refit_path

    try:
        report = refit_path(contributions)
    except (ValueError, FileNotFoundError) as error:
        raise typer.BadParameter(str(error), param_hint="CONTRIBUTIONS_JSON") from error
    if as_json:
        typer.echo(json.dumps(report))
        return
    rounds = report["rounds"]
    typer.echo(f"rounds: {rounds if isinstance(rounds, int) else ', '.join(rounds)}")
    typer.echo(f"columns: {report['columns']}")
    typer.echo(f"observations: {report['observations']}")
    typer.echo(f"max |dbeta|: {report['max_abs_diff']:.3e}")
