"""``intraskill experiment``: the control experiment (arms × seeds × rounds, each cell tested; heavy imports
inside the command body)."""

from __future__ import annotations

import json
from pathlib import Path

from typing import TYPE_CHECKING

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, emit, fail, load, note
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined

if TYPE_CHECKING:
    from intraskill.params import Params


def experiment_command(
    params: Path = typer.Option(Path("params/organism.yaml"), "--params",
                                help="Parameter file; its matrix: section gives the defaults below."),
    overrides: list[str] = SET_OPTION,
    arms: str = typer.Option(None, "--arms",
                             help="Comma-separated arms, e.g. coevolve,grpo,fixed,nomask,uniform,skill1."),
    seeds: int = typer.Option(None, "--seeds", help="Training seeds per arm (seed indices 0 … n−1)."),
    rounds: int = typer.Option(None, "--rounds", help="Rounds per cell."),
    test_tasks: int = typer.Option(None, "--test-tasks", help="Test tasks per evaluation (default: the split)."),
    repeats: int = typer.Option(None, "--repeats", help="Rollouts per test task (evaluation.repeats)."),
    out: Path = typer.Option(None, "--out", help="Matrix dir (<run_root>/<experiment>/controls)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    jobs: int = typer.Option(1, "--jobs", min=1, help="Cells run at once, one process each."),
    ray: str = typer.Option(None, "--ray", metavar="ADDRESS",
                            help="Run each cell as a Ray task on this cluster (local: start a local instance; auto: "
                            "this node's cluster) instead of --jobs; the matrix dir must be storage every node "
                            "shares at the same path."),
    ship: Path = typer.Option(None, "--ship", help="Then write the finished cells as shipped records (per-task "
                              "outcomes, no traces) into this folder, e.g. data/results/organism/controls."),
    records: Path = typer.Option(None, "--records", help="Keep the records here as the matrix goes (each finished "
                                 "cell, with its seed's baselines for grpo and coevolve) and restore the finished "
                                 "cells they hold instead of re-running them: a run that outlives its machine."),
    status: bool = typer.Option(False, "--status", help="Only say which declared cells and baselines have "
                                "finished (from which records exist; no outcome is read) and exit: what a "
                                "pre-registered matrix may show before it is complete."),
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Run (or resume, or extend) the control experiment: every arm trains from the same warm start with the
    same rounds and differs only in how skills enter; every cell's final checkpoint is tested bare and with
    its final bank (skill1: also deployed with its final library); grpo's final checkpoint is also deployed with
    S₀ and with coevolve's final bank of the same seed; arms are compared to grpo (and coevolve to every arm and
    to those two deployments) per seed and across seeds, beside a compute table per arm; verdicts only for the
    claims declared in matrix.family."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.experiment.matrix import MatrixPlanMismatchError, MatrixRayError, run_matrix
    from intraskill.pipeline.coevolve import CoEvolvePlanMismatchError
    from intraskill.pipeline.round import RoundPlanMismatchError
    from intraskill.training.checkpoint import CheckpointError

    flags = {"matrix.arms": f"[{arms}]" if arms is not None else None, "matrix.seeds": seeds,
             "matrix.rounds": rounds, "matrix.test_tasks": test_tasks, "evaluation.repeats": repeats}
    settings = [f"{field}={value}" for field, value in flags.items() if value is not None]
    if ray is not None and jobs > 1:
        fail("--jobs and --ray: give one (Ray places the cells itself)")
    loaded = load(params, overrides, settings)
    out = confined(out, loaded, allow_outside) if out is not None else None
    if status:
        _status(loaded, out, as_json)
        return
    try:
        result = run_matrix(loaded, out, jobs=jobs, progress=progress, ray_address=ray, records_dir=records)
    except (MatrixPlanMismatchError, MatrixRayError, CoEvolvePlanMismatchError, RoundPlanMismatchError,
            CheckpointError) as error:
        fail(str(error))
    if ship is not None:
        # deferred: a verb loads its stage only when it runs
        from intraskill.experiment.shipped import ship_matrix

        ship_matrix(result.out_dir, ship, family=loaded.matrix.family)
        note(f"shipped records of {len(result.cells)} cells written to {ship} (record the run in its PROVENANCE.md)")
    emit(json.loads(json.dumps(result.to_dict())), as_json, text=result.summary())


def _status(loaded: Params, out: Path | None, as_json: bool) -> None:
    """The declared cells' progress and the wall time its finished stages took (``--status``), without reading an
    outcome."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.experiment.matrix import default_matrix_dir
    from intraskill.experiment.progress import matrix_progress, matrix_timeline

    found = matrix_progress(out or default_matrix_dir(loaded), loaded.matrix.arms, loaded.matrix.seeds)
    timeline = matrix_timeline(found.out_dir)
    left = found.seconds_left(timeline)
    rows = found.table().to_dict("records")
    text = [f"{found.out_dir}: {len(found.finished)} of {len(found.arms) * found.seeds} declared cells finished"
            + ("" if found.missing else "; complete")
            + f"; {timeline.stages} stages ran {timeline.busy_seconds / 3600:.2f} h of wall time "
              f"({timeline.stage_seconds / 3600:.2f} h of stage time)"
            + ("" if left is None or not found.missing else f"; about {left / 3600:.1f} h left at that pace")]
    text += [f"  {row['training_arm']:<10} {row['finished']:>2} / {row['declared']}  seeds {row['finished_seeds'] or '-'}"
             for row in rows]
    emit({"out_dir": str(found.out_dir), "complete": found.complete, "missing": found.missing, "arms": rows,
          "timeline": timeline.to_dict(), "seconds_left": left},
         as_json, text="\n".join(text))
