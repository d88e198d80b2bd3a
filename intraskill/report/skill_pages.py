"""Skill-version pages: one HTML page per bank version of each co-evolution run, in English and Chinese, and
the Markdown of the skills page (the version lists and the Skill1 libraries' growth, admissions, evictions).

:func:`write_skill_pages` writes, under the report's data folder, ``skills/<run>/S<k>.<lang>.html`` (from
:func:`intraskill.analysis.skill_versions.read_skill_versions`: each chunk by title with its status, β and
95 % CI, origin with the analyst's evidence cards, text and diff to the previous version; then what the gate
retired and the candidates it did not admit), ``skills.<lang>.md`` (the version lists) and
``skill1-library.<lang>.md`` (the Skill1 libraries), which ``report/<lang>/skills.qmd`` includes. The pages are copied to ``<site>/data/skills/`` with the rest of the data. :attr:`SkillPages.links`
maps each chunk text (its SHA-256) to the page and anchor of the version that introduced it, so other pages
show a chunk by its title, linked there.
"""

from __future__ import annotations

import html
import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from intraskill.analysis.skill_versions import (
    BankVersion,
    ChunkEntry,
    SkillHistory,
    find_coevolve_runs,
    read_skill_versions,
)
from intraskill.report.markdown import code_span, markdown_table, md_link
from intraskill.report.site import NO_FAVICON, STYLE

SKILLS_DIR = "skills"
"""Folder of the version pages inside the report's data folder (and the site's ``data/``)."""
INDEX_PAGE = {"en": "report/en/skills.html", "zh": "report/zh/skills.html"}
"""The skills page of each language, relative to the site root."""
SITE_DATA = "data"
TEXT = {
    "en": {
        "title": "Skill versions", "chunks": "Chunks", "chunk": "Chunk", "status": "Status", "beta": "β (reward)",
        "ci": "95 % CI", "gate": "Gate", "origin": "Origin", "s0": "S₀ (starting bank)", "text": "Text",
        "diff": "Diff to {previous}", "retired": "Retired at this gate", "rejected": "Candidates not admitted",
        "none": "None.", "produced": "Produced by the gate of {round} ({n} paired observations).",
        "initial": "The starting bank S₀: the chunks round 0 trained with.", "card": "Evidence card",
        "surface": "Failure surface", "mechanism": "Mechanism", "counterfactual": "Counterfactual successes",
        "validation": "Repair validation", "candidate": "candidate {id} ({op}, {round})", "empty": "No chunks.",
        "version": "Version", "bank": "Bank", "count": "Chunks", "index": "All versions", "previous": "previous",
        "next": "next", "switch": "中文", "runs_none": "No co-evolution run in this build: run `intraskill co-evolve`, "
        "then `make report`.", "notes": "Rounds that added no version",
        "skill1_none": "No Skill1 round in this build: run one with `--set round.method=skill1`, then `make report`.",
        "step": "Step", "size": "Size", "admissions": "Admissions", "evictions": "Evictions", "updates": "Updates",
        "mean_u": "Mean U", "event": "Event", "skill": "Skill", "desc": "Description", "utility": "U",
        "admit": "admitted", "evict": "evicted", "growth": "Growth", "events": "Admissions and evictions",
        "library": "Skill1 library",
        "statuses": {"initial": "initial", "kept": "kept", "rewritten": "rewritten", "added": "added",
                     "retired": "retired", "rejected": "not admitted"},
        "gate_statuses": {"selected": "selected", "rewrite_loser": "lost to its rewrite",
                          "non_positive": "β not positive", "budget_excluded": "over the budget K",
                          "retired": "retired"},
    },
    "zh": {
        "title": "技能版本", "chunks": "技能块", "chunk": "技能块", "status": "状态", "beta": "β（奖励）",
        "ci": "95% 置信区间", "gate": "门控", "origin": "来源", "s0": "S₀（初始技能库）", "text": "正文",
        "diff": "相对 {previous} 的差异", "retired": "本次门控退役的技能块", "rejected": "未采纳的候选",
        "none": "无。", "produced": "由 {round} 的门控产生（{n} 个配对观测）。",
        "initial": "初始技能库 S₀：第 0 轮训练所用的技能块。", "card": "证据卡",
        "surface": "失败面", "mechanism": "机制", "counterfactual": "反事实成功", "validation": "修复验证",
        "candidate": "候选 {id}（{op}，{round}）", "empty": "没有技能块。", "version": "版本", "bank": "技能库",
        "count": "技能块数", "index": "全部版本", "previous": "上一版", "next": "下一版", "switch": "English",
        "runs_none": "本次构建没有协同演化运行：请先运行 `intraskill co-evolve`，再运行 `make report`。",
        "notes": "未产生新版本的轮次",
        "skill1_none": "本次构建没有 Skill1 轮次：请用 `--set round.method=skill1` 运行一轮，再运行 `make report`。",
        "step": "步", "size": "规模", "admissions": "纳入", "evictions": "淘汰", "updates": "更新",
        "mean_u": "平均 U", "event": "事件", "skill": "技能", "desc": "描述", "utility": "U",
        "admit": "纳入", "evict": "淘汰", "growth": "增长", "events": "纳入与淘汰", "library": "Skill1 技能库",
        "statuses": {"initial": "初始", "kept": "保留", "rewritten": "改写", "added": "新增", "retired": "退役",
                     "rejected": "未采纳"},
        "gate_statuses": {"selected": "入选", "rewrite_loser": "不敌其改写版本", "non_positive": "β 非正",
                          "budget_excluded": "超出预算 K", "retired": "退役"},
    },
}
PAGE_STYLE = STYLE + """
.chunk{border-top:1px solid #ddd;margin-top:1.2rem}.status{font-weight:600}
pre.diff{background:#fbfbf4}td,th{text-align:left}
"""


@dataclass(frozen=True)
class SkillPages:
    """What :func:`write_skill_pages` wrote: the page paths (relative to the data folder) and the chunk links."""

    pages: list[str]
    links: dict[str, str] = field(default_factory=dict)
    """Chunk text SHA-256 → ``skills/<run>/S<k>`` and anchor (``#chunk-<id>``), without the language suffix."""


def version_path(run: str, version: BankVersion, language: str) -> str:
    """``skills/<run>/S<k>.<lang>.html`` (relative to the data folder)."""
    return f"{SKILLS_DIR}/{run}/{version.label}.{language}.html"


def _number(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:+.3f}"


def _interval(chunk: ChunkEntry) -> str:
    if chunk.ci_low is None or chunk.ci_high is None:
        return "—"
    return f"[{chunk.ci_low:+.3f}, {chunk.ci_high:+.3f}]"


def _gate_status(chunk: ChunkEntry, language: str) -> str:
    if chunk.gate_status is None:
        return "—"
    return TEXT[language]["gate_statuses"].get(chunk.gate_status, chunk.gate_status)


def _origin(chunk: ChunkEntry, language: str) -> str:
    text, origin = TEXT[language], chunk.origin
    if origin.round_id is None:
        return text["s0"]
    return text["candidate"].format(id=origin.candidate_id, op=origin.operation, round=origin.round_id)


def _chunk_html(chunk: ChunkEntry, previous: str | None, language: str) -> str:
    text, e = TEXT[language], html.escape
    parts = [f'<section class="chunk" id="chunk-{e(chunk.skill_id)}"><h3>{e(chunk.title)}</h3>',
             f'<p><span class="status">{e(text["statuses"][chunk.status])}</span> · <code>{e(chunk.skill_id)}</code>'
             f' · {e(text["beta"])} {_number(chunk.beta)} {_interval(chunk)}'
             f'{" · " + e(text["gate"]) + ": " + e(_gate_status(chunk, language)) if chunk.gate_status else ""}'
             f' · {e(text["origin"])}: {e(_origin(chunk, language))}</p>']
    if chunk.origin.cards:
        header = (text["card"], text["surface"], text["mechanism"], text["counterfactual"], text["validation"])
        rows = "".join(
            f"<tr><td><code>{e(c.card_id)}</code></td><td>{e(c.failure_surface)}</td><td>{e(c.failure_mechanism)}"
            f"</td><td>{e(str(c.counterfactual_successes))} / {e(str(c.counterfactual_trials))}</td>"
            f"<td>{e(c.repair_validation)}</td></tr>"
            for c in chunk.origin.cards)
        parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + f"</tr>{rows}</table>")
    parts.append(f"<h4>{e(text['text'])}</h4><pre>{e(chunk.content)}</pre>")
    if chunk.diff and previous is not None:
        parts.append(f"<details open><summary>{e(text['diff'].format(previous=previous))}</summary>"
                     f'<pre class="diff">{e(chunk.diff)}</pre></details>')
    return "".join(parts) + "</section>"


def _summary_table(chunks: Sequence[ChunkEntry], language: str) -> str:
    text, e = TEXT[language], html.escape
    header = (text["chunk"], text["status"], text["beta"], text["ci"], text["gate"], text["origin"])
    rows = "".join(
        f'<tr><td><a href="#chunk-{e(c.skill_id)}">{e(c.title)}</a></td><td>{e(text["statuses"][c.status])}</td>'
        f"<td>{_number(c.beta)}</td><td>{_interval(c)}</td><td>{e(_gate_status(c, language))}</td>"
        f"<td>{e(_origin(c, language))}</td></tr>" for c in chunks)
    return "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + f"</tr>{rows}</table>"


def version_page(run: str, history: SkillHistory, position: int, language: str) -> str:
    """The HTML document of ``history.versions[position]`` in ``language``."""
    text, e = TEXT[language], html.escape
    version = history.versions[position]
    here = version_path(run, version, language)

    def link(target: str) -> str:
        return posixpath.relpath(target, posixpath.dirname(here))

    index = link(f"../{INDEX_PAGE[language]}")
    other = "zh" if language == "en" else "en"
    nav = [f'<a class="brand" href="{e(index)}">{e(text["title"])}</a>']
    if position > 0:
        previous = history.versions[position - 1]
        nav.append(f'<a href="{e(link(version_path(run, previous, language)))}">← {e(previous.label)}</a>')
    if position + 1 < len(history.versions):
        following = history.versions[position + 1]
        nav.append(f'<a href="{e(link(version_path(run, following, language)))}">{e(following.label)} →</a>')
    nav.append(f'<a class="lang-switch" href="{e(link(version_path(run, version, other)))}">{text["switch"]}</a>')
    previous_label = history.versions[position - 1].label if position > 0 else None
    intro = (text["initial"] if version.gate_round is None
             else text["produced"].format(round=version.gate_round, n=version.observations))
    body = [f"<h1>{e(version.label)} · {e(run)}</h1>",
            f"<p>{e(intro)} <code>{e(version.bank_version)}</code> · sha256 <code>{e(version.sha256[:12])}</code></p>",
            f'<h2 id="chunks">{e(text["chunks"])}</h2>',
            _summary_table(version.chunks, language) if version.chunks else f"<p>{e(text['empty'])}</p>",
            *(_chunk_html(chunk, previous_label, language) for chunk in version.chunks)]
    if version.gate_round is not None:
        for key, entries in (("retired", version.retired), ("rejected", version.rejected)):
            body.append(f'<h2 id="{key}">{e(text[key])}</h2>')
            body.append(_summary_table(entries, language) if entries else f"<p>{e(text['none'])}</p>")
            body.extend(_chunk_html(chunk, None, language) for chunk in entries)
    lang_attr = "zh-CN" if language == "zh" else "en"
    return (f'<!DOCTYPE html>\n<html lang="{lang_attr}">\n<head>\n<meta charset="utf-8">\n{NO_FAVICON}\n'
            f"<title>{e(version.label)} · {e(run)} · {e(text['title'])}</title>\n<style>{PAGE_STYLE}</style>\n</head>\n"
            f'<body>\n<nav class="navbar">{"".join(nav)}</nav>\n<main>\n{"".join(body)}\n</main>\n</body>\n</html>\n')


def versions_markdown(histories: Sequence[tuple[str, SkillHistory]], language: str, to_data: str) -> str:
    """The skills page's version lists (``to_data``: from the page to the data folder)."""
    text = TEXT[language]
    if not histories:
        return text["runs_none"] + "\n"
    parts = []
    for run, history in histories:
        rows = []
        for version in history.versions:
            counts = {status: sum(c.status == status for c in version.chunks) for status in ("kept", "rewritten", "added")}
            rows.append((md_link(version.label, f"{to_data}/{version_path(run, version, language)}"),
                         code_span(version.bank_version), version.gate_round or "—", len(version.chunks),
                         counts["kept"], counts["rewritten"], counts["added"], len(version.retired)))
        statuses = {key: value.capitalize() for key, value in text["statuses"].items()}
        header = (text["version"], text["bank"], text["gate"], text["count"], statuses["kept"], statuses["rewritten"],
                  statuses["added"], statuses["retired"])
        parts.append(f"### {code_span(run)}\n\n" + markdown_table(header, rows, "lllrrrrr"))
        if history.notes:
            parts.append(f"{text['notes']}: " + "; ".join(code_span(note) for note in history.notes) + "\n")
    return "\n".join(parts)


def library_markdown(libraries: Sequence[tuple[str, Path]], language: str) -> str:
    """The Skill1 libraries' growth per step and their admissions and evictions."""
    text = TEXT[language]
    if not libraries:
        return text["skill1_none"] + "\n"
    # deferred: the Skill1 pipeline is heavy to import
    from intraskill.analysis.skill1 import read_skill1_round

    parts = []
    for run, root in libraries:
        record = read_skill1_round(root)
        growth = record.library_by_step()
        rows = [(int(r.step), int(r.size), int(r.admissions), int(r.evictions), int(r.updates),
                 "—" if math.isnan(r.mean_utility) else f"{r.mean_utility:.3f}") for r in growth.itertuples()]
        header = (text["step"], text["size"], text["admissions"], text["evictions"], text["updates"], text["mean_u"])
        parts.append(f"### {text['library']}: {code_span(run)}\n\n**{text['growth']}**\n\n"
                     + markdown_table(header, rows, "rrrrrr"))
        descriptions: dict[int, str] = {}
        events = []
        for row in record.history.sort_values("seq").to_dict("records"):
            skill_id = int(row["skill_id"])
            if row["event"] == "admit":
                descriptions[skill_id] = str((row["skill"] or {}).get("desc", ""))
            if row["event"] in ("admit", "evict"):
                utility = row["utility"]
                events.append((int(row["step"]), text[row["event"]], skill_id, descriptions.get(skill_id, ""),
                               "—" if utility is None or utility != utility else f"{float(utility):.3f}"))
        header = (text["step"], text["event"], text["skill"], text["desc"], text["utility"])
        parts.append(f"**{text['events']}**\n\n" + markdown_table(header, events, "rlrlr"))
    return "\n".join(parts)


def find_skill1_rounds(root: Path) -> list[Path]:
    """Skill1 round directories at or under ``root`` (those holding a library snapshot), in order."""
    return sorted(path.parent.parent for path in root.rglob("library/snapshot.json") if path.is_file())


def write_skill_pages(runs: Sequence[tuple[str, Path]], out_dir: Path, to_data: str) -> SkillPages:
    """The version pages and the skills page's Markdown of ``runs`` (``(name, run directory)`` pairs) into
    ``out_dir`` (the report's data folder); ``to_data``: from a report page to the data folder in the site."""
    def named(name: str, run_dir: Path, path: Path) -> str:
        relative = path.relative_to(run_dir).as_posix()
        return name if relative == "." else f"{name}/{relative}"

    histories = [(named(name, run_dir, path), read_skill_versions(path))
                 for name, run_dir in runs for path in find_coevolve_runs(run_dir)]
    libraries = [(named(name, run_dir, path), path) for name, run_dir in runs for path in find_skill1_rounds(run_dir)]
    out_dir.mkdir(parents=True, exist_ok=True)
    pages, links = [], {}
    for run, history in histories:
        for position, version in enumerate(history.versions):
            for language in TEXT:
                path = version_path(run, version, language)
                (out_dir / path).parent.mkdir(parents=True, exist_ok=True)
                (out_dir / path).write_text(version_page(run, history, position, language), encoding="utf-8")
                pages.append(path)
            for chunk in version.chunks:
                links.setdefault(chunk.content_sha256, f"{SKILLS_DIR}/{run}/{version.label}#chunk-{chunk.skill_id}")
    for language in TEXT:
        (out_dir / f"skills.{language}.md").write_text(versions_markdown(histories, language, to_data),
                                                       encoding="utf-8")
        (out_dir / f"skill1-library.{language}.md").write_text(library_markdown(libraries, language),
                                                               encoding="utf-8")
    return SkillPages(pages, links)
