"""A training round's wall time split into rollout, retry, training and I/O.

Runs one full round (``intraskill round`` logic: prerequisites, rollout steps, GRPO updates,
checkpoints, the before/after bare val check) into a fresh directory and prints one JSON object:
the total wall time, the setup (store, policy, plan) and val phases, and per rollout step the
seconds spent generating episodes, running full-skill retries, in the trainer update and in I/O
(step files, checkpoint, metrics), with their shares of the step time and the throughputs
(episodes/s of rollout, trainer tokens/s).

    OMP_NUM_THREADS=2 python benchmarks/bench_round.py                      # params/ci.yaml
    OMP_NUM_THREADS=2 python benchmarks/bench_round.py --params params/organism.yaml --steps 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intraskill.params import Params, load_params, params_from_dict
from intraskill.training.metrics import ROLLOUT_PREFIX, RoundStepMetrics

PHASES = ("rollout_s", "retry_s", "train_s", "io_s")


def with_overrides(params: Params, steps: int | None, val_tasks: int | None) -> Params:
    """``params`` with the round's step count and val size replaced where given."""
    data = params.model_dump(mode="json")
    if steps is not None:
        data["round"]["rollout_steps"] = steps
    if val_tasks is not None:
        data["round"]["val_tasks"] = val_tasks
    return params_from_dict(data)


class PhaseClock:
    """Round events → wall-clock marks (``round-start``, first ``step-start``, last ``step-done``, ``round-done``)."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}

    def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        if name == "step-start":
            self.marks.setdefault("first_step", now)
        elif name == "step-done":
            self.marks["last_step_done"] = now
        elif name in ("round-start", "round-done"):
            self.marks[name] = now


def summarize(rows: list[RoundStepMetrics], clock: PhaseClock, start: float, end: float,
              prepare_s: float) -> dict[str, Any]:
    """The JSON report of one benchmarked round."""
    totals = {phase: sum(getattr(row.time, phase) for row in rows) for phase in PHASES}
    step_s = sum(totals.values())
    episodes = sum(int(row.rollout[ROLLOUT_PREFIX + "trajectory_count"] or 0) for row in rows)
    marks = clock.marks
    return {
        "wall_s": end - start,
        "prepare_s": prepare_s,
        "setup_s": marks["round-start"] - start - prepare_s,
        "val_before_s": marks["first_step"] - marks["round-start"],
        "steps_s": marks["last_step_done"] - marks["first_step"],
        "val_after_s": marks["round-done"] - marks["last_step_done"],
        "steps": len(rows),
        "phases_s": totals,
        "phase_shares": {phase: value / step_s if step_s else None for phase, value in totals.items()},
        "rollout_episodes": episodes,
        "rollout_episodes_per_s": episodes / totals["rollout_s"] if totals["rollout_s"] else None,
        "train_tokens_per_s": [row.train.tokens_per_s for row in rows],
        "train_padding_waste": [row.train.padding_waste for row in rows],
        "success_rate": [row.rollout.get(ROLLOUT_PREFIX + "success_rate") for row in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params/ci.yaml", help="parameter file (default params/ci.yaml)")
    parser.add_argument("--steps", type=int, default=None, help="rollout steps (default: the file's)")
    parser.add_argument("--val-tasks", type=int, default=None, help="val tasks of the before/after check")
    parser.add_argument("--random-init", action="store_true",
                        help="start from a random-init organism without skills (skip the warm start)")
    parser.add_argument("--out", default=None, help="round directory (default: a fresh temporary one)")
    args = parser.parse_args()

    from intraskill.pipeline.prepare import prepare_round
    from intraskill.pipeline.round import run_round

    params = with_overrides(load_params(args.params), args.steps, args.val_tasks)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-round-")) / "round-000"
    start = time.perf_counter()
    curriculum, checkpoint = None, None
    if not args.random_init:
        inputs = prepare_round(params, 0, out)
        curriculum, checkpoint = inputs.curriculum, inputs.checkpoint
    prepare_s = time.perf_counter() - start
    clock = PhaseClock()
    result = run_round(params, 0, curriculum=curriculum, initial_checkpoint=checkpoint, out_dir=out,
                       progress=False, on_event=clock)
    end = time.perf_counter()
    report = {"params": args.params, "round_dir": str(out), "start": checkpoint or "random-init",
              **summarize(result.metrics, clock, start, end, prepare_s)}
    if result.comparison is not None:
        success = result.comparison.metric("r_success")
        report["val_success"] = {"before": success.a_mean, "after": success.b_mean,
                                 "difference": success.mean_difference, "ci95": list(success.confidence_interval)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
