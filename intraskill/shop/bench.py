"""Store benchmark: in-process step latency and HTTP request throughput of the store service.

One deterministic browsing policy (search, open products, pick an option, go back; never buy)
drives both measurements, so the numbers are comparable across machines and commits. Every loop
is bounded by a count and by wall-clock time. The HTTP part starts the real service on
``127.0.0.1`` on a free port in a background thread, drives it with :class:`AsyncShopClient`
instances (1 and 32 concurrent clients by default), and stops it. In the same run it drives a
plain threaded Flask (werkzeug) server hosting the same engine on the same routes (the baseline),
and a trivial endpoint under the service's server stack, which bounds what the benchmark client
itself can send (the client ceiling). Each server runs in its own child process (so it does not share
the clients' interpreter lock); the clients share the benchmarking process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import queue
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.responses import Response

from intraskill.shop.build import open_store
from intraskill.shop.client import API_PATH, AsyncShopClient
from intraskill.shop.engine import EpisodeFinishedError, ShopEngine
from intraskill.shop.leases import LeaseError
from intraskill.shop.observation import BACK_TO_SEARCH, NAVIGATION_LABELS, PREV_PAGE
from intraskill.shop.service import (
    RESET_WAIT_S,
    RequestError,
    ResetBody,
    ShopService,
    create_app,
    dispatch,
    parse_body,
    serve_in_thread,
)

SEARCH_PERIOD = 8
"""The policy leaves a results page for a new search when ``turn % SEARCH_PERIOD >= SEARCH_PERIOD - 2``
(two residues, because results pages recur at turns of either parity)."""


@dataclass(frozen=True)
class BenchConfig:
    """Loop bounds of :func:`run_store_bench`.

    Parameters
    ----------
    steps : in-process environment actions to time (search and click together).
    requests : HTTP requests per concurrency level (reset, interact and release together).
    concurrency : numbers of concurrent HTTP clients to measure.
    max_seconds : wall-clock cap of each measurement (in-process and each concurrency level).
    slots : environment slots of the benchmarked service.
    """

    steps: int = 600
    requests: int = 2000
    concurrency: tuple[int, ...] = (1, 32)
    max_seconds: float = 20.0
    slots: int = 32

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"BenchConfig.steps must be >= 1, got {self.steps}")
        if self.requests < 1:
            raise ValueError(f"BenchConfig.requests must be >= 1, got {self.requests}")
        if not self.concurrency or min(self.concurrency) < 1:
            raise ValueError(f"BenchConfig.concurrency needs positive client counts, got {self.concurrency}")
        if self.max_seconds <= 0:
            raise ValueError(f"BenchConfig.max_seconds must be > 0, got {self.max_seconds}")
        if self.slots < 1:
            raise ValueError(f"BenchConfig.slots must be >= 1, got {self.slots}")


def next_action(state: dict[str, Any], turn: int, query: str) -> str:
    """The benchmark policy's canonical action for a page (never ``buy now``).

    Parameters
    ----------
    state : the current ``observation_state``.
    turn : actions taken so far in the episode.
    query : the text to search for when on the search home page.
    """
    page = state["page_type"]
    if page == "search_home":
        return f"search[{query}]"
    actions = state["actions"]
    if page == "search_results":
        asins = [a for a in actions if a not in NAVIGATION_LABELS]
        if not asins or turn % SEARCH_PERIOD >= SEARCH_PERIOD - 2:
            return f"click[{BACK_TO_SEARCH}]"
        return f"click[{asins[turn % len(asins)]}]"
    if page == "product_detail":
        options = [a for a in actions if "=" in a and a not in NAVIGATION_LABELS]
        return f"click[{options[0]}]" if options and turn % 2 == 0 else f"click[{PREV_PAGE}]"
    raise ValueError(f"observation_state.page_type: no benchmark action for page {page!r}")


def _cycle(items: Sequence[Any]) -> Iterator[Any]:
    if not items:
        raise ValueError("the store has no active tasks to benchmark")
    return itertools.cycle(items)


def bench_engine(engine: ShopEngine, task_ids: Sequence[int], queries: Sequence[str],
                 steps: int, max_seconds: float) -> dict[str, Any]:
    """Time ``Session.step`` in-process: mean and median µs per search and per click step, and steps/s.

    Resets are not timed. Each search uses the next query of ``queries`` (cycled), so a
    session's per-query result cache does not flatter the search time.
    """
    session = engine.new_session()
    tasks, texts = _cycle(task_ids), _cycle(queries)
    times: dict[str, list[float]] = {"search": [], "click": []}
    deadline = time.perf_counter() + max_seconds
    state, turn = session.reset(next(tasks))["observation_state"], 0
    while len(times["search"]) + len(times["click"]) < steps and time.perf_counter() < deadline:
        action = next_action(state, turn, next(texts) if state["page_type"] == "search_home" else "")
        kind = "search" if action.startswith("search[") else "click"
        started = time.perf_counter()
        payload = session.step(action)
        times[kind].append(time.perf_counter() - started)
        state, turn = payload["observation_state"], turn + 1
        if payload["done"]:
            state, turn = session.reset(next(tasks))["observation_state"], 0
    total = sum(times["search"]) + sum(times["click"])
    return {
        "search_step_us": 1e6 * statistics.fmean(times["search"]) if times["search"] else None,
        "click_step_us": 1e6 * statistics.fmean(times["click"]) if times["click"] else None,
        "search_step_median_us": 1e6 * statistics.median(times["search"]) if times["search"] else None,
        "click_step_median_us": 1e6 * statistics.median(times["click"]) if times["click"] else None,
        "steps_per_s": (len(times["search"]) + len(times["click"])) / total if total > 0 else None,
        "in_process_steps": {kind: len(values) for kind, values in times.items()},
    }


class _Budget:
    """A request counter shared by the clients of one concurrency level (one event loop)."""

    def __init__(self, requests: int, max_seconds: float) -> None:
        self.left = requests
        self.used = 0
        self.deadline = time.perf_counter() + max_seconds

    def take(self) -> bool:
        if self.left <= 0 or time.perf_counter() >= self.deadline:
            return False
        self.left -= 1
        self.used += 1
        return True


async def _drive_client(base_url: str, budget: _Budget, tasks: Iterator[int], texts: Iterator[str]) -> None:
    async with AsyncShopClient(base_url) as client:
        state: dict[str, Any] | None = None
        turn = 0
        while budget.take():
            if state is None:
                state, turn = (await client.reset(next(tasks)))["observation_state"], 0
                continue
            if state["page_type"] == "terminal":
                await client.release()
                state = None
                continue
            action = next_action(state, turn, next(texts) if state["page_type"] == "search_home" else "")
            state, turn = (await client.step(action))["observation_state"], turn + 1


async def bench_http(base_url: str, task_ids: Sequence[int], queries: Sequence[str], clients: int,
                     requests: int, max_seconds: float) -> dict[str, Any]:
    """HTTP requests/s of ``clients`` concurrent :class:`AsyncShopClient` loops against a service.

    Counts every reset, interact and release request sent within the budget; the final
    lease releases on close are not timed.
    """
    budget = _Budget(requests, max_seconds)
    tasks, texts = _cycle(task_ids), _cycle(queries)
    started = time.perf_counter()
    await asyncio.gather(*(_drive_client(base_url, budget, tasks, texts) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {"requests": budget.used, "seconds": elapsed, "requests_per_s": budget.used / elapsed}


async def _drive_trivial(base_url: str, budget: _Budget) -> None:
    async with httpx.AsyncClient(base_url=base_url, trust_env=False) as http:
        while budget.take():
            (await http.post(API_PATH, json={"action": "noop"})).raise_for_status()


async def bench_client_ceiling(base_url: str, clients: int, requests: int,
                               max_seconds: float) -> dict[str, Any]:
    """Requests/s of ``clients`` concurrent httpx loops against a constant endpoint (the client's cost)."""
    budget = _Budget(requests, max_seconds)
    started = time.perf_counter()
    await asyncio.gather(*(_drive_trivial(base_url, budget) for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {"requests": budget.used, "seconds": elapsed, "requests_per_s": budget.used / elapsed}


def trivial_app() -> FastAPI:
    """A constant ``POST /api/shop_agent`` (no engine, no parsing): the client-ceiling target."""
    app = FastAPI()
    reply = b'{"result":{}}'

    @app.post(API_PATH)
    async def constant() -> Response:
        return Response(reply, media_type="application/json")

    return app


def flask_baseline_app(service: ShopService, reset_wait_s: float = RESET_WAIT_S) -> Any:
    """A plain Flask app serving ``service`` on the store's routes (the benchmark baseline).

    Same engine, same request models and the same lease rules as the service, each request on a
    werkzeug worker thread with the standard-library JSON encoder.
    """
    # deferred: flask is needed only by the benchmark
    import flask

    app = flask.Flask("intraskill-store-baseline")

    @app.get("/healthz")
    def healthz() -> Any:
        return flask.jsonify(service.health())

    @app.post(API_PATH)
    def shop_agent() -> Any:
        try:
            body = parse_body(flask.request.get_data())
            if isinstance(body, ResetBody):
                slot, lease = service.pool.acquire(reset_wait_s)
                result = service.start_episode(slot, lease, body.idx, body.if_persona)
            else:
                result = dispatch(service, body)()
        except RequestError as exc:
            return flask.jsonify({"result": {"error": str(exc)}}), 400
        except (LeaseError, EpisodeFinishedError) as exc:
            return flask.jsonify({"result": {"error": str(exc)}}), 409
        return flask.jsonify({"result": result})

    return app


@contextlib.contextmanager
def serve_flask_in_thread(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Run a WSGI ``app`` on werkzeug's threaded server (HTTP/1.1 keep-alive) on a free port; yields URL."""
    # deferred: werkzeug comes with flask, needed only by the benchmark
    from werkzeug.serving import WSGIRequestHandler, make_server

    class KeepAlive(WSGIRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    server = make_server(host, 0, app, threaded=True, request_handler=KeepAlive)
    thread = threading.Thread(target=server.serve_forever, name="intraskill-store-baseline", daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


SERVER_KINDS = ("service", "flask", "trivial")


def _serve_forever(kind: str, root: str, slots: int) -> None:
    """Child process: serve ``kind`` (over the store at ``root``) on a free port, print its URL, wait."""
    with contextlib.ExitStack() as stack:
        if kind == "trivial":
            url = stack.enter_context(serve_in_thread(trivial_app())).base_url
        else:
            catalog, index, _ = open_store(root)
            stack.callback(index.close)
            engine = ShopEngine(catalog.products, catalog.goals, index)
            if kind == "service":
                url = stack.enter_context(serve_in_thread(create_app(engine, slots=slots))).base_url
            else:
                service = ShopService(engine, slots, admin_token=secrets.token_urlsafe(16))
                url = stack.enter_context(serve_flask_in_thread(flask_baseline_app(service)))
        print(url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or terminates us)


@dataclass(frozen=True)
class ServerProcess:
    """A benchmark server in a child process: its base URL and process id."""

    url: str
    pid: int

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the server has used so far (``None`` where ``/proc`` is missing)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server_process(kind: str, root: str | Path, slots: int,
                   startup_timeout: float = 180.0) -> Iterator[ServerProcess]:
    """Run one of :data:`SERVER_KINDS` in a child Python process on 127.0.0.1.

    The child is a fresh interpreter (``python -c``), so callers need no ``__main__`` guard.
    """
    if kind not in SERVER_KINDS:
        raise ValueError(f"kind: need one of {SERVER_KINDS}, got {kind!r}")
    call = f"_serve_forever({kind!r}, {str(root)!r}, {slots})"
    code = f"from intraskill.shop.bench import _serve_forever; {call}"
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
        try:
            url = lines.get(timeout=startup_timeout).strip()
        except queue.Empty:
            url = ""
        if not url.startswith("http://"):
            raise RuntimeError(f"benchmark {kind} server did not start (exit code {process.poll()})")
        yield ServerProcess(url, process.pid)
    finally:
        process.terminate()
        process.wait(10)


def _rates(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {n: run["requests_per_s"] for n, run in runs.items()}


def _run_in_fresh_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run`` in a worker thread, so callers inside a running loop (notebooks) work too."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_store_bench(root: str | Path, config: BenchConfig | None = None) -> dict[str, Any]:
    """Benchmark the store under ``root`` in-process and over HTTP; returns one flat JSON-able record.

    Keys: ``catalog_products``, ``catalog_tasks``, ``search_step_us``, ``click_step_us`` (means),
    ``search_step_median_us``, ``click_step_median_us``, ``steps_per_s``, ``in_process_steps``;
    keyed by the concurrency as a string:
    ``http_requests_per_s`` and ``http_requests`` (the service), ``http_baseline_requests_per_s``
    (the Flask baseline), ``http_speedup`` (service / baseline) and
    ``http_client_ceiling_requests_per_s`` (the client against a constant endpoint),
    ``http_server_cpu_us_per_request`` and ``http_baseline_server_cpu_us_per_request`` (the server
    process's CPU time per request, which the client's own cost does not inflate); ``config``, ``root``.

    Examples
    --------
    >>> record = run_store_bench("runs/store/default", BenchConfig(steps=100, requests=200))  # doctest: +SKIP
    """
    config = config or BenchConfig()
    catalog, index, _ = open_store(root)
    try:
        engine = ShopEngine(catalog.products, catalog.goals, index)
        task_ids = [t for t in catalog.task_ids() if engine.has_task(t)]
        queries = [catalog.task(t).instruction_simple for t in task_ids]
        record: dict[str, Any] = {
            "root": str(root),
            "catalog_products": len(catalog.products),
            "catalog_tasks": len(task_ids),
            **bench_engine(engine, task_ids, queries, config.steps, config.max_seconds),
        }
    finally:
        index.close()

    def levels(kind: str) -> dict[str, dict[str, Any]]:
        runs = {}
        with server_process(kind, root, config.slots) as server:
            for n in config.concurrency:
                before = server.cpu_seconds()
                drive = (bench_client_ceiling(server.url, n, config.requests, config.max_seconds)
                         if kind == "trivial" else
                         bench_http(server.url, task_ids, queries, n, config.requests, config.max_seconds))
                runs[str(n)] = _run_in_fresh_loop(drive)
                after = server.cpu_seconds()
                runs[str(n)]["server_cpu_us"] = (None if before is None or after is None else
                                                 1e6 * (after - before) / runs[str(n)]["requests"])
        return runs

    served, baseline, ceiling = (levels(kind) for kind in SERVER_KINDS)
    record["http_requests_per_s"] = _rates(served)
    record["http_requests"] = {n: level["requests"] for n, level in served.items()}
    record["http_baseline_requests_per_s"] = _rates(baseline)
    record["http_speedup"] = {n: served[n]["requests_per_s"] / baseline[n]["requests_per_s"] for n in served}
    record["http_client_ceiling_requests_per_s"] = _rates(ceiling)
    record["http_server_cpu_us_per_request"] = {n: served[n]["server_cpu_us"] for n in served}
    record["http_baseline_server_cpu_us_per_request"] = {n: baseline[n]["server_cpu_us"] for n in baseline}
    record["config"] = asdict(config)
    return record
