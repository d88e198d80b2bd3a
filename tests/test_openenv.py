"""The store as an OpenEnv environment: a real OpenEnv server on 127.0.0.1 driven by OpenEnv's own client,
checked step by step against the in-process engine; skill context, errors, leases and the CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from waiting import wait_until

pytest.importorskip("openenv.core", reason="the openenv extra is not installed (pip install 'intraskill[openenv]')")

from websockets.exceptions import ConnectionClosedError  # noqa: E402

from intraskill.integrations.openenv.agent_env import openenv_environments  # noqa: E402
from intraskill.integrations.openenv.client import ShopEnvClient  # noqa: E402
from intraskill.integrations.openenv.models import ShopAction, ShopObservation  # noqa: E402
from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options  # noqa: E402
from intraskill.shop.engine import ShopEngine  # noqa: E402
from intraskill.shop.scripted_expert import ScriptedExpert  # noqa: E402
from intraskill.shop.service import RunningService, serve_in_thread  # noqa: E402
from intraskill.skills.bank import Skill, SkillBank, save_skillbank  # noqa: E402
from intraskill.skills.render import render_skill_block  # noqa: E402

TERMINAL_ONLY = ("reward_detail", "termination_reason", "purchase", "goal")
RESET_ONLY = ("task_id", "instruction", "user_persona", "task_mode", "skill_context")
BANK = SkillBank("test-bank-1", (
    Skill("chunk-a", "### Read the persona\n\n- Applies when: a persona names a brand"),
    Skill("chunk-b", "### Check the budget\n\n- Applies when: the request names a price"),
    Skill("chunk-off", "### Disabled\n\n- Applies when: never", enabled=False),
))


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def server(engine: ShopEngine, small_store) -> Iterator[RunningService]:
    app = create_openenv_app(engine, small_store[2], slots=4, bank=BANK)
    with serve_in_thread(app, **uvicorn_options()) as running:
        yield running


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def client(server: RunningService) -> Any:
    return ShopEnvClient(base_url=server.base_url).sync()


def test_expert_episodes_match_the_engine_step_by_step(server: RunningService, engine: ShopEngine,
                                                       small_store) -> None:
    catalog, _, splits = small_store
    plays = [{"split": "val", "task_id": splits.ids("val")[0]}, {"split": "val", "task_id": splits.ids("val")[1]},
             {"split": "test", "task_id": splits.ids("test")[0], "persona": False},
             {"split": "train", "seed": 7}]
    rewards = []
    with client(server) as env:  # one session plays every episode: reset reuses its slot
        for play in plays:
            first = env.reset(**play).observation
            task_id = first.task_id
            assert task_id is not None and task_id in splits.ids(play["split"])
            reference = engine.new_session()
            expected = reference.reset(task_id, persona=play.get("persona"))
            assert (first.page, first.page_state, first.instruction, first.user_persona, first.task_mode) == (
                expected["observation"], expected["observation_state"], expected["task_instruction"],
                expected["user_persona"], expected["task_mode"])
            assert first.feedback == expected["observation_state"]["last_action"] and first.skill_context == ""
            assert first.available_actions == ["search[...]"] and not first.done and first.reward is None
            assert all(getattr(first, name) is None for name in TERMINAL_ONLY)
            expert, task, steps = ScriptedExpert(), catalog.task(task_id), 0
            while not expected.get("done"):
                action = expert.act(task, expected["observation_state"])
                result = env.step(ShopAction(action=action))
                expected, seen, steps = reference.step(action), result.observation, steps + 1
                assert (seen.page, seen.page_state, seen.feedback, seen.message) == (
                    expected["observation"], expected["observation_state"], expected["action_feedback"],
                    expected["message"]), f"task {task_id} step {steps}: {action}"
                assert (result.done, result.reward, seen.done, seen.reward) == (
                    expected["done"], expected["reward"], expected["done"], expected["reward"])
                assert seen.available_actions == (["search[...]"] if seen.page_state["search_available"] else []) + [
                    f"click[{label}]" for label in seen.page_state["actions"]]
                assert all(getattr(seen, name) is None for name in RESET_ONLY)
                if not seen.done:  # the private goal and the reward parts never show before the end
                    assert all(getattr(seen, name) is None for name in TERMINAL_ONLY)
                    assert "__reasoning__" not in seen.model_dump_json()
            assert (seen.reward_detail, seen.termination_reason, seen.purchase, seen.goal) == (
                expected["reward_detail"], expected["termination_reason"], expected["purchase"], None)  # no gold
            state = env.state()
            assert (state.task_id, state.split, state.step_count, state.done, state.termination_reason) == (
                task_id, play["split"], steps, True, expected["termination_reason"])
            assert "goal" not in state.model_dump()
            rewards.append(seen.reward)
    assert max(rewards) == 1.0, rewards  # at least one expert purchase scored in full


def test_the_agent_environment_hands_the_runtime_the_engines_payloads(server: RunningService, engine: ShopEngine,
                                                                      small_store) -> None:
    catalog, _, splits = small_store
    environments = openenv_environments(server.base_url)
    for task_id in splits.ids("val")[:2]:
        env, reference = environments(), engine.new_session()
        try:
            expected, seen = reference.reset(task_id), env.reset(task_id)
            assert seen == {key: value for key, value in expected.items() if key != "interaction_mode"}
            expert, task = ScriptedExpert(), catalog.task(task_id)
            for _ in range(4):
                action = expert.act(task, expected["observation_state"])
                expected, seen = reference.step(action), env.step(action)
                assert seen == {key: None if key == "goal" else value for key, value in expected.items()
                                if key != "idx"}, action
                if seen["done"]:
                    break
            if not seen["done"]:
                expected, seen = reference.terminate("action_limit"), env.terminate("action_limit")
                assert {key: seen[key] for key in ("done", "reward", "reward_detail", "termination_reason")} \
                    == {key: expected[key] for key in ("done", "reward", "reward_detail", "termination_reason")}
                assert seen["goal"] is None  # untrusted by default: no gold
        finally:
            env.close()
            env.close()  # idempotent
    with pytest.raises(ValueError, match="serves a store with page_size=20, the parameter set plays 5"):
        openenv_environments(server.base_url, {"page_size": 5})
    with pytest.raises(ValueError, match="env_url: no OpenEnv store answers at http://127.0.0.1:"):
        openenv_environments(f"http://127.0.0.1:{free_port()}", timeout_s=2.0)


def test_a_seed_draws_the_same_task_every_time(server: RunningService) -> None:
    with client(server) as env:
        drawn = {env.reset(split="val", seed=3).observation.task_id for _ in range(2)}
        assert len(drawn) == 1 and env.state().seed == 3


def test_invalid_action_text_is_engine_feedback_not_an_error(server: RunningService, engine: ShopEngine,
                                                             small_store) -> None:
    task_id = small_store[2].ids("val")[0]
    reference = engine.new_session()
    reference.reset(task_id)
    with client(server) as env:
        env.reset(task_id=task_id)
        seen = env.step(ShopAction(action="click[nothing here]")).observation
    expected = reference.step("click[nothing here]")
    assert seen.feedback == expected["action_feedback"] and seen.feedback["valid"] is False
    assert seen.message == expected["message"] == "Invalid action" and not seen.done


def test_skill_ids_select_chunks_rendered_in_bank_order(server: RunningService, small_store) -> None:
    task_id = small_store[2].ids("val")[0]
    with client(server) as env:
        first = env.reset(task_id=task_id, skill_ids=["chunk-b", "chunk-a"]).observation
        assert first.skill_context == render_skill_block(list(BANK.skills[:2]))
        assert env.state().skill_ids == ["chunk-a", "chunk-b"]
        assert env.reset(task_id=task_id, skill_ids=["chunk-b"]).observation.skill_context == render_skill_block(
            [BANK.skills[1]])
        assert env.reset(task_id=task_id).observation.skill_context == ""


@pytest.mark.parametrize("options, message", [
    ({"task_id": 10**9}, "task_id: unknown task id"),
    ({"split": "val"}, "task_id: give a task id, or a seed"),
    ({"split": "holdout", "seed": 1}, "split: unknown split 'holdout'"),
    ({"split": "val", "seed": "7"}, "seed: need an integer, got '7'"),
    ({"taskid": 1}, "taskid: unknown reset option"),
    ({"seed": 1, "persona": "yes"}, "persona: need true, false or null"),
    ({"seed": 1, "skill_ids": ["chunk-off"]}, "skill_ids: 'chunk-off' is not an enabled skill"),
    ({"seed": 1, "skill_ids": "chunk-a"}, "skill_ids: need a list of skill id strings"),
])
def test_bad_reset_options_name_the_field(server: RunningService, options: dict[str, Any], message: str) -> None:
    with client(server) as env:
        with pytest.raises(RuntimeError, match=message):
            env.reset(**options)
        assert env.reset(seed=1).observation.task_id is not None  # the session survives the error


def test_bad_steps_are_clear_errors(server: RunningService, small_store) -> None:
    with client(server) as env:
        with pytest.raises(RuntimeError, match="step: no episode in this session"):
            env.step(ShopAction(action="search[mug]"))
        env.reset(task_id=small_store[2].ids("val")[0])
        with pytest.raises(RuntimeError, match="action: the search query has 200 tokens"):
            env.step(ShopAction(action="search[" + " ".join(f"w{i}" for i in range(200)) + "]"))
        end = env.step(ShopAction(terminate="generation_length")).observation
        assert end.done and end.reward == 0.0 and end.termination_reason == "generation_length"
        assert end.goal is None and end.reward_detail is not None  # untrusted by default: no gold
        with pytest.raises(RuntimeError, match="the episode ended"):
            env.step(ShopAction(action="search[mug]"))
    with pytest.raises(ValueError, match="action, terminate: give exactly one"):
        ShopAction(action="search[mug]", terminate="action_limit")


def test_a_message_over_the_cap_closes_the_session_and_frees_its_slot(server: RunningService) -> None:
    pool = server.server.config.app.state.pool
    with client(server) as env:
        env.reset(seed=1)
        assert pool.free_count == 3
        with pytest.raises(ConnectionClosedError, match="message too big"):
            env.step(ShopAction(action="click[" + "x" * 70_000 + "]"))
    wait_until(lambda: pool.free_count == 4, "the closed session's slot came back")


def test_http_endpoints_refuse_with_4xx_naming_the_problem(server: RunningService, small_store) -> None:
    with httpx.Client(base_url=server.base_url, trust_env=False) as http:
        assert http.get("/health").json()["status"] == "healthy"
        schema = http.get("/schema").json()
        assert set(schema["action"]["properties"]) >= {"action", "terminate"}
        assert "goal" not in schema["state"].get("properties", {})
        assert http.get("/metadata").json()["name"] == "intraskill-store"
        reset = http.post("/reset", json={"task_id": small_store[2].ids("val")[0]})
        assert reset.status_code == 200 and reset.json()["observation"]["available_actions"] == ["search[...]"]
        assert server.server.config.app.state.pool.free_count == 4  # a stateless reset gives its slot back
        bad_task = http.post("/reset", json={"task_id": 10**9})
        assert bad_task.status_code == 400 and bad_task.json()["detail"].startswith("task_id: unknown task id")
        unstarted = http.post("/step", json={"action": {"action": "search[mug]"}})
        assert unstarted.status_code == 409 and unstarted.json()["reason"] == "episode_not_started"
        malformed = http.post("/step", json={"action": {"act": "search[mug]"}})
        assert malformed.status_code == 422 and "act" in json.dumps(malformed.json()["detail"])
        huge = http.post("/reset", content=b"{" + b" " * 70_000 + b"}", headers={"content-type": "application/json"})
        assert huge.status_code == 413 and huge.json()["detail"].startswith("body: ")


def test_one_slot_leases_like_the_shopsimulator_service(engine: ShopEngine, small_store) -> None:
    task_id = small_store[2].ids("val")[0]
    app = create_openenv_app(engine, small_store[2], slots=1, reset_wait_s=0.3, lease_idle_s=1.0)
    with serve_in_thread(app, **uvicorn_options()) as running:
        holder, waiter = client(running), client(running)
        with holder:
            holder.reset(task_id=task_id)
            started = time.monotonic()
            with pytest.raises(RuntimeError, match=r"no free slot within 0.3 s \(1 slots, all leased\)"):
                waiter.reset(task_id=task_id)
            assert time.monotonic() - started >= 0.3
            assert app.state.pool.free_count == 0
        wait_until(lambda: app.state.pool.free_count == 1, "closing the holder's connection released its slot")
        with waiter:
            assert waiter.reset(task_id=task_id).observation.task_id == task_id
            wait_until(lambda: app.state.pool.expired_count == 1, "the lease expired lease_idle_s after its last use")
            with pytest.raises(RuntimeError, match="lease: this session's slot lease expired"):
                waiter.step(ShopAction(action="search[mug]"))
            assert waiter.reset(task_id=task_id).observation.task_id == task_id  # a reset leases again
            assert waiter.step(ShopAction(action="search[mug]")).observation.page_state["page_type"] == (
                "search_results")


@pytest.mark.e2e
def test_cli_serves_the_openenv_protocol(small_store_root: Path, small_store, tmp_path: Path) -> None:
    bank_path = save_skillbank(BANK, tmp_path / "bank.json")
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params" / "ci.yaml").read_text())
    params["store"]["page_size"] = 5
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    port = free_port()
    command = [sys.executable, "-m", "intraskill", "env", "serve", "--protocol", "openenv", "--root",
               str(small_store_root), "--params", str(tmp_path / "params.yaml"), "--port", str(port), "--slots", "2",
               "--skillbank", str(bank_path)]
    process = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[1], env=os.environ.copy(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base_url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            assert process.poll() is None, process.communicate()[1]
            try:
                return httpx.get(f"{base_url}/health", trust_env=False).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, "the openenv server answers /health", timeout_s=120, every_s=0.2)
        with ShopEnvClient(base_url=base_url).sync() as env:
            first = env.reset(task_id=small_store[2].ids("val")[0], skill_ids=["chunk-a"]).observation
            assert isinstance(first, ShopObservation) and "chunk-a" in (first.skill_context or "")
            assert env.step(ShopAction(action="search[mug]")).observation.page_state["page_type"] == "search_results"
            assert env.state().store_config["page_size"] == 5  # the parameter set's store settings
        openenv_environments(base_url, {"page_size": 5, "max_actions": 30})
        with pytest.raises(ValueError, match="page_size=5, the parameter set plays 20"):
            openenv_environments(base_url, {"page_size": 20})
    finally:
        process.terminate()
        process.wait(20)
    assert "protocol: openenv" in process.stdout.read()
