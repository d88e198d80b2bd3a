"""``intraskill eval`` and ``intraskill compare``: resumable evaluation runs and paired comparisons."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, default, emit, fail, load, note
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined
from intraskill.params import EvaluationParams


def eval_command(
    params_path: Path = typer.Option(..., "--params", help="Parameter file (params/*.yaml or a shipped name)."),
    split: str = typer.Option(..., "--split", help="Task split: val, test (declared claims only) or dev (probes; carved from train)."),
    skills: str = typer.Option(..., "--skills", help="SkillBank JSON injected in every episode, or 'none'."),
    out: Path = typer.Option(..., "--out", help="Run directory (re-running the same plan resumes it)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    library: Path | None = typer.Option(
        None, "--library", help="Skill1: deploy this library snapshot.json (query, retrieval, rank, act; frozen, no "
                                "distillation) with the params' skill1: settings; needs --skills none."),
    overrides: list[str] = SET_OPTION,
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Episodes per lockstep batch (default evaluation.batch_size)."),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the split's first N tasks (a subset sized to the machine; default all)."),
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Evaluate the params' policy on val/test/dev (model.checkpoint: null = the matching warm start for the
    organism; choose others with --set model.checkpoint=DIR|untrained, --set model.spec=expert)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.evaluate.runner import PlanMismatchError, run_eval
    from intraskill.evaluate.skill1_deploy import LibraryDeployment
    from intraskill.evaluate.summary import summary_text
    from intraskill.policy.warmstarts import resolve_checkpoint

    if split not in ("val", "test", "dev"):
        fail(f"--split: expected val, test or dev, got {split!r}")
    if skills.lower() != "none" and not Path(skills).is_file():
        fail(f"--skills: no such SkillBank file: {skills}")
    if library is not None and skills.lower() != "none":
        fail("--library: a Skill1 library replaces the bank; give --skills none")
    if library is not None and not library.is_file():
        fail(f"--library: no such library snapshot: {library}")
    params = load(params_path, overrides)
    out = confined(out, params, allow_outside)
    try:
        deployment = LibraryDeployment.from_snapshot(library, params.skill1) if library is not None else None
    except ValueError as error:  # SkillLibraryError and a snapshot that is not JSON
        fail(f"--library: {library}: {error}")
    checkpoint, warmstart = resolve_checkpoint(params, params_path)
    if warmstart is not None:
        note(f"model.checkpoint: null -> the warm start {warmstart}")
    try:
        run = run_eval(params, split, checkpoint, None if deployment else skills, out, progress=progress,
                       batch_size=batch_size, library=deployment, limit=limit)
    except PlanMismatchError as error:
        fail(str(error))
    summary = run.summary
    record = {"run_dir": str(run.run_dir), "checkpoint": checkpoint, "plan_fingerprint": run.plan.fingerprint,
              "counts": summary.counts.to_dict(), "primary": summary.primary.to_dict(),
              "behavior": summary.behavior.model_dump(include={"steps_mean", "protocol_error_rate",
                                                               "invalid_action_rate"})}
    emit(record, as_json, text=summary_text(summary, str(run.run_dir)))
    if summary.counts.failed:
        raise typer.Exit(1)


def compare_command(
    run_a: Path = typer.Argument(..., exists=True, file_okay=False, metavar="A",
                                 help="Reference run A (the bare run)."),
    run_b: Path = typer.Argument(..., exists=True, file_okay=False, metavar="B",
                                 help="Treatment run B; differences are B − A."),
    kind: str = typer.Option(
        "same-checkpoint", "--kind", help="same-checkpoint (bare vs equipped) or cross-checkpoint."
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for comparison.json/.md (default RUN_B)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    samples: int = typer.Option(default(EvaluationParams, "bootstrap_samples"), "--samples", min=100,
                                help="Bootstrap resamples."),
    seed: int = typer.Option(default(EvaluationParams, "bootstrap_seed"), "--seed",
                             help="Bootstrap seed base; metric m uses u64('seed:m')."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Align two evaluation runs and compare them task by task with paired bootstrap CIs."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.evaluate.compare import (
        KINDS,
        AlignmentError,
        compare_runs,
        comparison_markdown,
        write_comparison,
    )

    if out is not None:
        out = confined(out, None, allow_outside)
    if kind not in KINDS:
        fail(f"--kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    try:
        comparison = compare_runs(run_a, run_b, kind=kind, samples=samples, seed=seed)
    except AlignmentError as error:
        fix = ("; runs of two checkpoints compare with --kind cross-checkpoint"
               if kind == "same-checkpoint" and "model" in str(error) else "")
        fail(f"{error}{fix}")
    write_comparison(comparison, out or run_b)
    emit(comparison.to_dict(), as_json, comparison_markdown(comparison))

