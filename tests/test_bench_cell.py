"""The cell benchmark at ci size: its phase table, FLOP and byte counts, roofline limits and result digests, and the
shared val check."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType

import pytest

from intraskill.paths import project_root

pytestmark = pytest.mark.e2e


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(project_root() / "benchmarks"))
    import bench_cell

    return bench_cell


def test_a_ci_cell_reports_every_phase_with_its_arithmetic(bench: ModuleType, tmp_path: Path) -> None:
    args = argparse.Namespace(
        params=str(project_root() / "params" / "ci.yaml"), arm="grpo", seed=1, rounds=1, threads=1,
        set=[f"experiment.run_root={tmp_path / 'runs'}", "round.rollout_steps=1", "round.val_tasks=3",
             "matrix.test_tasks=3", "sampling.max_turns=3"],
        out=str(tmp_path / "matrix"), json=True)
    report = bench.run(args)
    json.dumps(report)
    phases = report["phases"]
    for key in ("cell/rollout/generate/prefill", "cell/rollout/generate/decode", "cell/rollout/generate/sample",
                "cell/rollout/store", "cell/train/forward", "cell/train/backward", "cell/train/optimizer",
                "cell/val/generate/prefill", "cell/test/generate/decode", "shared/test/generate/prefill",
                "shared/val/generate/prefill", "cell/io"):
        assert key in phases, key
    for key in ("cell/rollout/generate/prefill", "cell/rollout/generate/decode", "cell/train/forward"):
        assert phases[key]["gflop"] > 0 and 0 < phases[key]["arithmetic_share_of_cpu"], key
    forward, backward = phases["cell/train/forward"]["gflop"], phases["cell/train/backward"]["gflop"]
    assert backward == pytest.approx(2 * forward, rel=0.02)
    assert phases["cell/io"]["gflop"] == 0 and report["matmul_gflops"] > 0
    for key in ("cell/rollout/generate/prefill", "cell/rollout/generate/decode", "cell/train/forward",
                "cell/train/optimizer"):  # every phase that moves model data has bytes and a limit
        row = phases[key]
        assert row["gbyte"] > 0 and row["bound"] in ("arithmetic", "memory") and 0 < row["limit_share_of_cpu"], key
        limit = max(row["gflop"] / report["matmul_gflops"], row["gbyte"] / report["bandwidth_gbytes"])
        assert row["limit_s"] == pytest.approx(limit, rel=0.01, abs=2e-3), key
    assert phases["cell/train/optimizer"]["bound"] == "memory" and phases["cell/io"]["gbyte"] == 0
    assert phases["cell/train/backward"]["gbyte"] == pytest.approx(2 * phases["cell/train/forward"]["gbyte"], rel=0.02)
    assert report["bandwidth_gbytes"] > 0 and report["stages"]["cell/train"]["gbyte"] > 0
    assert set(report["test_success"]) == {"final-bare", "final-bank"}  # grpo is also tested with S0 (grpo+s0)
    assert "| cell/train |" in bench.markdown(report) and "| cell/rollout/generate/decode |" in bench.markdown(report)
    digest = report["digest"]  # the arms of seed 1 share one val check: the cell holds the shared run's episodes
    cell = "cells/grpo/seed-1/round-000"
    assert digest[f"{cell}/val-before/traces.jsonl"] == digest["shared/val-before-seed-1/traces.jsonl"]
    assert f"{cell}/checkpoint/model/model.safetensors" in digest and f"{cell}/steps/step-0001/tokens.jsonl" in digest
