"""``intraskill env …``: the store's commands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from intraskill.cli.common import ALLOW_OUTSIDE_OPTION, JSON_OPTION, confined, default, emit, fail, load
from intraskill.params import StoreParams

SCALE_DEFAULT, SEED_DEFAULT = default(StoreParams, "scale"), default(StoreParams, "seed")

app = typer.Typer(help="The ShopSimulator-compatible store: build, serve, parse budgets.", no_args_is_help=True)


@app.command("budget")
def budget_command(text: str = typer.Argument(..., help="An instruction, in Chinese or English."),
                   as_json: bool = JSON_OPTION) -> None:
    """Parse the budget of TEXT: price_upper (a number or None) and its kind."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.budget import parse_budget

    emit(parse_budget(text).to_dict(), as_json)


@app.command("build")
def build_command(
    root: str = typer.Option(..., "--root", "--out", help="Directory of the store (created if missing)."),
    scale: str = typer.Option(SCALE_DEFAULT, "--scale",
                              help="default (22,630 products, 3726/400/400 tasks) or small."),
    seed: int = typer.Option(SEED_DEFAULT, "--seed", help="Generation and split seed."),
    from_shopsimulator: Path | None = typer.Option(
        None, "--from-shopsimulator",
        help="Build from ShopSimulator's own files: its shop_env directory (data/fine_items_eval_train_all."
             "cleaned.v2.json.gz and persona_splits.v1.json); --scale and --seed are then unused."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when ROOT holds a store (also a damaged one)."),
    allow_outside: bool = ALLOW_OUTSIDE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Generate (or reuse) the synthetic catalogue, tasks, splits and search index under ROOT, or build them from
    ShopSimulator's published files (--from-shopsimulator); a store whose files differ from its manifest is
    refused until rebuilt with --force."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.build import build_shopsimulator_store, build_store

    root = str(confined(Path(root), None, allow_outside))
    started = time.perf_counter()
    if from_shopsimulator is None:
        artifacts = build_store(root, scale=scale, seed=seed, force=force)
        identity = ("scale", "seed", "generator_version")
    else:
        artifacts = build_shopsimulator_store(root, from_shopsimulator, force=force)
        identity = ("source",)
    summary = {
        "root": str(artifacts.paths.root),
        "reused": artifacts.reused,
        "seconds": round(time.perf_counter() - started, 2),
        **{k: artifacts.manifest[k] for k in (*identity, "catalog_sha256", "counts", "split_sha256")},
    }
    emit(summary, as_json)


ROOT_HELP = "Store directory (built if missing); default runs/store/<scale>-<seed>."


def _ensure_store(root: str | None, scale: str, seed: int) -> str:
    """The store directory, built when it has no manifest yet (an existing store is never rebuilt)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.paths import store_dir
    from intraskill.shop.build import StorePaths, build_store

    root = root or str(store_dir(scale, seed))
    if not StorePaths(Path(root)).manifest.is_file():
        build_store(root, scale=scale, seed=seed)
    return root


@app.command("search")
def search_command(
    query: str = typer.Argument(..., help="The search text, as an agent would type it."),
    k: int = typer.Option(10, "--k", min=1, help="Results to print (the store keeps 150 per query)."),
    root: str | None = typer.Option(None, "--root", help=ROOT_HELP),
    engine: str = typer.Option("fast", "--engine", help="fast (precomputed BM25 matrix) or fts5 (SQLite bm25())."),
    as_json: bool = JSON_OPTION,
    scale: str = typer.Option(SCALE_DEFAULT, "--scale", help="Scale used only when the store must be built."),
    seed: int = typer.Option(SEED_DEFAULT, "--seed", help="Seed used only when the store must be built."),
) -> None:
    """Rank the store's products for QUERY and print the ASINs, best first (ties by ascending ASIN)."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.build import open_store
    from intraskill.shop.search import SEARCH_ENGINES

    if engine not in SEARCH_ENGINES:
        fail(f"--engine must be one of {', '.join(SEARCH_ENGINES)}, got {engine!r}")
    _, index, _ = open_store(_ensure_store(root, scale, seed))
    try:
        asins = index.search(query, k=k, engine=engine)
    finally:
        index.close()
    emit({"asins": asins, "engine": engine, "query": query}, as_json, text="\n".join(asins))


PROTOCOLS = ("shopsimulator", "openenv")


@app.command("serve")
def serve_command(
    root: str | None = typer.Option(None, "--root", help=ROOT_HELP),
    params: Path | None = typer.Option(
        None, "--params", help="Serve this parameter set's store with its settings (page size, results kept, "
                               "actions, language), built when missing: the store its rollouts play in process."),
    protocol: str = typer.Option(
        "shopsimulator", "--protocol",
        help="shopsimulator (POST /api/shop_agent) or openenv (OpenEnv's /ws server; needs the openenv extra)."),
    skillbank: str | None = typer.Option(
        None, "--skillbank", help="openenv only: the skill bank JSON that reset(skill_ids=...) selects from."),
    runs: Path | None = typer.Option(
        None, "--runs", help="shopsimulator only: a runs folder whose episodes the read-only episode browser "
                             "shows live (/replay-ui, /api/replay/{runs,run,episode})."),
    slots: int = typer.Option(8, "--slots", envvar="SHOPSIM_ENV_SLOTS", min=1, help="Environment slots."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address."),
    port: int = typer.Option(5700, "--port", envvar="SHOPSIM_PORT", min=0, max=65535, help="Bind port."),
    language: str = typer.Option("en", "--language", help="Observation language: en or zh."),
    admin_token: str | None = typer.Option(
        None, "--admin-token", envvar="SHOPSIM_ADMIN_TOKEN",
        help="Token release_all needs; generated and printed on stderr if omitted. Prefer the environment "
             "variable SHOPSIM_ADMIN_TOKEN: a value on the command line shows in `ps` to every local user."),
    reveal_goal: bool = typer.Option(
        False, "--reveal-goal",
        help="Trusted mode: terminal replies carry the task's private goal (product and options), which the "
             "traces keep as private_goal. Only for clients you trust: a client that reads the goal can replay "
             "it on a fresh reset and forge the reward. Off by default."),
    lease_idle_s: float = typer.Option(
        900.0, "--lease-idle-s", min=0.001, help="Idle seconds before a lease expires (its slot returns)."),
    reset_wait_s: float = typer.Option(
        60.0, "--reset-wait-s", min=0.001, help="Longest wait of a reset for a slot (then 503)."),
    scale: str = typer.Option(SCALE_DEFAULT, "--scale", help="Scale used only when the store must be built."),
    seed: int = typer.Option(SEED_DEFAULT, "--seed", help="Seed used only when the store must be built."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve the store over HTTP: the ShopSimulator protocol (POST /api/shop_agent, GET /healthz) or, with
    --protocol openenv, OpenEnv's server (/ws sessions, /health, /schema) under the same slot leases and limits;
    --runs adds the read-only episode browser over a runs folder (/replay-ui)."""
    # deferred: uvicorn is heavy to import
    import uvicorn

    # deferred: a verb loads its stage only when it runs
    from intraskill.shop.build import ensure_store, open_store, store_config
    from intraskill.shop.engine import ShopEngine, StoreConfig
    from intraskill.shop.search import SearchIndex

    # deferred: fastapi is heavy to import
    from intraskill.shop.service import SERVER_STACK, create_app

    if protocol not in PROTOCOLS:
        fail(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if skillbank is not None and protocol != "openenv":
        fail("--skillbank: only the openenv protocol serves skill context")
    if runs is not None and (protocol != "shopsimulator" or not runs.is_dir()):
        fail(f"--runs: needs the shopsimulator protocol and an existing runs folder, got {runs} ({protocol})")
    if params is None:
        config = StoreConfig(language=language)
        root = _ensure_store(root, scale, seed)
        catalog, index, splits = open_store(root)
    else:
        if (language, scale, seed) != ("en", SCALE_DEFAULT, SEED_DEFAULT):
            fail("--params: the store's language, scale and seed come from the parameter set; "
                 "drop --language, --scale and --seed")
        loaded = load(params)
        config = store_config(loaded.store)
        artifacts = ensure_store(loaded.store, root, loaded.experiment.run_root)  # read and checked once
        root, catalog, splits = str(artifacts.paths.root), artifacts.catalog, artifacts.splits
        index = SearchIndex.open(artifacts.paths.index, catalog.sha256)
    engine = ShopEngine(catalog.products, catalog.goals, index, config)
    options: dict[str, object] = {}
    if protocol == "openenv":
        app_, options = _openenv_app(engine, splits, skillbank, slots, lease_idle_s, reset_wait_s, reveal_goal)
    else:
        app_ = create_app(engine, slots=slots, split_sizes={name: len(splits.ids(name)) for name in splits.names},
                          admin_token=admin_token, lease_idle_s=lease_idle_s, reset_wait_s=reset_wait_s,
                          reveal_goal=reveal_goal)
        if admin_token is None:
            typer.echo(f"admin token (release_all): {app_.state.admin_token}", err=True)
        if runs is not None:
            # deferred: a verb loads its stage only when it runs
            from intraskill.report.replay import replay_router

            app_.include_router(replay_router(runs))
    replay = {"replay_ui": f"http://{host}:{port}/replay-ui", "runs": str(runs)} if runs is not None else {}
    emit({"serving": f"http://{host}:{port}", "protocol": protocol, "root": root, "slots": slots,
          "language": config.language, "page_size": config.page_size, "products": len(catalog.products),
          "lease_idle_s": lease_idle_s, "reset_wait_s": reset_wait_s, "reveal_goal": reveal_goal, **replay}, as_json)
    try:
        uvicorn.run(app_, host=host, port=port, log_level="info", timeout_graceful_shutdown=5,
                    **{**SERVER_STACK, **options})
    finally:
        index.close()


def _openenv_app(engine: Any, splits: Any, skillbank: str | None, slots: int, lease_idle_s: float,
                 reset_wait_s: float, reveal_goal: bool) -> tuple[Any, dict[str, object]]:
    """The OpenEnv app and its uvicorn settings; a clear failure when the openenv extra is missing."""
    # deferred: a verb loads its stage only when it runs
    from intraskill.skills.bank import load_skillbank

    try:
        # deferred: the openenv extra is optional
        from intraskill.integrations.openenv.server import create_openenv_app, uvicorn_options
    except ModuleNotFoundError as exc:
        fail(f"--protocol openenv needs the openenv extra (pip install 'intraskill[openenv]'): {exc}")
    bank = load_skillbank(skillbank) if skillbank is not None else None
    app_ = create_openenv_app(engine, splits, slots=slots, bank=bank, lease_idle_s=lease_idle_s,
                              reset_wait_s=reset_wait_s, reveal_goal=reveal_goal)
    return app_, uvicorn_options()
