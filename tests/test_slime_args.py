"""``intraskill slime-args``: the task file, custom config, curriculum and slime argument list of one round,
checked against the params they come from (real store, real bash for the argument file)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.integrations.slime.config import ARGS_ARRAY, HOOK_PATHS, SWITCHES
from intraskill.integrations.slime.data import TASKS_SCHEMA_VERSION
from intraskill.jsonl import read_jsonl
from intraskill.params import load_params
from intraskill.paths import project_root
from intraskill.skills.curriculum import load_curriculum

BANK = project_root() / "params" / "ci_s0.json"
CI = project_root() / "params" / "ci.yaml"


def _invoke(*arguments: str) -> object:
    return CliRunner().invoke(app, ["slime-args", "--params", str(CI), *arguments])


def _array(script: Path) -> list[str]:
    """The tokens of the bash array the argument file defines (parsed as bash would)."""
    text = script.read_text(encoding="utf-8")
    body = text[text.index(f"{ARGS_ARRAY}=(") + len(ARGS_ARRAY) + 2:text.rindex(")")]
    return shlex.split(body)


def test_a_control_cell_round_writes_every_file_from_its_params(small_store_root: Path,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "uniform" / "seed-1" / "round-001"
    result = _invoke("--round", "1", "--out", str(out), "--allow-outside-run-root", "--skillbank", str(BANK), "--arm", "uniform",
                     "--seed-index", "1", "--store-root", str(small_store_root),
                     "--store-url", "http://127.0.0.1:5999", "--episode-concurrency", "4", "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    params = load_params(CI)
    flags = record["args"]
    script = Path(record["args_file"])
    assert _array(script) == flags
    command = f'source "$1"; printf "%s\\n" "${{{ARGS_ARRAY}[@]}}"'
    sourced = subprocess.run(["bash", "-c", command, "-", script], check=True, capture_output=True,
                             text=True).stdout.splitlines()
    assert sourced == flags  # copy-pasteable: bash reads back exactly the list
    lines = script.read_text(encoding="utf-8").splitlines()
    assert all(line.strip().startswith("--") for line in lines[2:-1])  # one flag (and its value) per line

    switches = [flag for flag in flags if flag in SWITCHES]
    assert switches == list(SWITCHES)
    valued = [flag for flag in flags if flag not in SWITCHES]
    pairs = dict(zip(valued[::2], valued[1::2]))
    assert {flag: pairs[flag] for flag in HOOK_PATHS} == HOOK_PATHS
    round_ = params.round
    sizes = ("--rollout-batch-size", "--n-samples-per-prompt", "--over-sampling-batch-size",
             "--global-batch-size")
    assert [int(pairs[k]) for k in sizes] == [
        round_.rollout_batch_size, round_.n_samples_per_prompt, round_.over_sampling_batch_size,
        round_.rollout_batch_size * round_.n_samples_per_prompt]  # global_batch_size null: one update a step
    grpo, sampling = params.grpo, params.sampling
    update = ("--lr", "--eps-clip", "--eps-clip-high", "--weight-decay", "--adam-beta1", "--adam-beta2",
              "--clip-grad", "--rollout-temperature")
    assert [float(pairs[k]) for k in update] == [
        grpo.lr, grpo.eps_low, grpo.eps_high, grpo.weight_decay, *grpo.betas, grpo.max_grad_norm,
        sampling.temperature]
    assert int(pairs["--rollout-max-response-len"]) == sampling.max_tokens_per_turn
    assert int(pairs["--max-tokens-per-gpu"]) == grpo.micro_batch_tokens
    assert (int(pairs["--start-rollout-id"]), int(pairs["--num-rollout"])) == (
        round_.rollout_steps, 2 * round_.rollout_steps)
    assert int(pairs["--seed"]) == int(pairs["--rollout-seed"]) == params.experiment.seed + 1

    tasks = read_jsonl(Path(pairs["--prompt-data"]))
    assert len(tasks) == record["tasks"] == 120  # the small store's train split, each task once
    assert {t["metadata"]["schema_version"] for t in tasks} == {TASKS_SCHEMA_VERSION}
    custom = yaml.safe_load(Path(pairs["--custom-config-path"]).read_text(encoding="utf-8"))
    assert custom["intraskill_environment_base_url"] == record["store_url"] == "http://127.0.0.1:5999"
    assert custom["intraskill_training_output_dir"] == str(out.resolve())
    assert custom["intraskill_max_steps"] == sampling.max_turns
    assert custom["intraskill_episode_concurrency"] == 4
    assert custom["intraskill_full_skill_retry"] is True  # the uniform arm keeps the retry
    curriculum = load_curriculum(custom["intraskill_curriculum_path"])
    assert {chunk.inclusion_probability for chunk in curriculum.chunks} == {0.5}
    assert curriculum.seed == round_.curriculum_seed + 1 and curriculum.round_id == "round-001"


@pytest.mark.parametrize(("arguments", "message"), [
    (("--set", "sampling.top_p=0.9"), "sampling.top_p"),
    (("--set", "grpo.lora={}"), "grpo.lora"),
    (("--arm", "bogus"), "arm 'bogus'"),
    (("--seed-index", "2"), "--arm"),
    (("--set", "round.skillbank=null"), "--skillbank"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path, arguments: tuple[str, ...],
                                                  message: str) -> None:
    bank = () if "round.skillbank=null" in arguments else ("--skillbank", str(BANK))
    result = _invoke("--out", str(tmp_path / "round"), "--allow-outside-run-root", *bank, *arguments)
    assert result.exit_code == 1
    assert message in result.stderr and result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "round").exists()
