"""The report's downloadable data: each covered run's episodes and turns, and the pages that list them.

:func:`export_report_data` exports every run directory matched by the manifest's ``data`` globs
(:func:`intraskill.analysis.export.export_run`, Parquet and CSV) into ``<run_dir>/data/<run>/`` and writes
the Markdown that the data pages include: ``runs.<lang>.md`` (one row per run with its download links)
and ``schema.<lang>.md`` (column, type and meaning of each table, from
:data:`~intraskill.analysis.export.SCHEMA`), and the episode browser's data of the same runs
(:func:`intraskill.report.browser.write_browser_data`, in ``browser/``) and the skill-version pages of their
co-evolution runs with the skills page's Markdown (:func:`intraskill.report.skill_pages.write_skill_pages`,
in ``skills/`` and ``skills.<lang>.md``). The build copies the run folders, the browser data and the version
pages into ``<site>/data/`` and the browser's script into ``<site>/assets/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from intraskill.analysis.export import FORMATS, SCHEMA, export_run, find_trace_files
from intraskill.report.browser import BROWSER_DIR, BrowserRun, copy_assets, write_browser_data
from intraskill.report.markdown import Markdown, code_span, markdown_table, md_link
from intraskill.report.skill_pages import SKILLS_DIR, SkillPages, write_skill_pages

DATA_DIR = "data"
"""Folder of the export inside the report run folder, and of the downloads inside the site."""
PAGE_TO_SITE = "../.."
"""From a data page (``report/<lang>/data.html``) to the site root."""
TEXT = {
    "en": {"run": "Run", "episodes": "Episodes", "turns": "Turns", "downloads": "Downloads",
           "column": "Column", "type": "Type", "meaning": "Meaning",
           "none": "No run of this build matched the manifest's `data` patterns ({patterns}); run `make round` "
                   "or `intraskill co-evolve` first, then `make report`."},
    "zh": {"run": "运行", "episodes": "回合数", "turns": "轮次数", "downloads": "下载",
           "column": "列", "type": "类型", "meaning": "含义",
           "none": "本次构建没有运行目录匹配清单中的 `data` 模式（{patterns}）；请先运行 `make round` "
                   "或 `intraskill co-evolve`，再运行 `make report`。"},
}
TYPE_TEXT = {"en": {"string": "text", "int": "integer", "float": "number", "bool": "true/false"},
             "zh": {"string": "文本", "int": "整数", "float": "数值", "bool": "布尔"}}


@dataclass(frozen=True)
class DataRun:
    """One exported run: its name (path under ``runs/``), row counts and files (relative to the data dir)."""

    name: str
    episodes: int
    turns: int
    files: dict[str, str]


@dataclass(frozen=True)
class ReportData:
    """The export of one build: where it lies and which runs it holds."""

    out_dir: Path
    runs: list[DataRun]
    browser: list[BrowserRun]
    skills: SkillPages

    def copy_into(self, site_dir: str | Path) -> None:
        """Copy every run's files to ``<site_dir>/data/<run>/`` (the links of the data pages), the browser
        data to ``<site_dir>/data/browser/`` and the browser's script and style to ``<site_dir>/assets/``."""
        target = Path(site_dir) / DATA_DIR
        for run in self.runs:
            shutil.copytree(self.out_dir / run.name, target / run.name, dirs_exist_ok=True)
        for folder in (BROWSER_DIR, SKILLS_DIR):
            if (target / folder).exists():
                shutil.rmtree(target / folder)
            if (self.out_dir / folder).is_dir():
                shutil.copytree(self.out_dir / folder, target / folder)
        copy_assets(site_dir)


def data_runs(root: Path, patterns: Sequence[str]) -> list[Path]:
    """Run directories matched by ``patterns`` (globs relative to ``root``) that hold trace files; a match
    inside another match is left out (its traces are in the outer run's export)."""
    matched = sorted({path for pattern in patterns for path in root.glob(pattern) if path.is_dir()})
    outer = [path for path in matched if not any(other in path.parents for other in matched)]
    return [path for path in outer if find_trace_files(path)]


def _run_name(root: Path, run: Path) -> str:
    relative = run.relative_to(root)
    return (relative.relative_to("runs") if relative.parts[:1] == ("runs",) else relative).as_posix()


def runs_markdown(runs: Sequence[DataRun], language: str, patterns: Sequence[str]) -> str:
    """The data page's run list: name, episode and turn counts, one link per table and format."""
    text = TEXT[language]
    if not runs:
        return text["none"].format(patterns=", ".join(code_span(p) for p in patterns) or "—") + "\n"
    rows = [
        (code_span(run.name), f"{run.episodes:,}", f"{run.turns:,}",
         Markdown(" · ".join(md_link(name, f"{PAGE_TO_SITE}/{DATA_DIR}/{path}") for name, path in run.files.items())))
        for run in runs
    ]
    return markdown_table([text["run"], text["episodes"], text["turns"], text["downloads"]], rows, "lrrl")


def schema_markdown(table: str, language: str) -> str:
    """Column, type and meaning of one exported table, in ``language``."""
    text = TEXT[language]
    rows = [(code_span(c.name), TYPE_TEXT[language][c.kind], getattr(c, language)) for c in SCHEMA[table]]
    return markdown_table([text["column"], text["type"], text["meaning"]], rows, "lll")


def export_report_data(root: Path, patterns: Sequence[str], out_dir: Path,
                       echo: Callable[[str], None] = print) -> ReportData:
    """Export the runs matched by ``patterns`` into ``out_dir`` (emptied first) and write the pages' Markdown."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    runs, named = [], []
    for run in data_runs(root, patterns):
        name = _run_name(root, run)
        named.append((name, run))
        result = export_run(run, out_dir / name, FORMATS, name=name)
        files = {f"{table}.{fmt}": f"{name}/{Path(path).name}"
                 for table, paths in result.paths.items() for fmt, path in paths.items()}
        echo(f"data: {name}: {result.episodes} episodes, {result.turns} turns")
        runs.append(DataRun(name, result.episodes, result.turns, files))
    for language in TEXT:
        (out_dir / f"runs.{language}.md").write_text(runs_markdown(runs, language, patterns), encoding="utf-8")
        for table in SCHEMA:
            (out_dir / f"schema-{table}.{language}.md").write_text(schema_markdown(table, language), encoding="utf-8")
    skills = write_skill_pages(named, out_dir, f"{PAGE_TO_SITE}/{DATA_DIR}")
    echo(f"data: {len(skills.pages)} skill-version pages")
    browser = write_browser_data(named, out_dir / BROWSER_DIR, skills.links)
    echo(f"data: episode browser over {len(browser)} trace files")
    return ReportData(out_dir, runs, browser, skills)
