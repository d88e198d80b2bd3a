"""The store service over real HTTP on 127.0.0.1 (reference §4.5, §6, test_slot_lease_contract,
test_debug_ui's /healthz contract) and its clients."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner
from waiting import wait_until

from intraskill.agent.env import Environment
from intraskill.cli import app as cli_app
from intraskill.shop.client import AsyncShopClient, ShopClient, ShopProtocolError, ShopServiceError
from intraskill.shop.engine import EpisodeFinishedError, ShopEngine
from intraskill.shop.leases import StaleLeaseError
from intraskill.shop.service import (
    MAX_BODY_BYTES,
    MAX_QUERY_TOKENS,
    RunningService,
    create_app,
    serve_in_thread,
)

API = "/api/shop_agent"
ADMIN = "test-admin-token"


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def task_ids(small_store) -> list[int]:
    _, _, splits = small_store
    return list(splits.ids("test"))


@pytest.fixture(scope="module")
def service(engine: ShopEngine, small_store) -> Iterator[RunningService]:
    _, _, splits = small_store
    app = create_app(engine, slots=2, split_sizes={n: len(splits.ids(n)) for n in splits.names},
                     admin_token=ADMIN)
    with serve_in_thread(app) as running:
        yield running


@pytest.fixture()
def http(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, trust_env=False, timeout=10) as client:
        yield client
        release_all(client)  # every test starts with all slots free


def post(http: httpx.Client, **body: Any) -> tuple[int, dict[str, Any]]:
    response = http.post(API, json=body)
    return response.status_code, response.json()["result"]


def release_all(http: httpx.Client) -> tuple[int, dict[str, Any]]:
    return post(http, action="release_all", admin_token=ADMIN)


def free_slots(http: httpx.Client) -> int:
    return http.get("/healthz").json()["free_slots"]


def healthz(base_url: str) -> dict[str, Any]:
    """The service's ``/healthz`` body, on a fresh connection."""
    return httpx.get(base_url + "/healthz", trust_env=False).json()


def test_healthz_contract(http: httpx.Client, engine: ShopEngine) -> None:
    health = http.get("/healthz").json()
    assert health["ready"] is True
    assert health["environment_slots"] == 2 and health["free_slots"] == 2
    assert health["tasks"] == {"active": 200, "train": 120, "val": 40, "test": 40, "dev": 24}
    assert health["primary_reward"] == "r_strict" and health["reveals_goal"] is False
    versions = health["versions"]
    assert versions["environment_version"] == "shopsimulator-paper-aligned-v8"
    assert versions["search"] == "shopsimulator-multifield-bm25-v3"
    assert versions["reward"] == "shopsimulator-paper-reward-v2"
    assert versions["observation"] == "shopping-observation-v7"


def test_reset_interact_terminate_release_cycle(http: httpx.Client, task_ids: list[int]) -> None:
    status, reset = post(http, action="reset", idx=task_ids[0], if_persona=True)
    assert status == 200
    slot, lease = reset["env_idx"], reset["lease_id"]
    assert reset["idx"] == task_ids[0] and reset["task_mode"] == "persona"
    assert reset["observation_state"]["page_type"] == "search_home" and reset["task_instruction"]
    assert "goal" not in reset and lease not in json.dumps(reset["observation_state"]) + reset["observation"]
    assert free_slots(http) == 1

    status, step = post(http, action="interact", env_idx=slot, lease_id=lease, response="search[pillow]")
    assert status == 200 and step["done"] is False and step["over"] is False
    assert step["message"] == "Continue interaction" and step["lease_id"] == lease
    assert step["idx"].startswith(f"slot-{slot}-") and lease not in step["observation"]
    status, bad = post(http, action="interact", env_idx=slot, lease_id=lease, response="search[again]")
    assert status == 200 and bad["message"] == "Invalid action"
    assert bad["observation_state"]["last_action"]["reason"] == "search_unavailable"

    status, end = post(http, action="terminate", env_idx=slot, lease_id=lease,
                       termination_reason="action_limit")
    assert status == 200 and end["done"] is True and end["over"] is True
    assert end["reward"] == 0.0 and end["termination_reason"] == "action_limit"
    assert free_slots(http) == 1  # the episode ended but the slot stays leased until released

    assert post(http, action="release_one", env_idx=slot, lease_id=lease)[0] == 200
    assert free_slots(http) == 2
    status, again = post(http, action="release_one", env_idx=slot, lease_id=lease)
    assert status == 409 and "not leased" in again["error"]  # a duplicate release is visible


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "reset", "idx": 0, "env_idx": 0}, "env_idx"),
        ({"action": "reset"}, "idx"),
        ({"action": "reset", "idx": -5}, "idx"),
        ({"action": "reset", "idx": 0, "interaction_mode": "multi_turn"}, "interaction_mode"),
        ({"action": "jump"}, "action"),
        ({"action": "interact", "env_idx": 99, "lease_id": "x", "response": "search[a]"}, "env_idx"),
        ({"action": "interact", "env_idx": 0, "lease_id": "x"}, "response"),
        ({"action": "terminate", "env_idx": 0, "lease_id": "x", "termination_reason": "bored"},
         "termination_reason"),
    ],
)
def test_bad_arguments_are_400_naming_the_field(http: httpx.Client, task_ids: list[int], body: dict[str, Any],
                                                field: str) -> None:
    if body.get("idx") == 0:
        body = {**body, "idx": task_ids[0]}
    status, result = post(http, **body)
    assert status == 400 and result["error"].startswith(f"{field}:")
    assert free_slots(http) == 2  # a rejected reset leases nothing


def test_stale_lease_is_409(http: httpx.Client, service: RunningService, task_ids: list[int]) -> None:
    _, reset = post(http, action="reset", idx=task_ids[0])
    slot, lease = reset["env_idx"], reset["lease_id"]
    post(http, action="release_one", env_idx=slot, lease_id=lease)
    status, result = post(http, action="interact", env_idx=slot, lease_id=lease, response="search[pillow]")
    assert status == 409 and "stale lease" in result["error"]

    async def client_side() -> None:
        async with AsyncShopClient(service.base_url) as env:
            await env.reset(task_ids[1])
            release_all(http)
            with pytest.raises(StaleLeaseError):
                await env.step("search[pillow]")
            assert not env.has_lease

    asyncio.run(client_side())


def test_a_hostile_action_is_refused_by_lease_first_and_parsed_in_linear_time(http: httpx.Client,
                                                                               task_ids: list[int]) -> None:
    """``search[a]`` + spaces + ``x]`` took ~7 s at 16,000 spaces on the event loop, before the lease check."""
    hostile = "search[a]" + " " * 60_000 + "x]"
    _, reset = post(http, action="reset", idx=task_ids[0])
    slot, lease = reset["env_idx"], reset["lease_id"]
    started = time.monotonic()
    status, result = post(http, action="interact", env_idx=slot, lease_id="not-the-lease", response=hostile)
    assert status == 409 and "stale lease" in result["error"]
    status, result = post(http, action="interact", env_idx=slot, lease_id=lease, response=hostile)
    assert status == 200 and result["action_feedback"]["valid"] is True
    assert time.monotonic() - started < 2.0  # minutes at the 64 KB cap before the fix


def test_the_goal_is_revealed_only_in_trusted_mode(engine: ShopEngine, task_ids: list[int]) -> None:
    """``terminate`` once returned the goal, which replayed on a fresh reset scored 1.0."""
    for reveal in (False, True):
        with serve_in_thread(create_app(engine, slots=1, admin_token=ADMIN, reveal_goal=reveal)) as running, \
                httpx.Client(base_url=running.base_url, trust_env=False, timeout=10) as client:
            assert client.get("/healthz").json()["reveals_goal"] is reveal
            _, reset = post(client, action="reset", idx=task_ids[0])
            status, end = post(client, action="terminate", env_idx=reset["env_idx"], lease_id=reset["lease_id"],
                               termination_reason="action_limit")
        assert status == 200 and end["done"] and end["reward"] == 0.0
        assert end.get("goal") == (engine.goals[task_ids[0]].to_dict() if reveal else None)


def test_step_or_terminate_after_done_is_409_with_the_reason(http: httpx.Client, service: RunningService,
                                                             task_ids: list[int]) -> None:
    _, reset = post(http, action="reset", idx=task_ids[0])
    slot, lease = reset["env_idx"], reset["lease_id"]
    post(http, action="terminate", env_idx=slot, lease_id=lease, termination_reason="generation_length")
    status, result = post(http, action="interact", env_idx=slot, lease_id=lease, response="search[pillow]")
    assert status == 409 and result["reason"] == "episode_finished" and "generation_length" in result["error"]
    status, result = post(http, action="terminate", env_idx=slot, lease_id=lease,
                          termination_reason="action_limit")
    assert status == 409 and result["reason"] == "episode_finished"  # a terminal cannot be overwritten
    with ShopClient(service.base_url) as env:
        env.reset(task_ids[1])
        env.terminate("action_limit")
        with pytest.raises(EpisodeFinishedError):
            env.step("search[pillow]")
        assert env.has_lease  # the lease is still valid: the episode ended, the slot did not


def test_full_purchase_episode_with_the_sync_client(service: RunningService, small_store,
                                                    task_ids: list[int]) -> None:
    catalog = small_store[0]
    goal = catalog.goals[task_ids[0]]  # private: the test plays the gold path
    with ShopClient(service.base_url) as env:
        assert isinstance(env, Environment)
        first = env.reset(goal.task_id)
        assert "lease_id" not in first and env.has_lease
        results = env.step(f"search[{goal.name}]")
        assert goal.asin in results["observation_state"]["actions"]
        page = env.step(f"click[{goal.asin}]")
        for label in page["observation_state"]["actions"]:
            if "=" in label and label.split("=", 1)[1] in goal.goal_options:
                page = env.step(f"click[{label}]")
        assert page["observation_state"]["options_complete"] is True
        end = env.step("click[buy now]")
        assert end["done"] and end["termination_reason"] == "purchase"
        assert end["reward"] == end["reward_detail"]["r_strict"] == 1.0
        assert end["purchase"]["asin"] == goal.asin and "goal" not in end  # untrusted by default: no gold
        assert "lease_id" not in end and env.has_lease  # no automatic release
    env.close()  # idempotent: the context exit already closed it
    with httpx.Client(base_url=service.base_url, trust_env=False) as http:
        assert free_slots(http) == 2  # close() released the lease


@pytest.fixture()
def one_slot_service(engine: ShopEngine) -> Iterator[RunningService]:
    with serve_in_thread(create_app(engine, slots=1)) as running:
        yield running


def test_blocking_reset_waits_for_a_release(one_slot_service: RunningService, task_ids: list[int]) -> None:
    base_url = one_slot_service.base_url

    async def scenario() -> None:
        first, second = AsyncShopClient(base_url), AsyncShopClient(base_url)
        try:
            await first.reset(task_ids[0])
            waiting = asyncio.create_task(second.reset(task_ids[1]))
            await asyncio.to_thread(wait_until, lambda: healthz(base_url)["waiting_resets"] == 1,
                                    "the second reset queued")
            assert not waiting.done()  # queued: the only slot is leased
            await first.release()
            payload = await asyncio.wait_for(waiting, timeout=5)
            assert payload["env_idx"] == 0 and payload["idx"] == task_ids[1]
        finally:
            await first.close()
            await second.close()

    asyncio.run(scenario())
    assert httpx.get(base_url + "/healthz", trust_env=False).json()["free_slots"] == 1


def test_a_waiter_that_disconnects_does_not_leak_the_slot(one_slot_service: RunningService,
                                                          task_ids: list[int]) -> None:
    base_url = one_slot_service.base_url
    with ShopClient(base_url) as holder:
        holder.reset(task_ids[0])
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(base_url + API, json={"action": "reset", "idx": task_ids[1]}, timeout=0.3,
                       trust_env=False)
    wait_until(lambda: healthz(base_url)["free_slots"] == 1, "the abandoned reset gave its slot back")


def test_release_all_frees_every_slot(http: httpx.Client, service: RunningService,
                                      task_ids: list[int]) -> None:
    clients = [ShopClient(service.base_url) for _ in range(2)]
    for client, task_id in zip(clients, task_ids):
        client.reset(task_id)
    assert free_slots(http) == 0
    status, result = release_all(http)
    assert status == 200 and result["released"] == [0, 1] and free_slots(http) == 2
    for client in clients:
        with pytest.raises(StaleLeaseError):
            client.step("search[pillow]")
        client.close()


def test_client_rejects_a_response_without_observation_fields() -> None:
    legacy = FastAPI()

    @legacy.post(API)
    async def old_protocol() -> dict[str, Any]:
        return {"result": {"instruction": "buy a pillow", "observation": "home", "env_idx": 0,
                           "lease_id": "a"}}

    with serve_in_thread(legacy) as running, ShopClient(running.base_url) as env:
        with pytest.raises(ShopProtocolError, match="instruction"):
            env.reset(1)
        assert not env.has_lease


def test_client_surfaces_400_as_service_error(service: RunningService) -> None:
    with ShopClient(service.base_url) as env, pytest.raises(ShopServiceError) as caught:
        env.reset(-5)
    assert caught.value.status == 400 and "idx" in caught.value.message


# ---- hardening: one client cannot stall or break others -----------------------------------------


def test_a_body_over_the_cap_is_413(http: httpx.Client) -> None:
    query = "a " * MAX_BODY_BYTES
    huge = {"action": "interact", "env_idx": 0, "lease_id": "x", "response": f"search[{query}]"}
    response = http.post(API, json=huge)
    assert response.status_code == 413 and "body" in response.json()["result"]["error"]
    parts = [b'{"action": "release_all", "pad": "', b"x" * MAX_BODY_BYTES, b'"}']
    chunked = http.post(API, content=iter(parts))
    assert chunked.status_code == 413  # no Content-Length: the cap holds while streaming


def test_a_query_over_the_token_cap_is_400_and_costs_no_step(http: httpx.Client, service: RunningService,
                                                             task_ids: list[int]) -> None:
    _, reset = post(http, action="reset", idx=task_ids[0])
    slot, lease = reset["env_idx"], reset["lease_id"]
    words = " ".join(f"w{i}" for i in range(MAX_QUERY_TOKENS + 1))
    status, result = post(http, action="interact", env_idx=slot, lease_id=lease, response=f"search[{words}]")
    assert status == 400 and result["error"].startswith("response:")
    assert f"at most {MAX_QUERY_TOKENS}" in result["error"]
    session = service.server.config.app.state.shop.session(slot)
    assert session.action_count == 0
    allowed = " ".join(f"w{i}" for i in range(MAX_QUERY_TOKENS))
    status, _ = post(http, action="interact", env_idx=slot, lease_id=lease, response=f"search[{allowed}]")
    assert status == 200 and session.action_count == 1


def test_a_failing_search_leaves_the_episode_as_it_was(http: httpx.Client, service: RunningService,
                                                       task_ids: list[int]) -> None:
    _, reset = post(http, action="reset", idx=task_ids[0])
    slot, lease = reset["env_idx"], reset["lease_id"]
    session = service.server.config.app.state.shop.session(slot)
    before = session.state
    response_text = '"search[\\ud800]"'  # a lone surrogate, as JSON sends it
    body = f'{{"action": "interact", "env_idx": {slot}, "lease_id": "{lease}", "response": {response_text}}}'
    response = http.post(API, content=body.encode(), headers={"content-type": "application/json"})
    assert response.status_code == 400 and "body" in response.json()["result"]["error"]
    assert session.action_count == 0 and session.state == before
    status, step = post(http, action="interact", env_idx=slot, lease_id=lease, response="search[pillow]")
    assert status == 200 and step["message"] == "Continue interaction"


def test_deeply_nested_json_is_400(http: httpx.Client) -> None:
    deep = "[" * 5000 + "]" * 5000
    response = http.post(API, content=('{"action": "reset", "idx": ' + deep + "}").encode())
    assert response.status_code == 400 and response.json()["result"]["error"].startswith("body:")


def test_searches_do_not_hold_a_service_wide_lock(engine: ShopEngine, task_ids: list[int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    entered, finish = threading.Event(), threading.Event()
    search = engine.search

    def slow_search(query: str) -> list[str]:
        if query == "block me":
            entered.set()
            finish.wait(10)
        return search(query)

    monkeypatch.setattr(engine, "search", slow_search)
    with serve_in_thread(create_app(engine, slots=2, admin_token=ADMIN)) as running:
        with ShopClient(running.base_url) as blocked, ShopClient(running.base_url) as other:
            blocked.reset(task_ids[0])
            other.reset(task_ids[1])
            worker = threading.Thread(target=blocked.step, args=("search[block me]",))
            worker.start()
            assert entered.wait(5)
            started = time.monotonic()
            page = other.step("search[pillow]")  # served while the other search is still running
            assert page["observation_state"]["page_type"] == "search_results"
            assert time.monotonic() - started < 5 and worker.is_alive()
            finish.set()
            worker.join(5)


# ---- leases: admin token, idle expiry, bounded reset wait -----------------------------------------


def test_release_all_needs_the_admin_token(http: httpx.Client, task_ids: list[int]) -> None:
    post(http, action="reset", idx=task_ids[0])
    for body in ({"action": "release_all"}, {"action": "release_all", "admin_token": "guess"}):
        status, result = post(http, **body)
        assert status == 403 and result["error"].startswith("admin_token:")
    assert free_slots(http) == 1
    assert release_all(http)[0] == 200 and free_slots(http) == 2


def test_an_idle_lease_expires_and_its_slot_returns(engine: ShopEngine, task_ids: list[int]) -> None:
    app = create_app(engine, slots=1, admin_token=ADMIN, lease_idle_s=0.3)
    with serve_in_thread(app) as running, ShopClient(running.base_url) as idle, \
            httpx.Client(base_url=running.base_url, trust_env=False) as http:
        idle.reset(task_ids[0])
        assert free_slots(http) == 0
        wait_until(lambda: free_slots(http) == 1, "the idle lease expired (0.3 s after its last use)")
        assert http.get("/healthz").json()["expired_leases"] == 1
        with pytest.raises(StaleLeaseError):
            idle.step("search[pillow]")


def test_a_full_service_answers_503_with_retry_after(engine: ShopEngine, task_ids: list[int]) -> None:
    app = create_app(engine, slots=1, admin_token=ADMIN, reset_wait_s=0.3)
    with serve_in_thread(app) as running, ShopClient(running.base_url) as holder, \
            httpx.Client(base_url=running.base_url, trust_env=False) as http:
        holder.reset(task_ids[0])
        started = time.monotonic()
        response = http.post(API, json={"action": "reset", "idx": task_ids[1]})
        assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert "slot" in response.json()["result"]["error"] and time.monotonic() - started < 3
        with ShopClient(running.base_url, reset_retry_s=0.5) as impatient, \
                pytest.raises(ShopServiceError) as caught:
            impatient.reset(task_ids[1])
        assert caught.value.status == 503

        with ShopClient(running.base_url, reset_retry_s=10) as patient:
            refused, post = threading.Event(), patient._post

            def observed(body: dict[str, Any], timeout: httpx.Timeout | None = None) -> httpx.Response:
                response = post(body, timeout)
                if response.status_code == 503:
                    refused.set()
                return response

            def release_once_refused() -> None:
                refused.wait(10)
                holder.release()

            patient._post = observed
            threading.Thread(target=release_once_refused).start()
            assert patient.reset(task_ids[1])["env_idx"] == 0  # retried after Retry-After
            assert refused.is_set()


# ---- OpenAPI -------------------------------------------------------------------------------------------


def test_openapi_documents_every_request_body(engine: ShopEngine) -> None:
    schema = create_app(engine, slots=1).openapi()
    body = schema["paths"][API]["post"]["requestBody"]["content"]["application/json"]["schema"]
    actions = set(body["discriminator"]["mapping"])
    assert actions == {"reset", "interact", "terminate", "release_one", "release_all"}
    for name in ("ResetBody", "InteractBody", "TerminateBody", "ReleaseOneBody", "ReleaseAllBody"):
        assert schema["components"]["schemas"][name]["properties"]["action"]


@pytest.mark.parametrize("extra, message", [
    (["--protocol", "grpc"], "--protocol must be one of shopsimulator, openenv, got 'grpc'"),
    (["--skillbank", "bank.json"], "--skillbank: only the openenv protocol serves skill context"),
])
def test_serve_refuses_an_unknown_protocol_or_a_stray_skillbank(small_store_root: Path, extra: list[str],
                                                                message: str) -> None:
    result = CliRunner().invoke(cli_app, ["env", "serve", "--root", str(small_store_root), *extra])
    assert result.exit_code == 1 and message in result.stderr
