"""Click-step latency of the store in-process: median / p90 µs per click kind (page and target), and a profile.

Plays the benchmark's browsing policy (:func:`bench_store.next_action`) on a store and
times every ``Session.step`` separately; searches are timed but reported apart. With ``--profile``
cProfile runs around the click steps only and the top functions by own time are printed.

    OMP_NUM_THREADS=1 python benchmarks/bench_click.py --root runs/store/default-20260829 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import pstats
import statistics
import time

from bench_store import next_action

from intraskill.shop.build import open_store
from intraskill.shop.engine import ShopEngine
from intraskill.shop.observation import NAVIGATION_LABELS


def _target(action: str) -> str:
    """``navigation`` for the page's navigation clicks, ``item`` for a product or an option."""
    return "navigation" if action[len("click["):-1] in NAVIGATION_LABELS else "item"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/store/default-20260829", help="store directory (built)")
    parser.add_argument("--steps", type=int, default=3000, help="actions to play")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the click steps")
    args = parser.parse_args()
    catalog, index, _ = open_store(args.root)
    engine = ShopEngine(catalog.products, catalog.goals, index)
    task_ids = [t for t in catalog.task_ids() if engine.has_task(t)]
    tasks = itertools.cycle(task_ids)
    texts = itertools.cycle([catalog.task(t).instruction_simple for t in task_ids])
    profiler = cProfile.Profile() if args.profile else None
    session = engine.new_session()
    times: dict[str, list[float]] = {}
    state, turn = session.reset(next(tasks))["observation_state"], 0
    for _ in range(args.steps):
        action = next_action(state, turn, next(texts) if state["page_type"] == "search_home" else "")
        is_search = action.startswith("search[")
        if profiler is not None and not is_search:
            profiler.enable()
        started = time.perf_counter()
        payload = session.step(action)
        elapsed = time.perf_counter() - started
        if profiler is not None and not is_search:
            profiler.disable()
        kind = "search" if is_search else f"click:{state['page_type']}:{_target(action)}"
        times.setdefault(kind, []).append(elapsed * 1e6)
        state, turn = payload["observation_state"], turn + 1
        if payload["done"]:
            state, turn = session.reset(next(tasks))["observation_state"], 0
    index.close()
    clicks = [t for kind, values in times.items() if kind != "search" for t in values]
    report = {kind: {"n": len(v), "median_us": statistics.median(v), "p90_us": statistics.quantiles(v, n=10)[-1]}
              for kind, v in sorted(times.items())}
    report["click"] = {"n": len(clicks), "median_us": statistics.median(clicks),
                       "p90_us": statistics.quantiles(clicks, n=10)[-1]}
    print(json.dumps(report, indent=1))
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())


if __name__ == "__main__":
    main()
