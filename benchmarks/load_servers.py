"""A 32-client load run of every server on 127.0.0.1: the status of every request (the claim: 0 non-2xx).

Each server runs in this process (``serve_in_thread``, under its CLI limits) and ``--clients`` asyncio
clients drive it at once:

* the store (``POST /api/shop_agent``, 8 slots, so resets also queue): episodes of the benchmark
  policy (reset, ``--steps`` actions, release);
* the replay API on the same app (``env serve --runs``): run list, index pages and episodes of a runs
  folder holding one small scripted-expert evaluation made here;
* the OpenEnv server (``/ws`` sessions, 8 slots): reset and ``--steps`` steps per episode;
* ``serve-policy`` with a random-init tiny organism: multi-turn chat completions with tools.

Prints one JSON object (per server: requests, statuses, non-2xx, seconds) and exits 1 on any non-2xx.

    OMP_NUM_THREADS=1 python benchmarks/load_servers.py --root runs/store/small-11 --clients 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from bench_store import next_action

from intraskill.integrations.openenv.client import ShopEnvClient
from intraskill.integrations.openenv.models import ShopAction
from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options
from intraskill.policy.hf import HFPolicy
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer
from intraskill.policy.server import ServerConfig
from intraskill.policy.server import create_app as create_policy_app
from intraskill.report.replay import replay_router
from intraskill.shop.build import StorePaths, build_store, open_store
from intraskill.shop.engine import ShopEngine
from intraskill.shop.service import API_PATH, create_app, serve_in_thread

SLOTS = 8
TINY = OrganismConfig(vocab_size=400, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32,
                      intermediate_size=128, max_position=2048, seed=3)
CLICK = {"type": "function", "function": {"name": "click", "parameters": {
    "type": "object", "properties": {"value": {"type": "string", "enum": ["buy now", "< prev"]}},
    "required": ["value"]}}}


def load(clients: int, drive: Callable[[int, Counter[int]], Awaitable[None]]) -> dict[str, Any]:
    """Run ``clients`` drivers at once; their statuses and the wall time."""
    statuses: Counter[int] = Counter()

    async def everyone() -> None:
        await asyncio.gather(*(drive(client, statuses) for client in range(clients)))

    started = time.perf_counter()
    asyncio.run(everyone())
    non_2xx = sum(count for status, count in statuses.items() if not 200 <= status < 300)
    return {"requests": sum(statuses.values()), "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "non_2xx": non_2xx, "seconds": round(time.perf_counter() - started, 2)}


def store_driver(url: str, tasks: list[int], episodes: int, steps: int) -> Callable[..., Awaitable[None]]:
    async def drive(client: int, statuses: Counter[int]) -> None:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=120) as http:
            async def post(**body: Any) -> dict[str, Any]:
                reply = await http.post(API_PATH, json=body)
                statuses[reply.status_code] += 1
                return reply.json()["result"]

            for episode in range(episodes):
                reset = await post(action="reset", idx=tasks[(client * episodes + episode) % len(tasks)])
                lease, slot, state = reset["lease_id"], reset["env_idx"], reset["observation_state"]
                for turn in range(steps):
                    step = await post(action="interact", env_idx=slot, lease_id=lease,
                                      response=next_action(state, turn, "mug"))
                    state = step["observation_state"]
                await post(action="release_one", env_idx=slot, lease_id=lease)
    return drive


def replay_driver(url: str, rounds: int) -> Callable[..., Awaitable[None]]:
    async def drive(client: int, statuses: Counter[int]) -> None:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=120) as http:
            for round_ in range(rounds):
                runs = await http.get("/api/replay/runs")
                statuses[runs.status_code] += 1
                for run in runs.json()["runs"]:
                    for reply in (await http.get("/api/replay/run", params={"run": run["id"], "page": 0}),
                                  await http.get("/api/replay/episode", params={
                                      "run": run["id"], "index": (client + round_) % run["episodes"]})):
                        statuses[reply.status_code] += 1
    return drive


def openenv_driver(url: str, tasks: list[int], episodes: int, steps: int) -> Callable[..., Awaitable[None]]:
    async def drive(client: int, statuses: Counter[int]) -> None:
        async with ShopEnvClient(base_url=url, message_timeout_s=120) as env:
            for episode in range(episodes):
                try:
                    seen = (await env.reset(task_id=tasks[(client * episodes + episode) % len(tasks)])).observation
                    statuses[200] += 1
                    for turn in range(steps):
                        seen = (await env.step(ShopAction(action=next_action(seen.page_state, turn, "mug")))).observation
                        statuses[200] += 1
                except RuntimeError:  # an error frame: OpenEnv's answer to a refused message
                    statuses[400] += 1
    return drive


def policy_driver(url: str, turns: int) -> Callable[..., Awaitable[None]]:
    async def drive(client: int, statuses: Counter[int]) -> None:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You shop."},
                                          {"role": "user", "content": f"Shopping task {client}: a red mug"}]
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=300) as http:
            for turn in range(turns):
                reply = await http.post("/v1/chat/completions", json={
                    "model": "organism", "messages": messages, "tools": [CLICK], "max_tokens": 8, "temperature": 1.0})
                statuses[reply.status_code] += 1
                if reply.status_code != 200:
                    return
                messages += [reply.json()["choices"][0]["message"],
                             {"role": "tool", "tool_call_id": "call_0", "content": f"Page {turn}"}]
    return drive


def eval_runs(root: Path, out: Path) -> None:
    """One small scripted-expert evaluation (ci parameters, val split) for the replay API to serve."""
    from intraskill.evaluate.runner import run_eval
    from intraskill.params import load_params
    from intraskill.policy.expert_policy import ExpertPolicy

    repo = Path(__file__).resolve().parents[1]
    run_eval(load_params(repo / "params" / "ci.yaml"), "val", None, repo / "params" / "ci_s0.json",
             out / "eval-expert", policy=ExpertPolicy(), progress=False, limit=16, store_root=root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="store root (built at scale small, seed 11 if missing)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=3, help="episodes per store/OpenEnv client")
    parser.add_argument("--steps", type=int, default=6, help="actions per episode")
    parser.add_argument("--turns", type=int, default=3, help="chat turns per serve-policy client")
    args = parser.parse_args()
    if not StorePaths(args.root).manifest.is_file():
        build_store(args.root, scale="small", seed=11)
    catalog, index, splits = open_store(args.root)
    engine = ShopEngine(catalog.products, catalog.goals, index)
    tasks = list(splits.ids("val"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as runs:
        eval_runs(args.root, Path(runs))
        app = create_app(engine, slots=SLOTS, admin_token="load")
        app.include_router(replay_router(runs))
        with serve_in_thread(app) as running:
            results["store"] = load(args.clients, store_driver(running.base_url, tasks, args.episodes, args.steps))
            results["replay"] = load(args.clients, replay_driver(running.base_url, args.episodes))
    with serve_in_thread(create_openenv_app(engine, splits, slots=SLOTS), **uvicorn_options()) as running:
        results["openenv"] = load(args.clients, openenv_driver(running.base_url, tasks, args.episodes, args.steps))
    tokenizer = train_tokenizer(protocol_corpus(), TINY.vocab_size)
    policy = HFPolicy(build_organism(TINY, tokenizer), tokenizer)
    with serve_in_thread(create_policy_app(policy, ServerConfig(model_name="organism"))) as running:
        results["serve_policy"] = load(args.clients, policy_driver(running.base_url, args.turns))
    index.close()
    print(json.dumps({"clients": args.clients, "slots": SLOTS, "servers": results,
                      "non_2xx": sum(r["non_2xx"] for r in results.values())}))
    return 1 if any(r["non_2xx"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
