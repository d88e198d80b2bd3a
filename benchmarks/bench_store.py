"""Store throughput: in-process µs per search and click step, steps/s, and HTTP requests/s of the store
service at 1 and 32 concurrent clients, beside a plain threaded Flask server on the same engine; prints one
JSON object.

    OMP_NUM_THREADS=1 python benchmarks/bench_store.py --root runs/store/default --requests 2000

The store is built first if ROOT has none. Flask is the ``bench`` extra (``pip install -e '.[bench]'``).

One deterministic browsing policy (:func:`next_action`: search, open products, pick an option, go back;
never buy) drives both measurements, so the numbers are comparable across machines and commits;
``bench_click.py``, ``load_servers.py`` and ``soak_store.py`` import it from here. Every loop is bounded by
a count and by wall-clock time. The HTTP part starts the real service on ``127.0.0.1`` on a free port,
drives it with the benchmark's own lean client (one raw HTTP/1.1 connection per simulated client; non-2xx
replies count as errors, and the client's own CPU time per request is reported), and stops it. In the same
run it drives a plain threaded Flask (werkzeug) server hosting the same engine on the same routes (the
baseline, ``http_baseline_requests_per_s``), and a trivial endpoint under the service's server stack, which
bounds what the benchmark client itself can send (the client ceiling,
``http_client_ceiling_requests_per_s``). Each server runs in its own child process (so it does not share the
clients' interpreter lock); the clients share the benchmarking process.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import itertools
import json
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
from urllib.parse import urlsplit

import orjson
from fastapi import FastAPI
from fastapi.responses import Response

from intraskill.shop.build import StorePaths, build_store, open_store
from intraskill.shop.engine import EpisodeFinishedError, ShopEngine
from intraskill.shop.leases import LeaseError
from intraskill.shop.observation import BACK_TO_SEARCH, NAVIGATION_LABELS, PREV_PAGE
from intraskill.shop.service import (
    API_PATH,
    RESET_WAIT_S,
    RequestError,
    ResetBody,
    ShopService,
    create_app,
    dispatch,
    parse_body,
    serve_in_thread,
)

HERE = Path(__file__).resolve().parent
"""This benchmark's folder, put on a server child's path so that it imports :func:`_serve_forever`."""
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
        self.errors = 0
        self.deadline = time.perf_counter() + max_seconds

    def take(self) -> bool:
        if self.left <= 0 or time.perf_counter() >= self.deadline:
            return False
        self.left -= 1
        self.used += 1
        return True

    def count(self, status: int) -> None:
        """Record a reply's status: anything outside 2xx is an error."""
        if not 200 <= status < 300:
            self.errors += 1


class ProtocolError(RuntimeError):
    """A benchmark server's reply the benchmark client cannot read."""


def _content_length(head: bytes) -> int:
    """The ``Content-Length`` of a reply's lower-cased head (status line and headers)."""
    at = head.find(b"\r\ncontent-length:")
    if at < 0:
        raise ProtocolError("benchmark reply: no Content-Length header")
    stop = head.find(b"\r\n", at + 2)
    return int(head[at + 17:stop if stop >= 0 else len(head)])


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection of the benchmark client: a pre-encoded POST out, one reply in.

    Only the status line, ``Content-Length`` (both servers send one) and ``Connection: close`` of a
    reply are read, so the client spends its time on the protocol's JSON, not on HTTP machinery. A
    server that closes after each reply (werkzeug does) costs the client a reconnect per request.
    """

    def __init__(self, host: str, port: int) -> None:
        self._head = (f"POST {API_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                      "Content-Type: application/json\r\nContent-Length: ").encode()
        self._buffer = bytearray()
        self._reply: asyncio.Future[tuple[int, bytes]] | None = None
        self._transport: asyncio.Transport | None = None
        self._total = -1  # bytes of the reply being read, once its head is complete
        self._body_at = 0
        self._last = False  # the reply being read closes the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    @property
    def closed(self) -> bool:
        """Whether the connection is closed or closing (a server may close after an error reply)."""
        return self._transport is None or self._transport.is_closing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(ConnectionError(f"the server closed the connection ({exc})"))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._total < 0:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            self._body_at = end + 4
            head = bytes(self._buffer[:end]).lower()
            self._last = b"\r\nconnection: close" in head
            try:
                self._total = self._body_at + _content_length(head)
            except ProtocolError as exc:
                self._fail(exc)
                return
        if len(self._buffer) >= self._total and self._reply is not None:
            status, body = int(self._buffer[9:12]), bytes(self._buffer[self._body_at:self._total])
            del self._buffer[:self._total]
            self._total = -1
            self._reply.set_result((status, body))
            if self._last:  # werkzeug answers each request on its own connection
                self._transport.close()  # type: ignore[union-attr]

    def _fail(self, exc: Exception) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(exc)

    async def post(self, body: bytes) -> tuple[int, bytes]:
        """Send ``body`` as ``POST /api/shop_agent``; the reply's status and body."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the benchmark connection is closed")
        self._reply = asyncio.get_running_loop().create_future()
        self._transport.write(b"%s%d\r\n\r\n%s" % (self._head, len(body), body))
        return await self._reply

    def close(self) -> None:
        """Close the connection."""
        if self._transport is not None:
            self._transport.close()



async def _connect(base_url: str) -> _Connection:
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    _, connection = await asyncio.get_running_loop().create_connection(lambda: _Connection(host, port),
                                                                       host, port)
    return connection


@dataclass
class _Episode:
    """One client's episode as the benchmark policy sees it: its lease and the current page."""

    slot: int | None = None
    lease: str = ""
    state: dict[str, Any] | None = None
    turn: int = 0

    def next_body(self, tasks: Iterator[int], texts: Iterator[str]) -> dict[str, Any]:
        """The next request: reset without a lease, release at the end of an episode, else a step."""
        if self.slot is None:
            return {"action": "reset", "idx": next(tasks), "if_persona": True}
        leased = {"env_idx": self.slot, "lease_id": self.lease}
        if self.state is None or self.state["page_type"] == "terminal":
            return {"action": "release_one", **leased}
        page = self.state["page_type"]
        action = next_action(self.state, self.turn, next(texts) if page == "search_home" else "")
        return {"action": "interact", "response": action, **leased}

    def update(self, sent: str, status: int, reply: bytes) -> None:
        """Follow a reply; a refused request (non-2xx) gives the episode up (release, then reset)."""
        if sent == "release_one" or (sent == "reset" and not 200 <= status < 300):
            self.slot, self.state = None, None
            return
        if not 200 <= status < 300:
            self.state = None
            return
        result = orjson.loads(reply)["result"]
        if sent == "reset":
            self.slot, self.lease, self.turn = result["env_idx"], result["lease_id"], 0
        else:
            self.turn += 1
        self.state = result["observation_state"]


async def _drive_client(base_url: str, budget: _Budget, tasks: Iterator[int], texts: Iterator[str]) -> None:
    connection = await _connect(base_url)
    episode = _Episode()
    try:
        while budget.take():
            if connection.closed:
                connection = await _connect(base_url)
            body = episode.next_body(tasks, texts)
            status, reply = await connection.post(orjson.dumps(body))
            budget.count(status)
            episode.update(body["action"], status, reply)
        if episode.slot is not None:  # not counted: the lease goes back for the next level
            if connection.closed:
                connection = await _connect(base_url)
            await connection.post(orjson.dumps({"action": "release_one", "env_idx": episode.slot,
                                                "lease_id": episode.lease}))
    finally:
        connection.close()


def _level(budget: _Budget, elapsed: float, cpu_s: float) -> dict[str, Any]:
    return {"requests": budget.used, "errors": budget.errors, "seconds": elapsed,
            "requests_per_s": budget.used / elapsed, "client_cpu_us": 1e6 * cpu_s / max(budget.used, 1)}


async def bench_http(base_url: str, task_ids: Sequence[int], queries: Sequence[str], clients: int,
                     requests: int, max_seconds: float) -> dict[str, Any]:
    """HTTP requests/s of ``clients`` concurrent benchmark-policy loops against a store server.

    Each loop holds one keep-alive connection and plays :func:`next_action` (reset, interact until
    the episode ends, release_one). Counts every request sent within the budget, the non-2xx ones
    as ``errors``, and the benchmark process's CPU time per request (``client_cpu_us``); the final
    lease releases are not counted.
    """
    budget = _Budget(requests, max_seconds)
    tasks, texts = _cycle(task_ids), _cycle(queries)
    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_drive_client(base_url, budget, tasks, texts) for _ in range(clients)))
    return _level(budget, time.perf_counter() - started, time.process_time() - cpu)


async def _drive_trivial(base_url: str, budget: _Budget) -> None:
    connection = await _connect(base_url)
    body = orjson.dumps({"action": "noop"})
    try:
        while budget.take():
            if connection.closed:
                connection = await _connect(base_url)
            budget.count((await connection.post(body))[0])
    finally:
        connection.close()


async def bench_client_ceiling(base_url: str, clients: int, requests: int,
                               max_seconds: float) -> dict[str, Any]:
    """Requests/s of ``clients`` concurrent benchmark connections against a constant endpoint."""
    budget = _Budget(requests, max_seconds)
    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_drive_trivial(base_url, budget) for _ in range(clients)))
    return _level(budget, time.perf_counter() - started, time.process_time() - cpu)


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
                result = dispatch(service, body).run()
        except RequestError as exc:
            return flask.jsonify({"result": {"error": str(exc)}}), 400
        except (LeaseError, EpisodeFinishedError) as exc:
            return flask.jsonify({"result": {"error": str(exc)}}), 409
        return flask.jsonify({"result": result})

    return app


@contextlib.contextmanager
def serve_flask_in_thread(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """Run a WSGI ``app`` on werkzeug's threaded server on a free port; yields its URL.

    Werkzeug closes the connection after every response (``Connection: close``), so each request of a
    client costs a new connection, as it does for any client of a plain Flask server.
    """
    # deferred: werkzeug comes with flask, needed only by the benchmark
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    server = make_server(host, 0, app, threaded=True, request_handler=Quiet)
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
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); from bench_store import _serve_forever; {call}"
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
    (the Flask baseline), ``http_speedup`` (service / baseline),
    ``http_errors`` and ``http_baseline_errors`` (non-2xx replies),
    ``http_client_ceiling_requests_per_s`` (the client against a constant endpoint),
    ``http_client_cpu_us_per_request`` (the benchmark client's own CPU time per request to the service),
    ``http_server_cpu_us_per_request`` and ``http_baseline_server_cpu_us_per_request`` (the server
    process's CPU time per request, which the client's own cost does not inflate); ``config``, ``root``.

    Examples
    --------
    On a built store (seconds to minutes, so not a doctest)::

        record = run_store_bench("runs/store/default", BenchConfig(steps=100, requests=200))
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
    record["http_errors"] = {n: level["errors"] for n, level in served.items()}
    record["http_baseline_errors"] = {n: level["errors"] for n, level in baseline.items()}
    record["http_client_cpu_us_per_request"] = {n: level["client_cpu_us"] for n, level in served.items()}
    record["http_server_cpu_us_per_request"] = {n: served[n]["server_cpu_us"] for n in served}
    record["http_baseline_server_cpu_us_per_request"] = {n: baseline[n]["server_cpu_us"] for n in baseline}
    record["config"] = asdict(config)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/store/default", help="store directory")
    parser.add_argument("--scale", default="default", help="scale used only when the store must be built")
    parser.add_argument("--steps", type=int, default=BenchConfig.steps)
    parser.add_argument("--requests", type=int, default=BenchConfig.requests)
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(BenchConfig.concurrency))
    parser.add_argument("--max-seconds", type=float, default=BenchConfig.max_seconds)
    parser.add_argument("--slots", type=int, default=BenchConfig.slots)
    args = parser.parse_args()
    if not StorePaths(Path(args.root)).manifest.is_file():
        build_store(args.root, scale=args.scale)
    config = BenchConfig(steps=args.steps, requests=args.requests, concurrency=tuple(args.concurrency),
                         max_seconds=args.max_seconds, slots=args.slots)
    print(json.dumps(run_store_bench(args.root, config), ensure_ascii=False))


if __name__ == "__main__":
    main()
