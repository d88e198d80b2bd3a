"""Publication figures: the labelled figure outputs of the executed notebooks as ``figures/<name>.{svg,png}``.

``report/notebooks.yaml`` names them per notebook (``figures: {<cell label>: <name>}``, English and Chinese labels
each their own file); :func:`publish_figures` copies each cell's SVG and PNG output byte for byte (the figures'
outputs are reproducible, :func:`intraskill.plots.style.save_figure`), so the README, ``docs/`` and the report
show the same pictures. ``make figures`` executes the notebooks that have figures (re-using unchanged
executions, as ``make report`` does) and publishes them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from intraskill.report.build import NotebookSpec
from intraskill.report.site import cell_labels


@dataclass(frozen=True)
class PublishedFigure:
    """One figure written: its notebook, cell label, name and files."""

    notebook: str
    label: str
    name: str
    files: tuple[str, ...]


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def figure_outputs(notebook_path: Path, label: str) -> dict[str, bytes]:
    """The SVG and PNG bytes of the cell labelled ``label`` in an executed notebook; ``ValueError`` naming the
    notebook and label when the cell is missing or drew no figure."""
    cells = cell_labels(json.loads(notebook_path.read_text(encoding="utf-8")))
    if label not in cells:
        raise ValueError(f"{notebook_path}: no cell labelled {label!r}")
    found: dict[str, bytes] = {}
    for output in cells[label].get("outputs", []):
        data = output.get("data", {})
        if "image/svg+xml" in data:
            found["svg"] = _text(data["image/svg+xml"]).encode("utf-8")
        if "image/png" in data:
            found["png"] = base64.b64decode(_text(data["image/png"]).replace("\n", ""))
    if not found:
        raise ValueError(f"{notebook_path}: cell {label!r} has no figure output (was the notebook executed?)")
    return found


def publish_figures(specs: Sequence[NotebookSpec], executed_dir: str | Path, out_dir: str | Path,
                    echo: Callable[[str], None] = print) -> list[PublishedFigure]:
    """Write every figure the ``specs`` name from their executed copies in ``executed_dir`` into ``out_dir``; a
    notebook without an executed copy is skipped with a note."""
    executed, out = Path(executed_dir), Path(out_dir)
    published = []
    for spec in specs:
        if not spec.figures:
            continue
        path = executed / f"{spec.name}.ipynb"
        if not path.is_file():
            echo(f"skipped the figures of {spec.name}: it has not been executed ({path})")
            continue
        for label, name in spec.figures.items():
            files = []
            for suffix, payload in sorted(figure_outputs(path, label).items()):
                target = out / f"{name}.{suffix}"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(payload)
                files.append(str(target))
            published.append(PublishedFigure(spec.name, label, name, tuple(files)))
            echo(f"{spec.name}#{label} -> {', '.join(files)}")
    return published
