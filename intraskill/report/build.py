"""Report build: run the manifest's notebooks with papermill, then render the site.

The manifest (``report/notebooks.yaml``) lists the pipeline notebooks in execution order; executed
copies go to ``<run_dir>/notebooks/<name>.ipynb`` (default ``runs/report/notebooks``, the path the pages'
``{{< embed >}}`` shortcodes point at). Listed notebooks that do not exist yet are skipped with a note.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from intraskill.report.site import render_static_site

MANIFEST_PATH = Path("report") / "notebooks.yaml"
DEFAULT_RUN_DIR = Path("runs") / "report"
DEFAULT_SITE_DIR = Path("_site")
NOTEBOOKS_DIR = Path("notebooks")
KERNEL_NAME = "python3"


@dataclass(frozen=True)
class NotebookSpec:
    """One manifest entry: ``notebooks/<name>.ipynb`` with its papermill parameter overrides."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)

    def overrides(self, quick: bool) -> dict[str, Any]:
        """Parameters for this build: ``parameters``, updated with ``quick`` for a quick build."""
        return {**self.parameters, **(self.quick if quick else {})}


@dataclass(frozen=True)
class NotebookRun:
    """What happened to one manifest notebook: ``executed``, ``missing`` (skipped) or ``failed``."""

    name: str
    status: str
    output: str | None
    seconds: float
    note: str


@dataclass(frozen=True)
class ReportBuild:
    """Outcome of :func:`build_report`."""

    notebooks: list[NotebookRun]
    renderer: str
    site_dir: str
    pages: list[str]

    @property
    def ok(self) -> bool:
        """True when no notebook failed."""
        return all(run.status != "failed" for run in self.notebooks)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def load_manifest(path: str | Path) -> list[NotebookSpec]:
    """Parse ``report/notebooks.yaml``; errors name the entry and field at fault."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    entries = data.get("notebooks")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: 'notebooks' must be a list of entries")
    specs, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{path}: notebooks[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ValueError(f"{where}.name must be a non-empty string")
        unknown = sorted(set(entry) - {"name", "parameters", "quick"})
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}")
        for key in ("parameters", "quick"):
            if not isinstance(entry.get(key, {}), dict):
                raise ValueError(f"{where}.{key} must be a mapping of parameter -> value")
        if entry["name"] in seen:
            raise ValueError(f"{where}.name {entry['name']!r} is listed twice")
        seen.add(entry["name"])
        specs.append(NotebookSpec(entry["name"], dict(entry.get("parameters", {})), dict(entry.get("quick", {}))))
    return specs


def check_parameters(notebook: Path, overrides: dict[str, Any]) -> None:
    """Reject overrides the notebook's ``parameters`` cell does not define (papermill only warns)."""
    # deferred: papermill is heavy to import
    import papermill

    known = papermill.inspect_notebook(str(notebook))
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"{notebook}: unknown parameter(s) {unknown}; the parameters cell defines {sorted(known)}")


def execute_notebooks(
    specs: list[NotebookSpec],
    *,
    notebooks_dir: Path,
    out_dir: Path,
    quick: bool = False,
    echo: Callable[[str], None] = print,
) -> list[NotebookRun]:
    """Execute each existing manifest notebook with papermill into ``out_dir/<name>.ipynb``.

    Missing notebooks are skipped with a note; a failing notebook is recorded as ``failed`` (papermill
    leaves the partly executed copy with its error) and the build goes on.
    """
    # deferred: papermill is heavy to import
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for spec in specs:
        source = notebooks_dir / f"{spec.name}.ipynb"
        target = out_dir / f"{spec.name}.ipynb"
        if not source.is_file():
            note = f"skipped {spec.name}: {source} does not exist yet"
            echo(note)
            runs.append(NotebookRun(spec.name, "missing", None, 0.0, note))
            continue
        parameters = spec.overrides(quick)
        check_parameters(source, parameters)
        echo(f"executing {source} -> {target} with {parameters or 'default parameters'}")
        start = time.monotonic()
        try:
            papermill.execute_notebook(
                str(source), str(target), parameters=parameters, cwd=str(notebooks_dir),
                kernel_name=KERNEL_NAME, progress_bar=False, log_output=False,
            )
        except papermill.PapermillExecutionError as error:
            note = f"failed {spec.name}: {error.ename}: {error.evalue} (see {target})"
            echo(note)
            runs.append(NotebookRun(spec.name, "failed", str(target), time.monotonic() - start, note))
            continue
        runs.append(NotebookRun(spec.name, "executed", str(target), time.monotonic() - start, "ok"))
    return runs


def render_with_quarto(root: Path) -> None:
    """``quarto render`` in ``root`` (the project file ``_quarto.yml`` names the pages and ``_site``)."""
    subprocess.run(["quarto", "render"], cwd=root, check=True)


def build_report(
    root: str | Path = ".",
    *,
    run_dir: str | Path | None = None,
    site_dir: str | Path | None = None,
    quick: bool = False,
    execute: bool = True,
    use_quarto: bool | None = None,
    only: Sequence[str] | None = None,
    echo: Callable[[str], None] = print,
) -> ReportBuild:
    """Execute the manifest notebooks and render the report site.

    Parameters
    ----------
    root : path
        Repository root (holds ``_quarto.yml``, ``report/`` and ``notebooks/``).
    run_dir : path, optional
        Run folder; executed notebooks go to ``<run_dir>/notebooks``. Default ``<root>/runs/report``.
    site_dir : path, optional
        Output folder of the static renderer. Default ``<root>/_site`` (Quarto's ``output-dir``).
    quick : bool
        Apply each entry's ``quick`` parameter overrides (a fast smoke build).
    execute : bool
        Execute the notebooks; with False the existing executed copies are rendered as they are.
    use_quarto : bool, optional
        Force (True) or forbid (False) Quarto; by default it is used when ``quarto`` is on PATH.
    only : sequence of str, optional
        Execute only these manifest notebooks (the others' existing executed copies are rendered).

    Returns
    -------
    ReportBuild
    """
    base = Path(root).resolve()
    runs_root = Path(run_dir) if run_dir is not None else base / DEFAULT_RUN_DIR
    executed_dir = runs_root / "notebooks"
    specs = load_manifest(base / MANIFEST_PATH)
    if only is not None:
        unknown = sorted(set(only) - {spec.name for spec in specs})
        if unknown:
            raise ValueError(f"only: {unknown} are not in {MANIFEST_PATH}")
        specs = [spec for spec in specs if spec.name in set(only)]
    if execute:
        runs = execute_notebooks(specs, notebooks_dir=base / NOTEBOOKS_DIR, out_dir=executed_dir, quick=quick, echo=echo)
    else:
        runs = [
            NotebookRun(s.name, "executed" if (executed_dir / f"{s.name}.ipynb").is_file() else "missing",
                        str(executed_dir / f"{s.name}.ipynb"), 0.0, "not re-executed")
            for s in specs
        ]
    quarto = shutil.which("quarto") is not None if use_quarto is None else use_quarto
    if quarto:
        if executed_dir.resolve() != (base / DEFAULT_RUN_DIR / "notebooks").resolve():
            raise ValueError(f"Quarto embeds notebooks from {DEFAULT_RUN_DIR / 'notebooks'}; run_dir must be the default")
        echo("rendering with quarto render")
        render_with_quarto(base)
        return ReportBuild(runs, "quarto", str(base / DEFAULT_SITE_DIR), [])
    out = Path(site_dir) if site_dir is not None else base / DEFAULT_SITE_DIR
    echo(f"quarto is not on PATH: rendering a static HTML site with nbconvert + mistune into {out}")
    pages = render_static_site(base, executed_dir, out)
    return ReportBuild(runs, "static", str(out), [str(page) for page in pages])
