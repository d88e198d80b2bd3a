"""``intraskill trl``: train a model on the store with TRL's GRPOTrainer (the recipe of ``docs/trl.md``; the ``trl``
extra)."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import typer

from intraskill.cli.common import JSON_OPTION, PROGRESS_OPTION, SET_OPTION, emit, fail, load, note
from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, confined
from intraskill.layout import ModelDir


def trl_command(
    params_path: Path = typer.Option(Path("params/organism.yaml"), "--params",
                                     help="Parameter file with grpo:, round: and sampling: sections."),
    model_dir: Path | None = typer.Option(
        None, "--model", help="A Hugging Face model directory to train (default: the params' model and checkpoint)."),
    steps: int = typer.Option(3, "--steps", min=1, help="Rollout steps (each ends in its optimizer updates)."),
    skills: bool = typer.Option(False, "--skills", help="S0's chunks in the prompts, with the round's group-shared "
                                                        "masks (default: every episode bare)."),
    env_url: str | None = typer.Option(
        None, "--env-url", help="Play the store served as an OpenEnv environment at this URL (intraskill env serve "
                                "--protocol openenv --params P; the openenv extra) instead of an engine in process."),
    store_root: Path | None = typer.Option(None, "--store-root", help="The built store (default: the params')."),
    out: Path = typer.Option(Path("runs/trl-grpo"), "--out", help="Output directory: TRL's files and the model."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    threads: int | None = typer.Option(None, "--threads", min=1, help="Torch threads (default: torch's)."),
    overrides: list[str] = SET_OPTION,
    progress: bool = PROGRESS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Train with TRL's GRPOTrainer on store episodes: the organism's warm start on CPU by default, any Hugging Face
    directory with --model, SmolLM2 with --params params/smollm2.yaml (on a GPU when model.device finds one); saves
    the model under OUT/model and prints each step's episodes, success and time, then a summary."""
    if model_dir is not None and not ModelDir(model_dir).is_saved():
        fail(f"--model: {model_dir} is not a Hugging Face model directory (no config.json)")
    try:
        # deferred: the trl extra is optional and heavy to import
        from intraskill.integrations.trl.recipe import build_trainer, round_tasks, store_rollout
    except ModuleNotFoundError as error:
        fail(f"intraskill trl needs the trl extra (pip install 'intraskill[trl]'): {error}")
    # deferred: a verb loads its stage only when it runs
    from intraskill.pipeline.prepare import prepare_round
    from intraskill.pipeline.round import open_train_store
    from intraskill.policy.factory import load_model
    from intraskill.policy.warmstarts import resolve_checkpoint

    params = load(params_path, overrides)
    out = confined(out, params, allow_outside)
    if threads is not None:
        # deferred: torch is heavy to import
        import torch

        torch.set_num_threads(threads)
    tokenizer = None
    if model_dir is not None:
        model = model_dir
    elif params.model.spec == "organism":
        checkpoint, warmstart = resolve_checkpoint(params, params_path)
        if checkpoint is None:
            fail("--params: model.checkpoint is untrained (no weights); pass --model")
        if warmstart is not None:
            note(f"model.checkpoint: null -> the warm start {warmstart}")
        model = Path(checkpoint)
    else:  # smollm2 or a model directory, loaded (and a LoRA warm start merged) as the package loads it
        model, tokenizer, _, _ = load_model(params.model.spec, checkpoint=params.model.checkpoint)
    curriculum = prepare_round(params, out_dir=out).curriculum if skills else None
    start = time.perf_counter()
    store = open_train_store(params, store_root)
    try:  # a served store that is not the parameter set's ends in one line (the CLI's user errors)
        rollout = (store_rollout(params, curriculum=curriculum, progress=progress, env_url=env_url) if env_url
                   else store_rollout(params, store.engine, curriculum, progress=progress))
        trainer = build_trainer(params, model, rollout, round_tasks(params, store.task_ids, steps), out / "trainer",
                                steps, tokenizer=tokenizer, disable_tqdm=not progress)
        with contextlib.redirect_stdout(sys.stderr):  # TRL prints its logs: stdout keeps the one summary
            trainer.train()
        trainer.save_model(str(out / "model"))
    finally:
        store.close()
    per_step = [{"step": step, "episodes": stats.episodes, "success_rate": stats.successes / stats.episodes,
                 "rollout_s": round(stats.seconds, 2), "store_s": round(stats.store_seconds, 3)}
                for step, stats in enumerate(rollout.stats, start=1)]
    rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    emit({"model": str(model_dir or params.model.checkpoint or params.model.spec), "steps": steps,
          "skills": curriculum is not None, "store": env_url or "in process",
          "seconds": round(time.perf_counter() - start, 1), "reward_per_step": rewards, "per_step": per_step,
          "saved": str(out / "model")}, as_json)
