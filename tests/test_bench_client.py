"""The benchmark's raw HTTP client: status checking, reconnects and its own cost (real servers on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import Response

from intraskill.shop.bench import (
    bench_client_ceiling,
    bench_http,
    flask_baseline_app,
    serve_flask_in_thread,
)
from intraskill.shop.build import open_store
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import API_PATH, ShopService, create_app, serve_in_thread


def _failing_app(status: int) -> FastAPI:
    app = FastAPI()

    @app.post(API_PATH)
    async def refuse() -> Response:
        return Response(b'{"result":{"error":"down"}}', status_code=status, media_type="application/json")

    return app


@pytest.mark.parametrize("status", [500, 503, 409])
def test_the_client_counts_every_non_2xx_reply_as_an_error(status: int) -> None:
    with serve_in_thread(_failing_app(status)) as running:
        ceiling = asyncio.run(bench_client_ceiling(running.base_url, clients=3, requests=12, max_seconds=10))
        policy = asyncio.run(bench_http(running.base_url, [1, 2], ["pillow"], clients=2, requests=8,
                                        max_seconds=10))
    assert ceiling["requests"] == 12 and ceiling["errors"] == 12
    assert policy["requests"] == 8 and policy["errors"] == 8  # refused resets: the loop resets again
    assert ceiling["client_cpu_us"] > 0 and policy["client_cpu_us"] > 0


@pytest.fixture(scope="module")
def store(small_store_root: Path) -> tuple[ShopEngine, list[int], list[str]]:
    catalog, index, _ = open_store(small_store_root)
    engine = ShopEngine(catalog.products, catalog.goals, index)
    task_ids = [t for t in catalog.task_ids() if engine.has_task(t)][:20]
    return engine, task_ids, [catalog.task(t).instruction_simple for t in task_ids]


def test_the_client_plays_episodes_on_the_service_without_errors_and_frees_its_leases(store) -> None:
    engine, task_ids, queries = store
    app = create_app(engine, slots=4, admin_token="admin")
    with serve_in_thread(app) as running:
        level = asyncio.run(bench_http(running.base_url, task_ids, queries, clients=4, requests=120,
                                       max_seconds=30))
        assert app.state.shop.pool.free_count == 4  # every lease went back at the end
    assert level["requests"] == 120 and level["errors"] == 0


def test_the_client_reconnects_when_werkzeug_closes_each_connection(store) -> None:
    engine, task_ids, queries = store
    service = ShopService(engine, 2, admin_token="admin")
    with serve_flask_in_thread(flask_baseline_app(service)) as url:
        level = asyncio.run(bench_http(url, task_ids, queries, clients=2, requests=40, max_seconds=30))
    assert level["requests"] == 40 and level["errors"] == 0
    assert service.pool.free_count == 2
