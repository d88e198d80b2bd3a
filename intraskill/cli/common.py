"""What every verb shares: the params file with ``--set`` overrides, one way to print, one-line errors.

Every verb prints human-readable lines by default and exactly one JSON object on stdout with ``--json``;
progress and notes go to stderr. Bad input ends in one ``error: …`` line on stderr (exit 1) that names the
field, file or flag, and the fix where there is one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import BaseModel

from intraskill.params import Params, ParamsError, load_params, with_overrides
from intraskill.paths import params_path, project_root, runs_root

JSON_OPTION = typer.Option(False, "--json", help="Print exactly one JSON object on stdout (notes on stderr).")
SET_OPTION = typer.Option(None, "--set", metavar="FIELD=VALUE",
                          help="Override a field of the params file, e.g. grpo.lr=1e-4 (repeatable).")
PROGRESS_OPTION = typer.Option(True, "--progress/--no-progress", help="Show progress bars on stderr.")
ALLOW_OUTSIDE_OPTION = typer.Option(
    False, "--allow-outside-run-root",
    help="Let --out name a folder outside the run root (experiment.run_root; default runs/).")
USER_ERRORS = (ValueError, FileNotFoundError)
"""Errors of bad input (ParamsError, a refused split, a missing file): one line, never a traceback."""


def default(section: type[BaseModel], field: str) -> Any:
    """The default of a params field: the one place CLI defaults come from."""
    return section.model_fields[field].default


def fail(message: str) -> NoReturn:
    """One ``error: …`` line on stderr, exit status 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def note(message: str) -> None:
    """A progress note on stderr (stdout holds only the result)."""
    typer.echo(message, err=True)


def load(path: Path, overrides: list[str] | None = None, flags: list[str] | None = None) -> Params:
    """The params file (a path, one relative to the project root, or a shipped name such as ``organism``)
    with its ``--set`` overrides, then a verb's own flags given as ``field=value`` settings."""
    found = next((p for p in (path, project_root() / path, params_path(str(path))) if p.exists()), None)
    if found is None:
        fail(f"--params: no parameter file {path}")
    try:
        params = load_params(found)
        params = with_overrides(params, overrides) if overrides else params
        return with_overrides(params, flags, source="flag") if flags else params
    except ParamsError as error:
        head, *fields = str(error).splitlines()
        fail(" ".join([head, "; ".join(field.strip() for field in fields)]).strip())


def confined(out: Path, params: Params | None, allow: bool, root: Path | None = None) -> Path:
    """``out`` (as given) when it resolves inside ``root`` (default the run root: ``experiment.run_root``, or
    ``runs`` without params), symbolic links and ``..`` followed; otherwise one error line, unless ``allow``
    (``--allow-outside-run-root``) or ``experiment.allow_outside_run_root`` lifts the rule (never for an
    explicit ``root``)."""
    if allow or (params is not None and params.experiment.allow_outside_run_root):
        return out
    base = (root if root is not None else runs_root(params.experiment.run_root if params else "runs")).resolve()
    resolved = out.expanduser().resolve()
    if not resolved.is_relative_to(base):
        lift = "" if root is not None else " or pass --allow-outside-run-root"
        fail(f"--out {out}: resolves to {resolved}, outside {base}; choose a folder inside it{lift}")
    return out


def _lines(record: Mapping[str, Any], prefix: str = "") -> Iterable[str]:
    for key, value in record.items():
        if isinstance(value, Mapping) and value:
            yield from _lines(value, f"{prefix}{key}.")
        else:
            shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else value
            yield f"{prefix}{key}: {shown}"


def emit(record: Mapping[str, Any], as_json: bool, text: str | None = None) -> None:
    """The result: one JSON object with ``--json``, else ``text`` (default one ``key: value`` line per field)."""
    if as_json:
        typer.echo(json.dumps(record, ensure_ascii=False))
    else:
        typer.echo(text if text is not None else "\n".join(_lines(record)))


class _StderrNotes(logging.Handler):
    """The package's INFO notes (e.g. building the store) as plain lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(self.format(record), err=True)


def route_notes() -> None:
    """Send the ``intraskill`` loggers' notes (INFO and up) to stderr, once."""
    logger = logging.getLogger("intraskill")
    if not any(isinstance(handler, _StderrNotes) for handler in logger.handlers):
        logger.addHandler(_StderrNotes())
        logger.setLevel(logging.INFO)
