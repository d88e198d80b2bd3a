"""``intraskill eval`` and ``intraskill compare``: resumable evaluation runs and paired comparisons."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def eval_command(
    params_path: Path = typer.Option(
        ..., "--params", exists=True, dir_okay=False, help="Parameter file (params/*.yaml)."
    ),
    split: str = typer.Option(..., "--split", help="Task split: val or test."),
    skills: str = typer.Option(..., "--skills", help="SkillBank JSON injected in every episode, or 'none'."),
    out: Path = typer.Option(..., "--out", help="Run directory (re-running the same plan resumes it)."),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint", help="Checkpoint directory; default params model.checkpoint; 'none' for none."
    ),
    model: str | None = typer.Option(
        None, "--model", help="Policy spec overriding model.spec, e.g. 'expert' or 'expert:without:page_on'."
    ),
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="Episodes per lockstep batch."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Evaluate only the split's first N tasks."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar on stderr."),
) -> None:
    """Evaluate a policy on val/test; prints the run's counts and primary block as one JSON object."""
    import yaml

    from intraskill.evaluate.runner import PlanMismatchError, run_eval
    from intraskill.params import ParamsError, load_params

    if split not in ("val", "test"):
        raise typer.BadParameter(f"expected val or test, got {split!r}", param_hint="--split")
    if skills.lower() != "none" and not Path(skills).is_file():
        raise typer.BadParameter(f"no such SkillBank file: {skills}", param_hint="--skills")
    try:
        params = load_params(params_path)
    except (ParamsError, yaml.YAMLError) as error:
        raise typer.BadParameter(str(error), param_hint="--params") from error
    if model is not None:
        params = params.model_copy(update={"model": params.model.model_copy(update={"spec": model})})
    if checkpoint is None:
        checkpoint = params.model.checkpoint
    elif checkpoint.lower() == "none":
        checkpoint = None
    try:
        run = run_eval(params, split, checkpoint, skills, out, progress=progress, batch_size=batch_size,
                       limit=limit)
    except PlanMismatchError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    report = {"run_dir": str(run.run_dir), "plan_fingerprint": run.plan.fingerprint,
              "counts": run.summary["counts"], "primary": run.summary["primary"]}
    typer.echo(json.dumps(report))
    if run.summary["counts"]["failed"]:
        raise typer.Exit(1)


def compare_command(
    run_a: Path = typer.Argument(..., exists=True, file_okay=False, help="Reference run a (the bare run)."),
    run_b: Path = typer.Argument(..., exists=True, file_okay=False, help="Treatment run b (b − a)."),
    kind: str = typer.Option(
        "same-checkpoint", "--kind", help="same-checkpoint (bare vs equipped) or cross-checkpoint."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object."),
    out: Path | None = typer.Option(None, "--out", help="Folder for comparison.json/.md (default RUN_B)."),
    samples: int = typer.Option(10_000, "--samples", min=100, help="Bootstrap resamples."),
    seed: int = typer.Option(20260901, "--seed", help="Bootstrap seed base; metric m uses u64('seed:m')."),
) -> None:
    """Align two runs and compare them task by task with paired bootstrap CIs."""
    from intraskill.evaluate.compare import (
        KINDS,
        AlignmentError,
        compare_runs,
        comparison_markdown,
        write_comparison,
    )

    if kind not in KINDS:
        raise typer.BadParameter(f"expected one of {KINDS}, got {kind!r}", param_hint="--kind")
    try:
        comparison = compare_runs(run_a, run_b, kind=kind, samples=samples, seed=seed)
    except (AlignmentError, FileNotFoundError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    write_comparison(comparison, out or run_b)
    typer.echo(json.dumps(comparison) if as_json else comparison_markdown(comparison))
