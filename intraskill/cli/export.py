"""``intraskill export``: a run directory's episodes and turns as Parquet / CSV tables."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, JSON_OPTION, confined, emit, fail


def export_command(
    run: Path = typer.Option(..., "--run", help="Run directory (round, co-evolve, gate, evaluation, matrix)."),
    out: Path = typer.Option(..., "--out", help="Folder for episodes.<fmt> and turns.<fmt>."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    formats: str = typer.Option("parquet,csv", "--format", help="Comma-separated: parquet, csv."),
    name: str | None = typer.Option(None, "--name", help="Value of the run column (default: the folder name)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export every episode trace under RUN as an episodes table and a turns table (schema: report data page)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.analysis.export import export_run

    out = confined(out, None, allow_outside)
    if not run.is_dir():
        fail(f"--run: no such run directory: {run}")
    result = export_run(run, out, [f.strip() for f in formats.split(",") if f.strip()], name)
    written = ", ".join(path for table in result.paths.values() for path in table.values())
    emit({"run": result.run, "trace_files": list(result.files), "episodes": result.episodes, "turns": result.turns,
          "paths": result.paths}, as_json,
         f"{result.run}: {result.episodes} episodes, {result.turns} turns from {len(result.files)} trace "
         f"file(s) -> {written}")
