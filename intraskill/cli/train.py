"""``intraskill round`` and ``co-evolve``: the training stages (heavy imports inside the command bodies)."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, emit, fail, load
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined
from intraskill.cli.trace2skill import (
    ANALYST_MAX_TOKENS_OPTION,
    ANALYST_MAX_TURNS_OPTION,
    ANALYST_MODEL_OPTION,
    ANALYST_OPTION,
    ANALYST_URL_OPTION,
    analyst_settings,
)
from intraskill.layout import RunDir

PARAMS_HELP = "Parameter file (params/*.yaml or a shipped name) with grpo: and round: sections."


def round_command(
    params: Path = typer.Option(Path("params/organism.yaml"), "--params", help=PARAMS_HELP),
    overrides: list[str] = SET_OPTION,
    round_index: int = typer.Option(0, "--round", min=0, help="Round number (0 = the first round)."),
    out: Path = typer.Option(None, "--out", help="Round directory (default <run_root>/<experiment>/round-NNN)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run (or resume) a training round from the resolved model.checkpoint (the organism's matching warm
    start) and S0's curriculum: rollout steps with GRPO updates and checkpoints, then the before/after
    bare val check."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.prepare import prepare_round
    from intraskill.pipeline.round import RoundPlanMismatchError, run_round
    from intraskill.training.checkpoint import CheckpointError

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside) if out is not None else None
    inputs = prepare_round(loaded, round_index, out)
    try:
        result = run_round(loaded, round_index, curriculum=inputs.curriculum, initial_checkpoint=inputs.checkpoint,
                           out_dir=out, progress=progress)
    except (RoundPlanMismatchError, CheckpointError) as error:
        fail(str(error))
    val = None
    if result.comparison is not None:
        success = result.comparison.metric("r_success")
        val = {"before": success.a_mean, "after": success.b_mean, "difference": success.mean_difference,
               "ci95": list(success.confidence_interval), "pairs": success.pairs}
    emit({"round_dir": str(result.root), "checkpoint": str(result.model_dir),
          "inputs": inputs.to_json(), "steps": len(result.metrics),
          "last_step": result.metrics[-1].to_dict() if result.metrics else None, "val_success": val}, as_json)


def co_evolve_command(
    params: Path = typer.Option(Path("params/organism.yaml"), "--params", help=PARAMS_HELP),
    overrides: list[str] = SET_OPTION,
    rounds: int = typer.Option(..., "--rounds", min=1, help="Number of co-evolution rounds."),
    out: Path = typer.Option(None, "--out", help="Run dir (<run_root>/<experiment>/co-evolve)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    rollouts_per_task: int = typer.Option(None, "--rollouts-per-task", min=1,
                                           help="Gate rollouts per val task (gate.samples_per_task)."),
    gate_task_limit: int = typer.Option(None, "--gate-task-limit", help="Gate val tasks (round.val_tasks)."),
    max_candidates: int = typer.Option(None, "--max-candidates",
                                       help="Candidates per round, 1-16 (coevolve.max_candidates)."),
    analyst: str = ANALYST_OPTION,
    analyst_url: str = ANALYST_URL_OPTION,
    analyst_model: str = ANALYST_MODEL_OPTION,
    analyst_max_turns: int = ANALYST_MAX_TURNS_OPTION,
    analyst_max_tokens: int = ANALYST_MAX_TOKENS_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run (or resume, or extend) skill-model co-evolution: per round train (GRPO with the curriculum),
    analyze the failed full-skill retries (the rule analyst, or an LLM over an OpenAI-compatible server),
    gate the pool on the frozen checkpoint and build the next curriculum from the selected bank."""
    settings = analyst_settings(analyst, analyst_url, analyst_model, analyst_max_turns, analyst_max_tokens)
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.coevolve import CoEvolveConfig, CoEvolvePlanMismatchError, CoEvolveSummary, co_evolve
    from intraskill.pipeline.round import RoundPlanMismatchError
    from intraskill.training.checkpoint import CheckpointError

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside) if out is not None else None
    given = {"samples_per_task": rollouts_per_task, "max_candidates": max_candidates}
    config = CoEvolveConfig.from_params(loaded, gate_task_limit=gate_task_limit, analyst=settings,
                                        **{name: value for name, value in given.items() if value is not None})
    try:
        result = co_evolve(loaded, rounds, config=config, out_dir=out, progress=progress)
    except (CoEvolvePlanMismatchError, RoundPlanMismatchError, CheckpointError) as error:
        fail(str(error))
    summary = CoEvolveSummary.read(RunDir(result.run_dir).summary).to_dict()
    emit({"run_dir": str(result.run_dir), **summary}, as_json)
