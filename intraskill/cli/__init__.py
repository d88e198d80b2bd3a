"""The ``intraskill`` command line: one typer app that mounts each stage's commands.

The command line is the top layer: each stage's commands live in ``intraskill/cli/<stage>.py`` and import
heavy libraries (torch, transformers) inside the command bodies, so ``intraskill env budget`` stays instant.
Every verb prints one way and fails in one line (:mod:`intraskill.cli.common`).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import click
import typer
from typer.core import TyperGroup

from intraskill.cli import analysis as analysis_cli
from intraskill.cli import evaluate as evaluate_cli
from intraskill.cli import experiment as experiment_cli
from intraskill.cli import export as export_cli
from intraskill.cli import gate as gate_cli
from intraskill.cli import organism as organism_cli
from intraskill.cli import params as params_cli
from intraskill.cli import policy as policy_cli
from intraskill.cli import report as report_cli
from intraskill.cli import shop as shop_cli
from intraskill.cli import slime as slime_cli
from intraskill.cli import trace2skill as t2s_cli
from intraskill.cli import train as train_cli
from intraskill.cli import trl as trl_cli
from intraskill.cli.common import USER_ERRORS, fail, route_notes


class _Commands(TyperGroup):
    """The top group: bad input (:data:`~intraskill.cli.common.USER_ERRORS`) ends in one line, no traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as error:
            fail(str(error))


app = typer.Typer(
    name="intraskill",
    cls=_Commands,
    help="Skill-model co-evolution for LLM shopping agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"intraskill {importlib.metadata.version('intraskill')}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Skill-model co-evolution for LLM shopping agents."""
    route_notes()


# --- stage mounts (one line per stage) ---
app.add_typer(shop_cli.app, name="env")
app.add_typer(analysis_cli.app, name="release")
app.add_typer(gate_cli.app, name="gate")
app.add_typer(params_cli.app, name="params")
app.add_typer(report_cli.app, name="report")
app.add_typer(t2s_cli.app, name="trace2skill")
app.command("eval")(evaluate_cli.eval_command)
app.command("compare")(evaluate_cli.compare_command)
app.command("serve-policy")(policy_cli.serve_policy)
app.command("warmstart")(organism_cli.warmstart_command)
app.command("warmstart-skill1")(organism_cli.warmstart_skill1_command)
app.command("round")(train_cli.round_command)
app.command("co-evolve")(train_cli.co_evolve_command)
app.command("trl")(trl_cli.trl_command)
app.command("cold-start")(t2s_cli.cold_start_command)
app.command("experiment")(experiment_cli.experiment_command)
app.command("slime-args")(slime_cli.slime_args_command)
app.command("export")(export_cli.export_command)
