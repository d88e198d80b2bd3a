"""``intraskill params show``: a parameter file as the commands read it (its ``base:`` merged, ``--set`` applied)."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from intraskill.cli.common import JSON_OPTION, SET_OPTION, emit, load

app = typer.Typer(help="Parameter files: show one resolved (base merged, --set applied, validated).",
                  no_args_is_help=True)


@app.command("show")
def show_command(
    params: Path = typer.Option(..., "--params", help="Parameter file (params/*.yaml or a shipped name)."),
    overrides: list[str] = SET_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Print the validated parameters of PARAMS as YAML (every field, defaults included) or one JSON object."""
    record = load(params, overrides).model_dump(mode="json")
    emit(record, as_json, yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=120).rstrip())
