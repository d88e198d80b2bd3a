"""``intraskill report …``: execute the pipeline notebooks and render the bilingual report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="Build the bilingual report (papermill notebooks + Quarto or a static fallback).",
                  no_args_is_help=True)


@app.command()
def build(
    root: Path = typer.Option(Path("."), "--root", help="Repository root holding _quarto.yml, report/ and notebooks/."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Run folder (default <root>/runs/report)."),
    site_dir: Optional[Path] = typer.Option(None, "--site-dir", help="Static-site output (default <root>/_site)."),
    quick: bool = typer.Option(False, "--quick", help="Use each notebook's quick parameters (smoke build)."),
    execute: bool = typer.Option(True, "--execute/--no-execute", help="Execute the notebooks first."),
    quarto: Optional[bool] = typer.Option(None, "--quarto/--static", help="Force Quarto or the static renderer."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="Execute only this notebook (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of progress lines."),
) -> None:
    """Execute the manifest notebooks (report/notebooks.yaml) and render the site into _site/."""
    from intraskill.report.build import build_report

    def echo(line: str) -> None:
        typer.echo(line, err=as_json)

    try:
        result = build_report(root, run_dir=run_dir, site_dir=site_dir, quick=quick, execute=execute,
                              use_quarto=quarto, only=only, echo=echo)
    except (FileNotFoundError, ValueError) as error:
        raise typer.BadParameter(str(error)) from error
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
    else:
        typer.echo(f"{result.renderer} site: {result.site_dir} ({len(result.pages)} pages)")
    if not result.ok:
        raise typer.Exit(1)
