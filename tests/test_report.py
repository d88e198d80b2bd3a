"""The bilingual report: _quarto.yml structure, page twins, embeds that resolve to labelled notebook
cells, the static renderer, and a headless-Chromium check of a quick build served over real HTTP."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from typing import Iterator

import nbformat
import pandas as pd
import pytest
import yaml

from intraskill.agent.traces import read_traces
from intraskill.analysis.episodes import read_trace_file
from intraskill.jsonl import read_jsonl
from intraskill.plots.tables import format_table
from intraskill.report.build import (
    CJK_FONT_HINT,
    MANIFEST_PATH,
    NotebookRun,
    NotebookSpec,
    build_report,
    check_parameters,
    execute_notebooks,
    input_files,
    load_manifest,
    require_cjk_font,
    strip_progress,
    write_build_record,
)
from intraskill.report.mathml import tex_to_mathml
from intraskill.report.pagecheck import page_problems
from intraskill.report.site import (
    cell_labels,
    export_notebooks,
    find_embeds,
    front_matter,
    load_site_config,
    render_static_site,
    stamp_quarto_site,
    twin_page,
)

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ("method", "protocol", "results", "runs", "controls", "experiment", "skill1", "behaviour", "optimization", "reproduce", "data", "browser", "skills")
CJK = re.compile(r"[\u4e00-\u9fff]")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chapter_pages() -> list[str]:
    return [f"report/{lang}/{chapter}.qmd" for lang in ("en", "zh") for chapter in CHAPTERS]


def test_quarto_project_structure() -> None:
    config = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))
    assert config["project"]["type"] == "website"
    assert config["project"]["output-dir"] == "_site"
    menus = {item["text"]: item["menu"] for item in config["website"]["navbar"]["left"] if "menu" in item}
    assert menus == {
        "English": [f"report/en/{c}.qmd" for c in CHAPTERS],
        "中文": [f"report/zh/{c}.qmd" for c in CHAPTERS],
    }
    site = load_site_config(ROOT)
    assert set(_chapter_pages()) <= set(site.pages) and site.landing == "report/index.qmd"
    include = config["format"]["html"]["include-after-body"]
    assert (ROOT / include).is_file()


def test_every_listed_page_exists_and_has_a_twin() -> None:
    site = load_site_config(ROOT)
    listed = set(site.pages) | {page for menu in site.menus for page in menu.pages} | {site.landing}
    assert all((ROOT / page).is_file() for page in listed), sorted(p for p in listed if not (ROOT / p).is_file())
    on_disk = {p.relative_to(ROOT).as_posix() for p in (ROOT / "report").glob("*/*.qmd")}
    assert on_disk == set(_chapter_pages())
    for page in on_disk:
        assert twin_page(page) in on_disk and twin_page(page) != page


def test_page_languages_and_titles() -> None:
    for page in _chapter_pages():
        meta, body = front_matter((ROOT / page).read_text(encoding="utf-8"))
        assert meta["lang"] == page.split("/")[1] and meta["title"]
        chinese = len(CJK.findall(body))
        if "/zh/" in page:
            assert chinese > 150, f"{page} should be written in Chinese ({chinese} CJK characters)"
        else:
            assert chinese == 0, f"{page} should be English"
        # twins share their section anchors so the language switch lands on the same section
        ids = re.findall(r"\{#([\w-]+)\}", body)
        twin_ids = re.findall(r"\{#([\w-]+)\}", (ROOT / twin_page(page)).read_text(encoding="utf-8"))
        assert ids and ids == twin_ids, page


ZH_ARGUMENT = re.compile(r"""[(,=]\s*["']zh["']\s*[,)]""")
"""``"zh"`` passed as an argument (``language="zh"``, ``view("zh")``), not a dict key or subscript."""


def test_embeds_point_at_manifest_notebooks_and_existing_labels() -> None:
    """Every embed resolves to a labelled cell of a manifest notebook, and a page embeds only the cells of its own
    language: a Chinese page shows no English table, sentence or figure."""
    manifest = {spec.name for spec in load_manifest(ROOT / MANIFEST_PATH).notebooks}
    embeds = [(page, path, label) for page in _chapter_pages()
              for path, label in find_embeds((ROOT / page).read_text(encoding="utf-8"))]
    assert len(embeds) >= 20
    for page, path, label in embeds:
        resolved = (ROOT / page).parent / path
        assert resolved.resolve().parent == (ROOT / "runs" / "report" / "notebooks").resolve(), (page, path)
        name = PurePosixPath(path).stem
        assert name in manifest, f"{page}: {name} is not in {MANIFEST_PATH}"
        source = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        assert label in cell_labels(source), f"{page}: no cell labelled {label!r} in notebooks/{name}.ipynb"
        language = page.split("/")[1]
        assert label.endswith(f"-{language}"), f"{page} embeds {label}, not its {language} cell (label-{language})"
        # a Chinese cell draws its figure, table or sentence in Chinese; an English cell never does
        code = "".join(line for line in cell_labels(source)[label]["source"].splitlines(keepends=True)
                       if not line.startswith("#|"))
        assert bool(ZH_ARGUMENT.search(code)) == (language == "zh"), f"notebooks/{name}.ipynb#{label}: language"
        caption = re.search(r"^#\|\s*fig-cap:(.*)$", cell_labels(source)[label]["source"], re.MULTILINE)
        assert caption is None or bool(CJK.search(caption.group(1))) == (language == "zh"), f"{name}#{label}: caption"


def test_manifest_and_parameter_validation(tmp_path: Path) -> None:
    specs = load_manifest(ROOT / MANIFEST_PATH).notebooks
    release = next(spec for spec in specs if spec.name == "06_release_reanalysis")
    assert release.overrides(quick=True) == {"samples": 500} and release.overrides(quick=False) == {}
    check_parameters(ROOT / "notebooks" / "06_release_reanalysis.ipynb", release.overrides(quick=True))
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['sample'\]"):
        check_parameters(ROOT / "notebooks" / "06_release_reanalysis.ipynb", {"sample": 5})
    bad = tmp_path / "m.yaml"
    bad.write_text("notebooks:\n  - name: a\n    quick: 5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notebooks\[0\]\.quick must be a mapping"):
        load_manifest(bad)
    bad.write_text("inputs: runs/x\nnotebooks:\n  - name: a\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"inputs must be a list of glob patterns"):
        load_manifest(bad)
    bad.write_text("notebooks:\n  - name: a\n    inputs: [1]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notebooks\[0\]\.inputs must be a list"):
        load_manifest(bad)
    manifest = load_manifest(ROOT / MANIFEST_PATH)
    assert "runs/*/round-*" in manifest.data and "intraskill/**/*.py" in manifest.inputs
    for pattern in [*manifest.inputs, *release.inputs]:  # every shared input pattern matches files
        assert input_files(ROOT, [pattern]), pattern


def _tiny_project(root: Path) -> Path:
    """A two-language project whose pages embed a hand-made executed notebook (no kernel needed)."""
    (root / "report" / "en").mkdir(parents=True)
    (root / "report" / "zh").mkdir(parents=True)
    (root / "_quarto.yml").write_text(yaml.safe_dump({
        "project": {"type": "website", "output-dir": "_site", "render": ["report/index.qmd", "report/*/*.qmd"]},
        "website": {"title": "T", "navbar": {"left": [
            {"href": "report/index.qmd", "text": "T"},
            {"text": "English", "menu": ["report/en/a.qmd"]},
            {"text": "中文", "menu": ["report/zh/a.qmd"]}]}},
    }, allow_unicode=True), encoding="utf-8")
    (root / "report" / "index.qmd").write_text("---\ntitle: Home\n---\n\n[A](en/a.qmd)\n", encoding="utf-8")
    embed = "{{< embed ../../runs/report/notebooks/nb.ipynb#fig-x >}}"
    missing = "{{< embed ../../runs/report/notebooks/absent.ipynb#fig-y >}}"
    (root / "report" / "en" / "a.qmd").write_text(
        f"---\ntitle: A\nlang: en\n---\n\n## Part {{#sec-p}}\n\nSee [twin](../zh/a.qmd#sec-p).\n\n{embed}\n\n{missing}\n",
        encoding="utf-8")
    (root / "report" / "zh" / "a.qmd").write_text(
        f"---\ntitle: 甲\nlang: zh\n---\n\n## 部分 {{#sec-p}}\n\n中文第一行\n第二行。\n\n{embed}\n", encoding="utf-8")
    executed = root / "runs" / "report" / "notebooks"
    executed.mkdir(parents=True)
    png = base64.b64encode(PNG_SIGNATURE + b"fake").decode()
    cell = nbformat.v4.new_code_cell("#| label: fig-x\nfig", outputs=[
        nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
        nbformat.v4.new_output("execute_result", data={"image/png": png, "text/plain": "<Figure>"}, execution_count=1),
    ])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), executed / "nb.ipynb")
    return executed


def test_static_renderer_resolves_embeds(tmp_path: Path) -> None:
    executed = _tiny_project(tmp_path)
    pages = render_static_site(tmp_path, executed, tmp_path / "_site")
    assert sorted(p.relative_to(tmp_path / "_site").as_posix() for p in pages) == [
        "notebooks/nb.html", "report/en/a.html", "report/index.html", "report/zh/a.html"]
    english = (tmp_path / "_site" / "report" / "en" / "a.html").read_text(encoding="utf-8")
    assert f'src="data:image/png;base64,{base64.b64encode(PNG_SIGNATURE + b"fake").decode()}"' in english
    assert "a warning" not in english and "&lt;Figure&gt;" not in english
    assert 'id="sec-p"' in english and 'href="../zh/a.html#sec-p"' in english
    assert 'class="lang-switch" href="../zh/a.html"' in english
    assert "absent" in english and "not executed" in english
    chinese = (tmp_path / "_site" / "report" / "zh" / "a.html").read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in chinese and "中文第一行第二行。" in chinese
    assert 'class="lang-switch" href="../en/a.html"' in chinese
    assert (tmp_path / "_site" / "notebooks" / "nb.html").is_file()
    assert "report/index.html" in (tmp_path / "_site" / "index.html").read_text(encoding="utf-8")


def test_static_renderer_math_and_includes(tmp_path: Path) -> None:
    executed = _tiny_project(tmp_path)
    data = tmp_path / "elsewhere" / "data"
    data.mkdir(parents=True)
    (data / "runs.en.md").write_text("| Run | Episodes |\n|---|---|\n| `r` | 4 |\n", encoding="utf-8")
    page = tmp_path / "report" / "en" / "a.qmd"
    page.write_text(page.read_text(encoding="utf-8") + "\nWith $S_0$ and `$HOME`.\n\n"
                    "{{< include ../../runs/report/data/runs.en.md >}}\n\n"
                    "```{=html}\n<div id=\"raw\" data-x=\"1\"></div>\n```\n\n```python\n<b>\n```\n", encoding="utf-8")
    render_static_site(tmp_path, executed, tmp_path / "_site", data)
    english = (tmp_path / "_site" / "report" / "en" / "a.html").read_text(encoding="utf-8")
    assert "<msub><mi>S</mi><mn>0</mn></msub></math>" in english and "$S_0$" not in english
    assert "<code>$HOME</code>" in english and "<td><code>r</code></td>" in english
    assert '<div id="raw" data-x="1"></div>' in english and "&lt;b&gt;" in english  # raw HTML; code escaped
    page.write_text(page.read_text(encoding="utf-8") + "\n$\\frac{a}{b}$\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"unsupported command \\frac"):
        render_static_site(tmp_path, executed, tmp_path / "_site", data)


def test_page_math_is_in_the_static_subset() -> None:
    formulas = [tex for page in _chapter_pages()
                for tex in re.findall(r"\$([^$\n]+)\$", (ROOT / page).read_text(encoding="utf-8"))]
    assert "S_0" in formulas and "S_T" in formulas
    assert all(tex_to_mathml(tex).startswith("<math") for tex in formulas)


TQDM_STDERR = (
    "/venv/lib/tqdm/auto.py:21: TqdmWarning: IProgress not found. Please update jupyter and ipywidgets.\n"
    "  from .autonotebook import tqdm as notebook_tqdm\n"
    "\rgate:   0%|          | 0/20 [00:00<?, ?it/s]\rgate:  45%|####5     | 9/20 [00:01<00:01,  8.0it/s]"
    "\rgate: 100%|##########| 20/20 [00:02<00:00,  9.1it/s]\n"
    "kept: a real warning\n"
)


def test_strip_progress_keeps_real_output() -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("stream", name="stderr", text=TQDM_STDERR),
        nbformat.v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "m"},
                                                     "text/plain": "HBox(children=(...))"}),
        nbformat.v4.new_output("stream", name="stderr", text="\r 50%|#####     | 1/2 [00:00<00:00]\r"
                                                             "\rrollout: 12it [00:03,  3.90it/s]\n"),
        nbformat.v4.new_output("stream", name="stdout", text="result: 42\n"),
    ])])
    assert strip_progress(notebook) == 3
    outputs = notebook["cells"][0]["outputs"]
    assert [o.get("text") for o in outputs] == ["kept: a real warning\n", "result: 42\n"]


@pytest.mark.e2e
def test_execution_cache_and_progress_stripping(tmp_path: Path) -> None:
    """A real kernel runs a notebook with a tqdm bar once; unchanged notebook, parameters and inputs re-use
    it (inputs as the run left them: the notebook writes one), a changed input runs it again; the executed
    copy carries no progress output."""
    notebooks, out = tmp_path / "notebooks", tmp_path / "executed"
    notebooks.mkdir()
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "a.txt").write_text("1", encoding="utf-8")
    written = tmp_path / "inputs" / "written.txt"
    parameters = nbformat.v4.new_code_cell(f"n = 3\nwritten = {str(written)!r}", metadata={"tags": ["parameters"]})
    body = nbformat.v4.new_code_cell("from pathlib import Path\nfrom tqdm.auto import tqdm\nfor _ in tqdm(range(n)):\n"
                                     "    pass\nPath(written).write_text(str(n))\nprint('done', n)")
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, body], metadata=kernel), notebooks / "nb.ipynb")
    spec = load_manifest_text(tmp_path, "notebooks:\n  - name: nb\n    inputs: [inputs/*.txt]\n").notebooks

    def run(**kwargs: object) -> str:
        [result] = execute_notebooks(spec, notebooks_dir=notebooks, out_dir=out, root=tmp_path,
                                     echo=lambda line: None, **kwargs)
        return result.status

    assert run() == "executed"
    executed = nbformat.read(out / "nb.ipynb", as_version=4)
    texts = "".join(o.get("text", "") for cell in executed.cells for o in cell.get("outputs", []))
    assert "done 3" in texts and "it/s" not in texts and "IProgress" not in texts
    assert run() == "cached"
    (tmp_path / "inputs" / "a.txt").write_text("2", encoding="utf-8")
    assert run() == "executed"


def load_manifest_text(root: Path, text: str):
    path = root / "notebooks.yaml"
    path.write_text(text, encoding="utf-8")
    return load_manifest(path)


def test_run_directories_named_by_parameters_are_records(tmp_path: Path) -> None:
    """A notebook's records include the run directories its parameters name (04's coevolve_dir, 07's out_dir) once
    they hold a file; a parameter set's name, an absolute path or an empty directory is none."""
    run = tmp_path / "runs" / "report-ci" / "co-evolve"
    run.mkdir(parents=True)
    (tmp_path / "runs" / "empty").mkdir()
    parameters = {"params_name": "ci", "coevolve_dir": "runs/report-ci/co-evolve", "out_dir": "runs/empty",
                  "run_root": str(tmp_path / "runs"), "limit": 6}
    assert NotebookSpec.parameter_dirs(parameters, tmp_path) == []
    (run / "co_evolve_summary.json").write_text("{}", encoding="utf-8")
    assert NotebookSpec.parameter_dirs(parameters, tmp_path) == ["runs/report-ci/co-evolve"]


@pytest.mark.e2e
def test_records_rerun_progress_and_timings(tmp_path: Path) -> None:
    """An entry that analyses records is not executed while none exists (a note names --rerun), runs with its
    rerun parameters when re-run, and analyses the records once they exist; the build says what it runs, how
    long it took last time, and each cell as it starts with the time elapsed."""
    notebooks, out = tmp_path / "notebooks", tmp_path / "executed"
    notebooks.mkdir()
    parameters = nbformat.v4.new_code_cell("n = 3", metadata={"tags": ["parameters"]})
    body = nbformat.v4.new_code_cell("#| label: tbl-n\nprint('n is', n)")
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, body], metadata=kernel), notebooks / "nb.ipynb")
    spec = load_manifest_text(tmp_path, "notebooks:\n  - name: nb\n    records: [records/*, runs/nb]\n"
                                        "    rerun: {n: 5}\n    estimate: a second\n").notebooks

    def run(**kwargs: object) -> tuple[NotebookRun, list[str]]:
        lines: list[str] = []
        [result] = execute_notebooks(spec, notebooks_dir=notebooks, out_dir=out, root=tmp_path, echo=lines.append,
                                     **kwargs)
        return result, lines

    (tmp_path / "records" / "empty").mkdir(parents=True)  # a directory without a file holds no records
    result, lines = run()
    assert result.status == "no-records" and not (out / "nb.ipynb").exists()
    assert "intraskill report build --rerun nb" in lines[0]
    result, lines = run(rerun=["nb"])
    assert result.status == "executed" and result.records == ()
    assert lines[0].startswith("executing nb (full; n=5)") and "about a second on 2 CPU cores" in lines[0]
    assert any(re.fullmatch(r"  nb · cell 3/3 \(tbl-n\) · \d+ s elapsed", line) for line in lines), lines
    (tmp_path / "records" / "shipped").mkdir()
    (tmp_path / "records" / "shipped" / "tasks.jsonl").write_text("{}\n", encoding="utf-8")
    result, lines = run()
    assert result.status == "executed" and result.records == ("records/shipped",)
    assert "last execution here: " in lines[0] and "n=3" not in lines[0]
    texts = "".join(o.get("text", "") for c in nbformat.read(out / "nb.ipynb", as_version=4).cells
                    for o in c.get("outputs", []))
    assert "n is 3" in texts
    assert [r["mode"] for r in read_jsonl(out / "timings.jsonl")] == ["full", "full"]


def test_footer_names_commit_mode_records_and_smoke_builds(tmp_path: Path) -> None:
    """Every page's footer names the build's commit, date and mode and the records its notebooks read; a page fed
    by a quick notebook carries the smoke-build banner in its language (a notebook page in both); a notebook without
    records is said so once per page, in each language."""
    executed = _tiny_project(tmp_path)
    runs = [NotebookRun("nb", "executed", None, 1.0, "ok", "quick", ("data/results/x/controls", "runs/x")),
            NotebookRun("absent", "no-records", None, 0.0, "none")]
    record = write_build_record(tmp_path / "runs" / "report", tmp_path, runs, "quick")
    assert json.loads((tmp_path / "runs" / "report" / "build.json").read_text())["notebooks"]["absent"]["status"] \
        == "no-records"
    render_static_site(tmp_path, executed, tmp_path / "_site", record=record)
    english = (tmp_path / "_site" / "report" / "en" / "a.html").read_text(encoding="utf-8")
    chinese = (tmp_path / "_site" / "report" / "zh" / "a.html").read_text(encoding="utf-8")
    landing = (tmp_path / "_site" / "report" / "index.html").read_text(encoding="utf-8")
    assert "Smoke build" in english and "smoke (--quick) build" in english
    assert "<code>nb</code> ran with their quick parameters" in english and "<code>nb</code> 以快速参数运行" in chinese
    assert "<code>data/results/x/controls</code> (shipped), <code>runs/x</code> (your run)" in english
    assert "No records of this experiment exist yet" in english and english.count("no-records") == 1
    assert "冒烟构建" in chinese and "随包发布" in chinese and "Smoke build" not in chinese
    assert "Smoke build" not in landing and "no experiment records" in landing and "无实验记录" in landing
    assert record["mode"] == "quick" and "Built " in english and "构建于" in chinese
    # the notebook page of a quick notebook says so too, in both languages, with the same provenance
    notebook = (tmp_path / "_site" / "notebooks" / "nb.html").read_text(encoding="utf-8")
    assert re.search(r'<main[^>]*><div class="smoke-build">Smoke build · 冒烟构建', notebook)
    assert "smoke (--quick) build" in notebook and "冒烟（--quick）构建" in notebook
    assert "<code>data/results/x/controls</code> (shipped)" in notebook and "随包发布" in notebook
    # the Quarto render gets the same banner and provenance line (its pages in Quarto's shape: a <main> element)
    quarto = tmp_path / "_quarto_site"
    for page in ("report/index.html", "report/en/a.html", "report/zh/a.html"):
        (quarto / page).parent.mkdir(parents=True, exist_ok=True)
        (quarto / page).write_text('<html><body><main class="content" id="quarto-document-content"><h1>A</h1>'
                                   '</main><footer class="footer"></footer></body></html>', encoding="utf-8")
    assert len(stamp_quarto_site(tmp_path, quarto, record)) == 3
    stamped = {page: (quarto / "report" / page).read_text(encoding="utf-8") for page in ("en/a.html", "index.html")}
    for static, page in ((english, "en/a.html"), (landing, "index.html")):
        line = re.search(r'<p class="provenance">.*?</p>', static).group(0)
        assert line in stamped[page] and stamped[page].index(line) < stamped[page].index("</main>")
    assert re.search(r'<main [^>]*><div class="smoke-build">Smoke build', stamped["en/a.html"])
    assert "smoke-build" not in stamped["index.html"]
    (quarto / "report" / "index.html").write_text("<html><body>no main</body></html>", encoding="utf-8")
    with pytest.raises(ValueError, match="no <main> element"):
        stamp_quarto_site(tmp_path, quarto, record)


def test_build_fails_on_a_bad_page_with_one_line_per_problem(tmp_path: Path) -> None:
    """`intraskill report build` checks every page it writes, report and notebook pages alike: a planted empty
    section and a dict repr fail the build, each problem on one line naming its page; --no-check builds anyway."""
    from typer.testing import CliRunner

    from intraskill.cli import app

    executed = _tiny_project(tmp_path)
    (tmp_path / MANIFEST_PATH).write_text("notebooks:\n  - name: nb\n", encoding="utf-8")
    clean = ["report", "build", "--root", str(tmp_path), "--static", "--no-execute"]
    built = CliRunner().invoke(app, clean)
    assert built.exit_code == 0 and "page check: 0 problem(s)" in built.stdout and "page problem" not in built.stderr
    page = tmp_path / "report" / "en" / "a.qmd"
    page.write_text(page.read_text(encoding="utf-8") + "\n## Empty {#sec-e}\n\n## Raw {#sec-r}\n\n{{< embed "
                    "../../runs/report/notebooks/nb.ipynb#tbl-raw >}}\n", encoding="utf-8")
    notebook = nbformat.read(executed / "nb.ipynb", as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("#| label: tbl-raw\nsettings", outputs=[nbformat.v4.new_output(
        "execute_result", data={"text/plain": "{'checkpoint': 'params/x'}"}, execution_count=2)]))
    nbformat.write(notebook, executed / "nb.ipynb")
    failed = CliRunner().invoke(app, clean)
    assert failed.exit_code == 1 and "page check: 4 problem(s)" in failed.stdout
    assert [line for line in failed.stderr.splitlines() if line.startswith("page problem: ")] == [
        "page problem: report/en/a.html: empty section: 'Empty'",
        "page problem: report/en/a.html: Python repr: \"{'checkpoint':\"",
        "page problem: notebooks/nb.html: Python repr: \"{'checkpoint':\"",
        "page problem: notebooks/nb.html: bare value: \"{'checkpoint': 'params/x'}\""]
    assert "4 problem(s) on 2 page(s)" in failed.stderr and "--no-check" in failed.stderr
    unchecked = CliRunner().invoke(app, [*clean, "--no-check"])
    assert unchecked.exit_code == 0 and "page check skipped (--no-check)" in unchecked.stdout


def test_quarto_build_checks_every_page_quarto_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Quarto the check reads every page the render wrote, not only the report pages it stamps: a notebook
    preview that loads require.js from a CDN and shows a dict repr fails the build, and so does an English table on
    a Chinese page; Quarto's site_libs hold no pages."""
    _tiny_project(tmp_path)
    (tmp_path / MANIFEST_PATH).write_text("notebooks:\n  - name: nb\n", encoding="utf-8")
    site = tmp_path / "_site"
    english_table = format_table(pd.DataFrame({"success_rate": [0.5]}), "en", percent=["success_rate"]).to_html()
    written = {
        "report/index.html": '<html lang="en"><body><main><h1>Home</h1><p>Start here.</p></main></body></html>',
        "report/en/a.html": '<html lang="en"><body><main><h2>Part</h2><p>Fine.</p></main></body></html>',
        "report/zh/a.html": f'<html lang="zh"><body><main><h2>部分</h2>{english_table}</main></body></html>',
        "runs/report/notebooks/nb-preview.html": (
            '<html lang="en"><head><script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js">'
            "</script></head><body><main><pre>{'checkpoint': 'params/x'}</pre></main></body></html>"),
        "site_libs/quarto-nav/skip.html": "<html><body><pre>{'not': 'a page'}</pre></body></html>",
    }

    def render(root: Path) -> None:
        for page, text in written.items():
            (site / page).parent.mkdir(parents=True, exist_ok=True)
            (site / page).write_text(text, encoding="utf-8")

    monkeypatch.setattr("intraskill.report.build.render_with_quarto", render)
    result = build_report(tmp_path, use_quarto=True, execute=False, echo=lambda line: None)
    assert result.renderer == "quarto" and not result.ok
    assert sorted(Path(page).relative_to(site).as_posix() for page in result.pages) == sorted(
        page for page in written if not page.startswith("site_libs/"))
    assert result.problems == {
        "report/zh/a.html": ["English table header on a Chinese page: 'Success'"],
        "runs/report/notebooks/nb-preview.html": [
            "Python repr: \"{'checkpoint':\"",
            "loads from another host: 'https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js'"]}


def test_headline_prints_a_labelled_cell_and_the_notebook_path(tmp_path: Path) -> None:
    """`make round` ends with `intraskill report headline`: the round's val sentence and where the notebook is."""
    from typer.testing import CliRunner

    from intraskill.cli import app

    sentence = "Bare val success on 8 val tasks went from 10.0 % to 20.0 %: +10.0 points [+0.0, +25.0]"
    cell = nbformat.v4.new_code_cell("#| label: md-round-val-en\nMarkdown(text)", outputs=[nbformat.v4.new_output(
        "execute_result", data={"text/markdown": sentence, "text/plain": "<IPython.core.display.Markdown object>"},
        execution_count=1)])
    path = tmp_path / "02_train_round.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    printed = CliRunner().invoke(app, ["report", "headline", str(path), "--label", "md-round-val-en"])
    assert printed.exit_code == 0 and printed.stdout == f"{sentence}\nexecuted notebook: {path.resolve()}\n"
    wrong = CliRunner().invoke(app, ["report", "headline", str(path), "--label", "md-other"])
    assert wrong.exit_code == 1 and "no cell labelled 'md-other'" in wrong.output and "Traceback" not in wrong.output


def test_notebook_pages_load_nothing_from_a_cdn(tmp_path: Path) -> None:
    """A notebook page renders its math as MathML and a widget as its static output, with no script, style or
    font fetched from another host (no MathJax, require.js or widget manager)."""
    markdown = nbformat.v4.new_markdown_cell("# T\n\nThe bank $S_0$ and $\\rho_j \\le 1$.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    widget = nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2, "version_minor": 0},
        "text/plain": "static 42"})])
    sentence = nbformat.v4.new_code_cell("Markdown(s)", outputs=[nbformat.v4.new_output("execute_result", data={
        "text/markdown": "Iter80 + $S_T$ − Iter80 free", "text/plain": "<IPython.core.display.Markdown object>"},
        execution_count=1)])
    (tmp_path / "executed").mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[markdown, widget, sentence], metadata={"widgets": {"state": {}}}),
                   tmp_path / "executed" / "nb.ipynb")
    assert export_notebooks(tmp_path / "executed", tmp_path / "_site") == ["nb"]
    page = (tmp_path / "_site" / "notebooks" / "nb.html").read_text(encoding="utf-8")
    assert not re.findall(r'(?:src|href)="(?:https?:)?//', page)
    assert not re.search(r"mathjax|require\.js|html-manager", page, re.IGNORECASE)
    assert "<math" in page and "$S_0$" not in page and "static 42" in page and "<table" in page
    assert "$S_T$" not in page and "Iter80 + <math" in page and not page_problems(page)


def test_cjk_font_for_chinese_pages() -> None:
    """The Chinese pages' font is the packaged Noto Sans CJK SC, whatever the system has installed."""
    assert require_cjk_font(ROOT) == "Noto Sans CJK SC"
    assert "mplfonts" in CJK_FONT_HINT


def test_missing_font_package_names_its_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("intraskill.report.build.find_cjk_font", lambda: None)
    with pytest.raises(RuntimeError, match="mplfonts"):
        require_cjk_font(ROOT)


# --- end to end: quick build, real HTTP server, headless Chromium ---------------------------------------

def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.switch: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.sources.append(values.get("src") or "")
        if tag == "a" and "lang-switch" in (values.get("class") or ""):
            self.switch = values.get("href")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature of the base class
        return


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # the browser may drop a connection early (e.g. favicon); that is not a test failure


@pytest.fixture(scope="module")
def quick_site(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A quick static build over the tiny evaluation runs (``browser_runs``): its ``_site`` folder."""
    work = tmp_path_factory.mktemp("report")
    result = build_report(ROOT, run_dir=work / "run", site_dir=work / "_site", quick=True, use_quarto=False,
                          only=["06_release_reanalysis"], data_root=request.getfixturevalue("browser_runs"),
                          echo=lambda line: None)
    assert result.ok and result.renderer == "static"
    assert {run.name: run.status for run in result.notebooks}["06_release_reanalysis"] == "executed"
    assert result.data_runs == ["eval-expert", "eval-organism", "planted/co-evolve"]
    return work / "_site"


LOOKED_AT = ("report/index.html", *(f"report/{lang}/{page}.html" for lang in ("en", "zh")
                                    for page in ("results", "controls", "browser", "reproduce")),
             "notebooks/06_release_reanalysis.html")
"""The pages a reader opens first: the landing page, results, controls, the episode browser, reproduce, and a
notebook page."""


@pytest.mark.e2e
def test_pages_show_no_raw_tex_repr_traceback_or_empty_section(quick_site: Path) -> None:
    """The built pages as served (no browser needed): every section has content, no raw TeX, Python repr or
    traceback."""
    problems = {page: page_problems((quick_site / page).read_text(encoding="utf-8")) for page in LOOKED_AT}
    assert not {page: found for page, found in problems.items() if found}


@pytest.fixture(scope="module")
def served_site(quick_site: Path) -> Iterator[str]:
    """The quick build served on 127.0.0.1 (for headless Chromium)."""
    if _chromium() is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium); the browser check needs it")
    handler = functools.partial(_QuietHandler, directory=str(quick_site))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _dump_dom(url: str, profile: Path) -> str:
    command = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--dump-dom", url]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    return completed.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("language", ["en", "zh"])
def test_browser_renders_figures_and_language(served_site: str, tmp_path: Path, language: str) -> None:
    url = f"{served_site}/report/{language}/results.html"
    dom = _dump_dom(url, tmp_path / "profile")
    parser = _Images()
    parser.feed(dom)
    assert len(parser.sources) >= 4, "the results page embeds at least four figures"
    for source in parser.sources:
        if source.startswith("data:image/png;base64,"):
            assert base64.b64decode(source.split(",", 1)[1]).startswith(PNG_SIGNATURE)
        else:  # a file next to the page: must be served
            with urllib.request.urlopen(urllib.parse.urljoin(url, source)) as response:
                assert response.status == 200
    text = re.sub(r"<[^>]+>", " ", dom)
    if language == "zh":
        assert '<html lang="zh-CN">' in dom and "四条件测试" in text and len(CJK.findall(text)) > 200
    else:
        assert '<html lang="en">' in dom and "Four-condition test" in text
        assert not CJK.search(text.replace("中文", ""))
    assert parser.switch == f"../{'zh' if language == 'en' else 'en'}/results.html"
    with urllib.request.urlopen(urllib.parse.urljoin(url, parser.switch)) as response:
        assert response.status == 200


@pytest.mark.e2e
def test_browser_pages_after_their_scripts_ran(served_site: str, tmp_path: Path) -> None:
    """Headless Chromium opens the landing page, results, controls, episode browser, reproduce and a notebook
    page in both languages: after their scripts ran, no empty section, raw TeX, Python repr or traceback."""
    problems = {page: page_problems(_dump_dom(f"{served_site}/{page}", tmp_path / "profile")) for page in LOOKED_AT}
    assert not {page: found for page, found in problems.items() if found}


@pytest.mark.e2e
def test_browser_landing_page_is_bilingual(served_site: str, tmp_path: Path) -> None:
    with urllib.request.urlopen(f"{served_site}/index.html") as response:  # redirects to the landing page
        assert 'url=report/index.html"' in response.read().decode("utf-8")
    dom = _dump_dom(f"{served_site}/report/index.html", tmp_path / "profile")
    assert "本报告介绍" in dom and "This report documents" in dom
    assert 'href="en/method.html"' in dom and 'href="zh/method.html"' in dom


def test_every_manifest_entry_names_parameters_the_notebook_declares() -> None:
    for spec in load_manifest(ROOT / MANIFEST_PATH).notebooks:
        for quick in (False, True):
            for rerun in (False, True):
                check_parameters(ROOT / "notebooks" / f"{spec.name}.ipynb", spec.overrides(quick, rerun))


class _Links(HTMLParser):
    """Every link target and image source of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        target = values.get("href") if tag in ("a", "link") else values.get("src") if tag in ("img", "script") else None
        if target and not target.startswith(("data:", "#", "mailto:")):
            self.targets.append(target)


def _broken_targets(site: str, *start: str) -> list[str]:
    """Links, images, scripts and style sheets of the ``start`` pages (and of the site pages they link to) that
    do not load; targets off the site are not followed."""
    broken, pages, seen = [], list(start), set()
    while pages:
        url = pages.pop()
        with urllib.request.urlopen(url) as response:
            html_text = response.read().decode("utf-8")
        parser = _Links()
        parser.feed(html_text)
        for target in parser.targets:
            absolute = urllib.parse.urljoin(url, target).split("#")[0]
            if not absolute.startswith(site) or absolute in seen:
                continue
            seen.add(absolute)
            try:
                with urllib.request.urlopen(absolute) as response:
                    is_page = response.headers.get_content_type() == "text/html"
            except urllib.error.HTTPError as error:
                broken.append(f"{url} -> {target} ({error.code})")
                continue
            if is_page and "/report/" in absolute and url in start:
                pages.append(absolute)  # one level: the navbar reaches every page of the site
    return broken


@pytest.mark.e2e
def test_browser_episode_browser(served_site: str, browser_runs: Path) -> None:
    """The episode browser in headless Chromium: the English page loads the runs, filters, opens an episode
    and steps through it to the final reward (the private goal on that panel only), shows the same task of
    a second run side by side, switches to Chinese on the same episode; no JavaScript error, no failed
    request, and no broken link or image on the site."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    runs = browser_runs / "runs"
    organism = "eval-organism/val-s0/traces.jsonl"
    expected = {ident: read_trace_file(runs / ident, runs) for ident in
                ("eval-expert/val-s0/traces.jsonl", "eval-expert/val-none/traces.jsonl", organism)}
    traces = {trace.episode_id: trace for trace in read_traces(runs / organism)}
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = chromium.new_page()
        page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
        page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}")
                if message.type == "error" else None)
        page.on("response", lambda response: problems.append(f"HTTP {response.status}: {response.url}")
                if response.status >= 400 else None)
        page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url}"))
        page.goto(f"{served_site}/report/en/browser.html")
        page.wait_for_selector("tr.eb-row")
        options = page.eval_on_selector_all("#eb-run option", "nodes => nodes.map(n => n.value)")
        assert sorted(options) == sorted([*expected, "planted/co-evolve/round-000/gate/bare-val/traces.jsonl",
                                          "planted/co-evolve/round-000/gate/traces.jsonl"])

        def shown() -> int:
            return page.locator("tr.eb-row").count()

        page.select_option("#eb-run", organism)
        page.wait_for_function("document.querySelector('#eb-count').textContent.startsWith('4 of 4')")
        for failure in {row.failure for row in expected[organism].episodes}:
            page.select_option("#eb-failure", failure)
            assert shown() == sum(row.failure == failure for row in expected[organism].episodes)
        page.select_option("#eb-failure", "")
        longest = max(row.turns for row in expected[organism].episodes)
        page.fill("#eb-min-turns", str(longest))
        assert shown() == sum(row.turns == longest for row in expected[organism].episodes)
        page.fill("#eb-min-turns", "")
        target = expected[organism].episodes[2]
        page.fill("#eb-task", str(target.task_id))
        assert shown() == 1
        page.locator("tr.eb-row").first.click()
        trace = traces[target.episode_id]
        goal = trace.private_goal["instruction_text"]
        pane = page.locator("#eb-pane-a")
        for turn in trace.turns:
            page.wait_for_selector(f"#eb-pane-a .eb-turn[data-step='{turn.turn}']")
            assert pane.locator(".eb-action").inner_text() == (turn.action or "no action reached the store")
            assert goal not in pane.inner_text()
            page.click("#eb-pane-a .eb-step-next")
        final = pane.locator(".eb-final").inner_text()
        assert goal in final and "Private goal" in final and "r_success" in final
        page.select_option("#eb-success", "")
        page.fill("#eb-task", "")
        page.select_option("#eb-run", "eval-expert/val-s0/traces.jsonl")
        page.wait_for_selector("tr.eb-row")
        successes = sum(bool(row.success) for row in expected["eval-expert/val-s0/traces.jsonl"].episodes)
        page.select_option("#eb-success", "yes")
        assert shown() == successes
        page.select_option("#eb-compare", "eval-expert/val-none/traces.jsonl")
        page.locator("tr.eb-row").first.click()
        first = page.locator("tr.eb-row").first.get_attribute("data-index")
        chosen = expected["eval-expert/val-s0/traces.jsonl"].episodes[int(first)]
        page.wait_for_selector("#eb-pane-b .eb-turn")
        assert page.locator("#eb-pane-b h3").inner_text().startswith(f"task-{chosen.task_id:06d}")
        page.click("#eb-pane-a .eb-step-next")
        page.click("a.lang-switch")  # the Chinese twin, with the opened episode in the address
        page.wait_for_url("**/report/zh/browser.html#run=*")
        page.wait_for_selector("#eb-pane-a .eb-turn")
        assert page.get_attribute("html", "lang") == "zh-CN"
        assert page.locator("#eb-pane-a h3").inner_text().startswith(chosen.episode_id)
        assert "第 1 / " in page.locator("#eb-pane-a .eb-position").inner_text() and "回合" in page.inner_text("thead")
        # a gate arm: the chunks in the prompt by title, each linked to the version page that introduced it
        gate = "planted/co-evolve/round-000/gate/traces.jsonl"
        page.goto(f"{served_site}/report/en/browser.html#run={gate}&episode=0")
        page.wait_for_selector("#eb-pane-a .eb-turn")
        links = page.locator("#eb-pane-a a.eb-skill-page")
        titles = [link.inner_text() for link in links.all()]
        assert titles and set(titles) <= {"Read the profile", "Read the profile (rewritten)", "Pick the options",
                                          "Be polite"}
        links.first.click()
        page.wait_for_url("**/data/skills/planted/co-evolve/S*.en.html#chunk-*")
        anchor = page.url.split("#")[1]
        assert page.locator(f"section#{anchor} h3").inner_text() == titles[0]
        page.goto(f"{served_site}/report/zh/skills.html")
        page.click("text=S1")
        page.wait_for_url("**/S1.zh.html")
        assert page.get_attribute("html", "lang") == "zh-CN" and "改写" in page.inner_text("main")
        chromium.close()
    assert not problems, problems
    version_page = "data/skills/planted/co-evolve/S1.en.html"
    assert not _broken_targets(served_site, f"{served_site}/report/en/browser.html", f"{served_site}/{version_page}")


@pytest.mark.e2e
def test_browser_live_replay_ui(browser_runs: Path) -> None:
    """The same browser served live by the replay routes (as `intraskill env serve --runs` mounts them): it lists
    the runs folder's trace files, opens an episode and steps to its final reward, without a JavaScript error."""
    if _chromium() is None:
        pytest.skip("chromium is not on PATH (apt-get install chromium); the browser check needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    from fastapi import FastAPI

    from intraskill.report.replay import replay_router
    from intraskill.shop.service import serve_in_thread

    app = FastAPI()
    app.include_router(replay_router(browser_runs / "runs"))
    problems: list[str] = []
    with serve_in_thread(app) as running, sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        page = chromium.new_page()
        page.on("pageerror", lambda error: problems.append(f"JavaScript error: {error}"))
        page.on("response", lambda response: problems.append(f"HTTP {response.status}: {response.url}")
                if response.status >= 400 else None)
        page.goto(f"{running.base_url}/replay-ui?lang=zh")
        page.wait_for_selector("tr.eb-row")
        assert page.locator("#eb-run option").count() == 5 and "回合" in page.inner_text("thead")
        page.locator("tr.eb-row").first.click()
        page.wait_for_selector("#eb-pane-a .eb-turn")
        while page.locator("#eb-pane-a .eb-final").count() == 0:
            page.click("#eb-pane-a .eb-step-next")
        assert "私有目标" in page.locator("#eb-pane-a .eb-final").inner_text()
        chromium.close()
    assert not problems, problems


def test_every_notebook_has_a_home_on_a_page() -> None:
    """Every notebook is executed by the build and embedded on a page of each language."""
    manifest = {spec.name for spec in load_manifest(ROOT / MANIFEST_PATH).notebooks}
    notebooks = {path.stem for path in (ROOT / "notebooks").glob("*.ipynb")}
    assert notebooks <= manifest, sorted(notebooks - manifest)
    for language in ("en", "zh"):
        embedded = {PurePosixPath(path).stem for chapter in CHAPTERS
                    for path, _ in find_embeds((ROOT / "report" / language / f"{chapter}.qmd").read_text(encoding="utf-8"))}
        assert notebooks <= embedded, (language, sorted(notebooks - embedded))


def test_report_evaluations_never_run_stand_ins() -> None:
    """The report executes 04 and 05 on the co-evolve run 07 writes, stand-ins refused, in both builds."""
    specs = {spec.name: spec for spec in load_manifest(ROOT / MANIFEST_PATH).notebooks}
    order = list(specs)
    for name in ("04_evaluate", "05_behaviour"):
        assert order.index("07_co_evolve") < order.index(name), f"{name} must run after 07_co_evolve"
        for quick in (False, True):
            overrides = specs[name].overrides(quick)
            assert overrides["allow_stand_ins"] is False, (name, quick)
            expected = specs["07_co_evolve"].overrides(quick).get("out_dir", "runs/organism/co-evolve")
            assert overrides["coevolve_dir"] == expected, (name, quick)


def test_static_renderer_refuses_an_embedded_stand_in(tmp_path: Path) -> None:
    """Markdown outputs render (math included); a notebook whose outputs name a stand-in is not embedded."""
    executed = _tiny_project(tmp_path)
    note = nbformat.v4.new_code_cell("#| label: md-x\nMarkdown(note)", outputs=[nbformat.v4.new_output(
        "execute_result", data={"text/markdown": "**Evaluated:** with $S_0$.", "text/plain": "<Markdown>"},
        execution_count=1)])
    notebook = nbformat.read(executed / "nb.ipynb", as_version=4)
    notebook.cells.append(note)
    nbformat.write(notebook, executed / "nb.ipynb")
    page = tmp_path / "report" / "en" / "a.qmd"
    page.write_text(page.read_text(encoding="utf-8") + "\n{{< embed ../../runs/report/notebooks/nb.ipynb#md-x >}}\n",
                    encoding="utf-8")
    render_static_site(tmp_path, executed, tmp_path / "_site")
    english = (tmp_path / "_site" / "report" / "en" / "a.html").read_text(encoding="utf-8")
    assert "<strong>Evaluated:</strong> with <math" in english and "&lt;Markdown&gt;" not in english
    notebook.cells.insert(0, nbformat.v4.new_code_cell("print(setup)", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text='{"label": "trained (stand-in)"}\n')]))
    nbformat.write(notebook, executed / "nb.ipynb")
    with pytest.raises(ValueError, match=r"nb.ipynb#fig-x: the executed nb.ipynb evaluated a scripted stand-in"):
        render_static_site(tmp_path, executed, tmp_path / "_site")
