"""Experiment trackers (``round.report_to``): a real ci round logged to TensorBoard reads back as its
``metrics.jsonl``, trackers stay out of every plan, the legacy ``wandb_offline`` switch, a clear error for a
missing tracker package, and trackio (when its optional extra is installed) in a fresh process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from intraskill.jsonl import read_jsonl
from intraskill.params import ParamsError, load_params, params_from_dict, plan_dump
from intraskill.paths import project_root
from intraskill.pipeline.round import round_plan, run_round
from intraskill.pipeline.trackers import numeric_metrics, require_trackers


def ci_params(run_root: Path, **round_overrides: object):
    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(run_root)
    data["round"].update({"n_samples_per_prompt": 2, "rollout_batch_size": 1, "over_sampling_batch_size": 2,
                          "val_tasks": 0, "rollout_steps": 2, **round_overrides})
    return params_from_dict(data)


@pytest.mark.e2e
@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                    reason="the tensorboard extra is not installed (pip install 'intraskill[tensorboard]')")
def test_a_round_logged_to_tensorboard_reads_back_as_its_metrics(tmp_path: Path, small_store_root: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    params = ci_params(tmp_path / "runs", report_to=["tensorboard"])
    result = run_round(params, 0, out_dir=tmp_path / "round", store_root=small_store_root, progress=False)
    records = list(read_jsonl(result.root / "metrics.jsonl"))
    assert [r["step"] for r in records] == [1, 2]
    events = EventAccumulator(str(result.root / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    expected = {key for r in records for key in numeric_metrics(r)}
    assert set(events.Tags()["scalars"]) == expected and "rollout/shopsim/success_rate" in expected
    for key in expected:
        logged = {e.step: e.value for e in events.Scalars(key)}
        wanted = {r["step"]: numeric_metrics(r)[key] for r in records if key in numeric_metrics(r)}
        assert logged == pytest.approx(wanted, rel=1e-6), key


def test_trackers_are_in_no_plan_and_wandb_offline_is_report_to_wandb(tmp_path: Path) -> None:
    plain, tracked = ci_params(tmp_path), ci_params(tmp_path, report_to=["tensorboard", "trackio"])
    assert plan_dump(plain) == plan_dump(tracked)
    identity = {"model_id": "organism"}
    assert round_plan(plain, 0, identity, None, {}) == round_plan(tracked, 0, identity, None, {})
    assert tracked.round.trackers == ("tensorboard", "trackio") and plain.round.trackers == ()
    assert ci_params(tmp_path, wandb_offline=True).round.trackers == ("wandb",)
    assert ci_params(tmp_path, wandb_offline=True, report_to=["wandb", "wandb"]).round.trackers == ("wandb",)
    with pytest.raises(ParamsError, match="round.report_to"):
        ci_params(tmp_path, report_to=["mlflow"])
    assert numeric_metrics({"step": 3, "a": 1, "b": 0.5, "c": None, "d": "text", "e": True}) == {"a": 1.0, "b": 0.5}


def test_a_missing_tracker_is_one_clear_error_before_the_round(tmp_path: Path, small_store_root: Path) -> None:
    missing = [name for name in ("wandb", "tensorboard", "trackio") if importlib.util.find_spec(name) is None]
    if not missing:
        pytest.skip("every tracker package is installed")
    with pytest.raises(RuntimeError, match=rf"round.report_to: {missing[0]} chosen but not installed "
                                           rf"\(pip install 'intraskill\[{missing[0]}\]'"):
        run_round(ci_params(tmp_path / "runs", report_to=[missing[0]]), 0, out_dir=tmp_path / "round",
                  store_root=small_store_root, progress=False)
    assert not (tmp_path / "round" / "plan.json").exists()  # refused before any work
    require_trackers([])


TRACKIO_SCRIPT = """
import json, sys
from pathlib import Path
from intraskill.pipeline.trackers import TrackedRun, Trackers
from intraskill.training.metrics import RoundStepMetrics
from trackio.sqlite_storage import SQLiteStorage
trackers = Trackers(["trackio"], TrackedRun(Path(sys.argv[1]), "ci-round-000", "f" * 64, {"seed": 1}))
trackers.log(RoundStepMetrics.from_dict({"round": 0, "step": 1, "train/loss": 0.5, "train/kl_loss": None}))
trackers.log(RoundStepMetrics.from_dict({"round": 0, "step": 2, "train/loss": 0.25}))
trackers.close()
logs = SQLiteStorage.get_logs("intraskill", "ci-round-000-ffffffff")
print("LOGS", json.dumps([[row["step"], row["train/loss"]] for row in logs]))
"""


@pytest.mark.skipif(importlib.util.find_spec("trackio") is None,
                    reason="the trackio extra is not installed (pip install 'intraskill[trackio]')")
def test_trackio_stores_each_step(tmp_path: Path) -> None:
    """In a fresh process, as trackio reads its store's location (``TRACKIO_DIR``) when imported."""
    done = subprocess.run([sys.executable, "-c", TRACKIO_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          env={"TRACKIO_DIR": str(tmp_path / "trackio"), "PATH": "/usr/bin:/bin",
                               "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(project_root())}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    logged = [line for line in done.stdout.splitlines() if line.startswith("LOGS ")]
    assert [json.loads(line[5:]) for line in logged] == [[[1, 0.5], [2, 0.25]]]
    assert (tmp_path / "trackio").is_dir()
