"""``intraskill gate …``: the paired validation gate's commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from intraskill.params import Params
    from intraskill.pipeline.gate_run import GateResult

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


def _load(params: Path) -> Params:
    from intraskill.params import ParamsError, load_params
    from intraskill.paths import params_path

    try:
        return load_params(params if params.exists() else params_path(str(params)))
    except ParamsError as error:
        raise typer.BadParameter(str(error), param_hint="--params") from None


def _echo_result(result: GateResult) -> None:
    manifest = result.manifest
    typer.echo(json.dumps({"gate_dir": str(result.gate_dir), "status": manifest["status"],
                           "outcomes": manifest["outcomes"],
                           "selected": list(result.contributions.selected_intervention_ids),
                           "next_curriculum": result.curriculum.state_id if result.curriculum else None}))


@app.command("run")
def run_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (store, model, sampling, evaluation)."),
    round_dir: Path = typer.Option(..., "--round-dir", exists=True, file_okay=False,
                                   help="Round directory: analysis/candidate_pool.json, checkpoint/model."),
    checkpoint_id: str = typer.Option(None, "--checkpoint-id", help="Checkpoint name (<round>-checkpoint)."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="Policy dir (<round-dir>/checkpoint/model)."),
    pool: Path = typer.Option(None, "--pool", help="Pool (<round-dir>/analysis/candidate_pool.json)."),
    out: Path = typer.Option(None, "--out", help="Gate directory; default <round-dir>/gate."),
    bare_run_dir: Path = typer.Option(None, "--bare-run-dir", help="Bare val run to reuse (run if missing)."),
    samples_per_task: int = typer.Option(1, "--samples-per-task", help="Masked rollouts per task (m)."),
    mask_seed: int = typer.Option(20260901, "--mask-seed", help="Seed of the mask draws."),
    task_limit: int = typer.Option(None, "--task-limit", help="First val tasks (evaluation.task_limit)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Run (or resume) the online gate of a round on its frozen checkpoint; prints one JSON object."""
    from intraskill.pipeline.gate_run import GateConfig, run_online_gate

    loaded = _load(params)
    ledger = round_dir / "analysis" / "proposal_ledger.jsonl"
    default_checkpoint = round_dir / "checkpoint" / "model"
    if checkpoint is None and loaded.model.spec != "expert" and not loaded.model.spec.startswith("expert:"):
        checkpoint = default_checkpoint
    try:
        config = GateConfig(checkpoint_id=checkpoint_id or f"{round_dir.name}-checkpoint",
                            mask_seed=mask_seed, samples_per_task=samples_per_task, task_limit=task_limit)
        result = run_online_gate(loaded, pool or round_dir / "analysis" / "candidate_pool.json",
                                 out or round_dir / "gate", config, checkpoint=checkpoint,
                                 bare_run_dir=bare_run_dir, ledger=ledger if ledger.is_file() else None,
                                 progress=progress)
    except (ValueError, FileNotFoundError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    _echo_result(result)


@app.command("gate-a")
def gate_a_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (store, model, sampling, evaluation)."),
    draft: Path = typer.Option(..., "--draft", exists=True, dir_okay=False, help="Draft bank (draft_only)."),
    out: Path = typer.Option(..., "--out", help="Gate A directory."),
    checkpoint_id: str = typer.Option(..., "--checkpoint-id", help="Name of the frozen checkpoint."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="Policy dir (model.checkpoint)."),
    ledger: Path = typer.Option(None, "--ledger", exists=True, dir_okay=False, help="ADD ledger to update."),
    bare_run_dir: Path = typer.Option(None, "--bare-run-dir", help="Bare val run to reuse (run if missing)."),
    samples_per_task: int = typer.Option(1, "--samples-per-task", help="Masked rollouts per task (m)."),
    mask_seed: int = typer.Option(20260901, "--mask-seed", help="Seed of the mask draws."),
    task_limit: int = typer.Option(None, "--task-limit", help="First val tasks (evaluation.task_limit)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Run (or resume) Gate A: Bernoulli(0.5) masks over a draft bank's chunks; prints one JSON object."""
    from intraskill.pipeline.gate_run import GateConfig, run_gate_a

    loaded = _load(params)
    try:
        config = GateConfig(checkpoint_id=checkpoint_id, mask_seed=mask_seed,
                            samples_per_task=samples_per_task, task_limit=task_limit)
        result = run_gate_a(loaded, draft, out, config, checkpoint=checkpoint or loaded.model.checkpoint,
                            bare_run_dir=bare_run_dir, ledger=ledger, progress=progress)
    except (ValueError, FileNotFoundError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from error
    _echo_result(result)
