"""Report build: run the manifest's notebooks with papermill, export the runs' data, then render the site.

The manifest (``report/notebooks.yaml``) lists the pipeline notebooks in execution order; executed
copies go to ``<run_dir>/notebooks/<name>.ipynb`` (default ``runs/report/notebooks``, the path the pages'
``{{< embed >}}`` shortcodes point at). Listed notebooks that do not exist yet are skipped with a note.
An execution is cached: ``<name>.key`` next to the executed copy holds the SHA-256 of the notebook, its
parameters and its input files (the manifest's ``inputs`` globs) as they were after the run, and an
unchanged key skips the next run.
Progress bars and widget warnings are stripped from the executed copies (:func:`strip_progress`); the build
reports each notebook's cells as they run, with the time elapsed (:mod:`intraskill.report.progress`), and before
each execution its ``estimate`` and how long its last execution here took (``notebooks/timings.jsonl``).

An entry with ``records`` (directories of an experiment's records: shipped under ``data/results/``, the user's
own run under ``runs/``) analyses records rather than producing them: when none of them holds a file it is not
executed (status ``no-records``, its page says so) unless the build re-runs it (``rerun``: the entry's ``rerun``
parameters, e.g. running the whole experiment) or is quick. ``<run_dir>/build.json`` records the build: commit,
date, mode and, per notebook, its status and the record directories it read (the site's footer shows them).
Every page the build writes goes through the page check (:func:`intraskill.report.pagecheck.site_problems`: no empty
section, raw TeX, Python repr, JSON dump, unformatted DataFrame, traceback, file from another host or English on a
Chinese page): the static renderer's report and notebook pages, or every page Quarto wrote (the report pages and the
notebook previews its embeds link to, :func:`quarto_pages`); a problem fails the build unless ``check`` is off
(``intraskill report build --no-check``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from intraskill.evaluate.summary import utc_now
from intraskill.hashing import sha256_file, sha256_json
from intraskill.jsonl import JsonlWriter, iter_jsonl, write_json
from intraskill.plots.style import find_cjk_font
from intraskill.provenance import git_commit
from intraskill.report.data import DATA_DIR, export_report_data
from intraskill.report.pagecheck import site_problems
from intraskill.report.progress import clock, progress_engine
from intraskill.report.site import BUILD_FILE, render_static_site, stamp_quarto_site

MANIFEST_PATH = Path("report") / "notebooks.yaml"
DEFAULT_RUN_DIR = Path("runs") / "report"
DEFAULT_SITE_DIR = Path("_site")
NOTEBOOKS_DIR = Path("notebooks")
KERNEL_NAME = "python3"
TIMINGS_FILE = "timings.jsonl"
"""Append-only, next to the executed notebooks: one line per finished execution (name, mode, seconds)."""
QUICK, FULL = "quick", "full"
NOT_REEXECUTED = "not re-executed"
CJK_FONT_HINT = (
    "no CJK font found for the Chinese figures: the mplfonts package (a dependency of intraskill, it ships "
    "Noto Sans CJK SC) is missing; reinstall with `pip install -e .` (or `pip install mplfonts`), then run the "
    "build again"
)
PROGRESS_TEXT = re.compile(r"\d+%\||\|\s*[\d.]+[kMG]?(/[\d.?]+[kMG]?)?\s*\[\d+:\d+|[\d.]+[kMG]?it \[\d+:\d+")
"""A tqdm progress line: ``42%|████ |``, ``| 9/20 [00:01<00:02, …]`` or, without a total, ``12it [00:03, …]``."""
WIDGET_WARNING = re.compile(r"IProgress not found|TqdmWarning|TqdmExperimentalWarning")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class NotebookSpec:
    """One manifest entry: ``notebooks/<name>.ipynb`` with its papermill parameter overrides."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    figures: dict[str, str] = field(default_factory=dict)
    """Cell label → publication figure name under ``figures/`` (:mod:`intraskill.report.figures`)."""
    records: tuple[str, ...] = ()
    """Directories (globs relative to the root) of the records the notebook analyses; empty: it needs none."""
    rerun: dict[str, Any] = field(default_factory=dict)
    """Parameter overrides that re-run the experiment behind the records (``report build --rerun <name>``)."""
    estimate: str = ""
    """How long a full execution takes on 2 CPU cores, stated before it starts."""

    def overrides(self, quick: bool, rerun: bool = False) -> dict[str, Any]:
        """Parameters for this build: ``parameters``, updated with ``rerun`` when re-run and ``quick`` for a quick
        build."""
        return {**self.parameters, **(self.rerun if rerun else {}), **(self.quick if quick else {})}

    def record_dirs(self, root: Path) -> list[str]:
        """The ``records`` directories under ``root`` that hold at least one file (relative POSIX paths)."""
        found = [path for pattern in self.records for path in sorted(root.glob(pattern)) if path.is_dir()]
        return list(dict.fromkeys(path.relative_to(root).as_posix() for path in found
                                  if any(item.is_file() for item in path.rglob("*"))))

    @staticmethod
    def parameter_dirs(parameters: dict[str, Any], root: Path) -> list[str]:
        """The run directories a build's ``parameters`` name (``coevolve_dir``, ``out_dir``: a relative path to a
        directory under ``root`` that holds a file): the records a notebook read or wrote besides ``records``."""
        named = [value for value in parameters.values() if isinstance(value, str) and value
                 and not Path(value).is_absolute() and (root / value).is_dir()]
        return [value for value in dict.fromkeys(named) if any(item.is_file() for item in (root / value).rglob("*"))]


@dataclass(frozen=True)
class NotebookRun:
    """What happened to one manifest notebook: ``executed``, ``cached`` (unchanged key), ``missing``
    (skipped), ``no-records`` (nothing to analyse, not executed) or ``failed``; ``mode`` is ``quick`` when it ran
    with its quick parameters, ``records`` the record directories it found."""

    name: str
    status: str
    output: str | None
    seconds: float
    note: str
    mode: str = FULL
    records: tuple[str, ...] = ()


@dataclass(frozen=True)
class Manifest:
    """``report/notebooks.yaml``: the notebooks, the inputs every execution depends on, the data runs."""

    notebooks: list[NotebookSpec]
    inputs: tuple[str, ...] = ()
    data: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportBuild:
    """Outcome of :func:`build_report`."""

    notebooks: list[NotebookRun]
    renderer: str
    site_dir: str
    pages: list[str]
    data_runs: list[str] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)
    """The page check's findings: page (relative to the site) → its problems (empty when the check was off)."""
    checked: bool = True
    """Whether the pages went through the page check."""

    @property
    def ok(self) -> bool:
        """True when no notebook failed and the page check found nothing."""
        return all(run.status != "failed" for run in self.notebooks) and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _globs(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{where} must be a list of glob patterns (strings)")
    return tuple(value)


FIGURE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9_-]*)*$")
"""A publication figure's name: lower-case path segments under ``figures/`` (no suffix, no ``..``)."""


def _figure_names(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a mapping of cell label -> figure name")
    for label, name in value.items():
        if not isinstance(name, str) or not FIGURE_NAME.match(name):
            raise ValueError(f"{where}.{label}: figure names are lower-case path segments "
                             f"(letters, digits, - and _), got {name!r}")
    names = list(value.values())
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: two labels publish under the same name")
    return dict(value)


def load_manifest(path: str | Path) -> Manifest:
    """Parse ``report/notebooks.yaml``; errors name the entry and field at fault."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    entries = data.get("notebooks")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: 'notebooks' must be a list of entries")
    unknown = sorted(set(data) - {"notebooks", "inputs", "data"})
    if unknown:
        raise ValueError(f"{path}: unknown top-level field(s) {unknown}")
    specs, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{path}: notebooks[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ValueError(f"{where}.name must be a non-empty string")
        unknown = sorted(set(entry) - {"name", "parameters", "quick", "inputs", "figures", "records", "rerun",
                                       "estimate"})
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {unknown}")
        if not isinstance(entry.get("estimate", ""), str):
            raise ValueError(f"{where}.estimate must be a string (how long a full execution takes)")
        for key in ("parameters", "quick", "rerun"):
            if not isinstance(entry.get(key, {}), dict):
                raise ValueError(f"{where}.{key} must be a mapping of parameter -> value")
        if entry["name"] in seen:
            raise ValueError(f"{where}.name {entry['name']!r} is listed twice")
        seen.add(entry["name"])
        specs.append(NotebookSpec(entry["name"], dict(entry.get("parameters", {})), dict(entry.get("quick", {})),
                                  _globs(entry.get("inputs", []), f"{where}.inputs"),
                                  _figure_names(entry.get("figures", {}), f"{where}.figures"),
                                  _globs(entry.get("records", []), f"{where}.records"),
                                  dict(entry.get("rerun", {})), entry.get("estimate", "")))
    return Manifest(specs, _globs(data.get("inputs", []), f"{path}: inputs"),
                    _globs(data.get("data", []), f"{path}: data"))


def check_parameters(notebook: Path, overrides: dict[str, Any]) -> None:
    """Reject overrides the notebook's ``parameters`` cell does not define (papermill only warns)."""
    # deferred: papermill is heavy to import
    import papermill

    known = papermill.inspect_notebook(str(notebook))
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"{notebook}: unknown parameter(s) {unknown}; the parameters cell defines {sorted(known)}")


def _stream_text(text: str) -> str:
    """A stream's text without progress-bar updates and widget warnings (and their source lines)."""
    kept, skip_source = [], False
    for line in re.split(r"(?<=\n)", text):
        shown = line.rsplit("\r", 1)[-1] if line.strip("\r\n") else line
        if skip_source and line[:1].isspace() and line.strip():
            skip_source = False
            continue
        skip_source = bool(WIDGET_WARNING.search(shown))
        if skip_source or PROGRESS_TEXT.search(shown) or not shown.strip("\r"):
            continue
        kept.append(shown)
    return "".join(kept)


def strip_progress(notebook: dict[str, Any]) -> int:
    """Remove tqdm progress bars, progress widgets and the ``IProgress not found`` warning from a
    notebook's outputs (in place); returns how many outputs were removed or shortened."""
    changed = 0
    for cell in notebook.get("cells", []):
        outputs = []
        for output in cell.get("outputs", []):
            if WIDGET_MIME in output.get("data", {}):
                changed += 1
                continue
            if output.get("output_type") == "stream":
                text = output["text"] if isinstance(output["text"], str) else "".join(output["text"])
                cleaned = _stream_text(text)
                if cleaned != text:
                    changed += 1
                    if not cleaned.strip():
                        continue
                    output = {**output, "text": cleaned}
            outputs.append(output)
        if "outputs" in cell:
            cell["outputs"] = outputs
    return changed


def input_files(root: Path, patterns: Sequence[str]) -> list[Path]:
    """The files matched by ``patterns`` (globs relative to ``root``, ``**`` recursive), sorted, unique."""
    found = {path for pattern in patterns for path in root.glob(pattern) if path.is_file()}
    return sorted(found)


def execution_key(source: Path, parameters: dict[str, Any], inputs: Sequence[Path], root: Path) -> str:
    """SHA-256 of the notebook's content, its parameters, the kernel and each input file's path and content."""
    return sha256_json({
        "notebook": sha256_file(source),
        "parameters": parameters,
        "kernel": KERNEL_NAME,
        "inputs": {path.relative_to(root).as_posix(): sha256_file(path) for path in inputs},
    })


def _execute(source: Path, target: Path, parameters: dict[str, Any], cwd: Path, echo: Callable[[str], None]) -> None:
    """papermill into ``target`` (each cell reported through ``echo``), then strip progress output from the
    executed copy."""
    # deferred: papermill is heavy to import
    import papermill

    try:
        papermill.execute_notebook(str(source), str(target), parameters=parameters, cwd=str(cwd),
                                   kernel_name=KERNEL_NAME, progress_bar=False, log_output=False,
                                   engine_name=progress_engine(source.stem, echo))
    finally:
        if target.is_file():
            notebook = json.loads(target.read_text(encoding="utf-8"))
            if strip_progress(notebook):
                target.write_text(json.dumps(notebook, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def last_seconds(out_dir: Path, name: str, mode: str) -> float | None:
    """How long the last finished execution of ``name`` in ``mode`` took here (``timings.jsonl``), if any."""
    path = out_dir / TIMINGS_FILE
    times = [r["seconds"] for r in iter_jsonl(path) if r["name"] == name and r["mode"] == mode] if path.is_file() else []
    return times[-1] if times else None


def _announce(spec: NotebookSpec, mode: str, parameters: dict[str, Any], out_dir: Path) -> str:
    """What is about to run and roughly how long it takes here."""
    last = last_seconds(out_dir, spec.name, mode)
    expected = [f"about {spec.estimate} on 2 CPU cores"] if spec.estimate and mode == FULL else []
    expected += [f"last execution here: {clock(last)}"] if last is not None else []
    shown = ", ".join(f"{k}={v}" for k, v in parameters.items()) or "default parameters"
    return f"executing {spec.name} ({mode}; {shown})" + (f" — {'; '.join(expected)}" if expected else "")


def execute_notebooks(
    specs: list[NotebookSpec],
    *,
    notebooks_dir: Path,
    out_dir: Path,
    quick: bool = False,
    inputs: Sequence[str] = (),
    root: Path | None = None,
    force: bool = False,
    rerun: Sequence[str] = (),
    echo: Callable[[str], None] = print,
) -> list[NotebookRun]:
    """Execute each existing manifest notebook with papermill into ``out_dir/<name>.ipynb``.

    Missing notebooks are skipped with a note; a failing notebook is recorded as ``failed`` (papermill
    leaves the partly executed copy with its error) and the build goes on. A notebook whose execution key
    (:func:`execution_key` over ``inputs`` plus the entry's own, globs relative to ``root``) matches the
    ``<name>.key`` of its executed copy is ``cached`` and not run again, unless ``force``. An entry with
    ``records`` none of which exists is ``no-records`` (its stale executed copy removed) unless it is in
    ``rerun`` (then with its ``rerun`` parameters) or the build is quick.
    """
    # deferred: papermill is heavy to import
    import papermill

    base = root if root is not None else notebooks_dir.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for spec in specs:
        source = notebooks_dir / f"{spec.name}.ipynb"
        target = out_dir / f"{spec.name}.ipynb"
        key_file = out_dir / f"{spec.name}.key"
        if not source.is_file():
            note = f"skipped {spec.name}: {source} does not exist yet"
            echo(note)
            runs.append(NotebookRun(spec.name, "missing", None, 0.0, note))
            continue
        again = spec.name in rerun
        parameters = spec.overrides(quick, again)
        check_parameters(source, parameters)
        mode = QUICK if quick and spec.quick else FULL
        records = tuple(spec.record_dirs(base))
        if spec.records and not records and not again and mode == FULL:
            note = (f"no records for {spec.name}: none of {list(spec.records)} holds any yet; "
                    f"`intraskill report build --rerun {spec.name}` runs the experiment ({spec.estimate or 'long'})")
            echo(note)
            target.unlink(missing_ok=True)
            key_file.unlink(missing_ok=True)
            runs.append(NotebookRun(spec.name, "no-records", None, 0.0, note, mode))
            continue
        key = execution_key(source, parameters, input_files(base, [*inputs, *spec.inputs]), base)
        records = tuple(dict.fromkeys([*records, *spec.parameter_dirs(parameters, base)]))
        if not force and target.is_file() and key_file.is_file() and key_file.read_text().strip() == key:
            echo(f"cached {spec.name}: notebook, parameters and inputs unchanged ({target})")
            runs.append(NotebookRun(spec.name, "cached", str(target), 0.0, f"key {key[:12]}", mode, records))
            continue
        echo(_announce(spec, mode, parameters, out_dir))
        key_file.unlink(missing_ok=True)
        start = time.monotonic()
        try:
            _execute(source, target, parameters, notebooks_dir, echo)
        except papermill.PapermillExecutionError as error:
            note = f"failed {spec.name}: {error.ename}: {error.evalue} (see {target})"
            echo(note)
            runs.append(NotebookRun(spec.name, "failed", str(target), time.monotonic() - start, note, mode, records))
            continue
        seconds = time.monotonic() - start
        with JsonlWriter(out_dir / TIMINGS_FILE) as timings:
            timings.append({"name": spec.name, "mode": mode, "seconds": seconds, "finished_at": utc_now()})
        echo(f"executed {spec.name} in {clock(seconds)} -> {target}")
        # the key after the run: a notebook that writes its own inputs (a round it resumes) stays cached
        after = execution_key(source, parameters, input_files(base, [*inputs, *spec.inputs]), base)
        key_file.write_text(after + "\n", encoding="utf-8")
        records = tuple(dict.fromkeys([*records, *spec.parameter_dirs(parameters, base)]))
        runs.append(NotebookRun(spec.name, "executed", str(target), seconds, "ok", mode, records))
    return runs


def write_build_record(runs_root: Path, root: Path, runs: Sequence[NotebookRun], mode: str) -> dict[str, Any]:
    """``<runs_root>/build.json``: this build's commit, date and mode, and per notebook its status, mode and
    record directories (notebooks this build did not execute keep their entry from the earlier build)."""
    path = runs_root / BUILD_FILE
    earlier = json.loads(path.read_text(encoding="utf-8")).get("notebooks", {}) if path.is_file() else {}
    notebooks = {**earlier, **{run.name: {"status": run.status, "mode": run.mode, "records": list(run.records),
                                          "note": run.note} for run in runs if run.note != NOT_REEXECUTED}}
    record = {"commit": git_commit(root), "date": utc_now(), "mode": mode, "notebooks": notebooks}
    write_json(path, record, indent=1)
    return record


def require_cjk_font(root: Path) -> str:
    """The CJK font the Chinese figures use; ``RuntimeError`` with the install hint when the site has Chinese
    pages and no such font is installed (matplotlib would draw empty boxes or fall back to English)."""
    font = find_cjk_font()
    if font is None and any((root / "report" / "zh").glob("*.qmd")):
        raise RuntimeError(CJK_FONT_HINT)
    return font or ""


QUARTO_LIBS = "site_libs"
"""The folder of Quarto's site libraries (scripts and styles, no pages)."""


def quarto_pages(site_dir: Path, stamped: Sequence[Path]) -> list[Path]:
    """Every HTML page of a Quarto render: the ``stamped`` report pages, then the others Quarto wrote (the notebook
    previews its embeds link to), outside :data:`QUARTO_LIBS`."""
    listed = {page.resolve() for page in stamped}
    others = [page for page in sorted(site_dir.rglob("*.html"))
              if QUARTO_LIBS not in page.relative_to(site_dir).parts and page.resolve() not in listed]
    return [*stamped, *others]


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
    force: bool = False,
    rerun: Sequence[str] = (),
    data_root: str | Path | None = None,
    check: bool = True,
    echo: Callable[[str], None] = print,
) -> ReportBuild:
    """Execute the manifest notebooks, export the data runs and render the report site.

    Parameters
    ----------
    root : path
        Repository root (holds ``_quarto.yml``, ``report/`` and ``notebooks/``).
    run_dir : path, optional
        Run folder; executed notebooks go to ``<run_dir>/notebooks``, the data export to ``<run_dir>/data``.
        Default ``<root>/runs/report``.
    site_dir : path, optional
        Output folder of the static renderer. Default ``<root>/_site`` (Quarto's ``output-dir``).
    quick : bool
        A smoke build: each entry's ``quick`` overrides, which put the training and evaluation notebooks on the
        random-init ``ci`` organism at CI size (their numbers are not results; every page they feed says so).
    execute : bool
        Execute the notebooks; with False the existing executed copies are rendered as they are.
    use_quarto : bool, optional
        Force (True) or forbid (False) Quarto; by default it is used when ``quarto`` is on PATH.
    only : sequence of str, optional
        Execute only these manifest notebooks (the others' existing executed copies are rendered).
    force : bool
        Execute even the notebooks whose cached execution key is unchanged.
    rerun : sequence of str
        Manifest notebooks whose experiment is re-run (their ``rerun`` parameters; executed even without records).
    data_root : path, optional
        Folder the manifest's ``data`` globs (``runs/…``) are matched in. Default ``root``.
    check : bool
        Run the page check on every page written (:attr:`ReportBuild.problems`; any problem makes the build not
        :attr:`~ReportBuild.ok`).

    Returns
    -------
    ReportBuild
    """
    base = Path(root).resolve()
    require_cjk_font(base)
    runs_root = Path(run_dir) if run_dir is not None else base / DEFAULT_RUN_DIR
    executed_dir = runs_root / "notebooks"
    manifest = load_manifest(base / MANIFEST_PATH)
    specs = manifest.notebooks
    for field_name, names in (("only", only or ()), ("rerun", rerun)):
        unknown = sorted(set(names) - {spec.name for spec in specs})
        if unknown:
            raise ValueError(f"{field_name}: {unknown} are not in {MANIFEST_PATH}")
    if only is not None:
        specs = [spec for spec in specs if spec.name in set(only)]
    if execute:
        runs = execute_notebooks(specs, notebooks_dir=base / NOTEBOOKS_DIR, out_dir=executed_dir, quick=quick,
                                 inputs=manifest.inputs, root=base, force=force, rerun=rerun, echo=echo)
    else:
        runs = [
            NotebookRun(s.name, "executed" if (executed_dir / f"{s.name}.ipynb").is_file() else "missing",
                        str(executed_dir / f"{s.name}.ipynb"), 0.0, NOT_REEXECUTED)
            for s in specs
        ]
    build = write_build_record(runs_root, base, runs, QUICK if quick else FULL)
    data = export_report_data(Path(data_root) if data_root is not None else base, manifest.data,
                              runs_root / DATA_DIR, echo=echo)
    quarto = shutil.which("quarto") is not None if use_quarto is None else use_quarto
    if quarto:
        if runs_root.resolve() != (base / DEFAULT_RUN_DIR).resolve():
            raise ValueError(f"Quarto embeds notebooks from {DEFAULT_RUN_DIR / 'notebooks'}; run_dir must be the default")
        echo("rendering with quarto render")
        render_with_quarto(base)
        out = base / DEFAULT_SITE_DIR
        pages = [str(page) for page in quarto_pages(out, stamp_quarto_site(base, out, build))]
    else:
        out = Path(site_dir) if site_dir is not None else base / DEFAULT_SITE_DIR
        echo(f"quarto is not on PATH: rendering a static HTML site with nbconvert + mistune into {out}")
        pages = [str(page) for page in render_static_site(base, executed_dir, out, runs_root / DATA_DIR, build)]
    data.copy_into(out)
    problems = site_problems(out, pages) if check else {}
    return ReportBuild(runs, "quarto" if quarto else "static", str(out), pages, [run.name for run in data.runs],
                       problems, check)
