"""The store benchmark (``benchmarks/bench_store.py``): its raw HTTP client's status checking, reconnects and
own cost, and its one JSON record (real servers on 127.0.0.1). The Flask baseline is the ``bench`` extra:
without Flask the tests that serve it skip, saying so."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_store import (  # noqa: E402  (a benchmark, not a package module)
    bench_client_ceiling,
    bench_http,
    flask_baseline_app,
    main,
    serve_flask_in_thread,
)

from intraskill.shop.build import open_store  # noqa: E402
from intraskill.shop.engine import ShopEngine  # noqa: E402
from intraskill.shop.service import API_PATH, ShopService, create_app, serve_in_thread  # noqa: E402

FLASK_MISSING = "Flask (the baseline server) is the bench extra: pip install -e '.[bench]'"
needs_flask = pytest.mark.skipif(importlib.util.find_spec("flask") is None, reason=FLASK_MISSING)


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


@needs_flask
def test_the_client_reconnects_when_werkzeug_closes_each_connection(store) -> None:
    engine, task_ids, queries = store
    service = ShopService(engine, 2, admin_token="admin")
    with serve_flask_in_thread(flask_baseline_app(service)) as url:
        level = asyncio.run(bench_http(url, task_ids, queries, clients=2, requests=40, max_seconds=30))
    assert level["requests"] == 40 and level["errors"] == 0
    assert service.pool.free_count == 2


@pytest.mark.e2e
@needs_flask
def test_the_benchmark_prints_one_json_record(small_store_root: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_store.py", "--root", str(small_store_root), "--steps", "40",
                                      "--requests", "30", "--concurrency", "1", "4", "--slots", "4",
                                      "--max-seconds", "5"])
    main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["catalog_products"] == 1000 and record["catalog_tasks"] == 200
    assert record["search_step_us"] > 0 and record["click_step_us"] > 0 and record["steps_per_s"] > 0
    assert 0 < record["click_step_median_us"] and 0 < record["search_step_median_us"]
    assert sum(record["in_process_steps"].values()) == 40
    assert set(record["http_requests_per_s"]) == {"1", "4"}
    assert min(record["http_requests_per_s"].values()) > 0
    assert record["http_requests"] == {"1": 30, "4": 30}
    assert set(record["http_baseline_requests_per_s"]) == {"1", "4"}  # Flask, same engine, same run
    assert min(record["http_baseline_requests_per_s"].values()) > 0
    # the server process did the work (/proc counts 10 ms ticks: 30 fast requests may round to 0, 4 runs not)
    assert sum(record["http_server_cpu_us_per_request"].values()) + \
        sum(record["http_baseline_server_cpu_us_per_request"].values()) > 0
    assert record["http_errors"] == {"1": 0, "4": 0} and record["http_baseline_errors"] == {"1": 0, "4": 0}
    assert min(record["http_client_cpu_us_per_request"].values()) > 0
