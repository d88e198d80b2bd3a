"""``intraskill warmstart`` and ``warmstart-skill1``: the organism testbed's own verbs, the only commands that
import :mod:`intraskill.organism` (heavy imports inside the command bodies)."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import (
    ALLOW_OUTSIDE_OPTION,
    JSON_OPTION,
    PROGRESS_OPTION,
    SET_OPTION,
    confined,
    emit,
    load,
)
from intraskill.layout import WarmstartDir
from intraskill.paths import resolve_project_path


def warmstart_command(
    params: Path = typer.Option(..., "--params", help="Parameter file with a warmstart: section."),
    overrides: list[str] = SET_OPTION,
    out: Path = typer.Option(None, "--out", help="Output directory (default: warmstart.out_dir)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    ship: Path = typer.Option(None, "--ship", help="Also copy checkpoint, manifest and ground truth here."),
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Collect S0-gated expert demos, behaviour-clone the organism (or a pretrained model.spec such as smollm2,
    with LoRA or in full), evaluate it and write the checkpoint, manifest.json and ground_truth.json."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.organism.shipped import ship_warmstart
    from intraskill.organism.warmstart import run_warmstart

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside) if out is not None else None
    manifest = run_warmstart(loaded, out, progress=progress)
    if ship is not None:
        ship_warmstart(out or loaded.warmstart.out_dir, ship)
    emit({"out_dir": str(out or loaded.warmstart.out_dir), "checkpoint_sha256": manifest.checkpoint_sha256,
          "timings": manifest.timings, "final_loss": manifest.final_loss,
          "bare": manifest.metrics.bare.to_dict(), "s0": manifest.metrics.s0.to_dict()}, as_json)


def warmstart_skill1_command(
    params: Path = typer.Option(Path("params/organism_skill1.yaml"), "--params",
                                help="Parameter file with warmstart:, skill1: and skill1_warmstart: sections."),
    overrides: list[str] = SET_OPTION,
    out: Path = typer.Option(None, "--out", help="Output directory (default: skill1_warmstart.out_dir)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    ship: Path = typer.Option(None, "--ship", help="Also copy the checkpoint and manifest here."),
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Continue the organism's warm start on the S0-lesson expert's Skill1 trajectories (query, rank, episode,
    distillation), evaluate it through the Skill1 path on val and write the checkpoint and manifest.json."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.organism.shipped import ship_warmstart
    from intraskill.organism.skill1_warmstart import run_skill1_warmstart

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside) if out is not None else None
    out_dir = resolve_project_path(out or loaded.skill1_warmstart.out_dir)
    manifest = run_skill1_warmstart(loaded, out_dir, progress=progress)
    if ship is not None:
        ship_warmstart(out_dir, ship, files=(WarmstartDir.MANIFEST,))
    metrics = manifest.metrics
    emit({"out_dir": str(out_dir), "checkpoint_sha256": manifest.checkpoint_sha256, "timings": manifest.timings,
          "final_loss": manifest.final_loss, "protocol_error_rate": metrics.protocol_error_rate,
          "success": metrics.success.to_dict(), "ranking": metrics.ranking.to_dict()}, as_json)
