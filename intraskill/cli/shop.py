"""``intraskill env …``: the store's commands."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="The ShopSimulator-compatible store: build, serve, benchmark, parse budgets.", no_args_is_help=True)


@app.command("budget")
def budget_command(text: str = typer.Argument(..., help="An instruction, in Chinese or English.")) -> None:
    """Parse the budget of TEXT and print one JSON object {"price_upper": number|null, "kind": ...}."""
    import json

    from intraskill.shop.budget import parse_budget

    typer.echo(json.dumps(parse_budget(text).to_dict(), ensure_ascii=False))


@app.command("build")
def build_command(
    root: str = typer.Option(..., "--root", help="Directory of the store (created if missing)."),
    scale: str = typer.Option("default", "--scale", help="default (22,630 products, 3726/400/400 tasks) or small."),
    seed: int = typer.Option(20260829, "--seed", help="Generation and split seed."),
) -> None:
    """Generate (or reuse) the synthetic catalogue, tasks, splits and search index under ROOT."""
    import json
    import time

    from intraskill.shop.build import build_store

    started = time.perf_counter()
    try:
        artifacts = build_store(root, scale=scale, seed=seed)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error
    summary = {
        "root": str(artifacts.paths.root),
        "reused": artifacts.reused,
        "seconds": round(time.perf_counter() - started, 2),
        **{k: artifacts.manifest[k] for k in ("scale", "seed", "generator_version", "catalog_sha256", "counts",
                                              "split_sha256")},
    }
    typer.echo(json.dumps(summary, ensure_ascii=False))


ROOT_HELP = "Store directory (built if missing); default runs/store/<scale>-<seed>."


def _ensure_store(root: str | None, scale: str, seed: int) -> str:
    """The store directory, built when it has no manifest yet (an existing store is never rebuilt)."""
    from intraskill.paths import store_dir
    from intraskill.shop.build import StorePaths, build_store

    root = root or str(store_dir(scale, seed))
    if not StorePaths(Path(root)).manifest.is_file():
        typer.echo(f"no store at {root}; building it (scale={scale}, seed={seed})", err=True)
        build_store(root, scale=scale, seed=seed)
    return root


@app.command("serve")
def serve_command(
    root: str | None = typer.Option(None, "--root", help=ROOT_HELP),
    slots: int = typer.Option(8, "--slots", envvar="SHOPSIM_ENV_SLOTS", min=1, help="Environment slots."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address."),
    port: int = typer.Option(5700, "--port", envvar="SHOPSIM_PORT", min=0, max=65535, help="Bind port."),
    language: str = typer.Option("en", "--language", help="Observation language: en or zh."),
    scale: str = typer.Option("default", "--scale", help="Scale used only when the store must be built."),
    seed: int = typer.Option(20260829, "--seed", help="Seed used only when the store must be built."),
) -> None:
    """Serve the store over HTTP: POST /api/shop_agent (ShopSimulator protocol) and GET /healthz."""
    import json

    import uvicorn

    from intraskill.shop.build import open_store
    from intraskill.shop.engine import ShopEngine, StoreConfig
    from intraskill.shop.service import create_app

    try:
        config = StoreConfig(language=language)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--language") from error
    root = _ensure_store(root, scale, seed)
    catalog, index, splits = open_store(root)
    engine = ShopEngine(catalog.products, catalog.goals, index, config)
    app_ = create_app(engine, slots=slots, split_sizes={name: len(splits.ids(name)) for name in splits.names})
    typer.echo(json.dumps({"serving": f"http://{host}:{port}", "root": root, "slots": slots,
                           "language": language, "products": len(catalog.products)}))
    try:
        uvicorn.run(app_, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
    finally:
        index.close()


@app.command("bench")
def bench_command(
    root: str | None = typer.Option(None, "--root", help=ROOT_HELP),
    steps: int = typer.Option(600, "--steps", min=1, help="In-process actions to time."),
    requests: int = typer.Option(2000, "--requests", min=1, help="HTTP requests per concurrency level."),
    concurrency: list[int] = typer.Option([1, 32], "--concurrency", min=1,
                                          help="Concurrent clients (repeatable)."),
    max_seconds: float = typer.Option(20.0, "--max-seconds", min=0.01, help="Time cap of each measurement."),
    slots: int = typer.Option(32, "--slots", min=1, help="Slots of the benchmarked service."),
    as_json: bool = typer.Option(False, "--json", help="One compact JSON line instead of indented JSON."),
    scale: str = typer.Option("default", "--scale", help="Scale used only when the store must be built."),
    seed: int = typer.Option(20260829, "--seed", help="Seed used only when the store must be built."),
) -> None:
    """Benchmark the store: in-process µs per search/click step, steps/s, HTTP requests/s at N clients."""
    import json

    from intraskill.shop.bench import BenchConfig, run_store_bench

    root = _ensure_store(root, scale, seed)
    config = BenchConfig(steps=steps, requests=requests, concurrency=tuple(concurrency),
                         max_seconds=max_seconds, slots=slots)
    record = run_store_bench(root, config)
    typer.echo(json.dumps(record, ensure_ascii=False, indent=None if as_json else 1))
