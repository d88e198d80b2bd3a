"""``intraskill env …``: the store's commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="The ShopSimulator-compatible store: build, serve, benchmark, parse budgets.", no_args_is_help=True)
