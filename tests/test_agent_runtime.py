"""The lockstep runtime on the real small store: turns, budgets, failures, traces and the gold firewall."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from intraskill.agent import (
    EpisodeJob,
    InProcessEnvironment,
    RuntimeConfig,
    episode_id,
    episode_seed,
    read_traces,
    run_episodes,
    scan_prompts_for_gold,
)
from intraskill.chat.base import ChatRequest, ContextFull, Generation, SessionTokens
from intraskill.chat.chatml import parse_tool_calls
from intraskill.hashing import seed32
from intraskill.jsonl import JsonlWriter
from intraskill.skills import GroupAssignment, Skill

NAVIGATION = {"back to search", "< prev", "next >", "buy now"}


class ScriptedPolicy:
    """Test double: shops greedily from the offered tools; ``faults[(session, turn)]`` injects misbehaviour.

    Faults: ``"mixed"`` (text next to the call), ``"text"`` (no call), ``"length"`` (cut-off call),
    ``"length_valid"`` (a valid call that hit the budget), ``"raise"`` (the backend fails),
    ``"context_full"`` (no room left in the context window), ``"bad_click"`` (a click value outside the enum).
    """

    def __init__(self, faults: dict[tuple[str, int], str] | None = None) -> None:
        self.faults = faults or {}
        self.batches: list[list[ChatRequest]] = []
        self.ended: list[str] = []

    @property
    def identity(self) -> dict[str, Any]:
        return {"model_id": "scripted", "checkpoint_id": "ckpt-test", "backend": "scripted"}

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        self.batches.append(requests)
        return [self._reply(request) for request in requests]

    def end_session(self, session_id: str) -> SessionTokens | None:
        self.ended.append(session_id)
        return SessionTokens([1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.2])

    def _reply(self, request: ChatRequest) -> Generation:
        turn = sum(message["role"] == "assistant" for message in request.messages)
        fault = self.faults.get((request.session_id, turn), "")
        if fault == "raise":
            raise RuntimeError(f"backend failure in {request.session_id}")
        if fault == "context_full":
            raise ContextFull(f"session {request.session_id}: no room")
        name, argument = self._choose(request)
        if fault == "bad_click":
            name, argument = "click", {"value": "Buy Now!"}
        call = f'<tool_call>{json.dumps({"name": name, "arguments": argument}, ensure_ascii=False)}</tool_call>'
        text = {"mixed": "Let me think. " + call, "text": "I would buy it.", "length": call[:20]}.get(fault, call)
        content, calls, error = parse_tool_calls(text)
        finish = "length" if fault in ("length", "length_valid") else "stop"
        return Generation(text=text, content=content, tool_calls=calls, finish_reason=finish,
                          prompt_tokens=len(request.messages), completion_tokens=len(text), parse_error=error)

    @staticmethod
    def _choose(request: ChatRequest) -> tuple[str, dict[str, str]]:
        tools = {tool["function"]["name"]: tool["function"] for tool in request.tools}
        if "search" in tools:
            instruction = request.messages[1]["content"].split("\n\n")[0].split(": ", 1)[-1]
            return "search", {"query": instruction}
        values = tools["click"]["parameters"]["properties"]["value"]["enum"]
        clicked_axes = {
            json.loads(call["function"]["arguments"])["value"].split("=")[0]
            for message in request.messages if message["role"] == "assistant"
            for call in message.get("tool_calls") or [] if "=" in call["function"]["arguments"]
        }
        if "buy now" in values:
            return "click", {"value": "buy now"}
        for value in values:
            if "=" in value and value.split("=")[0] not in clicked_axes:
                return "click", {"value": value}
        products = [value for value in values if value not in NAVIGATION and "=" not in value]
        return "click", {"value": products[0] if products else "back to search"}


class FlakyEnvironment(InProcessEnvironment):
    """A real store session that raises on ``reset`` or on a chosen ``step`` of one task; records ``close``."""

    closed: list[int] = []

    def __init__(self, engine: Any, fail_task: int | None = None, fail_at_step: int = 1,
                 fail_reset: bool = False) -> None:
        super().__init__(engine)
        self.fail_task, self.fail_at_step, self.fail_reset = fail_task, fail_at_step, fail_reset
        self.task_id, self.steps = None, 0

    def reset(self, task_id: int) -> dict[str, Any]:
        self.task_id = task_id
        if self.fail_reset and task_id == self.fail_task:
            raise ConnectionError("store unavailable")
        return super().reset(task_id)

    def step(self, action: str) -> dict[str, Any]:
        self.steps += 1
        if self.task_id == self.fail_task and self.steps == self.fail_at_step:
            raise ConnectionError("environment lost")
        return super().step(action)

    def close(self) -> None:
        FlakyEnvironment.closed.append(self.task_id)
        super().close()


@pytest.fixture(scope="module")
def engine(small_store):
    from intraskill.shop.engine import ShopEngine, StoreConfig

    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index, StoreConfig())


@pytest.fixture(scope="module")
def task_ids(small_store) -> list[int]:
    catalog, _, _ = small_store
    return list(catalog.task_ids())[:8]


def _jobs(task_ids: list[int], samples: int = 1, **kwargs: Any) -> list[EpisodeJob]:
    return [EpisodeJob.create(task, sample, seed=11, **kwargs) for task in task_ids for sample in range(samples)]


def _all_prompts(policy: ScriptedPolicy, session: str) -> list[list[dict]]:
    return [r.messages for batch in policy.batches for r in batch if r.session_id == session]


def test_episode_ids_and_seeds() -> None:
    assert episode_id(123, 0) == "task-000123__sample-000"
    assert episode_seed(20260901, 123, 4) == seed32("20260901:123:4")
    job = EpisodeJob.create(123, 4, seed=20260901)
    assert (job.episode_id, job.seed) == ("task-000123__sample-004", seed32("20260901:123:4"))


def test_job_skills_must_match_assignment() -> None:
    assignment = GroupAssignment("state", "7", "assisted", ("chunk-a",))
    with pytest.raises(ValueError, match="assignment.skill_ids"):
        EpisodeJob.create(1, 0, seed=1, skills=[Skill("chunk-b", "### B")], assignment=assignment)


def test_lockstep_completes_and_writes_traces(engine, task_ids, tmp_path: Path) -> None:
    policy = ScriptedPolicy()
    jobs = _jobs(task_ids[:4], samples=2)
    with JsonlWriter(tmp_path / "traces.jsonl") as writer:
        results = run_episodes(policy, lambda: InProcessEnvironment(engine), jobs, RuntimeConfig(),
                               trace_writer=writer, progress=False)
    assert [r.episode_id for r in results] == [j.episode_id for j in jobs]
    assert all(r.status == "completed" and r.scored for r in results)
    # lockstep: one generate call per turn, each carrying every live episode
    assert len(policy.batches) == max(r.model_steps for r in results)
    live = [sum(r.model_steps > turn for r in results) for turn in range(len(policy.batches))]
    assert [len(batch) for batch in policy.batches] == live
    assert sorted(policy.ended) == sorted(j.episode_id for j in jobs)
    traces = read_traces(tmp_path / "traces.jsonl")
    assert [t.episode_id for t in traces] and {t.episode_id for t in traces} == {j.episode_id for j in jobs}
    for result in results:
        trace = result.trace
        assert result.session_tokens.loss_mask == [0, 1, 1]
        assert result.reward.reward == result.reward.r_strict == result.reward_detail["r_strict"]
        assert result.termination_reason == "purchase"
        assert result.steps == sum(t.action is not None for t in trace.turns) == result.model_steps
        assert result.protocol_errors == 0
        assert result.tokens["prompt"] == sum(t.prompt_tokens for t in trace.turns)
        assert trace.provenance["checkpoint_id"] == "ckpt-test"
        assert trace.provenance["prompt"]["skill_renderer_version"] == "plain-skill-context-v1"
        assert trace.provenance["environment_version"]
        assert trace.private_goal and trace.private_goal["asin"]
        for messages in _all_prompts(policy, result.episode_id):
            assert scan_prompts_for_gold(messages, trace.private_goal) == []
            assert "private_goal" not in json.dumps(messages, ensure_ascii=False)


def test_same_seed_same_requests(engine, task_ids) -> None:
    first, second = ScriptedPolicy(), ScriptedPolicy()
    config = RuntimeConfig(language="zh")
    for policy in (first, second):
        run_episodes(policy, lambda: InProcessEnvironment(engine), _jobs(task_ids[:2]), config, progress=False)
    flatten = lambda p: [(r.session_id, r.seed, r.messages, r.tools) for b in p.batches for r in b]  # noqa: E731
    assert flatten(first) == flatten(second)
    assert first.batches[0][0].messages[0]["content"].startswith("你是")


def test_protocol_errors_cost_a_turn_and_are_fed_back(engine, task_ids) -> None:
    target = episode_id(task_ids[0], 0)
    policy = ScriptedPolicy({(target, 0): "text", (target, 1): "mixed"})
    result = run_episodes(policy, lambda: InProcessEnvironment(engine), _jobs(task_ids[:1]), RuntimeConfig(),
                          progress=False)[0]
    assert result.status == "completed" and result.protocol_errors == 2
    assert result.model_steps == result.steps + 2
    prompts = _all_prompts(policy, target)
    assert prompts[1][-1]["role"] == "user" and json.loads(prompts[1][-1]["content"])["code"] == "tool_call_count"
    assert prompts[2][-1]["role"] == "tool" and json.loads(prompts[2][-1]["content"])["code"] == "mixed_content"
    assert [t.protocol_error for t in result.trace.turns[:2]] == ["tool_call_count", "mixed_content"]
    assert prompts[2][-1]["content"].find("same page") > 0


def test_turn_limit_terminates_with_action_limit(engine, task_ids) -> None:
    target = episode_id(task_ids[0], 0)
    policy = ScriptedPolicy({(target, turn): "mixed" for turn in range(5)})
    result = run_episodes(policy, lambda: InProcessEnvironment(engine), _jobs(task_ids[:1]),
                          RuntimeConfig(max_turns=5), progress=False)[0]
    assert (result.status, result.termination_reason) == ("completed", "action_limit")
    assert (result.model_steps, result.steps, result.protocol_errors) == (5, 0, 5)
    assert result.reward.reward == 0.0 and result.reward.r_success == 0.0


def test_length_cutoff_without_valid_call_is_a_scored_failure(engine, task_ids) -> None:
    cut, ok = episode_id(task_ids[0], 0), episode_id(task_ids[1], 0)
    policy = ScriptedPolicy({(cut, 1): "length", (ok, 0): "length_valid"})
    results = run_episodes(policy, lambda: InProcessEnvironment(engine), _jobs(task_ids[:2]), RuntimeConfig(),
                           progress=False)
    assert (results[0].status, results[0].termination_reason) == ("completed", "generation_length")
    assert results[0].model_steps == 2 and results[0].reward.reward == 0.0
    assert results[0].trace.turns[-1].protocol_error == "invalid_arguments_json"
    assert results[1].termination_reason == "purchase" and results[1].trace.turns[0].finish_reason == "length"


def test_out_of_enum_click_reaches_the_environment(engine, task_ids) -> None:
    target = episode_id(task_ids[0], 0)
    policy = ScriptedPolicy({(target, 1): "bad_click"})
    result = run_episodes(policy, lambda: InProcessEnvironment(engine), _jobs(task_ids[:1]), RuntimeConfig(),
                          progress=False)[0]
    bad = result.trace.turns[1]
    assert bad.action == "click[Buy Now!]" and bad.protocol_error is None and bad.action_valid is False
    assert result.invalid_actions == 1 and result.protocol_errors == 0
    assert result.steps == result.model_steps


def test_failures_are_isolated(engine, task_ids) -> None:
    broken_env, broken_policy = task_ids[1], episode_id(task_ids[2], 0)
    policy = ScriptedPolicy({(broken_policy, 1): "raise"})
    FlakyEnvironment.closed = []
    jobs = _jobs(task_ids[:4])
    results = run_episodes(policy, lambda: FlakyEnvironment(engine, fail_task=broken_env, fail_at_step=2),
                           jobs, RuntimeConfig(), progress=False)
    status = {r.task_id: r.status for r in results}
    assert status == {task_ids[0]: "completed", broken_env: "failed", task_ids[2]: "failed",
                      task_ids[3]: "completed"}
    failed = [r for r in results if r.status == "failed"]
    assert any("ConnectionError" in r.error for r in failed) and any("backend failure" in r.error for r in failed)
    assert all(r.reward is None and r.session_tokens is None and not r.scored for r in failed)
    assert all(r.trace.status == "failed" and r.trace.error == r.error for r in failed)
    assert sorted(FlakyEnvironment.closed) == sorted(task_ids[:4])
    assert sorted(policy.ended) == sorted(j.episode_id for j in jobs)


def test_a_full_context_ends_the_episode_as_a_scored_generation_length(engine, task_ids) -> None:
    full, first = episode_id(task_ids[0], 0), episode_id(task_ids[1], 0)
    policy = ScriptedPolicy({(full, 2): "context_full", (first, 0): "context_full"})
    results = {r.episode_id: r for r in run_episodes(policy, lambda: InProcessEnvironment(engine),
                                                     _jobs(task_ids[:3]), RuntimeConfig(), progress=False)}
    assert results[full].status == "completed" and results[full].termination_reason == "generation_length"
    assert results[full].reward is not None and results[full].reward.reward == 0.0 and results[full].model_steps == 2
    assert results[first].status == "failed" and "no room" in results[first].error  # its first prompt never fits
    assert results[episode_id(task_ids[2], 0)].termination_reason == "purchase"


def test_failed_reset_is_isolated(engine, task_ids) -> None:
    jobs = _jobs(task_ids[:2]) + [EpisodeJob.create(10**6, 0, seed=11)]
    results = run_episodes(ScriptedPolicy(), lambda: InProcessEnvironment(engine), jobs, RuntimeConfig(),
                           progress=False)
    assert [r.status for r in results] == ["completed", "completed", "failed"]
    assert results[2].model_steps == 0


def test_skills_enter_the_system_prompt_and_the_trace(engine, task_ids) -> None:
    skills = [Skill("chunk-b", "### Options\n\n- Applies when: always", version="2"),
              Skill("chunk-a", "### Search\n\n- Applies when: home", version="1")]
    assignment = GroupAssignment("state-x", "0", "assisted", ("chunk-b", "chunk-a"))
    policy = ScriptedPolicy()
    job = EpisodeJob.create(task_ids[0], 0, seed=11, skills=skills, assignment=assignment)
    result = run_episodes(policy, lambda: InProcessEnvironment(engine), [job], RuntimeConfig(), progress=False)[0]
    system = policy.batches[0][0].messages[0]["content"]
    assert system.index('<skill id="chunk-b" version="2">') < system.index('<skill id="chunk-a" version="1">')
    provenance = result.trace.provenance
    assert provenance["skills"]["assignment"]["mode"] == "assisted"
    assert [s["content_sha256"] for s in provenance["selected_skills"]] == [s.content_sha256 for s in skills]


class RecordingPolicy:
    """Delegates to a real policy and keeps every request it was sent."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.batches = policy, []

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        self.batches.append(requests)
        return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)


def test_end_to_end_tiny_organism_in_lockstep(engine, task_ids, tmp_path: Path) -> None:
    from intraskill.policy.hf import HFPolicy
    from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

    tiny = OrganismConfig(vocab_size=400, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                          head_dim=32, intermediate_size=128, max_position=4096, initializer_range=0.3, seed=7)
    tokenizer = train_tokenizer(protocol_corpus(), tiny.vocab_size)
    policy = RecordingPolicy(HFPolicy(build_organism(tiny, tokenizer), tokenizer, checkpoint_id="random-init"))
    broken = task_ids[5]

    jobs = _jobs(task_ids[:8])
    config = RuntimeConfig(max_turns=3, max_tokens_per_turn=12, temperature=1.0)
    FlakyEnvironment.closed = []
    with JsonlWriter(tmp_path / "traces.jsonl") as writer:
        results = run_episodes(policy, lambda: FlakyEnvironment(engine, fail_task=broken, fail_reset=True),
                               jobs, config, trace_writer=writer, progress=False)
    traces = {t.episode_id: t for t in read_traces(tmp_path / "traces.jsonl")}
    assert set(traces) == {job.episode_id for job in jobs}
    assert [r.status for r in results] == ["failed" if r.task_id == broken else "completed" for r in results]
    assert len(policy.batches) == max(r.model_steps for r in results) <= config.max_turns
    assert sorted(FlakyEnvironment.closed) == sorted(task_ids[:8])
    for result in results:
        if result.task_id == broken:
            assert "store unavailable" in result.error and result.model_steps == 0
            continue
        trace = traces[result.episode_id]
        assert trace.status == "completed" and trace.reward == result.reward
        assert result.termination_reason in ("generation_length", "action_limit", "purchase")
        assert result.steps + result.protocol_errors == result.model_steps >= 1
        assert result.invalid_actions <= result.steps
        assert trace.provenance["checkpoint_id"] == "random-init" and trace.provenance["backend"] == "hf"
        # the exact token stream: every sampled token is in the stream with mask 1
        stream = result.session_tokens
        assert sum(stream.loss_mask) == result.tokens["completion"] > 0
        assert len(stream.input_ids) > result.tokens["completion"]
        for batch in policy.batches:
            for request in batch:
                if request.session_id == result.episode_id:
                    assert scan_prompts_for_gold(request.messages, trace.private_goal) == []
