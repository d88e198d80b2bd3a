"""Run data never becomes markup in the report: crafted run folders, statuses and descriptions render as text."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pandas as pd

from intraskill.analysis.skill_versions import read_skill_versions
from intraskill.plots.tables import format_table
from intraskill.report.markdown import code_span, markdown_table, md_link, md_text
from intraskill.report.site import _Renderer
from intraskill.report.skill_pages import library_markdown, versions_markdown, write_skill_pages

CRAFTED = "run`<img src=x onerror=alert(2)>`"
"""The folder name of the issue's repro."""
HTML = "<img src=x onerror=alert(3)>"


def rendered(markdown: str) -> str:
    """``markdown`` as the static site renders it."""
    return _Renderer.create()(markdown)


def tags(page: str) -> set[str]:
    return {tag.lower() for tag in re.findall(r"<\s*([a-zA-Z]+)", page)}


def test_markdown_helpers_render_exactly_their_text() -> None:
    for value in (CRAFTED, HTML, "[x](javascript:alert(1))", "*a* _b_ `c` $d$ | e", "``` a\n<script>x</script>"):
        assert tags(rendered(md_text(value))) == {"p"}, value
        assert tags(rendered(code_span(value))) == {"p", "code"}, value
        assert tags(rendered(md_link(value, f"data/{value}/page.html"))) == {"p", "a"}, value
        assert 'href="javascript' not in rendered(md_link("x", value))
    assert "run`&lt;img src=x onerror=alert(2)&gt;`" in rendered(code_span(CRAFTED))
    table = rendered(markdown_table(["a", "b"], [[HTML, code_span("x|y")]], "ll"))
    assert tags(table) == {"table", "thead", "tbody", "tr", "th", "td", "code"} and "&lt;img" in table


def test_a_crafted_run_folder_and_gate_note_stay_text_on_every_skills_page(browser_runs: Path,
                                                                           tmp_path: Path) -> None:
    crafted = tmp_path / "runs" / CRAFTED
    shutil.copytree(browser_runs / "runs" / "planted", crafted)
    out = tmp_path / "data"
    pages = write_skill_pages([(CRAFTED, crafted)], out, "../../data")
    assert pages.pages
    for page in pages.pages:
        assert "<img" not in (out / page).read_text(encoding="utf-8"), page
    for language in ("en", "zh"):
        for name in (f"skills.{language}.md", f"skill1-library.{language}.md"):
            assert "img" not in tags(rendered((out / name).read_text(encoding="utf-8"))), name
    history = read_skill_versions(crafted / "co-evolve")
    noted = dataclasses.replace(history, notes=(f"round-001: {HTML}`{HTML}",))
    page = rendered(versions_markdown([(CRAFTED, noted)], "en", "../../data"))
    assert "img" not in tags(page) and "&lt;img src=x onerror=alert(3)&gt;" in page
    link = re.search(r'<a href="([^"]+S0\.en\.html)"', page).group(1)
    assert "%60%3Cimg" in link  # the crafted folder is percent-encoded in the link and still names the page
    assert library_markdown([], "en").startswith("No Skill1 round")


def test_a_table_cell_or_header_with_html_is_escaped() -> None:
    frame = pd.DataFrame({"gate_status": [HTML, "selected"], HTML: [1, 2]})
    page = format_table(frame).to_html()
    assert "<img" not in page and page.count("&lt;img src=x onerror=alert(3)&gt;") == 2
