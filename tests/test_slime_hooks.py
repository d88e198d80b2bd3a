"""slime hook contracts and behaviour, without slime: a stand-in ``Sample``, real HTTP, a real tokenizer.

Like slime's own ``tests/plugin_contracts``: each hook is loaded by dotted path (``load_function``
below mirrors ``slime.utils.misc.load_function``), its parameter names are checked against slime's
call sites, and its return shape is asserted. The generate hook runs against the real store
service and a fake SGLang ``/generate`` server on 127.0.0.1 that answers with scripted token ids
and log-probs from the tiny protocol tokenizer.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI, Request
from reward_helpers import strict_reward

from intraskill.agent.traces import EpisodeTrace
from intraskill.chat.chatml import IM_END, render_tool_call
from intraskill.integrations.slime import config as slime_config
from intraskill.integrations.slime.config import SlimeRunConfig, arm_round_config, load_checked_curriculum
from intraskill.integrations.slime.data import TASKS_SCHEMA_VERSION, task_from_metadata, write_slime_tasks
from intraskill.integrations.slime.filters import GroupFilterDecision
from intraskill.integrations.slime.metrics import METRICS_FILE
from intraskill.integrations.slime.rewards import META_GROUP_TRIAGE, finished_group
from intraskill.jsonl import read_jsonl
from intraskill.params import load_params
from intraskill.paths import project_root
from intraskill.policy.organism import protocol_corpus, train_tokenizer
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import create_app, serve_in_thread
from intraskill.skills.bank import Skill, SkillBank, save_skillbank
from intraskill.skills.curriculum import CurriculumError, assign_group, build_curriculum, save_curriculum
from intraskill.trace2skill.queue import read_analysis_queue
from intraskill.training.admission import TECHNICAL_DROP_REASON, ZERO_STD_DROP_REASON, UnscoredStreakError
from intraskill.training.triage import RetryOutcome, triage_group

HOOKS = "intraskill.integrations.slime"


def load_function(path: str) -> Any:
    """``slime.utils.misc.load_function``: import the module part of a dotted path, return the attribute."""
    module_path, _, attribute = path.rpartition(".")
    module = importlib.import_module(module_path)
    return getattr(module, attribute)


@dataclass
class Sample:
    """Stand-in for ``slime.utils.types.Sample`` (same field names, ``Status`` nested as in slime)."""

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False
    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    train_metadata: dict | None = None
    session_id: str | None = None


# --------------------------------------------------------------------------- contracts


@pytest.mark.parametrize(("flag", "params"), [
    ("--custom-generate-function-path", ("args", "sample", "sampling_params", "evaluation")),
    ("--dynamic-sampling-filter-path", ("args", "samples", "kwargs")),
    ("--custom-reward-post-process-path", ("args", "samples")),
    ("--custom-rollout-log-function-path",
     ("rollout_id", "args", "samples", "rollout_extra_metrics", "rollout_time")),
    ("--rollout-all-samples-process-path", ("args", "samples", "data_source")),
])
def test_hook_paths_load_with_slime_call_signatures(flag: str, params: tuple[str, ...]) -> None:
    hook = load_function(slime_config.HOOK_PATHS[flag])
    assert tuple(inspect.signature(hook).parameters) == params
    assert inspect.iscoroutinefunction(hook) == (flag == "--custom-generate-function-path")


def test_launch_flags_carry_hooks_and_the_params_batch_settings(tmp_path: Path) -> None:
    params = load_params(project_root() / "params" / "qwen35_4b.yaml")  # the released protocol
    flags = slime_config.launch_flags(params, 2, tmp_path / "slime.yaml", tmp_path / "train.jsonl")
    pairs = dict(zip(flags[::2], flags[1::2]))
    assert pairs["--custom-generate-function-path"] == f"{HOOKS}.generate.generate"
    assert all(pairs[flag] == path for flag, path in slime_config.HOOK_PATHS.items())
    names = ("--rollout-batch-size", "--n-samples-per-prompt", "--over-sampling-batch-size",
             "--global-batch-size")
    sizes = [int(pairs[k]) for k in names]
    assert sizes == [16, 8, 32, 64] and 16 * 8 == 64 * 2  # rollout_batch_size × n = global batch × updates
    update = ("--eps-clip", "--eps-clip-high", "--lr", "--weight-decay", "--adam-beta1", "--adam-beta2",
              "--rollout-temperature")
    assert [float(pairs[k]) for k in update] == [0.2, 0.28, 1e-6, 0.1, 0.9, 0.98, 0.6]
    assert (pairs["--rollout-top-p"], pairs["--rollout-top-k"], pairs["--rollout-max-response-len"]) == (
        "1.0", "-1", "4096")
    assert (pairs["--start-rollout-id"], pairs["--num-rollout"]) == ("40", "60")  # round 2 of 20-step rounds
    assert pairs["--seed"] == pairs["--rollout-seed"] == str(params.experiment.seed)
    assert "--use-kl-loss" not in flags and flags[-4:] == list(slime_config.SWITCHES)


@pytest.mark.parametrize(("override", "field_name"), [
    ("sampling.top_p=0.9", "sampling.top_p"),
    ("sampling.temperature=0", "sampling.temperature"),
    ("grpo.lora={}", "grpo.lora"),
    ("round.method=skill1", "round.method"),
])
def test_launch_flags_refuse_what_slime_or_the_hooks_cannot_run(override: str, field_name: str) -> None:
    from intraskill.params import with_overrides

    params = with_overrides(load_params(project_root() / "params" / "qwen35_4b.yaml"), [override])
    with pytest.raises(slime_config.SlimeConfigError, match=re.escape(field_name)):
        slime_config.batch_flags(params, 0)


def test_kl_and_a_single_update_map_to_slime_flags() -> None:
    from intraskill.params import with_overrides

    params = with_overrides(load_params(project_root() / "params" / "qwen35_4b.yaml"),
                            ["grpo.kl_coef=0.01", "grpo.global_batch_size=null"])
    flags = slime_config.batch_flags(params, 0)
    assert (flags["--kl-loss-coef"], flags["--kl-loss-type"], flags["--use-kl-loss"]) == ("0.01", "k3", "")
    assert flags["--global-batch-size"] == "128"  # one update of the step's 16 × 8 rollouts


def test_custom_config_round_trips_through_yaml_and_names_bad_keys(tmp_path: Path) -> None:
    import yaml

    config = slime_config.SlimeRunConfig("c.json", "b.json", str(tmp_path))
    loaded = yaml.safe_load(slime_config.write_custom_config(config, tmp_path / "slime.yaml").read_text())
    assert loaded["intraskill_max_steps"] == 30 and loaded["intraskill_episode_concurrency"] == 32
    assert slime_config.SlimeRunConfig.from_args(SimpleNamespace(**loaded)) == config
    with pytest.raises(slime_config.SlimeConfigError, match="intraskill_curriculum_path"):
        slime_config.SlimeRunConfig.from_args(SimpleNamespace(intraskill_skillbank_path="b"))
    with pytest.raises(slime_config.SlimeConfigError, match="intraskill_reasoning_parser"):
        slime_config.SlimeRunConfig("c", "b", "o", reasoning_parser="deepseek")


def test_task_file_lists_each_train_task_once(small_store, tmp_path: Path) -> None:
    _, _, splits = small_store
    rows = read_jsonl(write_slime_tasks(splits, tmp_path / "slime_train.jsonl"))
    assert [r["prompt"] for r in rows] == [str(t) for t in sorted(splits.ids("train"))]
    assert {task_from_metadata(r["metadata"])[1] for r in rows} == {"train"}
    assert rows[0]["metadata"]["schema_version"] == TASKS_SCHEMA_VERSION
    with pytest.raises(ValueError, match="task_id"):
        task_from_metadata({"schema_version": TASKS_SCHEMA_VERSION, "task_id": "7", "split": "train"})


# --------------------------------------------------------------------------- filter, advantages, metrics


def scored(group: int, index: int, reward: float, *, rollout_id: int | None = None,
           assignment: dict | None = None) -> Sample:
    detail = strict_reward(reward).to_dict()
    metadata = {"intraskill_scored": True, "intraskill_reward": detail}
    if assignment is not None:
        metadata["intraskill_assignment"] = assignment
    return Sample(group_index=group, index=index, rollout_id=index if rollout_id is None else rollout_id,
                  reward=dict(detail), metadata=metadata, status=Sample.Status.COMPLETED)


def unscored(group: int, index: int) -> Sample:
    metadata = {"intraskill_scored": False, "intraskill_reward": None}
    return Sample(group_index=group, index=index, rollout_id=index, reward={"reward": 0.0},
                  metadata=metadata, status=Sample.Status.ABORTED)


def test_filter_keeps_spread_drops_zero_std_softly_and_technical_hard() -> None:
    hook = load_function(slime_config.HOOK_PATHS["--dynamic-sampling-filter-path"])
    args = SimpleNamespace()
    assert hook(args, [scored(0, 0, 0.0), scored(0, 1, 0.5)]) == GroupFilterDecision(True)
    zero = hook(args, [scored(1, 0, 1.0), scored(1, 1, 1.0)])
    assert (zero.keep, zero.reason, zero.keep_when_insufficient) == (False, ZERO_STD_DROP_REASON, True)
    # fan-out: two segments of rollout 0 count once, so the spread is real, not diluted
    fanned = hook(args, [[scored(2, 0, 0.0), scored(2, 10, 0.0, rollout_id=0)], [scored(2, 1, 1.0)]])
    assert fanned.keep
    technical = hook(args, [scored(3, 0, 0.0), unscored(3, 1)])
    assert (technical.keep, technical.reason) == (False, TECHNICAL_DROP_REASON)
    assert technical.keep_when_insufficient is False


def test_filter_raises_after_max_consecutive_unscored_groups() -> None:
    hook = load_function(slime_config.HOOK_PATHS["--dynamic-sampling-filter-path"])
    args = SimpleNamespace(intraskill_max_consecutive_failed_groups=3)
    hook(args, [scored(9, 0, 0.0), scored(9, 1, 1.0)])  # resets the streak
    hook(args, [unscored(10, 0)])
    hook(args, [unscored(11, 0)])
    hook(args, [scored(12, 0, 0.0)])  # a scored group resets it again
    hook(args, [unscored(13, 0)])
    hook(args, [unscored(14, 0)])
    with pytest.raises(UnscoredStreakError, match="3 consecutive"):
        hook(args, [unscored(15, 0)])
    hook(args, [scored(16, 0, 0.0)])


def test_post_process_advantages_per_group_over_unique_rollouts() -> None:
    hook = load_function(slime_config.HOOK_PATHS["--custom-reward-post-process-path"])
    samples = [scored(0, 0, 0.0), scored(0, 8, 0.0, rollout_id=0), scored(0, 1, 1.0),
               scored(1, 2, 0.2), scored(1, 3, 0.4), scored(1, 4, 0.9)]
    raw, advantages = hook(SimpleNamespace(reward_key="reward"), samples)
    assert raw == [0.0, 0.0, 1.0, 0.2, 0.4, 0.9]
    half = 0.5 / (0.5 ** 0.5 + 1e-6)  # rollouts {0, 1}: centred ±0.5, unbiased std √0.5
    assert advantages[:3] == pytest.approx([-half, -half, half])
    rewards = [0.2, 0.4, 0.9]
    mean = sum(rewards) / 3
    std = (sum((r - mean) ** 2 for r in rewards) / 2) ** 0.5
    assert advantages[3:] == pytest.approx([(r - mean) / (std + 1e-6) for r in rewards])
    raw_only = hook(SimpleNamespace(rewards_normalization=False), samples)[1]
    assert raw_only == raw
    mismatched = [scored(0, 0, 0.0), scored(0, 5, 1.0, rollout_id=0)]
    with pytest.raises(ValueError, match="different rewards"):
        hook(SimpleNamespace(), mismatched)


def _metric_config(tmp_path: Path, curriculum_files: tuple[Path, Path]) -> SimpleNamespace:
    bank_path, curriculum_path = curriculum_files
    return SimpleNamespace(intraskill_curriculum_path=str(curriculum_path),
                           intraskill_skillbank_path=str(bank_path),
                           intraskill_training_output_dir=str(tmp_path / "metrics-run"))


def test_metrics_cover_all_generated_groups_and_the_admitted_ones(tmp_path: Path, curriculum_files) -> None:
    record = load_function(slime_config.HOOK_PATHS["--rollout-all-samples-process-path"])
    enrich = load_function(slime_config.HOOK_PATHS["--custom-rollout-log-function-path"])
    args = _metric_config(tmp_path, curriculum_files)
    from intraskill.skills.curriculum import load_curriculum

    state = load_curriculum(curriculum_files[1])
    free = {"state_id": state.state_id, "group_key": "0", "mode": "skill_free", "skill_ids": []}
    both = {"state_id": state.state_id, "group_key": "1", "mode": "assisted",
            "skill_ids": ["chunk-0", "chunk-1"]}
    empty = {"state_id": state.state_id, "group_key": "2", "mode": "assisted_empty", "skill_ids": []}
    one = {"state_id": state.state_id, "group_key": "3", "mode": "assisted", "skill_ids": ["chunk-1"]}
    spread = [scored(0, 0, 0.0, assignment=free), scored(0, 1, 1.0, assignment=free)]
    fanned = [[scored(1, 2, 0.5, assignment=both), scored(1, 20, 0.5, rollout_id=2, assignment=both)],
              [scored(1, 3, 0.5, assignment=both)]]                       # zero std, admitted (insufficient)
    zero = [scored(2, 4, 0.0, assignment=empty), scored(2, 5, 0.0, assignment=empty)]  # zero std, dropped
    broken = [scored(3, 6, 1.0, assignment=one), unscored(3, 7)]          # technical drop
    broken[1].metadata["intraskill_assignment"] = one
    failed_retry = RetryOutcome("group-000000002/full-skill-retry.json", "e-full-skill-retry",
                                strict_reward(0.0))
    triage = triage_group(finished_group(zero), {"state_id": state.state_id}, empty, failed_retry).to_dict()
    zero[1].metadata[META_GROUP_TRIAGE] = triage
    record(args, [spread, fanned, zero, broken, spread], data_source=None)  # a repeated group counts once
    extra: dict[str, Any] = {"rollout/dynamic_filter/drop_x": 1}
    admitted = spread + [s for entry in fanned for s in entry]
    assert enrich(7, args, admitted, extra, 1.5) is False
    m = {k.removeprefix("rollout/shopsim/"): v for k, v in extra.items()}
    assert extra["rollout/dynamic_filter/drop_x"] == 1
    assert (m["group_count"], m["trajectory_count"], m["scored_rate"]) == (4, 8, pytest.approx(7 / 8))
    assert (m["train_group_count"], m["train_trajectory_count"]) == (2, 4)
    assert (m["technical_group_drop_count"], m["zero_std_group_drop_count"]) == (1, 1)
    assert m["technical_group_drop_rate"] == pytest.approx(1 / 3)
    assert m["skill_free_group_rate"] == 0.25 and m["assisted_empty_group_rate"] == 0.25
    assert m["skills_per_assisted_group_mean"] == pytest.approx(1.0)  # (2 + 0 + 1) / 3
    assert m["chunk/chunk-1/inclusion_rate"] == pytest.approx(2 / 3)
    assert m["chunk/chunk-0/target_rho"] == pytest.approx(state.chunks[0].inclusion_probability)
    assert m["q"] == pytest.approx(0.2) and m["rho_max"] == pytest.approx(0.9)
    assert m["pending_analysis_rate"] == 1.0 and m["full_skill_retry_rate"] == 1.0  # over triaged groups
    logged = read_jsonl(Path(args.intraskill_training_output_dir) / METRICS_FILE)
    assert logged[-1]["rollout_id"] == 7 and logged[-1]["metrics"] == {k: v for k, v in extra.items()
                                                                        if k.startswith("rollout/shopsim/")}


# --------------------------------------------------------------------------- generate over real HTTP


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(protocol_corpus(), 400, path)
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


@pytest.fixture(scope="module")
def curriculum_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("curriculum")
    skills = tuple(Skill(f"chunk-{i}", f"### Chunk {i}\nCheck every option before buying ({i}).",
                         version="1", metadata={"estimated_effect": effect})
                   for i, effect in enumerate((0.08, 0.02, 0.05)))
    bank = SkillBank("slime-test-v1", skills)
    bank_path = save_skillbank(bank, root / "skillbank.json")
    state = build_curriculum(bank, round_id="round-000", skillbank_path=str(bank_path),
                             created_at="2026-01-01")
    return bank_path, save_curriculum(state, root / "curriculum.json")


STALL_S = 2.0


class FakeSGLang:
    """A scripted SGLang ``/generate``: reads the tools line of the prompt and answers in token ids."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.mode = "wander"
        self.requests: list[dict[str, Any]] = []
        self.stalled = 0

    def _reply(self, prompt: str) -> tuple[str, str]:
        tools = prompt[prompt.rindex("Tools: "):]
        first_turn = prompt.count("<|im_start|>assistant") == 1
        if self.mode in ("abort", "stall"):
            return "", "abort"
        if self.mode == "length":
            return "let me think about this", "length"
        if self.mode == "chatty" and first_turn:
            return "hello" + IM_END, "stop"
        if "search(" in tools:
            task = re.search(r"Shopping task: (.*)", prompt).group(1)
            return render_tool_call("search", {"query": " ".join(task.split()[:4])}) + IM_END, "stop"
        values = json.JSONDecoder().raw_decode(tools, tools.index("click(value:") + len("click(value:"))[0]
        return render_tool_call("click", {"value": self._click(prompt, values)}) + IM_END, "stop"

    def _click(self, prompt: str, values: list[str]) -> str:
        if self.mode in ("wander", "chatty"):
            return "back to search"
        chosen_axes = {v.split("=")[0] for v in re.findall(r'"value":"([^"]*=[^"]*)"', prompt)}
        options = [v for v in values if "=" in v and v.split("=")[0] not in chosen_axes]
        products = [v for v in values if "=" not in v and v not in ("back to search", "< prev", "next >")]
        return "buy now" if "buy now" in values else (options or products)[0]

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/generate")
        async def generate(request: Request) -> dict[str, Any]:
            body = await request.json()
            if self.mode == "stall":  # still generating when slime cancels the step's pending groups
                self.stalled += 1
                await asyncio.sleep(STALL_S)
            text, finish = self._reply(self.tokenizer.decode(body["input_ids"], skip_special_tokens=False))
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            logprobs = [-0.05 * (k + 1) for k in range(len(ids))]
            self.requests.append({"input_ids": body["input_ids"], "output_ids": ids, "logprobs": logprobs,
                                  "sampling_params": body["sampling_params"]})
            pairs = [[logprob, token, None] for logprob, token in zip(logprobs, ids)]
            return {"text": text,
                    "meta_info": {"finish_reason": {"type": finish}, "output_token_logprobs": pairs}}

        return app


@pytest.fixture(scope="module")
def services(small_store, tokenizer) -> Iterator[tuple[str, str, FakeSGLang, list[int]]]:
    catalog, index, splits = small_store
    engine = ShopEngine(catalog.products, catalog.goals, index)
    fake = FakeSGLang(tokenizer)
    with serve_in_thread(create_app(engine, slots=8)) as store, serve_in_thread(fake.app()) as sglang:
        yield store.base_url, sglang.base_url, fake, list(splits.ids("train"))


def slime_args(services, tokenizer_dir: Path, curriculum_files, output_dir: Path, n: int,
               **extra: Any) -> Any:
    store_url, sglang_url, _, _ = services
    host, port = sglang_url.removeprefix("http://").split(":")
    bank_path, curriculum_path = curriculum_files
    values = {"intraskill_curriculum_path": str(curriculum_path), "intraskill_skillbank_path": str(bank_path),
              "intraskill_training_output_dir": str(output_dir), "intraskill_environment_base_url": store_url,
              "intraskill_max_steps": 4, "sglang_router_ip": host, "sglang_router_port": int(port),
              "hf_checkpoint": str(tokenizer_dir), "n_samples_per_prompt": n, "partial_rollout": False,
              "group_rm": False, "rollout_max_context_len": 24576, "reward_key": "reward"}
    return SimpleNamespace(**{**values, **extra})


PARAMS = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "max_new_tokens": 64}


def run_group(args: Any, group: int, task_id: int, n: int, split: str = "train") -> list[Sample]:
    hook = load_function(slime_config.HOOK_PATHS["--custom-generate-function-path"])
    metadata = {"schema_version": TASKS_SCHEMA_VERSION, "task_id": task_id, "split": split}
    samples = [Sample(group_index=group, index=group * n + k, prompt=str(task_id), metadata=dict(metadata))
               for k in range(n)]

    async def main() -> list[Sample]:
        return list(await asyncio.gather(*(hook(args, s, dict(PARAMS)) for s in samples)))

    return asyncio.run(main())


def test_generate_runs_a_group_with_one_treatment_exact_tokens_and_a_retry(
        services, tokenizer, tokenizer_dir, curriculum_files, tmp_path: Path) -> None:
    _, _, fake, task_ids = services
    fake.mode, fake.requests = "wander", []
    out = tmp_path / "round-000"
    args = slime_args(services, tokenizer_dir, curriculum_files, out, n=3)
    samples = run_group(args, group=5, task_id=task_ids[0], n=3)
    from intraskill.skills.curriculum import load_curriculum

    expected = assign_group(load_curriculum(curriculum_files[1]), 5).to_dict()
    outputs = {tuple(r["input_ids"]): r for r in fake.requests}
    for sample in samples:
        assert sample.status is Sample.Status.COMPLETED and sample.rollout_id == sample.index
        assert sample.metadata["intraskill_assignment"] == expected
        assert sample.metadata["intraskill_scored"] is True
        # four wandering steps end in action_limit
        assert sample.reward["reward"] == sample.reward["r_strict"] == 0.0
        n_prompt = len(sample.tokens) - sample.response_length
        assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length > 0
        expected_mask = [0] * sample.response_length
        expected_logprobs = [0.0] * sample.response_length
        spans = [(len(key) - n_prompt, request) for key, request in outputs.items()
                 if list(key) == sample.tokens[:len(key)]]
        assert len(spans) == 4  # one request per model turn, each prefixed by the exact stream so far
        for start, request in spans:
            end = start + len(request["output_ids"])
            assert sample.tokens[n_prompt + start:n_prompt + end] == request["output_ids"]
            expected_mask[start:end] = [1] * (end - start)
            expected_logprobs[start:end] = request["logprobs"]
            assert request["sampling_params"]["top_p"] == 1.0 and request["sampling_params"]["no_stop_trim"]
        assert sample.loss_mask == expected_mask and sample.rollout_log_probs == expected_logprobs
        trace = EpisodeTrace.from_dict(json.loads(Path(sample.metadata["intraskill_trace_path"]).read_text()))
        assert trace.termination_reason == "action_limit"
        assert trace.provenance["skills"]["assignment"] == expected
        assert [s["skill_id"] for s in trace.provenance["selected_skills"]] == expected["skill_ids"]
    leaders = [s for s in samples if META_GROUP_TRIAGE in s.metadata]
    assert len(leaders) == 1
    triage = leaders[0].metadata[META_GROUP_TRIAGE]
    assert triage["classification"] == "full_skill_failure_pending_analysis"
    retry_id = "train-group-000000005-sample-000000018-full-skill-retry"  # the group's largest index + 1
    assert triage["full_skill_retry"]["episode_id"] == retry_id
    retry = EpisodeTrace.from_dict(json.loads((out / triage["full_skill_retry"]["trace_path"]).read_text()))
    assert retry.provenance["skills"]["diagnostic_full_skill"] is True
    assert [s["skill_id"] for s in retry.provenance["selected_skills"]] == ["chunk-0", "chunk-1", "chunk-2"]
    (item,) = read_analysis_queue(out / "analysis_queue.jsonl")
    assert (item.group_index, item.task_id, item.episode_id) == (5, task_ids[0], retry.episode_id)
    assert json.loads((out / "group-000000005" / "triage.json").read_text()) == triage


def test_generate_buys_protocol_errors_cost_a_turn_and_length_truncates(
        services, tokenizer_dir, curriculum_files, tmp_path: Path) -> None:
    _, _, fake, task_ids = services
    fake.mode = "buy"
    args = slime_args(services, tokenizer_dir, curriculum_files, tmp_path / "a", n=1,
                      intraskill_full_skill_retry=False, intraskill_max_steps=8)
    (bought,) = run_group(args, 1, task_ids[1], 1)
    trace = EpisodeTrace.from_dict(json.loads(Path(bought.metadata["intraskill_trace_path"]).read_text()))
    assert trace.purchase is not None and trace.reward.r_strict == bought.reward["reward"]
    assert bought.status is Sample.Status.COMPLETED
    fake.mode = "chatty"
    (chatty,) = run_group(slime_args(services, tokenizer_dir, curriculum_files, tmp_path / "b", n=1,
                                     intraskill_full_skill_retry=False), 2, task_ids[1], 1)
    trace = EpisodeTrace.from_dict(json.loads(Path(chatty.metadata["intraskill_trace_path"]).read_text()))
    assert trace.turns[0].protocol_error == "tool_call_count" and trace.counts["model_steps"] == 4
    assert chatty.metadata[META_GROUP_TRIAGE]["classification"] == "all_wrong_retry_disabled"
    fake.mode = "length"
    (cut,) = run_group(slime_args(services, tokenizer_dir, curriculum_files, tmp_path / "c", n=1,
                                  intraskill_full_skill_retry=False), 3, task_ids[1], 1)
    assert cut.status is Sample.Status.TRUNCATED and cut.reward["reward"] == 0.0
    assert set(cut.loss_mask) == {1}  # the cut-off reply is trained on, nothing follows it


def test_generate_turns_an_abort_into_a_dropped_placeholder(
        services, tokenizer_dir, curriculum_files, tmp_path: Path) -> None:
    _, _, fake, task_ids = services
    fake.mode = "abort"
    args = slime_args(services, tokenizer_dir, curriculum_files, tmp_path, n=2)
    samples = run_group(args, 4, task_ids[2], 2)
    for sample in samples:
        assert sample.status is Sample.Status.ABORTED and sample.remove_sample
        assert (sample.tokens, sample.loss_mask, sample.metadata["intraskill_scored"]) == ([0, 0], [0], False)
    triage = next(s.metadata[META_GROUP_TRIAGE] for s in samples if META_GROUP_TRIAGE in s.metadata)
    assert triage["classification"] == "environment_or_runtime_error" and triage["full_skill_retry"] is None
    hook = load_function(slime_config.HOOK_PATHS["--dynamic-sampling-filter-path"])
    decision = hook(SimpleNamespace(), samples)
    assert (decision.keep, decision.reason) == (False, TECHNICAL_DROP_REASON)


@pytest.mark.e2e
def test_hook_state_stays_bounded_over_many_batches(services, tokenizer_dir, curriculum_files,
                                                    tmp_path: Path) -> None:
    """Each step leaves a finished group, a group cancelled in flight (slime cancels the pending groups once
    the batch is full) and a group whose second sibling slime never started (it returns such a sample aborted
    without calling the hook); the hook keeps only open groups, and the batch-end hook closes them all."""
    from intraskill.integrations.slime.generate import run_state

    _, _, fake, task_ids = services
    hook = load_function(slime_config.HOOK_PATHS["--custom-generate-function-path"])
    record = load_function(slime_config.HOOK_PATHS["--rollout-all-samples-process-path"])
    args = slime_args(services, tokenizer_dir, curriculum_files, tmp_path / "round-000", n=2,
                      intraskill_full_skill_retry=False)
    state = run_state(SlimeRunConfig.from_args(args), 2)
    metadata = {"schema_version": TASKS_SCHEMA_VERSION, "task_id": task_ids[0], "split": "train"}

    def sample(group: int, k: int) -> Sample:
        return Sample(group_index=group, index=2 * group + k, prompt=str(task_ids[0]),
                      metadata=dict(metadata))

    async def step(first: int) -> list[list[Sample]]:
        fake.mode = "abort"
        finished = list(await asyncio.gather(*(hook(args, sample(first, k), dict(PARAMS)) for k in range(2))))
        await hook(args, sample(first + 1, 0), dict(PARAMS))
        fake.mode, stalled = "stall", fake.stalled
        pending = [asyncio.create_task(hook(args, sample(first + 2, k), dict(PARAMS))) for k in range(2)]
        while fake.stalled < stalled + 2:
            await asyncio.sleep(0.01)
        for task in pending:
            task.cancel()
        results = await asyncio.gather(*pending, return_exceptions=True)
        assert all(isinstance(result, asyncio.CancelledError) for result in results)
        return [finished]

    for index in range(6):
        generated = asyncio.run(step(3 * index))
        assert set(state.groups) == {3 * index + 1}  # only the half-started group is open
        assert len(state.registry) == 1
        record(args, generated, data_source=None)  # the batch end
        assert not state.groups and len(state.registry) == 0
    assert len(list((tmp_path / "round-000").glob("group-*/triage.json"))) == 6  # finished groups still lead


@pytest.mark.parametrize(("change", "field_name"), [
    ({"evaluation": True}, "evaluation"),
    ({"partial_rollout": True}, "partial-rollout"),
    ({"group_rm": True}, "group-rm"),
    ({"top_p": 0.9}, "top_p"),
    ({"top_k": 20}, "top_k"),
    ({"split": "val"}, "split"),
])
def test_generate_refuses_unsupported_modes(services, tokenizer_dir, curriculum_files, tmp_path: Path,
                                            change: dict[str, Any], field_name: str) -> None:
    hook = load_function(slime_config.HOOK_PATHS["--custom-generate-function-path"])
    args = slime_args(services, tokenizer_dir, curriculum_files, tmp_path, n=1,
                      **{k: v for k, v in change.items() if k in ("partial_rollout", "group_rm")})
    params = {**PARAMS, **{k: v for k, v in change.items() if k in ("top_p", "top_k")}}
    sample = Sample(group_index=0, index=0, metadata={"schema_version": TASKS_SCHEMA_VERSION, "task_id": 1,
                                                      "split": change.get("split", "train")})
    with pytest.raises(slime_config.SlimeConfigError, match=field_name):
        asyncio.run(hook(args, sample, params, evaluation=change.get("evaluation", False)))


def test_a_curriculum_change_inside_a_group_is_fatal(services, tokenizer_dir, curriculum_files,
                                                     tmp_path: Path) -> None:
    _, _, fake, task_ids = services
    fake.mode = "wander"
    bank_path, curriculum_path = curriculum_files
    from intraskill.skills.bank import load_skillbank

    other = build_curriculum(load_skillbank(bank_path), round_id="round-001", skillbank_path=str(bank_path),
                             seed=7, created_at="2026-01-02")
    other_path = save_curriculum(other, tmp_path / "other.json")
    args = slime_args(services, tokenizer_dir, curriculum_files, tmp_path / "run", n=2)
    hook = load_function(slime_config.HOOK_PATHS["--custom-generate-function-path"])
    metadata = {"schema_version": TASKS_SCHEMA_VERSION, "task_id": task_ids[0], "split": "train"}
    first = asyncio.run(hook(args, Sample(group_index=8, index=16, metadata=dict(metadata)), dict(PARAMS)))
    assert META_GROUP_TRIAGE not in first.metadata  # one of two siblings: not the leader
    args.intraskill_curriculum_path = str(other_path)
    with pytest.raises(CurriculumError, match="curriculum changed inside the group"):
        asyncio.run(hook(args, Sample(group_index=8, index=17, metadata=dict(metadata)), dict(PARAMS)))


def test_each_control_arm_is_a_slime_round_config(tmp_path: Path) -> None:
    params = load_params(project_root() / "params" / "organism.yaml")
    bank = project_root() / "params" / "ci_s0.json"
    expected = {"coevolve": (0.2, True), "grpo": (1.0, False), "fixed": (0.0, False), "nomask": (0.0, True),
                "uniform": (0.2, True)}
    fixed_rho = {"fixed": 1.0, "nomask": 1.0, "uniform": 0.5}
    for arm, (q, retry) in expected.items():
        config = arm_round_config(params, arm, 1, 0, bank, tmp_path / arm, episode_concurrency=8)
        curriculum = load_checked_curriculum(config.curriculum_path, config.skillbank_path)
        assert (curriculum.skill_free_probability, config.full_skill_retry) == (q, retry), arm
        assert curriculum.seed == params.round.curriculum_seed + 1 and config.episode_concurrency == 8
        if arm in fixed_rho:
            assert {c.inclusion_probability for c in curriculum.chunks} == {fixed_rho[arm]}, arm
        assert SlimeRunConfig.from_args(SimpleNamespace(**config.to_custom_config())) == config
