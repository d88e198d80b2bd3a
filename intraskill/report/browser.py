"""The episode browser's data: one entry per trace file, its episode list in pages, its episodes in chunks.

The same JSON shapes reach the browser (``intraskill/report/assets/episode-browser.js``) two ways:

* **static** — :func:`write_browser_data` writes, for the report's data runs, ``runs.json`` (the
  :class:`BrowserRun` entries) and per trace file a folder ``rNNNN/`` with ``index-NNNN.json``
  (:func:`run_page`: up to :data:`PAGE_SIZE` episode summaries and the skill titles) and
  ``episodes-NNNN.json`` (:data:`CHUNK_SIZE` full :func:`~intraskill.analysis.episodes.episode_view`
  records each), so a large run is read page by page and an episode with its chunk, never the run whole;
* **live** — :mod:`intraskill.report.replay` answers the same pages and single episodes over HTTP from a
  runs folder while it is being written.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from intraskill.analysis.episodes import FAILURE_CLASSES, TraceFileEpisodes, episode_view, read_trace_file
from intraskill.analysis.export import find_trace_files, trace_records

BROWSER_SCHEMA = "intraskill-episode-browser-v1"
BROWSER_DIR = "browser"
"""Folder of the static browser data inside the report's data folder (and the site's ``data/``)."""
ASSETS = ("episode-browser.js", "episode-browser.css")
"""The browser's script and style sheet (package data of :mod:`intraskill.report`)."""
ASSETS_DIR = "assets"
"""Folder of :data:`ASSETS` in the site."""
PAGE_SIZE = 1000
"""Episode summaries per index page."""
CHUNK_SIZE = 25
"""Full episodes per static chunk file."""


@dataclass(frozen=True)
class BrowserRun:
    """One run of the browser: a trace file, named by ``id`` (its path under the runs root)."""

    id: str
    run: str
    part: str
    file: str
    split: str | None
    episodes: int
    pages: int
    folder: str | None = None


def browser_run(ident: str, run: str, part: str, file: str, split: str | None, episodes: int,
                folder: str | None = None) -> BrowserRun:
    """The :class:`BrowserRun` of a trace file holding ``episodes`` episodes."""
    return BrowserRun(ident, run, part, file, split, episodes, max(1, math.ceil(episodes / PAGE_SIZE)), folder)


def runs_document(runs: Sequence[BrowserRun], source: str,
                  skill_pages: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``runs.json`` / ``/api/replay/runs``: the runs, the paging constants and the skill-version page of each
    chunk text (SHA-256 → ``skills/<run>/S<k>#chunk-<id>`` under the site's data folder; static only)."""
    return {"schema": BROWSER_SCHEMA, "source": source, "page_size": PAGE_SIZE, "chunk_size": CHUNK_SIZE,
            "failure_classes": list(FAILURE_CLASSES), "runs": [asdict(run) for run in runs],
            "skill_pages": dict(skill_pages or {})}


def run_page(run: BrowserRun, episodes: TraceFileEpisodes, page: int) -> dict[str, Any]:
    """Page ``page`` (0-based) of a run's episode list; ``IndexError`` outside ``0 … pages − 1``."""
    if not 0 <= page < run.pages:
        raise IndexError(f"page must be in 0..{run.pages - 1} for run {run.id!r}, got {page}")
    rows = episodes.episodes[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]
    return {"schema": BROWSER_SCHEMA, "run": asdict(run), "page": page, "skills": episodes.skills,
            "episodes": [asdict(row) for row in rows]}


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def write_trace_file(path: Path, episodes: TraceFileEpisodes, run: BrowserRun, target: Path) -> None:
    """The index pages and episode chunks of one trace file (read as ``episodes``) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for page in range(run.pages):
        _write_json(target / f"index-{page:04d}.json", run_page(run, episodes, page))
    chunk: list[dict[str, Any]] = []
    for index, (line, trace, titles) in enumerate(trace_records(path)):
        chunk.append(episode_view(index, line, trace, titles))
        if len(chunk) == CHUNK_SIZE:
            _write_json(target / f"episodes-{index // CHUNK_SIZE:04d}.json", {"episodes": chunk})
            chunk = []
    if chunk:
        _write_json(target / f"episodes-{len(episodes.episodes) // CHUNK_SIZE:04d}.json", {"episodes": chunk})


def write_browser_data(runs: Sequence[tuple[str, Path]], out_dir: str | Path,
                       skill_pages: Mapping[str, str] | None = None) -> list[BrowserRun]:
    """Write the static browser data of ``runs`` (``(name, run directory)`` pairs) into ``out_dir``;
    ``skill_pages``: see :func:`runs_document`."""
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    entries = []
    for name, run_dir in runs:
        for path in find_trace_files(run_dir):
            relative = path.relative_to(run_dir)
            folder = f"r{len(entries):04d}"
            episodes = read_trace_file(path, run_dir)
            entry = browser_run(f"{name}/{relative.as_posix()}", name, relative.parent.as_posix(), path.name,
                                episodes.split, len(episodes.episodes), folder)
            write_trace_file(path, episodes, entry, out / folder)
            entries.append(entry)
    _write_json(out / "runs.json", runs_document(entries, "static", skill_pages))
    return entries


def asset_text(name: str) -> str:
    """The text of one of :data:`ASSETS`."""
    if name not in ASSETS:
        raise KeyError(f"unknown browser asset {name!r}; expected one of {', '.join(ASSETS)}")
    return resources.files("intraskill.report").joinpath("assets", name).read_text(encoding="utf-8")


def copy_assets(site_dir: str | Path) -> Path:
    """Copy :data:`ASSETS` into ``<site_dir>/assets/``; returns that folder."""
    target = Path(site_dir) / ASSETS_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        (target / name).write_text(asset_text(name), encoding="utf-8")
    return target
