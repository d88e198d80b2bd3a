"""Measure the synthetic store: build time, query recall and the expert ablation; prints one JSON object.

Usage: ``OMP_NUM_THREADS=1 python benchmarks/store_build.py [--scale default] [--root DIR] [--limit N]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from intraskill.shop.build import build_store, open_store
from intraskill.shop.scripted_expert import expert_ablation, query_recall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="default")
    parser.add_argument("--seed", type=int, default=20260829)
    parser.add_argument("--root", type=Path, default=None, help="store directory (default: a fresh temp dir)")
    parser.add_argument("--split", default="val")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="intraskill-store-"))
    started, cpu_started = time.perf_counter(), time.process_time()
    artifacts = build_store(root, scale=args.scale, seed=args.seed)
    build_seconds, build_cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    started = time.perf_counter()
    build_store(root, scale=args.scale, seed=args.seed)
    reuse_seconds = time.perf_counter() - started
    store = open_store(root)
    started = time.perf_counter()
    recall = query_recall(store, args.split, args.limit)
    ablation = expert_ablation(store, args.split, args.limit)
    result = {
        "scale": args.scale, "seed": args.seed, "counts": artifacts.manifest["counts"], "reused": artifacts.reused,
        "build_seconds": round(build_seconds, 2),
        "build_cpu_seconds": round(build_cpu_seconds, 2), "reuse_seconds": round(reuse_seconds, 2),
        "query_recall": recall, "expert_ablation": ablation,
        "evaluation_seconds": round(time.perf_counter() - started, 2),
    }
    store[1].close()
    if args.root is None:
        shutil.rmtree(root)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
