"""``intraskill env …``: the store's commands."""

from __future__ import annotations

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
