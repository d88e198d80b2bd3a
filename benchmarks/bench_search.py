"""The two search engines on a built store: equivalence on every task's queries, and µs per query.

For each active task's ``instruction_simple`` and ``instruction_text`` (distinct queries, so no result
cache helps), both engines' scored top-150 must agree (:func:`intraskill.shop.search.rankings_agree`);
prints one JSON object with the fast engine's build time, the count of identical and of agreeing lists,
and the median / p90 µs per uncached query of each engine. The store is built first if ROOT has none.

    OMP_NUM_THREADS=1 python benchmarks/bench_search.py --root runs/store/default-20260829
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from intraskill.shop.build import StorePaths, build_store, open_store
from intraskill.shop.search import DEFAULT_TOP_K, SEARCH_ENGINES, rankings_agree


def _timed(search, queries: list[str]) -> list[float]:
    spent = []
    for query in queries:
        started = time.perf_counter()
        search(query)
        spent.append(1e6 * (time.perf_counter() - started))
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="runs/store/default-20260829", help="store directory")
    parser.add_argument("--scale", default="default", help="scale used only when the store must be built")
    parser.add_argument("--queries", type=int, default=2000, help="queries to time and compare")
    args = parser.parse_args()
    if not StorePaths(Path(args.root)).manifest.is_file():
        build_store(args.root, scale=args.scale)
    catalog, index, _ = open_store(args.root)
    started = time.perf_counter()
    index.bm25()
    build_s = time.perf_counter() - started
    goals = [catalog.goals[t] for t in catalog.task_ids() if t in catalog.goals]
    queries = list(dict.fromkeys(q for g in goals for q in (g.instruction_simple, g.instruction_text)))
    queries = queries[: args.queries]
    timing = {engine: _timed(lambda q, e=engine: index.search(q, DEFAULT_TOP_K, e), queries)
              for engine in SEARCH_ENGINES}
    pairs = [(index.scored(q, DEFAULT_TOP_K, "fts5"), index.scored(q, DEFAULT_TOP_K, "fast")) for q in queries]
    index.close()
    record = {
        "root": str(args.root),
        "products": index.bm25().n_rows,
        "fast_build_s": round(build_s, 3),
        "queries": len(queries),
        "identical": sum(ref == fast for ref, fast in pairs),
        "agreeing": sum(rankings_agree(ref, fast) for ref, fast in pairs),
        **{f"{engine}_us": {"median": round(statistics.median(spent), 1),
                            "p90": round(statistics.quantiles(spent, n=10)[-1], 1)}
           for engine, spent in timing.items()},
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
