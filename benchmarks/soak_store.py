"""A 32-client soak of the store service on 127.0.0.1: no 5xx, no leaked lease, bounded victim latency.

The service runs in its own process (``bench_store.server_process``). ``--clients``
browsing clients (the benchmark policy, never buying) share ``--slots`` slots, so resets also queue.
One attacker client sends the largest allowed search (``MAX_QUERY_TOKENS`` of the catalogue's most
frequent tokens) over and over, plus hostile bodies (too large, too deep, a lone surrogate, too many
tokens) that must get their 4xx. One victim client times each of its steps, first alone, then
during the soak. Every loop is bounded by a request count and by ``--max-seconds``. Prints one JSON
object and exits 1 if any check fails.

    OMP_NUM_THREADS=1 python benchmarks/soak_store.py --root runs/store/small-11 --clients 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from bench_store import next_action, server_process

from intraskill.shop.build import StorePaths, build_store, open_store
from intraskill.shop.client import API_PATH, AsyncShopClient, ShopServiceError
from intraskill.shop.leases import StaleLeaseError
from intraskill.shop.service import MAX_BODY_BYTES, MAX_QUERY_TOKENS
from intraskill.shop.text import tokenize


class Soak:
    """Shared state of one soak: statuses seen, the deadline, the task and query cycles."""

    def __init__(self, url: str, task_ids: list[int], queries: list[str], max_seconds: float) -> None:
        self.url, self.task_ids, self.queries = url, task_ids, queries
        self.deadline = time.monotonic() + max_seconds
        self.statuses: Counter[int] = Counter()
        self.turn = 0

    def live(self) -> bool:
        return time.monotonic() < self.deadline

    def next_task(self) -> tuple[int, str]:
        self.turn += 1
        return self.task_ids[self.turn % len(self.task_ids)], self.queries[self.turn % len(self.queries)]


async def browse(soak: Soak, requests: int, latencies: list[float] | None = None) -> None:
    """One client: episodes of the benchmark policy; every status is counted and, optionally, the
    latency of each step (resets are left out: by protocol they wait for a free slot)."""
    async with AsyncShopClient(soak.url) as client:
        state: dict[str, Any] | None = None
        turn, query = 0, ""
        for _ in range(requests):
            if not soak.live():
                break
            try:
                if state is None or state["page_type"] == "terminal":
                    task_id, query = soak.next_task()
                    state, turn = (await client.reset(task_id))["observation_state"], 0
                else:
                    started = time.perf_counter()
                    state = (await client.step(next_action(state, turn, query)))["observation_state"]
                    if latencies is not None:
                        latencies.append(time.perf_counter() - started)
                    turn += 1
                soak.statuses[200] += 1
            except ShopServiceError as error:
                soak.statuses[error.status] += 1
                state = None
            except StaleLeaseError:
                soak.statuses[409] += 1
                state = None


async def attack(soak: Soak, largest_query: str, requests: int) -> Counter[str]:
    """The largest allowed search, again and again, plus hostile bodies; counts their statuses."""
    hostile = {
        "too_large": b'{"action": "release_all", "pad": "' + b"x" * MAX_BODY_BYTES + b'"}',
        "too_deep": b'{"action": "reset", "idx": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "surrogate": b'{"action": "interact", "env_idx": 0, "lease_id": "x", "response": "search[\\ud800]"}',
    }
    seen: Counter[str] = Counter()
    raw = httpx.AsyncClient(base_url=soak.url, trust_env=False)
    async with AsyncShopClient(soak.url) as client, raw:
        for turn in range(requests):
            if not soak.live():
                break
            task_id, _ = soak.next_task()
            await client.reset(task_id)
            page = await client.step(f"search[{largest_query}]")
            seen[f"largest_query:{page['message']}"] += 1
            try:
                await client.step(f"search[{largest_query} extra]")
            except ShopServiceError as error:
                seen[f"too_many_tokens:{error.status}"] += 1
            name, body = list(hostile.items())[turn % len(hostile)]
            seen[f"{name}:{(await raw.post(API_PATH, content=body)).status_code}"] += 1
    return seen


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50 / p99 / max in milliseconds."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"n": len(ordered), "p50_ms": 1e3 * statistics.median(ordered), "p99_ms": 1e3 * p99,
            "max_ms": 1e3 * ordered[-1]}


async def soak_run(url: str, task_ids: list[int], queries: list[str], largest: str,
                   args: argparse.Namespace) -> dict[str, Any]:
    """Victim alone, then victim + attacker + the browsing clients; returns the record."""
    alone: list[float] = []
    await browse(Soak(url, task_ids, queries, args.max_seconds), args.victim_requests, alone)
    soak = Soak(url, task_ids, queries, args.max_seconds)
    loaded: list[float] = []
    crowd = [browse(soak, args.requests) for _ in range(args.clients - 2)]
    *_, attacks = await asyncio.gather(*crowd, browse(soak, args.victim_requests, loaded),
                                       attack(soak, largest, args.requests))
    async with httpx.AsyncClient(base_url=url, trust_env=False) as http:
        health = (await http.get("/healthz")).json()
    return {"victim_alone": percentiles(alone), "victim_loaded": percentiles(loaded),
            "statuses": dict(soak.statuses), "attacker": dict(attacks), "free_slots": health["free_slots"],
            "slots": health["environment_slots"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/store/small-11", help="store directory")
    parser.add_argument("--scale", default="small", help="scale used only when the store must be built")
    parser.add_argument("--clients", type=int, default=32, help="clients, victim and attacker included")
    parser.add_argument("--slots", type=int, default=24, help="slots (fewer than clients: resets queue)")
    parser.add_argument("--requests", type=int, default=200, help="requests per browsing client")
    parser.add_argument("--victim-requests", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time cap of each phase")
    parser.add_argument("--max-victim-p99-ms", type=float, default=2000.0, help="latency bound under load")
    args = parser.parse_args()
    if args.clients < 3:
        parser.error("--clients: need at least 3 (victim, attacker, one browser)")
    if not StorePaths(Path(args.root)).manifest.is_file():
        build_store(args.root, scale=args.scale)
    catalog, index, _ = open_store(args.root)
    index.close()
    task_ids = list(catalog.task_ids())
    queries = [catalog.task(t).instruction_simple for t in task_ids]
    common = Counter(token for text in queries for token in tokenize(text))
    largest = " ".join(token for token, _ in common.most_common(MAX_QUERY_TOKENS))
    with server_process("service", args.root, args.slots) as server:
        record = asyncio.run(soak_run(server.url, task_ids, queries, largest, args))
    failures = [f"{status} responses" for status in record["statuses"] if status >= 500]
    failures += [key for key in record["attacker"] if key.split(":")[1].startswith("5")]
    if record["free_slots"] != record["slots"]:
        failures.append(f"leaked leases: {record['slots'] - record['free_slots']}")
    if record["victim_loaded"]["p99_ms"] > args.max_victim_p99_ms:
        p99 = record["victim_loaded"]["p99_ms"]
        failures.append(f"victim p99 {p99:.0f} ms > {args.max_victim_p99_ms} ms")
    record["failures"] = failures
    print(json.dumps(record, ensure_ascii=False))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
