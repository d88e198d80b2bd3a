"""The episode browser served live and read-only over a runs folder (``intraskill env serve --runs``).

Routes (ShopSimulator's replay routes, answered with :mod:`intraskill.report.browser`'s JSON shapes):

* ``GET /replay-ui`` — the browser page (``?lang=zh`` for Chinese); its script and style sheet under
  ``/replay-ui/assets/``;
* ``GET /api/replay/runs`` — every trace file under the folder (:func:`~intraskill.report.browser.runs_document`);
* ``GET /api/replay/run?run=<id>&page=<n>`` — a page of its episode list (:func:`~intraskill.report.browser.run_page`);
* ``GET /api/replay/episode?run=<id>&index=<i>`` — one episode's step-through view.

A run ``id`` is the trace file's path relative to the folder; anything that resolves outside it, or is
not a trace file name, is refused with 400, a missing file or episode with 404, a corrupt trace with 422 —
each as ``{"error": message}`` naming the parameter. Files are only read (a torn last line of a file
still being written is skipped); a file's episode list is cached until its size or mtime changes, and the run
list counts episodes by complete lines without parsing them.
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from intraskill.analysis.episodes import TraceFileEpisodes, read_episode, read_trace_file
from intraskill.analysis.export import TRACE_FILES, find_trace_files, trace_split
from intraskill.jsonl import JsonlError
from intraskill.report.browser import ASSETS, BrowserRun, asset_text, browser_run, run_page, runs_document
from intraskill.report.site import NO_FAVICON
from intraskill.shop.actions import LANGUAGES

TITLE = {"en": "Episode browser (live)", "zh": "回合浏览器（实时）"}
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css"}
SHOWN_CHARS = 120
"""A refused run id is quoted in the error up to this many characters."""


class ReplayError(ValueError):
    """A refused request: its HTTP status and a message naming the parameter."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(error: ReplayError) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=error.status)


def _integer(request: Request, name: str) -> int:
    value = request.query_params.get(name, "0")
    try:
        number = int(value)
    except ValueError:
        raise ReplayError(400, f"{name}: must be a non-negative integer, got {value!r}") from None
    if number < 0:
        raise ReplayError(400, f"{name}: must be a non-negative integer, got {number}")
    return number


class ReplayFolder:
    """The trace files of one runs folder, read on demand and cached by size and mtime."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"--runs: no such runs folder: {root}")
        self._cache: dict[Path, tuple[tuple[int, int], TraceFileEpisodes]] = {}
        self._lock = threading.Lock()

    def trace_path(self, ident: str | None) -> Path:
        """The trace file named by a run ``id``; :class:`ReplayError` when it is not one inside the folder."""
        if not ident:
            raise ReplayError(400, "run: required (a trace file path listed by /api/replay/runs)")
        if "\\" in ident or "\x00" in ident or ident.startswith("/"):
            raise ReplayError(400, f"run: must be a relative path inside the runs folder, got {ident!r}")
        shown = ident if len(ident) <= SHOWN_CHARS else f"{ident[:SHOWN_CHARS]}…"
        try:  # a component over the file system's name limit (255 bytes) fails here with ENAMETOOLONG
            path = (self.root / ident).resolve()
            found = path.is_file()
        except OSError as error:
            raise ReplayError(400, f"run: {shown!r} is no usable path ({error.strerror})") from None
        if not path.is_relative_to(self.root):
            raise ReplayError(400, f"run: {shown!r} lies outside the runs folder")
        if path.name not in TRACE_FILES:
            raise ReplayError(400, f"run: {shown!r} is not a trace file ({', '.join(TRACE_FILES)})")
        if not found:
            raise ReplayError(404, f"run: no trace file {shown!r} in the runs folder")
        return path

    def episodes(self, path: Path) -> TraceFileEpisodes:
        """The episode list of a trace file (re-read when the file changed)."""
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            episodes = read_trace_file(path, self.root)
        except JsonlError as error:
            raise ReplayError(422, f"run: {error}") from None
        with self._lock:
            self._cache[path] = (key, episodes)
        return episodes

    def entry(self, path: Path, episodes: int) -> BrowserRun:
        """The :class:`BrowserRun` of a trace file (``run``: its first folder under the root)."""
        relative = path.relative_to(self.root)
        parts = relative.parent.parts
        return browser_run(relative.as_posix(), parts[0] if parts else ".", "/".join(parts[1:]) or ".",
                           path.name, trace_split(path, self.root), episodes)

    def runs(self) -> dict[str, Any]:
        """Every trace file, its episodes counted by their complete lines (no record is parsed: a large folder
        lists at once; a corrupt file shows its 422 when opened)."""
        return runs_document([self.entry(path, complete_lines(path)) for path in find_trace_files(self.root)], "live")

    def page(self, ident: str | None, page: int) -> dict[str, Any]:
        path = self.trace_path(ident)
        episodes = self.episodes(path)
        try:
            return run_page(self.entry(path, len(episodes.episodes)), episodes, page)
        except IndexError as error:
            raise ReplayError(404, f"page: {error}") from None

    def episode(self, ident: str | None, index: int) -> dict[str, Any]:
        path = self.trace_path(ident)
        try:
            return read_episode(path, index)
        except IndexError as error:
            raise ReplayError(404, f"index: {error}") from None
        except JsonlError as error:
            raise ReplayError(422, f"run: {error}") from None


def complete_lines(path: Path) -> int:
    """Non-blank lines of a JSONL file that end with a newline (a torn last write does not count)."""
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.endswith(b"\n") and line.strip())


def replay_page(language: str) -> str:
    """The live browser's HTML page in ``language``."""
    other = "zh" if language == "en" else "en"
    return (
        f'<!DOCTYPE html>\n<html lang="{"zh-CN" if language == "zh" else "en"}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{NO_FAVICON}\n<title>{html.escape(TITLE[language])}'
        f'</title>\n<link rel="stylesheet" href="/replay-ui/assets/episode-browser.css">\n</head>\n<body>\n'
        f'<nav class="replay-nav"><strong>{html.escape(TITLE[language])}</strong> '
        f'<a class="lang-switch" href="/replay-ui?lang={other}">{"中文" if other == "zh" else "English"}</a></nav>\n'
        f'<div id="episode-browser" data-source="live" data-root="/api/replay/" data-lang="{language}"></div>\n'
        '<script src="/replay-ui/assets/episode-browser.js"></script>\n</body>\n</html>\n'
    )


def replay_router(runs_dir: str | Path) -> APIRouter:
    """The read-only replay routes over ``runs_dir`` (mount with ``app.include_router``)."""
    folder = ReplayFolder(runs_dir)
    router = APIRouter()

    @router.get("/replay-ui")
    def ui(request: Request) -> Response:
        language = request.query_params.get("lang", "en")
        if language not in LANGUAGES:
            return _error(ReplayError(400, f"lang: expected one of {', '.join(LANGUAGES)}, got {language!r}"))
        return HTMLResponse(replay_page(language))

    @router.get("/replay-ui/assets/{name}")
    def asset(name: str) -> Response:
        if name not in ASSETS:
            return _error(ReplayError(404, f"asset: no {name!r}; expected one of {', '.join(ASSETS)}"))
        return Response(asset_text(name), media_type=MEDIA_TYPES[Path(name).suffix])

    @router.get("/api/replay/runs")
    def runs() -> Response:
        return JSONResponse(folder.runs())

    @router.get("/api/replay/run")
    def run(request: Request) -> Response:
        try:
            return JSONResponse(folder.page(request.query_params.get("run"), _integer(request, "page")))
        except ReplayError as error:
            return _error(error)

    @router.get("/api/replay/episode")
    def episode(request: Request) -> Response:
        try:
            return JSONResponse(folder.episode(request.query_params.get("run"), _integer(request, "index")))
        except ReplayError as error:
            return _error(error)

    return router
