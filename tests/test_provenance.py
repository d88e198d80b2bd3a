"""Provenance: what a run's numbers depend on, recorded beside a plan's fingerprint and checked on resume."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest
import torch

from intraskill.hashing import sha256_json
from intraskill.paths import project_root
from intraskill.pipeline.round import RoundPlanMismatchError, write_round_plan
from intraskill.provenance import git_commit, provenance_changes, run_provenance


def test_provenance_names_the_code_libraries_threads_and_machine(tmp_path: Path) -> None:
    record = run_provenance()
    assert record["torch_threads"] == torch.get_num_threads()
    assert record["libraries"]["torch"] == torch.__version__
    assert set(record["libraries"]) == {"torch", "transformers", "numpy", "scipy", "statsmodels"}
    assert record["python"] and record["platform"] and record["torch_cpu_capability"]
    head = subprocess.run(["git", "-C", str(project_root()), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert record["git_commit"].split("+")[0] == head.stdout.strip()
    assert git_commit(tmp_path) is None  # not a checkout


def test_changes_name_each_differing_field() -> None:
    record = run_provenance()
    changed = {**record, "torch_threads": record["torch_threads"] + 1,
               "libraries": {**record["libraries"], "numpy": "0.0"}}
    assert provenance_changes(record, record) == []
    assert provenance_changes(record, changed) == [
        f"libraries.numpy: {record['libraries']['numpy']} → 0.0",
        f"torch_threads: {record['torch_threads']} → {record['torch_threads'] + 1}"]
    assert provenance_changes(None, record) == ["provenance: not recorded"]


def test_round_plan_records_provenance_outside_its_fingerprint(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    plan = {"round_index": 0, "seed": 7}
    fingerprint = write_round_plan(tmp_path, plan)
    stored = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    assert fingerprint == sha256_json(plan) == stored["fingerprint"]
    assert stored["provenance"] == run_provenance()
    with caplog.at_level(logging.WARNING, logger="intraskill.provenance"):
        assert write_round_plan(tmp_path, plan) == fingerprint
    assert not caplog.records  # same machine, same code: no warning
    stored["provenance"]["torch_threads"] = 64  # as if written on another machine
    (tmp_path / "plan.json").write_text(json.dumps(stored), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="intraskill.provenance"):
        assert write_round_plan(tmp_path, plan) == fingerprint  # resumes
    assert len(caplog.records) == 1 and "torch_threads: 64 →" in caplog.records[0].getMessage()
    with pytest.raises(RoundPlanMismatchError, match=r"differing fields: seed\."):
        write_round_plan(tmp_path, {**plan, "seed": 8})
