"""Property-based fuzzing of the live store service on 127.0.0.1: no body, valid or hostile, gets a 5xx.

Bodies are drawn around the OpenAPI request models (every action, right and wrong field types,
real and stale leases, search queries of any text) plus raw bytes and hostile JSON. A 503 is the
documented answer of a full service and is allowed; anything else at 500 or above fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import API_PATH, RunningService, create_app, serve_in_thread

ADMIN = "fuzz-admin-token"
LIVE = "<live lease>"
"""Placeholder for the lease of the most recent successful reset (substituted at send time)."""
SLOTS = 2


@pytest.fixture(scope="module")
def service(small_store) -> Iterator[RunningService]:
    catalog, index, _ = small_store
    app = create_app(ShopEngine(catalog.products, catalog.goals, index), slots=SLOTS, admin_token=ADMIN,
                     reset_wait_s=0.05)
    with serve_in_thread(app) as running:
        yield running


@pytest.fixture(scope="module")
def http(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, trust_env=False, timeout=10) as client:
        yield client


def _task_ids(small_store: Any) -> list[int]:
    return list(small_store[2].ids("test"))[:5]


anything = (st.none() | st.booleans() | st.integers(-3, 10**12) | st.floats() | st.text(max_size=20)
            | st.lists(st.integers(), max_size=3))
queries = st.text(max_size=60) | st.sampled_from(["pillow", "智能 热洗 洗地机", "\ud800", "a " * 200])
responses = anything | st.builds(lambda verb, text: f"{verb}[{text}]",
                                 st.sampled_from(["search", "click", "Search", "buy"]), queries)


def bodies(task_ids: list[int]) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects shaped like the request models, each field right or wrong."""
    fields = {
        "action": st.sampled_from(["reset", "interact", "terminate", "release_one", "release_all", "x"]),
        "idx": st.sampled_from(task_ids) | anything,
        "env_idx": st.integers(-1, SLOTS) | anything,
        "lease_id": st.just(LIVE) | anything,
        "response": responses,
        "termination_reason": st.sampled_from(["action_limit", "generation_length"]) | anything,
        "if_persona": st.booleans() | anything,
        "include_private_goal": st.booleans(),
        "interaction_mode": st.sampled_from(["single_turn", "multi_turn"]),
        "admin_token": st.sampled_from([ADMIN, ""]) | anything,
    }
    action = fields.pop("action") | anything
    return st.fixed_dictionaries({"action": action}, optional=fields)  # type: ignore[arg-type]


raw_bodies = st.binary(max_size=200) | st.sampled_from([
    b"", b"null", b"[]", b'"reset"', b"{", b'{"action": "reset", "idx": 1e999}',
    b'{"action": "interact", "response": "search[\\udc00]"}', ("[" * 3000 + "]" * 3000).encode(),
    b'{"action": "reset", "idx": ' + b"[" * 2000 + b"]" * 2000 + b"}", b"\xff\xfe{}",
])


def test_no_request_gets_a_server_error(http: httpx.Client, small_store: Any) -> None:
    live: dict[str, Any] = {"lease": "none"}

    def send(content: bytes) -> None:
        response = http.post(API_PATH, content=content, headers={"content-type": "application/json"})
        assert response.status_code < 500 or response.status_code == 503, (content[:300], response.text)
        result = response.json()["result"]
        assert isinstance(result, dict)
        if response.status_code == 200 and "lease_id" in result:
            live["lease"] = result["lease_id"]

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(body=bodies(_task_ids(small_store)) | raw_bodies)
    def check(body: dict[str, Any] | bytes) -> None:
        if isinstance(body, dict):
            body = {k: live["lease"] if v == LIVE else v for k, v in body.items()}
            send(json.dumps(body, ensure_ascii=True, allow_nan=True).encode())
        else:
            send(body)

    check()
    status = http.post(API_PATH, json={"action": "release_all", "admin_token": ADMIN}).status_code
    health = http.get("/healthz").json()
    assert status == 200 and health["free_slots"] == SLOTS  # nothing leaked
