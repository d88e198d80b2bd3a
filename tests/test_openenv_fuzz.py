"""The OpenEnv server under malformed and hostile bodies and messages, on 127.0.0.1.

HTTP ``/reset`` and ``/step`` bodies drawn around OpenEnv's request shapes (and raw bytes) each get a
2xx or a 4xx with a one-line ``detail`` (503 only as the documented full-pool answer); ``/ws`` junk gets
error frames on a session that keeps playing. Regressions of issue 37: ``/step`` with ``{"action": {}}``
(a 500: its validation error could not be serialised), a chunked 10 MB body (read and parsed: the cap was
checked on ``Content-Length`` only), a quadratic action over the WebSocket (stalled ``/health``), and the
goal in terminal observations (only in trusted mode).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

pytest.importorskip("openenv", reason="the openenv extra is not installed (pip install 'intraskill[openenv]')")

from intraskill.integrations.openenv.client import ShopEnvClient
from intraskill.integrations.openenv.models import ShopAction
from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import RunningService, serve_in_thread

SLOTS = 2


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index = small_store[0], small_store[1]
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def server(engine: ShopEngine, small_store) -> Iterator[RunningService]:
    """One untrusted OpenEnv server of ``SLOTS`` slots whose resets give up after 50 ms."""
    with serve_in_thread(create_openenv_app(engine, small_store[2], slots=SLOTS, reset_wait_s=0.05),
                         **uvicorn_options()) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: RunningService) -> Iterator[httpx.Client]:
    client = httpx.Client(base_url=server.base_url, trust_env=False, timeout=20)
    yield client
    client.close()


def refused_clearly(reply: httpx.Response) -> None:
    assert reply.status_code < 500 or reply.status_code == 503, reply.text
    if reply.status_code >= 400:
        detail = reply.json()["detail"]
        assert isinstance(detail, str) and detail, reply.text


def still_serving(http: httpx.Client, small_store: Any) -> None:
    assert http.get("/health").json()["status"] == "healthy"
    reset = http.post("/reset", json={"task_id": small_store[2].ids("val")[0]})
    assert reset.status_code == 200 and reset.json()["observation"]["page"]


def test_a_step_action_that_fails_its_own_validator_is_422_in_one_line(http: httpx.Client, small_store) -> None:
    for action in ({}, {"action": "search[mug]", "terminate": "action_limit"}):
        reply = http.post("/step", json={"action": action})
        assert reply.status_code == 422 and reply.json()["detail"] == "action, terminate: give exactly one"
    wrong = http.post("/step", json={"action": {"act": "search[mug]"}})
    assert wrong.status_code == 422 and wrong.json()["detail"].startswith("act: ")
    still_serving(http, small_store)


def test_a_chunked_body_over_the_cap_is_413_on_the_bytes_read(http: httpx.Client, small_store) -> None:
    chunk = b" " * 65536
    sent = {"bytes": 0}

    def body() -> Iterator[bytes]:
        yield b'{"task_id": 1'
        for _ in range(160):  # 10 MB if it were all read
            sent["bytes"] += len(chunk)
            yield chunk
        yield b"}"

    reply = http.post("/reset", content=body(), headers={"content-type": "application/json"})
    assert reply.status_code == 413 and reply.json()["detail"] == "body: over 65536 bytes"
    still_serving(http, small_store)


def test_a_quadratic_action_over_the_websocket_stalls_nobody(server: RunningService, http: httpx.Client,
                                                               small_store) -> None:
    """``search[a]`` + 60,000 spaces + ``x]`` was quadratic in the action parser (about 7 s at 16,000)."""
    slowest = {"health": 0.0}
    done = threading.Event()

    def watch() -> None:
        with httpx.Client(base_url=server.base_url, trust_env=False, timeout=20) as watcher:
            while not done.is_set():
                started = time.monotonic()
                assert watcher.get("/health").status_code == 200
                slowest["health"] = max(slowest["health"], time.monotonic() - started)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        with ShopEnvClient(base_url=server.base_url).sync() as env:
            env.reset(task_id=small_store[2].ids("val")[0])
            started = time.monotonic()
            seen = env.step(ShopAction(action="search[a]" + " " * 60_000 + "x]")).observation
            took = time.monotonic() - started
    finally:
        done.set()
        thread.join(10)
    assert seen.feedback["valid"] is True and took < 2.0, took  # minutes before the fix
    assert slowest["health"] < 2.0, slowest


def test_the_goal_is_revealed_only_in_trusted_mode(engine: ShopEngine, small_store) -> None:
    task_id = small_store[2].ids("val")[0]
    for reveal in (False, True):
        app = create_openenv_app(engine, small_store[2], slots=1, reveal_goal=reveal)
        with serve_in_thread(app, **uvicorn_options()) as running, \
                ShopEnvClient(base_url=running.base_url).sync() as env:
            env.reset(task_id=task_id)
            end = env.step(ShopAction(terminate="action_limit")).observation
        assert end.done and end.reward == 0.0
        assert end.goal == (engine.goals[task_id].to_dict() if reveal else None)


anything = (st.none() | st.booleans() | st.integers(-3, 10**12) | st.floats() | st.text(max_size=12)
            | st.lists(st.integers(), max_size=2))
actions = st.fixed_dictionaries({}, optional={
    "action": st.sampled_from(["search[mug]", "click[buy now]", "search[a]" + " " * 3000 + "x]", "click[]",
                               "search[" + "w " * 300 + "]"]) | anything,
    "terminate": st.sampled_from(["action_limit", "generation_length", "purchase"]) | anything,
    "metadata": anything})
bodies = st.fixed_dictionaries({}, optional={
    "action": actions | anything, "task_id": st.sampled_from([0, 1, 10**9]) | anything,
    "split": st.sampled_from(["val", "test", "nope"]) | anything, "seed": st.integers(-1, 5) | anything,
    "persona": anything, "skill_ids": st.lists(st.text(max_size=4), max_size=2) | anything,
    "episode_id": anything, "timeout_s": anything})
raw_bodies = st.binary(max_size=100) | st.sampled_from([
    b"", b"null", b"[]", b"{", b'{"action": ' + b"[" * 3000 + b"]" * 3000 + b"}", b'{"task_id": 1e999}', b"\xff\xfe{}"])


@pytest.mark.e2e
def test_no_http_body_gets_a_server_error(http: httpx.Client, small_store) -> None:
    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(route=st.sampled_from(["/reset", "/step"]), body=bodies | raw_bodies)
    def check(route: str, body: dict[str, Any] | bytes) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body, allow_nan=True).encode()
        refused_clearly(http.post(route, content=raw, headers={"content-type": "application/json"}))

    check()
    still_serving(http, small_store)


def test_websocket_junk_gets_error_frames_and_the_session_plays_on(server: RunningService, small_store) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = server.base_url.replace("http", "ws") + "/ws"
    junk = ["not json", "{}", '{"type": "step"}', '{"type": "step", "data": {}}', '{"type": "nope"}',
            '{"type": "reset", "data": {"task_id": "x"}}', '{"type": "step", "data": {"action": 5}}',
            json.dumps({"type": "step", "data": {"action": "search[a]" + " " * 20_000 + "x]"}})]
    with connect(url, open_timeout=10) as socket:
        for message in junk:
            socket.send(message)
            reply = json.loads(socket.recv(timeout=10))
            assert reply["type"] == "error" and reply["data"]["message"], (message, reply)
        socket.send(json.dumps({"type": "reset", "data": {"task_id": small_store[2].ids("val")[0]}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "observation"
        socket.send(json.dumps({"type": "step", "data": {"action": "search[mug]"}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "observation"
    with connect(url, open_timeout=10) as socket:  # JSON that is no object: OpenEnv answers, then ends the session
        socket.send("[]")
        assert json.loads(socket.recv(timeout=10))["type"] == "error"
        with pytest.raises(ConnectionClosed):
            socket.recv(timeout=10)
    pool = server.server.config.app.state.pool
    wait_until(lambda: pool.free_count == SLOTS, "every slot came back")
