"""Progress of a notebook execution that tells time: each code cell as it starts, with the time elapsed.

:func:`progress_engine` registers a papermill engine that reports through ``echo``; the report build executes
every notebook on it, so a long build says which notebook and cell it is in and how long it has been running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

ENGINE_NAME = "intraskill-progress"
LONG_CELL_SECONDS = 10.0
"""A cell that ran at least this long is reported again when it finishes, with its own duration."""


def clock(seconds: float) -> str:
    """``42 s``, ``3 min 05 s`` or ``1 h 02 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def cell_summary(source: str, width: int = 60) -> str:
    """A code cell in a few words: its ``#| label`` if it has one, else its first line of code."""
    lines = [line.strip() for line in source.splitlines() if line.strip()]
    label = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("#| label:")), None)
    if label:
        return label
    code = next((line for line in lines if not line.startswith("#")), "")
    return code if len(code) <= width else code[: width - 1] + "…"


def progress_engine(name: str, echo: Callable[[str], None]) -> str:
    """Register (replacing any earlier one) the papermill engine that reports ``name``'s cells through ``echo``;
    returns the engine name to pass to ``papermill.execute_notebook``."""
    # deferred: papermill is heavy to import
    from papermill.engines import NBClientEngine, papermill_engines

    class ProgressEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, **kwargs: Any) -> Any:
            code = [i for i, cell in enumerate(nb_man.nb.cells) if cell.cell_type == "code"]
            start, started = time.monotonic(), {}
            cell_start, cell_complete = nb_man.cell_start, nb_man.cell_complete

            def on_start(cell: Any, cell_index: int | None = None, **more: Any) -> Any:
                if cell.cell_type == "code" and cell_index in code:
                    started[cell_index] = time.monotonic()
                    echo(f"  {name} · cell {code.index(cell_index) + 1}/{len(code)} "
                         f"({cell_summary(cell.source)}) · {clock(started[cell_index] - start)} elapsed")
                return cell_start(cell, cell_index, **more)

            def on_complete(cell: Any, cell_index: int | None = None, **more: Any) -> Any:
                took = time.monotonic() - started.pop(cell_index, time.monotonic())
                if took >= LONG_CELL_SECONDS:
                    echo(f"  {name} · cell {code.index(cell_index) + 1}/{len(code)} took {clock(took)}")
                return cell_complete(cell, cell_index, **more)

            nb_man.cell_start, nb_man.cell_complete = on_start, on_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register(ENGINE_NAME, ProgressEngine)
    return ENGINE_NAME
