"""``intraskill gate …``: the paired validation gate's commands."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, emit, fail, load
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined
from intraskill.layout import GateDir, RoundDir

if TYPE_CHECKING:
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
    as_json: bool = JSON_OPTION,
) -> None:
    """Refit the no-intercept paired-delta OLS and report the max |Δβ| against the stored coefficients."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.gate.ols import refit_path

    try:
        report = refit_path(contributions)
    except (ValueError, FileNotFoundError) as error:
        fail(f"{contributions}: {error}")
    rounds = report["rounds"]
    emit(report, as_json, "\n".join([f"rounds: {rounds if isinstance(rounds, int) else ', '.join(rounds)}",
                                     f"columns: {report['columns']}", f"observations: {report['observations']}",
                                     f"max |dbeta|: {report['max_abs_diff']:.3e}"]))


@app.command()
def show(
    gate_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="A finished gate directory."),
    as_json: bool = JSON_OPTION,
) -> None:
    """The gate's contributions table, its additivity test (computed from the rows when not stored) and the
    ranking check when one was run."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.gate.contributions import load_contributions

    try:
        gate = load_contributions(GateDir(gate_dir).contributions)
    except (ValueError, FileNotFoundError) as error:
        fail(f"{gate_dir}: {error}")
    if gate.additivity is None:
        gate = replace(gate, additivity=gate.additivity_test())
    ranking_path = GateDir(gate_dir).ranking_check
    ranking = json.loads(ranking_path.read_text(encoding="utf-8")) if ranking_path.is_file() else None
    text = gate.summary()
    if ranking is not None:
        text += "\n" + "\n".join(
            f"ranking {metric}: " + ", ".join(f"{name} {c['mean_difference']:+.4f} [{c['ci95'][0]:+.4f}, "
                                              f"{c['ci95'][1]:+.4f}]" for name, c in contrasts.items())
            for metric, contrasts in ranking["contrasts"].items())
    emit({"selected": gate.selected_intervention_ids, "additivity": gate.additivity.to_dict(),
          "ranking_check": ranking}, as_json, text)


def _echo_result(result: GateResult, as_json: bool) -> None:
    manifest = result.manifest
    emit({"gate_dir": str(result.gate_dir), "status": manifest.status,
          "outcomes": manifest.outcomes.to_dict() if manifest.outcomes is not None else None,
          "selected": list(result.contributions.selected_intervention_ids),
          "next_curriculum": result.curriculum.state_id if result.curriculum else None}, as_json)


ROLLOUTS_OPTION = typer.Option(None, "--rollouts-per-task", min=1,
                               help="Masked rollouts per val task, m (gate.samples_per_task).")
MASK_SEED_OPTION = typer.Option(None, "--mask-seed", help="Seed of the mask draws (gate.mask_seed).")
TASK_LIMIT_OPTION = typer.Option(None, "--task-limit", min=1, help="First val tasks (evaluation.task_limit).")
BARE_RUN_OPTION = typer.Option(None, "--bare-run-dir", help="Bare val run to reuse (run if missing).")


def _gate_options(mask_seed: int | None, rollouts_per_task: int | None) -> dict[str, int]:
    """The ``--mask-seed`` and ``--rollouts-per-task`` given, which override ``gate.mask_seed`` and
    ``gate.samples_per_task``."""
    given = {"mask_seed": mask_seed, "samples_per_task": rollouts_per_task}
    return {name: value for name, value in given.items() if value is not None}


@app.command("run")
def run_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (store, model, sampling, evaluation)."),
    overrides: list[str] = SET_OPTION,
    round_dir: Path = typer.Option(..., "--round-dir", exists=True, file_okay=False,
                                   help="Round directory: analysis/candidate_pool.json, checkpoint/model."),
    checkpoint_id: str = typer.Option(None, "--checkpoint-id", help="Checkpoint name (<round>-checkpoint)."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="Policy dir (<round-dir>/checkpoint/model)."),
    pool: Path = typer.Option(None, "--pool", help="Pool (<round-dir>/analysis/candidate_pool.json)."),
    out: Path = typer.Option(None, "--out", help="Gate directory; default <round-dir>/gate."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    bare_run_dir: Path = BARE_RUN_OPTION,
    rollouts_per_task: int = ROLLOUTS_OPTION,
    mask_seed: int = MASK_SEED_OPTION,
    task_limit: int = TASK_LIMIT_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run (or resume) the online gate of a round on its frozen checkpoint."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.gate_run import GateConfig, run_online_gate

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside) if out is not None else None
    files = RoundDir(round_dir)
    ledger = files.analysis.ledger
    default_checkpoint = files.checkpoint.model.root
    if checkpoint is None and loaded.model.spec != "expert" and not loaded.model.spec.startswith("expert:"):
        checkpoint = default_checkpoint
    config = GateConfig.from_params(loaded, checkpoint_id or f"{round_dir.name}-checkpoint", task_limit=task_limit,
                                    **_gate_options(mask_seed, rollouts_per_task))
    result = run_online_gate(loaded, pool or files.analysis.pool, out or files.gate.root, config,
                             checkpoint=checkpoint, bare_run_dir=bare_run_dir, ledger=ledger if ledger.is_file() else None,
                             progress=progress)
    _echo_result(result, as_json)


@app.command("gate-a")
def gate_a_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (store, model, sampling, evaluation)."),
    overrides: list[str] = SET_OPTION,
    draft: Path = typer.Option(..., "--draft", exists=True, dir_okay=False, help="Draft bank (draft_only)."),
    out: Path = typer.Option(..., "--out", help="Gate A directory."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    checkpoint_id: str = typer.Option(..., "--checkpoint-id", help="Name of the frozen checkpoint."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="Policy dir (default: model.checkpoint resolved)."),
    ledger: Path = typer.Option(None, "--ledger", exists=True, dir_okay=False, help="ADD ledger to update."),
    bare_run_dir: Path = BARE_RUN_OPTION,
    rollouts_per_task: int = ROLLOUTS_OPTION,
    mask_seed: int = MASK_SEED_OPTION,
    task_limit: int = TASK_LIMIT_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run (or resume) Gate A: Bernoulli(0.5) masks over a draft bank's chunks."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.gate_run import GateConfig, run_gate_a
    from intraskill.policy.warmstarts import resolve_checkpoint

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside)
    if checkpoint is None:
        checkpoint = resolve_checkpoint(loaded, params)[0]
    config = GateConfig.from_params(loaded, checkpoint_id, task_limit=task_limit,
                                    **_gate_options(mask_seed, rollouts_per_task))
    result = run_gate_a(loaded, draft, out, config, checkpoint=checkpoint, bare_run_dir=bare_run_dir,
                        ledger=ledger, progress=progress)
    _echo_result(result, as_json)


@app.command("ranking")
def ranking_command(
    params: Path = typer.Option(..., "--params", help="Parameter file of the gate's run."),
    overrides: list[str] = SET_OPTION,
    gate_dir: Path = typer.Option(..., "--gate-dir", exists=True, file_okay=False, help="A finished gate."),
    draft: Path = typer.Option(None, "--draft", exists=True, dir_okay=False, help="Gate A's draft bank."),
    pool: Path = typer.Option(None, "--pool", exists=True, dir_okay=False, help="The online gate's candidate pool."),
    checkpoint: Path = typer.Option(None, "--checkpoint", help="The gate's policy dir (default: model.checkpoint)."),
    k: int = typer.Option(None, "--k", min=1, help="Chunks per arm, top-K, bottom-K, random-K (gate.ranking_k)."),
    random_seeds: str = typer.Option(None, "--random-seeds",
                                     help="Comma-separated seeds of the random arms (gate.ranking_seed)."),
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Ranking check: val runs of the gate's top-K, bottom-K and random-K banks, task-paired with its bare run
    ((2 + random seeds) × tasks × m extra episodes)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.gate_run import pool_versions, run_ranking_check
    from intraskill.policy.warmstarts import resolve_checkpoint
    from intraskill.skills.bank import load_skillbank
    from intraskill.skills.pool import load_pool

    if (draft is None) == (pool is None):
        fail("give exactly one of --draft (Gate A) and --pool (online gate): the skills behind the columns")
    versions = ({s.skill_id: s for s in load_skillbank(draft).enabled_skills()} if draft is not None
                else pool_versions(load_pool(pool)))
    loaded = load(params, overrides)
    if checkpoint is None and loaded.model.spec != "expert" and not loaded.model.spec.startswith("expert:"):
        checkpoint = resolve_checkpoint(loaded, params)[0]
    seeds = ([loaded.gate.ranking_seed] if random_seeds is None
             else [int(s) for s in random_seeds.split(",") if s.strip()])
    check = run_ranking_check(loaded, gate_dir, versions, k=loaded.gate.ranking_k if k is None else k,
                              random_seeds=seeds, checkpoint=checkpoint,
                              progress=progress)
    emit(check.to_dict(), as_json, check.summary())
