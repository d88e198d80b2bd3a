"""The page check (intraskill.report.pagecheck) finds what a reader must never see, on report pages and on the
exported notebook pages, and passes what a notebook should show: a formatted table, a figure or a sentence."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from intraskill.plots.tables import format_table, settings_table
from intraskill.report.pagecheck import page_problems
from intraskill.report.site import export_notebooks


def _page(tmp_path: Path, *outputs: dict, source: str = "x", markdown: str = "The bank $S_0$.") -> str:
    """The exported page of a notebook: one Markdown cell, then one code cell per output."""
    cells = [nbformat.v4.new_markdown_cell(f"# Title\n\n## A section\n\n{markdown}")]
    cells += [nbformat.v4.new_code_cell(source, outputs=[output]) for output in outputs]
    executed = tmp_path / "executed"
    executed.mkdir(exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), executed / "nb.ipynb")
    export_notebooks(executed, tmp_path / "_site")
    return (tmp_path / "_site" / "notebooks" / "nb.html").read_text(encoding="utf-8")


def _stream(text: str) -> dict:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def _result(**data: str) -> dict:
    return nbformat.v4.new_output("execute_result", data=data, execution_count=1)


def _html(styler: object) -> dict:
    return _result(**{"text/html": styler.to_html(), "text/plain": "<pandas.io.formats.style.Styler object>"})


def test_what_a_notebook_should_show_passes(tmp_path: Path) -> None:
    """A settings table, a formatted table, a Markdown sentence with math, a quoted observation with its caption,
    a figure and a printed sentence; the code that makes them may hold dict literals and paths."""
    table = pd.DataFrame({"split": ["train", "val"], "tasks": [400.0, 40.0], "success": [0.5175, 0.25]})
    observation = "**The first page** the agent sees:\n\n```text\nWebShop [SEP] Search [SEP] price < $30\n```"
    page = _page(tmp_path,
                 _html(settings_table({"params": "/abs/params/ci.yaml", "round": {"q": 0.2, "rho": [0.2, 0.9]}})),
                 _html(format_table(table, percent=["success"])),
                 _result(**{"text/markdown": "The gate kept 3 of 5 chunks of $S_0$.", "text/plain": "<Markdown>"}),
                 _result(**{"text/markdown": observation, "text/plain": "<Markdown>"}),
                 _result(**{"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 640x480 with 1 Axes>"}),
                 _stream("2 steps in 14 s\n"),
                 source="settings = {'q': 0.2, \"path\": '/abs/x'}\nprint(json.dumps(settings))")
    assert page_problems(page) == []


FRAME = "unformatted DataFrame (show it with intraskill.plots.tables.format_table)"


@pytest.mark.parametrize(("output", "problems"), [
    (_stream("base_free {'episodes': 6} {'success': 0.5}\n"),
     ["Python repr: \"{'episodes':\"", "Python repr: \"{'success':\""]),
    (_stream(json.dumps({"checkpoint": "/x/model", "steps": 2}, indent=1) + "\n"), ["JSON dump: '{ \"checkpoint\":'"]),
    (_stream("/srv/runs/organism/warmstart\n"), ["bare path: '/srv/runs/organism/warmstart'"]),
    (_result(**{"text/plain": "PosixPath('runs/x')"}),
     ["Python repr: 'PosixPath('", "bare value: \"PosixPath('runs/x')\""]),
    (_result(**{"text/plain": "41"}), ["bare value: '41'"]),
    (_result(**{"text/html": pd.DataFrame({"tasks": [400.0]}).to_html(), "text/plain": "   tasks\n0  400.0"}), [FRAME]),
    (_stream("success np.float64(0.5)\n"), ["Python repr: 'np.float64('"]),
    (_result(**{"text/html": "<p>The bank $S_0$.</p>", "text/plain": "<HTML>"}), ["raw TeX: '$S_0$'"]),
    (nbformat.v4.new_output("error", ename="KeyError", evalue="'x'",
                            traceback=["Traceback (most recent call last)", "KeyError: 'x'"]),
     ["traceback: 'Traceback (most recent call last)'", "traceback: 'KeyError:'"]),
])
def test_each_bad_notebook_output_is_found(tmp_path: Path, output: dict, problems: list[str]) -> None:
    """One deliberately bad output per case: the check names it, and nothing else on the page."""
    assert page_problems(_page(tmp_path, output)) == problems


def test_notebook_markdown_is_read_as_prose(tmp_path: Path) -> None:
    """A Markdown cell's rendered text is checked (a code cell's source is not)."""
    page = _page(tmp_path, _stream("done\n"), markdown="Counts {'0->1': 39} and a \\$S_0\\$ left raw.")
    assert page_problems(page) == ["raw TeX: '$S_0$'", "Python repr: \"{'0->1':\""]


def test_report_page_problems() -> None:
    """A report page: an empty section, raw TeX in prose (not in code), a repr, a JSON dump in prose, a raw
    DataFrame and a traceback; a path in prose or code is not a notebook output and passes."""
    page = ("<main><h2>Empty</h2><h2>Full</h2><p>Bank $S_0$ and <code>$HOME</code> at runs/</p>"
            "<pre>{'a': 1}</pre><p>{\"a\": 1}</p>" + pd.DataFrame({"a": [1]}).to_html()
            + "<pre>ValueError: bad</pre></main>")
    assert page_problems(page) == ["empty section: 'Empty'", "raw TeX: '$S_0$'", "Python repr: \"{'a':\"",
                                   "JSON dump: '{\"a\":'", "traceback: 'ValueError:'", FRAME]


def test_files_from_another_host_are_found() -> None:
    """A script, style sheet, CSS import or image from another host is a problem (the site works offline); a link a
    reader follows, a canonical URL and a file of the site itself are not."""
    page = ('<html><head><script src="https://cdn.jsdelivr.net/npm/mathjax@3/tex-chtml.js"></script>'
            '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Lato">'
            '<link rel="canonical" href="https://example.org/report/">'
            '<script src="../assets/plotly.min.js"></script>'
            '<style>@import url("https://unpkg.com/x.css"); main{color:#222}</style></head>'
            '<body><main><p>See <a href="https://github.com/">the source</a>.</p>'
            '<img src="https://example.org/f.png" alt="f"><img src="data:image/png;base64,AAAA" alt="g"></main>'
            '</body></html>')
    assert page_problems(page) == [
        "loads from another host: 'https://cdn.jsdelivr.net/npm/mathjax@3/tex-chtml.js'",
        "loads from another host: '//fonts.googleapis.com/css?family=Lato'",
        "loads from another host: 'https://unpkg.com/x.css'",
        "loads from another host: 'https://example.org/f.png'"]


def _chinese_page(*parts: str, language: str = "zh-CN") -> str:
    return f'<html lang="{language}"><body><main><h2>结果</h2>{"".join(parts)}</main></body></html>'


def test_english_on_a_chinese_page_is_found() -> None:
    """On a Chinese page an English table header, paragraph or figure caption is a problem; a table formatted in
    Chinese, a header the same in both languages, a Chinese sentence naming English terms and a command are not. The
    same English page is fine."""
    frame = pd.DataFrame({"arm": ["warm start + S0"], "a": [1], "spearman": [0.5], "success_rate": [0.25]})
    english = format_table(frame, "en", percent=["success_rate"]).to_html()
    chinese = format_table(frame, "zh", percent=["success_rate"]).to_html()
    prose = ("<p>门控保留了 S0 的 3 个块（Gate A，m = 1）。</p><p><code>intraskill report build --quick</code></p>"
             "<figure><figcaption>各条件的成功率（左）</figcaption></figure>")
    assert page_problems(_chinese_page(chinese, prose)) == []
    wrong = ("<p>The gate kept 3 of 5 chunks.</p>"
             "<figure><figcaption>Success per condition (left)</figcaption></figure>")
    assert page_problems(_chinese_page(english, wrong)) == [
        "English table header on a Chinese page: 'Condition'",
        "English table header on a Chinese page: 'Success'",
        "English text on a Chinese page: 'The gate kept 3 of 5 chunks.'",
        "English text on a Chinese page: 'Success per condition (left)'"]
    assert page_problems(_chinese_page(english, wrong, language="en")) == []
