"""The control matrix's cells as Ray tasks: a tiny ci matrix through a local Ray instance gives the same cells as the
local path (one cell run whole, one resumed half-done), and a cluster that does not answer is refused in one line."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from test_experiment import matrix_params
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.experiment.matrix import MatrixRayError, run_matrix

TIMING_KEYS = ("duration_ms", "record_sha256")
"""Keys that differ between two runs of the same episodes: timings, and the JSONL chain digest that covers them."""


def untimed(value: object) -> object:
    """``value`` without its timings (keys in :data:`TIMING_KEYS` or ending in ``seconds``), at any depth."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMING_KEYS and not k.endswith("seconds")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def cell_records(out: Path) -> dict[str, str]:
    """Every cell's ``cell.json`` and the records of each of its trace and token files (timings and the matrix
    directory left out), and the digest of each checkpoint, by path below the matrix directory."""
    records = {}
    for path in sorted((out / "cells").rglob("*")):
        name = str(path.relative_to(out))
        if path.name == "model.safetensors":
            records[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.name in ("cell.json", "traces.jsonl", "tokens.jsonl"):
            lines = path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl" else [path.read_text()]
            kept = [untimed(json.loads(line)) for line in lines if line]
            records[name] = json.dumps(kept, sort_keys=True).replace(str(out), "<matrix>")
    return records


@pytest.mark.e2e
def test_ray_cells_equal_the_local_path_and_resume(tmp_path: Path, small_store_root: Path) -> None:
    params = matrix_params(tmp_path, arms=["grpo"], seeds=2)
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    run_matrix(params, local, store_root=small_store_root, progress=False)
    shutil.copytree(local / "shared", on_ray / "shared")  # the shared start is reused, as on a resumed matrix
    shutil.copy(local / "matrix.json", on_ray / "matrix.json")
    half_done = on_ray / "cells" / "grpo" / "seed-1"  # a cell killed after training, before its last test
    shutil.copytree(local / "cells" / "grpo" / "seed-1", half_done)
    (half_done / "cell.json").unlink()
    shutil.rmtree(half_done / "test-final-bank")
    trained = half_done / "round-000" / "steps" / "step-0001" / "traces.jsonl"
    stamp = trained.stat().st_mtime_ns
    result = run_matrix(params, on_ray, store_root=small_store_root, progress=False, ray_address="local")
    expected = cell_records(local)
    assert sum(name.endswith("cell.json") for name in expected) == 2 and len(result.cells) == 2
    assert cell_records(on_ray) == expected  # seed 0 ran whole on Ray, seed 1 resumed there
    assert trained.stat().st_mtime_ns == stamp  # the half-done cell's training was not run again


def test_an_unreachable_cluster_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(MatrixRayError, match="no Ray cluster answers"):
        run_matrix(matrix_params(tmp_path, arms=["grpo"], seeds=1), tmp_path / "m", ray_address="127.0.0.1:1",
                   progress=False)
    result = CliRunner().invoke(app, ["experiment", "--params", "params/ci.yaml", "--ray", "nowhere",
                                      "--out", str(tmp_path / "m2"), "--allow-outside-run-root"])
    assert result.exit_code == 1 and "--ray nowhere: not an address" in result.output
    result = CliRunner().invoke(app, ["experiment", "--ray", "local", "--jobs", "2"])
    assert result.exit_code == 1 and "--jobs and --ray: give one" in result.output
