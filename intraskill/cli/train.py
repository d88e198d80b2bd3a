"""``intraskill warmstart``: the organism's behaviour-cloning warm start (heavy imports inside)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def warmstart_command(
    params: Path = typer.Option(..., "--params", help="Parameter file with a warmstart: section."),
    out: Path = typer.Option(None, "--out", help="Output directory (default: warmstart.out_dir)."),
    ship: Path = typer.Option(None, "--ship", help="Also copy checkpoint, manifest and ground truth here."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Collect S0-gated expert demos, behaviour-clone the organism, evaluate it and write the
    checkpoint, manifest.json and ground_truth.json; prints a JSON summary."""
    from intraskill.organism.shipped import ship_warmstart
    from intraskill.organism.warmstart import run_warmstart
    from intraskill.params import ParamsError, load_params

    try:
        loaded = load_params(params)
    except ParamsError as error:
        raise typer.BadParameter(str(error), param_hint="--params") from None
    manifest = run_warmstart(loaded, out, progress=progress)
    if ship is not None:
        ship_warmstart(out or loaded.warmstart.out_dir, ship)
    summary = {"out_dir": str(out or loaded.warmstart.out_dir),
               "checkpoint_sha256": manifest["checkpoint_sha256"],
               "timings": manifest["timings"], "final_loss": manifest["bc"]["losses"][-1][1],
               "bare": manifest["metrics"]["bare"], "s0": manifest["metrics"]["s0"]}
    typer.echo(json.dumps(summary))


def round_command(
    params: Path = typer.Option(
        Path("params/organism.yaml"), "--params", help="Parameter file with grpo: and round: sections."
    ),
    round_index: int = typer.Option(0, "--round", min=0, help="Round number (0 = the first round)."),
    out: Path = typer.Option(None, "--out", help="Round directory (default <run_root>/<experiment>/round-NNN)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Run (or resume) a training round: builds missing prerequisites (store, warm start, S0 curriculum),
    runs the rollout steps with GRPO updates and checkpoints, then the before/after bare val check.
    Prints the round directory, checkpoint, last step's metrics and the val comparison as one JSON object."""
    from intraskill.params import ParamsError, load_params
    from intraskill.pipeline.prepare import prepare_round, round_inputs_summary
    from intraskill.pipeline.round import RoundPlanMismatchError, resolve_project_path, run_round

    try:
        loaded = load_params(params if params.exists() else resolve_project_path(params))
    except ParamsError as error:
        raise typer.BadParameter(str(error), param_hint="--params") from None
    inputs = prepare_round(loaded, round_index, out, progress=progress)
    try:
        result = run_round(loaded, round_index, curriculum=inputs.curriculum, initial_checkpoint=inputs.checkpoint,
                           out_dir=out, progress=progress)
    except RoundPlanMismatchError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    val = None
    if result.comparison is not None:
        success = result.comparison["paired"]["metrics"]["r_success"]
        val = {"before": success["a_mean"], "after": success["b_mean"], "difference": success["mean_difference"],
               "ci95": success["confidence_interval"], "pairs": success["pairs"]}
    typer.echo(json.dumps({"round_dir": str(result.root), "checkpoint": str(result.model_dir),
                           "inputs": round_inputs_summary(inputs), "steps": len(result.metrics),
                           "last_step": result.metrics[-1] if result.metrics else None, "val_success": val}))


def co_evolve_command(
    params: Path = typer.Option(
        Path("params/organism.yaml"), "--params", help="Parameter file with grpo: and round: sections."
    ),
    rounds: int = typer.Option(..., "--rounds", min=1, help="Number of co-evolution rounds."),
    out: Path = typer.Option(None, "--out", help="Run dir (<run_root>/<experiment>/co-evolve)."),
    samples_per_task: int = typer.Option(1, "--samples-per-task", min=1, help="Gate rollouts per val task."),
    gate_task_limit: int = typer.Option(None, "--gate-task-limit", help="Gate val tasks (round.val_tasks)."),
    max_candidates: int = typer.Option(6, "--max-candidates", help="Candidates per round (1-16)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Run (or resume, or extend) skill-model co-evolution: per round train (GRPO with the curriculum),
    analyze the failed full-skill retries (rule analyst), gate the pool on the frozen checkpoint and build
    the next curriculum from the selected bank. Prints the run directory and per-round outcomes as JSON."""
    from intraskill.params import ParamsError, load_params
    from intraskill.pipeline.coevolve import (
        SUMMARY_FILE,
        CoEvolveConfig,
        CoEvolvePlanMismatchError,
        co_evolve,
    )
    from intraskill.pipeline.round import RoundPlanMismatchError, resolve_project_path

    try:
        loaded = load_params(params if params.exists() else resolve_project_path(params))
        config = CoEvolveConfig(samples_per_task=samples_per_task, gate_task_limit=gate_task_limit,
                                max_candidates=max_candidates)
    except (ParamsError, ValueError) as error:
        raise typer.BadParameter(str(error)) from None
    try:
        result = co_evolve(loaded, rounds, config=config, out_dir=out, progress=progress)
    except (CoEvolvePlanMismatchError, RoundPlanMismatchError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    summary = json.loads((result.run_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    typer.echo(json.dumps({"run_dir": str(result.run_dir), **summary}))
