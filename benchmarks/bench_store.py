"""Store throughput: in-process µs per search and click step, steps/s, and HTTP requests/s of the
store service at 1 and 32 concurrent clients (the real service on 127.0.0.1, a free port), beside a
plain threaded Flask server on the same engine (``http_baseline_requests_per_s``) and the client's own
ceiling against a constant endpoint (``http_client_ceiling_requests_per_s``).

Calls :func:`intraskill.shop.bench.run_store_bench`, the function behind ``intraskill env bench``,
and prints one JSON object. The store is built first if ROOT has none.

    OMP_NUM_THREADS=1 python benchmarks/bench_store.py --root runs/store/default --requests 2000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from intraskill.shop.bench import BenchConfig, run_store_bench
from intraskill.shop.build import StorePaths, build_store


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
