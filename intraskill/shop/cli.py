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
