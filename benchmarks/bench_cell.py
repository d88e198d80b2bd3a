"""One control-matrix cell, timed phase by phase against the machine's measured matmul rate and memory bandwidth.

Runs the matrix's shared start (store, warm start, S₀ and the warm start's test runs: shared by every cell; the
first round's bare val check: shared by the arms of a seed) and then one cell (``--arm``, ``--seed`` index,
``--rounds``) into a fresh matrix directory under a :class:`~intraskill.phases.PhaseTimer`, and prints per phase
(``shared/…`` or ``cell/…``, then the stage: ``val``, ``rollout``, ``train``, ``test``, ``analysis``, ``gate``,
``io``, and inside generation ``prefill``, ``decode``, ``sample``, ``tokenize``, ``store``) the exclusive wall and
CPU seconds, the useful FLOPs and bytes (:mod:`intraskill.policy.flops`), the share of the phase's CPU time that
arithmetic at the measured rate would fill, and its roofline limit: ``max(FLOPs / rate, bytes / bandwidth)``, the
bound that sets it (``arithmetic`` or ``memory``) and the share of the CPU time the limit explains. ``generate`` alone
(outside its sub-phases) is the lockstep decoder's per-token Python work. The rate is the best of several timed
``torch.matmul`` of a representative shape (a prefill slice through the MLP's up projection), the bandwidth the best
of several sums over a buffer far larger than the caches, both on ``--threads`` threads in thread CPU time, measured
in the same run. ``digest`` names every result file's SHA-256 (:func:`cell_digest`), to compare two commits' cells.

    OMP_NUM_THREADS=1 python benchmarks/bench_cell.py --json                       # organism, grpo, 1 round
    OMP_NUM_THREADS=1 python benchmarks/bench_cell.py --params params/ci.yaml --set matrix.test_tasks=4 --json
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

MATMUL_SHAPE = (2048, 256, 768)
"""``(tokens, hidden, intermediate)`` of the rate probe: the organism's MLP on a prefill slice."""

BANDWIDTH_BYTES = 256 * 2**20
"""Size of the bandwidth probe's buffer: eight times the machine's 32 MiB last-level cache."""


def matmul_rate(threads: int, shape: tuple[int, int, int] = MATMUL_SHAPE, seconds: float = 2.0) -> float:
    """Best observed float32 matmul FLOP/s of ``shape`` on ``threads`` torch threads, per second of this thread's CPU
    time (on a shared machine, time spent descheduled is not the machine's rate; with more than one thread it
    counts the calling thread only, a lower bound)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        m, k, n = shape
        generator = torch.Generator().manual_seed(0)
        a, b = torch.randn(m, k, generator=generator), torch.randn(k, n, generator=generator)
        torch.matmul(a, b)
        best, deadline = float("inf"), time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            start = time.thread_time()
            torch.matmul(a, b)
            best = min(best, time.thread_time() - start)
        return 2 * m * k * n / best
    finally:
        torch.set_num_threads(previous)


def memory_bandwidth(threads: int, size: int = BANDWIDTH_BYTES, probes: int = 8) -> float:
    """Best observed read bandwidth (bytes/s) of a float32 ``sum`` over a ``size``-byte buffer on ``threads`` torch
    threads, per second of this thread's CPU time (as :func:`matmul_rate`)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        buffer = torch.ones(size // 4)
        buffer.sum()
        best = float("inf")
        for _ in range(probes):
            start = time.thread_time()
            buffer.sum()
            best = min(best, time.thread_time() - start)
        return size / best
    finally:
        torch.set_num_threads(previous)


def roofline(row: dict[str, Any], rate: float, bandwidth: float) -> dict[str, Any]:
    """A phase's (or stage's) work against the machine: GFLOP, GB, the arithmetic share of its CPU time, its limit
    ``max(FLOPs / rate, bytes / bandwidth)`` in seconds, the bound that sets it and the share of the CPU time the limit
    explains."""
    arithmetic, memory = row["flops"] / rate, row["bytes"] / bandwidth
    limit = max(arithmetic, memory)
    cpu = row["cpu_s"]
    return {
        "gflop": round(row["flops"] / 1e9, 2), "gbyte": round(row["bytes"] / 1e9, 4),
        "arithmetic_share_of_cpu": round(arithmetic / cpu, 4) if cpu > 0 else None,
        "limit_s": round(limit, 3), "bound": None if limit == 0 else "arithmetic" if arithmetic >= memory else "memory",
        "limit_share_of_cpu": round(limit / cpu, 4) if cpu > 0 else None,
    }


def stage_of(key: str) -> str:
    """``shared/…`` or ``cell/…`` plus the first stage below it (``cell/rollout``)."""
    return "/".join(key.split("/")[:2])


def phase_table(totals: dict[str, dict[str, Any]], rate: float, bandwidth: float) -> dict[str, dict[str, Any]]:
    """Per phase key: the recorded wall and CPU seconds and calls plus its :func:`roofline`."""
    return {key or "(outside)": {"wall_s": round(row["wall_s"], 3), "cpu_s": round(row["cpu_s"], 3),
                                 "calls": row["calls"], **roofline(row, rate, bandwidth)}
            for key, row in sorted(totals.items())}


def stage_table(totals: dict[str, dict[str, Any]], rate: float, bandwidth: float) -> dict[str, dict[str, Any]]:
    """The phases summed per stage (inclusive of everything nested in it), each with its :func:`roofline`."""
    names = ("wall_s", "cpu_s", "flops", "bytes")
    sums: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(names, 0.0))
    for key, row in totals.items():
        if key:
            for name in names:
                sums[stage_of(key)][name] += row[name]
    return {key: {"wall_s": round(row["wall_s"], 3), "cpu_s": round(row["cpu_s"], 3), **roofline(row, rate, bandwidth)}
            for key, row in sorted(sums.items())}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the shared start and one cell under a phase timer; the JSON report."""
    from intraskill.experiment import matrix
    from intraskill.experiment.arms import Cell, cell_params, start_checkpoint
    from intraskill.experiment.matrix import check_arm_inputs, run_cell, shared_start, torch_threads
    from intraskill.params import load_params, with_overrides
    from intraskill.phases import PhaseTimer, phase

    params = load_params(args.params)
    overrides = [f"matrix.arms=[{args.arm}]", f"matrix.seeds={args.seed + 1}", f"matrix.threads={args.threads}",
                 *([f"matrix.rounds={args.rounds}"] if args.rounds is not None else []), *args.set]
    params = with_overrides(params, overrides)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-cell-"))
    rate, bandwidth = matmul_rate(params.matrix.threads), memory_bandwidth(params.matrix.threads)
    check_arm_inputs(params)
    start = time.perf_counter()
    arm = params.matrix.arm(args.arm)
    with PhaseTimer() as timer:
        with phase("shared"), torch_threads(params.matrix.threads):
            inputs, _ = shared_start(params, out, progress=False)
            # run by the first arm of a seed, copied by the others (absent before commit 17c9428: older commits time
            # it inside the cell)
            shared_val = getattr(matrix, "shared_val_before", None)
            if shared_val is not None and start_checkpoint(params, arm) is None:
                shared_val(cell_params(params, arm, args.seed), out, args.seed, inputs.checkpoint, progress=False)
        shared_s = time.perf_counter() - start
        with phase("cell"):
            result = run_cell(params, out, Cell(args.arm, args.seed), inputs, progress=False)
    cell_s = time.perf_counter() - start - shared_s
    totals = timer.to_dict()
    return {
        "params": args.params, "overrides": overrides, "matrix_dir": str(out), "arm": args.arm, "seed": args.seed,
        "rounds": params.matrix.rounds, "threads": params.matrix.threads,
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version()},
        "matmul_shape": list(MATMUL_SHAPE), "matmul_gflops": round(rate / 1e9, 2),
        "bandwidth_probe_bytes": BANDWIDTH_BYTES, "bandwidth_gbytes": round(bandwidth / 1e9, 2),
        "shared_wall_s": round(shared_s, 2), "cell_wall_s": round(cell_s, 2),
        "cell_cpu_s": round(sum(r["cpu_s"] for k, r in totals.items() if k.startswith("cell")), 2),
        "stages": stage_table(totals, rate, bandwidth), "phases": phase_table(totals, rate, bandwidth),
        "test_success": {name: run.success for name, run in result.tests.items()},
        "digest": cell_digest(out),
    }


def cell_digest(matrix_dir: Path) -> dict[str, str]:
    """SHA-256 per result file of a matrix directory, relative path → digest: each ``traces.jsonl`` over its episodes'
    IDs, statuses, rewards and turns' outputs and actions (not timings or paths), each ``tokens.jsonl`` whole, each
    checkpoint's ``model.safetensors``. Equal digests across two commits mean the same episodes, rewards and weights."""
    import hashlib

    digests = {}
    for path in sorted(matrix_dir.rglob("*")):
        if path.name == "traces.jsonl":
            episodes = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
            kept = [[e["episode_id"], e["status"], e.get("reward"),
                     [[t["raw_output"], t.get("action")] for t in e["turns"]]] for e in episodes]
            data = json.dumps(kept, sort_keys=True).encode()
        elif path.name in ("tokens.jsonl", "model.safetensors"):
            data = path.read_bytes()
        else:
            continue
        digests[str(path.relative_to(matrix_dir))] = hashlib.sha256(data).hexdigest()
    return digests


def markdown(report: dict[str, Any]) -> str:
    """The stage and phase tables as markdown rows (wall s, CPU s, GFLOP, GB, limit s and its bound, limit share of
    CPU)."""
    lines = ["| stage or phase | wall s | CPU s | useful GFLOP | GB moved | limit s (bound) | limit / CPU |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in [*report["stages"].items(), *report["phases"].items()]:
        share, bound = row["limit_share_of_cpu"], row["bound"]
        lines.append(f"| {key} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['gflop']:.1f} | {row['gbyte']:.2f} | "
                     f"{row['limit_s']:.1f}{f' ({bound})' if bound else ''} | "
                     f"{'' if share is None else f'{100 * share:.1f} %'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params/organism.yaml", help="parameter file (default the organism)")
    parser.add_argument("--arm", default="grpo", help="matrix arm (default grpo)")
    parser.add_argument("--seed", type=int, default=0, help="seed index of the cell (default 0)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the cell (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, the matrix's)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="parameter override, as the CLI's --set (repeatable)")
    parser.add_argument("--out", default=None, help="matrix directory (default: a fresh temporary one)")
    parser.add_argument("--json", action="store_true", help="print the JSON report (default: the markdown table)")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report) if args.json else markdown(report))


if __name__ == "__main__":
    main()
