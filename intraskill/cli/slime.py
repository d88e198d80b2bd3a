"""``intraskill slime-args``: what one slime round needs, written from a params file (``docs/slime.md``)."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, JSON_OPTION, SET_OPTION, confined, emit, load
from intraskill.integrations.slime.config import ARGS_ARRAY, DEFAULT_STORE_URL

TASK_FILE = "slime_train.jsonl"
CUSTOM_CONFIG_FILE = "slime.yaml"
ARGS_FILE = "slime_args.sh"


def slime_args_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (e.g. params/qwen35_4b.yaml)."),
    overrides: list[str] = SET_OPTION,
    round_index: int = typer.Option(0, "--round", min=0, help="Round number (0 = the first round)."),
    out: Path = typer.Option(..., "--out", help="Round directory: the hooks' training output directory."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    skillbank: Path = typer.Option(None, "--skillbank",
                                   help="The round's bank (default round.skillbank): S0 in round 0, the "
                                        "previous round's gate/selected_skillbank.json later."),
    arm: str = typer.Option(None, "--arm", help="Train a control-experiment cell: an arm of the matrix."),
    seed_index: int = typer.Option(0, "--seed-index", min=0, help="The cell's seed index (with --arm)."),
    store_url: str = typer.Option(DEFAULT_STORE_URL, "--store-url", help="The store service's URL."),
    store_root: Path = typer.Option(None, "--store-root", file_okay=False,
                                    help="Built store (default <run_root>/store/<scale>-<seed>)."),
    episode_concurrency: int = typer.Option(None, "--episode-concurrency", min=1,
                                            help="Episodes at once per rollout process (default 32)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write a slime round's task file, curriculum, custom config (slime.yaml) and argument list
    (slime_args.sh: every hook, the batch, sampling and optimizer settings of the params, the round's
    rollout ids and seeds)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.integrations.slime.config import (
        batch_flags,
        cell_round_params,
        launch_flags,
        round_run_config,
        write_custom_config,
        write_launch_args,
    )
    from intraskill.integrations.slime.data import write_slime_tasks
    from intraskill.paths import resolve_project_path, store_dir
    from intraskill.shop.build import build_store

    loaded = load(params, overrides)
    out = confined(out, loaded, allow_outside)
    cell = cell_round_params(loaded, arm, seed_index)
    if skillbank is None and cell.round.skillbank is None:
        raise ValueError("--skillbank: the round needs a bank (S0 in round 0, the previous gate's "
                         "selected_skillbank.json later); round.skillbank is null")
    bank = skillbank.resolve() if skillbank is not None else resolve_project_path(cell.round.skillbank)
    if not bank.is_file():
        raise FileNotFoundError(f"--skillbank: no SkillBank file at {bank}")
    out = out.resolve()
    batch_flags(cell, round_index)  # refuse unsupported parameters before writing anything
    settings: dict[str, object] = {"environment_base_url": store_url}
    if episode_concurrency is not None:
        settings["episode_concurrency"] = episode_concurrency
    config = round_run_config(cell, round_index, bank, out, **settings)
    custom = write_custom_config(config, out / CUSTOM_CONFIG_FILE)
    store = cell.store
    root = store_root or store_dir(store.scale, store.seed, cell.experiment.run_root)
    splits = build_store(root, store.scale, store.seed).splits
    tasks = write_slime_tasks(splits, out / TASK_FILE)
    flags = launch_flags(cell, round_index, custom, tasks)
    where = f"arm {arm}, seed index {seed_index}" if arm else "no arm"
    script = write_launch_args(flags, out / ARGS_FILE,
                               f"intraskill slime-args: round {round_index} of {params} ({where}); "
                               f'source it, then python3 train.py "${{{ARGS_ARRAY}[@]}}" <model, checkpoint, '
                               "parallelism and SGLang flags>")
    emit({"round_dir": str(out), "task_file": str(tasks), "tasks": len(splits.ids("train")),
          "curriculum": config.curriculum_path, "custom_config": str(custom), "args_file": str(script),
          "store_url": store_url, "args": flags}, as_json,
         "\n".join([f"task file: {tasks}", f"custom config: {custom}",
                    f"curriculum: {config.curriculum_path}",
                    f"arguments: {script} (source it; {ARGS_ARRAY})"]))
