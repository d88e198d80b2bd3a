"""The package's GRPO round against TRL's GRPOTrainer, side by side on the organism.

Both arms start from the same warm start (``params/organism_warmstart``) with the same store, tasks, group size,
rollout steps and optimizer settings, as plain GRPO (the control experiment's ``grpo`` arm: no skill, no mask, no
retry): the package's round (:func:`~intraskill.pipeline.round.run_round`) and TRL's trainer through
:mod:`intraskill.integrations.trl` (:func:`~intraskill.integrations.trl.recipe.round_tasks`: the first groups
the round draws at each step). Each arm runs in its own process, so its peak RSS is its own. Prints one JSON
object: per arm, seconds per rollout step split into generation / store / training, tokens per second, peak
RSS, and the bare val success after the steps; then the paired comparison of the two trained models on the
same val tasks (task-level paired bootstrap, :func:`~intraskill.evaluate.compare.compare_runs`) and of each
against the warm start.

    OMP_NUM_THREADS=1 python benchmarks/bench_trl_parity.py --steps 3 --val-tasks 100 --threads 1 \\
        [--store-root runs/store/default-20260829] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intraskill.params import BUILTIN_ARMS, Params, load_params, params_from_dict

ARMS = ("intraskill", "trl")


def parity_params(params_path: str, steps: int, val_tasks: int) -> Params:
    """The ``grpo`` arm's parameters (seed index 0) with the step count and val size of the benchmark; no skill
    bank, so the round builds no curriculum (the matrix passes none for a skill-free arm)."""
    # deferred: the experiment layer is only needed in the arm processes
    from intraskill.experiment.arms import cell_params

    data = cell_params(load_params(params_path), BUILTIN_ARMS["grpo"], 0).model_dump(mode="json")
    data["round"].update(rollout_steps=steps, val_tasks=val_tasks, skillbank=None)
    return params_from_dict(data, source="bench_trl_parity")


def peak_rss_mib() -> float:
    """This process's peak resident set size (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def step_summary(steps: list[dict[str, float]]) -> dict[str, Any]:
    """Median seconds per rollout step by phase (wall and CPU), and throughputs over all steps."""
    phases = ("step_s", "generation_s", "store_s", "train_s", "generation_cpu_s", "train_cpu_s")
    total = {key: sum(step[key] for step in steps)
             for key in (*phases, "sampled_tokens", "train_tokens", "episodes", "trained_episodes")}
    return {
        "steps": len(steps),
        "median_s": {key: statistics.median(step[key] for step in steps) for key in phases},
        "total_s": {key: total[key] for key in phases},
        "episodes": int(total["episodes"]),
        "trained_episodes": int(total["trained_episodes"]),
        "generated_tokens_per_s": total["sampled_tokens"] / total["generation_s"],
        "generated_tokens_per_cpu_s": total["sampled_tokens"] / total["generation_cpu_s"],
        "train_tokens_per_s": total["train_tokens"] / total["train_s"],
        "train_tokens_per_cpu_s": total["train_tokens"] / total["train_cpu_s"],
        "per_step": steps,
    }


def run_intraskill(params: Params, out: Path, store_root: str | None) -> dict[str, Any]:
    """The package's round (no val inside it), then the bare val of the warm start and of the trained model.

    Per step: wall phases from the round's metrics, store seconds from a timed environment, CPU seconds of
    rollout (step start → admission) and training (admission → trained) from the round's events.
    """
    # deferred: heavy imports only in the arm process
    import intraskill.pipeline.round as round_module
    from intraskill.agent.env import InProcessEnvironment
    from intraskill.integrations.trl.rollout import StoreClock, TimedEnvironment
    from intraskill.pipeline.round import bare_val, run_round, trained_policy
    from intraskill.policy.warmstarts import resolve_checkpoint
    from intraskill.training.metrics import ROLLOUT_PREFIX

    clock = StoreClock()
    marks: dict[str, list[tuple[float, float]]] = {name: [] for name in ("step-start", "admitted", "trained",
                                                                         "step-done")}
    round_module.InProcessEnvironment = lambda engine: TimedEnvironment(InProcessEnvironment(engine), clock)

    def on_event(name: str, info: Mapping[str, Any]) -> None:
        if name in marks:
            marks[name].append((clock.seconds, time.process_time()))

    start = time.perf_counter()
    train_params = params.model_copy(update={"round": params.round.model_copy(update={"val_tasks": 0})})
    result = run_round(train_params, out_dir=out / "round", store_root=store_root, progress=False,
                       on_event=on_event)
    train_wall, train_rss = time.perf_counter() - start, peak_rss_mib()
    steps = []
    for index, row in enumerate(result.metrics):
        store = marks["step-done"][index][0] - marks["step-start"][index][0]
        rollout, shopsim = row.time.rollout_s + row.time.retry_s, ROLLOUT_PREFIX
        episodes = int(row.rollout[shopsim + "trajectory_count"])
        steps.append({
            "step_s": rollout + row.time.train_s + row.time.io_s,
            "generation_s": rollout - store, "store_s": store, "train_s": row.time.train_s,
            "generation_cpu_s": marks["admitted"][index][1] - marks["step-start"][index][1],
            "train_cpu_s": marks["trained"][index][1] - marks["admitted"][index][1],
            "episodes": episodes, "waves": int(row.rollout[shopsim + "wave_count"]),
            "trained_episodes": int(row.rollout[shopsim + "train_trajectory_count"]),
            "sampled_tokens": float(row.rollout[shopsim + "completion_tokens_mean"]) * episodes,
            "train_tokens": float(row.train.tokens_per_s) * row.time.train_s,
        })
    warm = trained_policy(params, Path(resolve_checkpoint(params)[0]))
    before = bare_val(params, warm, out / "val-before", store_root, progress=False)
    trained = trained_policy(params, result.model_dir)
    after = bare_val(params, trained, out / "val-after", store_root, progress=False)
    return {"wall_s": time.perf_counter() - start, "train_wall_s": train_wall, "train_peak_rss_mib": train_rss,
            "val_before": str(out / "val-before"), "val_after": str(out / "val-after"),
            "val_success_before": before.primary.to_dict(), "val_success_after": after.primary.to_dict(),
            **step_summary(steps)}


def run_trl(params: Params, out: Path, store_root: str | None) -> dict[str, Any]:
    """TRL's GRPOTrainer through the recipe, then the bare val of the trained model.

    Per step: wall and CPU seconds from a step callback, the rollout's share (and the store's) from its stats.
    """
    # deferred: heavy imports only in the arm process
    from transformers import TrainerCallback

    from intraskill.integrations.trl.recipe import build_trainer, round_tasks, store_rollout
    from intraskill.pipeline.round import bare_val, open_train_store, trained_policy
    from intraskill.policy.warmstarts import resolve_checkpoint

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[tuple[float, float]] = []
            self.started = (0.0, 0.0)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = (time.perf_counter(), time.process_time())

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.steps.append((time.perf_counter() - self.started[0], time.process_time() - self.started[1]))

    start = time.perf_counter()
    store = open_train_store(params, store_root)
    steps_n = params.round.rollout_steps
    rollout = store_rollout(params, store.engine)
    trainer = build_trainer(params, Path(resolve_checkpoint(params)[0]), rollout,
                            round_tasks(params, store.task_ids, steps_n), out / "trainer", steps_n)
    clock = StepClock()
    trainer.add_callback(clock)
    trainer.train()
    train_wall, train_rss = time.perf_counter() - start, peak_rss_mib()
    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    store.close()
    after = bare_val(params, trained_policy(params, model_dir), out / "val-after", store_root, progress=False)
    steps = [{
        "step_s": step_s, "generation_s": stats.generation_seconds, "store_s": stats.store_seconds,
        "train_s": step_s - stats.seconds,
        "generation_cpu_s": stats.cpu_seconds, "train_cpu_s": step_cpu - stats.cpu_seconds,
        "episodes": stats.episodes, "trained_episodes": stats.episodes,
        "sampled_tokens": stats.sampled_tokens, "train_tokens": stats.total_tokens,
    } for (step_s, step_cpu), stats in zip(clock.steps, rollout.stats)]
    return {"wall_s": time.perf_counter() - start, "train_wall_s": train_wall, "train_peak_rss_mib": train_rss,
            "val_after": str(out / "val-after"), "val_success_after": after.primary.to_dict(), **step_summary(steps)}


def run_arm(arm: str, params_path: str, steps: int, val_tasks: int, threads: int, store_root: str | None,
            out: Path) -> dict[str, Any]:
    """One arm in this process; its JSON report with the peak RSS."""
    # deferred: torch is heavy to import
    import torch

    torch.set_num_threads(threads)
    params = parity_params(params_path, steps, val_tasks)
    runner = run_intraskill if arm == "intraskill" else run_trl
    report = runner(params, out, store_root)
    return {**report, "peak_rss_mib": peak_rss_mib(), "threads": threads}


def paired(run_a: str, run_b: str, params: Params) -> dict[str, Any]:
    """Bare val ``r_success`` of b minus a, task-level paired bootstrap."""
    # deferred: the evaluation layer is only needed at the end
    from intraskill.evaluate.compare import compare_runs

    comparison = compare_runs(run_a, run_b, kind="cross-checkpoint", samples=params.evaluation.bootstrap_samples,
                              seed=params.evaluation.bootstrap_seed)
    return {"a": run_a, "b": run_b, **comparison.metric("r_success").to_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params/organism.yaml")
    parser.add_argument("--steps", type=int, default=3, help="rollout steps per arm")
    parser.add_argument("--val-tasks", type=int, default=100, help="bare val tasks after training (and before)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per arm")
    parser.add_argument("--store-root", default=None, help="the built store (default: the params' cached store)")
    parser.add_argument("--out", default=None, help="output directory (default: a temporary one)")
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.val_tasks < 1 or args.threads < 1:
        parser.error("--steps, --val-tasks and --threads must be >= 1")
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-trl-parity-"))
    if args.arm is not None:
        report = run_arm(args.arm, args.params, args.steps, args.val_tasks, args.threads, args.store_root,
                         out / args.arm)
        print(json.dumps(report))
        return
    arms = {}
    for arm in ARMS:
        command = [sys.executable, __file__, "--arm", arm, "--params", args.params, "--steps", str(args.steps),
                   "--val-tasks", str(args.val_tasks), "--threads", str(args.threads), "--out", str(out)]
        if args.store_root:
            command += ["--store-root", args.store_root]
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        arms[arm] = json.loads(done.stdout.strip().splitlines()[-1])
    params = parity_params(args.params, args.steps, args.val_tasks)
    ours, trl = arms["intraskill"], arms["trl"]
    print(json.dumps({
        "params": args.params, "arm": "grpo", "steps": args.steps, "val_tasks": args.val_tasks,
        "threads": args.threads, "out": str(out), "arms": arms,
        "val_success": {
            "warm_start": paired(ours["val_before"], ours["val_after"], params)["a_mean"],
            "intraskill_vs_warm_start": paired(ours["val_before"], ours["val_after"], params),
            "trl_vs_warm_start": paired(ours["val_before"], trl["val_after"], params),
            "trl_minus_intraskill": paired(ours["val_after"], trl["val_after"], params),
        },
    }, indent=1))


if __name__ == "__main__":
    main()
