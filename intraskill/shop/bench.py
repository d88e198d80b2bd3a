"""Store benchmark: in-process step latency and HTTP request throughput of the store service.

One deterministic browsing policy (search, open products, pick an option, go back; never buy)
drives both measurements, so the numbers are comparable across machines and commits. Every loop
is bounded by a count and by wall-clock time. The HTTP part starts the real service on
``127.0.0.1`` on a free port in a background thread, drives it with :class:`AsyncShopClient`
instances (1 and 32 concurrent clients by default), and stops it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import statistics
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from intraskill.shop.build import open_store
from intraskill.shop.client import AsyncShopClient
from intraskill.shop.engine import ShopEngine
from intraskill.shop.observation import BACK_TO_SEARCH, NAVIGATION_LABELS, PREV_PAGE
from intraskill.shop.service import create_app, serve_in_thread

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


def _run_in_fresh_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run`` in a worker thread, so callers inside a running loop (notebooks) work too."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def run_store_bench(root: str | Path, config: BenchConfig | None = None) -> dict[str, Any]:
    """Benchmark the store under ``root`` in-process and over HTTP; returns one flat JSON-able record.

    Keys: ``catalog_products``, ``catalog_tasks``, ``search_step_us``, ``click_step_us`` (means),
    ``search_step_median_us``, ``click_step_median_us``,
    ``steps_per_s``, ``in_process_steps``, ``http_requests_per_s`` and ``http_requests`` (both
    keyed by the concurrency as a string), ``config`` and ``root``.

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
        with serve_in_thread(create_app(engine, slots=config.slots)) as service:
            levels = {
                str(n): _run_in_fresh_loop(bench_http(service.base_url, task_ids, queries, n, config.requests,
                                                      config.max_seconds))
                for n in config.concurrency
            }
    finally:
        index.close()
    record["http_requests_per_s"] = {n: level["requests_per_s"] for n, level in levels.items()}
    record["http_requests"] = {n: level["requests"] for n, level in levels.items()}
    record["config"] = asdict(config)
    return record
