"""``intraskill report …``: execute the pipeline notebooks and render the bilingual report."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from intraskill.cli.common import JSON_OPTION, confined, emit, fail, note

app = typer.Typer(help="Build the bilingual report (papermill notebooks + Quarto or a static fallback).",
                  no_args_is_help=True)


ROOT_OPTION = typer.Option(Path("."), "--root", help="Repository root holding _quarto.yml, report/ and notebooks/.")
RUN_DIR_OPTION = typer.Option(None, "--run-dir", help="Run folder (default <root>/runs/report).")
QUICK_OPTION = typer.Option(
    False, "--quick", help="Smoke build: each notebook's quick parameters, which train and evaluate the random-init ci "
    "organism at CI size (minutes, not results); every page they feed says so.")
EXECUTE_OPTION = typer.Option(True, "--execute/--no-execute", help="Execute the notebooks first.")
FORCE_OPTION = typer.Option(False, "--force", help="Execute even notebooks whose cached execution is current.")


@app.command()
def build(
    root: Path = ROOT_OPTION,
    run_dir: Optional[Path] = RUN_DIR_OPTION,
    site_dir: Optional[Path] = typer.Option(None, "--site-dir", help="Static-site output (default <root>/_site)."),
    quick: bool = QUICK_OPTION,
    execute: bool = EXECUTE_OPTION,
    quarto: Optional[bool] = typer.Option(None, "--quarto/--static", help="Force Quarto or the static renderer."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="Execute only this notebook (repeatable)."),
    force: bool = FORCE_OPTION,
    rerun: Optional[list[str]] = typer.Option(
        None, "--rerun", help="Re-run this notebook's experiment (repeatable; e.g. 08_controls runs the organism "
        "control matrix, hours on 2 cores; 03_gate the gate validation, 14 min) instead of analysing the records "
        "there are."),
    check: bool = typer.Option(
        True, "--check/--no-check", help="Check every page written (Quarto's or the static renderer's) for what a "
        "reader must not see (an empty section, raw TeX, a Python repr, a JSON dump, an unformatted table, a "
        "traceback, English on a Chinese page) or a file it loads from another host, and exit 1 listing each "
        "problem; --no-check skips the check."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Execute the manifest notebooks (report/notebooks.yaml; unchanged ones are re-used), export the data runs,
    render the site into _site/ and check its pages."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.report.build import build_report

    result = build_report(root, run_dir=run_dir, site_dir=site_dir, quick=quick, execute=execute,
                          use_quarto=quarto, only=only, force=force, rerun=rerun or (), check=check, echo=note)
    found = sum(len(problems) for problems in result.problems.values())
    checked = f"page check: {found} problem(s)" if result.checked else "page check skipped (--no-check)"
    emit(result.to_dict(), as_json,
         f"{result.renderer} site: {result.site_dir} ({len(result.pages)} pages; {checked}); serve it with "
         f"`python -m http.server -d {result.site_dir}` and open http://127.0.0.1:8000/ (the episode browser "
         "reads its data over HTTP)")
    for page, problems in result.problems.items():
        for problem in problems:
            note(f"page problem: {page}: {problem}")
    if found:
        note(f"the page check found {found} problem(s) on {len(result.problems)} page(s), listed above: fix them, "
             "or build anyway with --no-check")
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def figures(
    root: Path = ROOT_OPTION,
    run_dir: Optional[Path] = RUN_DIR_OPTION,
    out: Optional[Path] = typer.Option(None, "--out", help="Figures folder inside ROOT (default <root>/figures)."),
    quick: bool = QUICK_OPTION,
    execute: bool = EXECUTE_OPTION,
    force: bool = FORCE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Execute the notebooks that publish figures (report/notebooks.yaml `figures:`; unchanged executions are
    re-used, shared with `report build`) and write those figures as SVG + PNG into figures/."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.report.build import (
        DEFAULT_RUN_DIR,
        MANIFEST_PATH,
        NOTEBOOKS_DIR,
        execute_notebooks,
        load_manifest,
    )
    from intraskill.report.figures import publish_figures

    base = root.resolve()
    out = confined(out, None, False, root=base) if out is not None else None
    manifest = load_manifest(base / MANIFEST_PATH)
    specs = [spec for spec in manifest.notebooks if spec.figures]
    executed_dir = (run_dir if run_dir is not None else base / DEFAULT_RUN_DIR) / "notebooks"
    runs = (execute_notebooks(specs, notebooks_dir=base / NOTEBOOKS_DIR, out_dir=executed_dir, quick=quick,
                              inputs=manifest.inputs, root=base, force=force, echo=note) if execute else [])
    published = publish_figures(specs, executed_dir, out if out is not None else base / "figures", echo=note)
    failed = [run.name for run in runs if run.status == "failed"]
    emit({"notebooks": [asdict(run) for run in runs], "figures": [asdict(figure) for figure in published],
          "failed": failed}, as_json, f"{len(published)} figures written")
    if failed:
        raise typer.Exit(1)


@app.command()
def headline(
    notebook: Path = typer.Argument(..., help="An executed notebook, e.g. runs/notebooks/02_train_round.ipynb."),
    label: str = typer.Option(..., "--label", help="The labelled cell whose output is the headline."),
) -> None:
    """Print the text a labelled cell of an executed notebook shows (e.g. a round's before → after with its
    paired interval and the tasks fixed and broken), then the notebook's path."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.report.site import cell_text

    if not notebook.is_file():
        fail(f"notebook: {notebook} does not exist (execute it first)")
    try:
        text = cell_text(notebook, label)
    except ValueError as error:
        fail(str(error))
    typer.echo(f"{text}\nexecuted notebook: {notebook.resolve()}")
