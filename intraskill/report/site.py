"""Static fallback renderer for the report when Quarto is not installed.

Reads the same sources Quarto would — ``_quarto.yml`` (pages, navbar menus) and the ``.qmd`` pages —
and writes a self-contained HTML site that works from ``file://``: the Markdown bodies go through
mistune (inline TeX as MathML, :mod:`intraskill.report.mathml`; raw ```` ```{=html} ```` blocks as they are, any other HTML
escaped, so run data included into a page cannot add markup), each ``{{< include path.md >}}`` by
the file's Markdown, each ``{{< embed path.ipynb#label >}}`` is replaced by the outputs of the executed notebook cell
carrying ``#| label: <label>`` (images as data URIs, tables as HTML), and every executed notebook is
exported with nbconvert to ``notebooks/<name>.html``. Headings keep explicit ``{#id}`` anchors, which the
English and Chinese twins share, so the language switch lands on the same section.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from dataclasses import dataclass
from glob import glob
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

import yaml

from intraskill.plots.interactive import PLOTLY_MARKER, PLOTLY_SCRIPT, plotly_script_path
from intraskill.report.mathml import tex_to_mathml

EMBED_PATTERN = re.compile(r"\{\{<\s*embed\s+(?P<path>[^\s#>]+\.ipynb)#(?P<label>[\w-]+)[^>]*>\}\}")
INCLUDE_PATTERN = re.compile(r"\{\{<\s*include\s+(?P<path>[^\s>]+)\s*>\}\}")
DATA_INCLUDE = "runs/report/data/"
"""Includes under this path are read from the build's data folder (the report run folder may be elsewhere)."""
LABEL_PATTERN = re.compile(r"^#\|\s*label:\s*(?P<label>[\w-]+)\s*$", re.MULTILINE)
HEADING_ID = re.compile(r"\s*\{#(?P<id>[\w-]+)\}\s*$")
ESCAPED_SHORTCODE = re.compile(r"\{\{</\*\s*(?P<body>.*?)\s*\*/>\}\}")
"""Quarto's escaped shortcode ``{{</* … */>}}``, shown literally as ``{{< … >}}``."""
CJK_LINE_BREAK = re.compile(r"(?<=[\u3000-\u9fff\uff00-\uffef])\n(?=[\u3000-\u9fff\uff00-\uffef])")
"""A source line break between two CJK characters, which joins without a space (pandoc's
``east_asian_line_breaks``)."""
RAW_HTML_INFO = "{=html}"
"""Info string of a raw HTML block (pandoc's raw attribute), passed through unchanged as Quarto does."""
FRONT_MATTER = re.compile(r"\A---\n(?P<yaml>.*?)\n---\n", re.DOTALL)
LANGUAGE_DIRS = {"en": "en", "zh": "zh"}
SWITCH_TEXT = {"en": "中文", "zh": "English"}
"""Text of the language-switch link on a page of the given language (it names the other language)."""
STYLE = """
body{margin:0;font-family:system-ui,"Noto Sans CJK SC","Noto Sans SC","Source Han Sans SC",sans-serif;
color:#222;line-height:1.6}
nav.navbar{display:flex;flex-wrap:wrap;gap:.2rem 1rem;align-items:center;padding:.6rem 1.2rem;
background:#1b3a6b}
nav.navbar a{color:#fff;text-decoration:none}nav.navbar a.active{text-decoration:underline}
nav.navbar .brand{font-weight:600;margin-right:1rem}nav.navbar .lang-switch{margin-left:auto;
border:1px solid #fff;border-radius:4px;padding:0 .5rem}
main{max-width:60rem;margin:0 auto;padding:1rem 1.5rem 3rem}
table{border-collapse:collapse;font-size:.85rem;margin:1rem 0;display:block;width:max-content;max-width:100%;
overflow-x:auto}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:right}th{background:#f3f3f3;white-space:normal}
figure.embed{overflow-x:auto}math{font-size:1.05em}
img{max-width:100%;height:auto}figure.embed{margin:1rem 0}pre{background:#f6f6f6;padding:.5rem;
overflow-x:auto}.embed-missing{border-left:4px solid #dd8452;background:#fff6ee;padding:.5rem 1rem}
footer{max-width:60rem;margin:0 auto;padding:1rem 1.5rem;font-size:.8rem;color:#666;
border-top:1px solid #ddd}
"""
STAMP_STYLE = (".smoke-build{border-left:4px solid #c44e52;background:#fdeeee;padding:.5rem 1rem;margin:1rem 0}"
               ".provenance-footer{margin-top:2rem;padding-top:.5rem;border-top:1px solid #ddd;font-size:.8rem;"
               "color:#666}")
"""The smoke-build banner's and the provenance line's style (Quarto's pages have it from ``report/_style.html``)."""
STYLE += STAMP_STYLE
FOOTER = {
    "en": "Static render (Quarto not installed). Executed notebooks:",
    "zh": "静态渲染（未安装 Quarto）。已执行的笔记本：",
    None: "Static render (Quarto not installed) · 静态渲染（未安装 Quarto）. Notebooks · 笔记本:",
}
MISSING_OUTPUT = {
    "en": "Output <code>{label}</code> of <code>{name}</code> is not in this build (notebook not executed).",
    "zh": "本次构建未执行笔记本 <code>{name}</code>，因此没有输出 <code>{label}</code>。",
    None: "Output <code>{label}</code> of <code>{name}</code> is not in this build · 本次构建未执行该笔记本.",
}
NO_RECORDS = {
    "en": "No records of this experiment exist yet: nothing is shipped under <code>data/results/</code> and "
          "<code>runs/</code> holds no run of it, so <code>{name}</code> was not executed. "
          "<code>intraskill report build --rerun {name}</code> runs the experiment here (it takes long).",
    "zh": "该实验尚无记录：<code>data/results/</code> 下没有随包发布的记录，<code>runs/</code> 中也没有它的运行，"
          "因此未执行 <code>{name}</code>。<code>intraskill report build --rerun {name}</code> 会在本机运行该实验（耗时较长）。",
    None: "No records of this experiment exist yet · 该实验尚无记录 (<code>intraskill report build --rerun {name}</code>).",
}
BUILD_FILE = "build.json"
"""The build record (:func:`intraskill.report.build.write_build_record`) in the report's run folder."""
SMOKE_BANNER = {
    "en": "Smoke build (<code>intraskill report build --quick</code>): {names} ran with their quick parameters "
          "(<code>report/notebooks.yaml</code>): training and evaluation as CI-size runs of the random-init "
          "<code>ci</code> organism, bootstrap intervals from fewer resamples. Read none of its numbers as results.",
    "zh": "冒烟构建（<code>intraskill report build --quick</code>）：{names} 以快速参数运行（<code>report/notebooks.yaml</code>）："
          "训练与评估是随机初始化的 <code>ci</code> 模型的 CI 规模运行，自助法区间的重抽样次数更少。其中任何数值都不是实验结果。",
    None: "Smoke build · 冒烟构建 (<code>--quick</code>): {names} — CI-size runs of a random-init model, fewer "
          "bootstrap resamples; not results · 数值不是实验结果.",
}
"""The banner of a page whose notebooks (``{names}``) ran with their quick parameters."""
PROVENANCE_TEXT = {
    "en": {"built": "Built {date} from commit {commit}", "mode": "{mode} build", "quick": "smoke (--quick)",
           "full": "full", "records": "records", "none": "no experiment records", "shipped": "shipped",
           "own": "your run"},
    "zh": {"built": "构建于 {date}，提交 {commit}", "mode": "{mode}构建", "quick": "冒烟（--quick）", "full": "完整",
           "records": "记录", "none": "无实验记录", "shipped": "随包发布", "own": "你自己的运行"},
}
SHIPPED_PREFIX = "data/results/"
TEMPLATES_DIR = Path(__file__).parent / "assets" / "nbconvert"
OFFLINE_TEMPLATE = "offline"
"""nbconvert's lab template without require.js, the widget manager, MathJax or Mermaid from a CDN."""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NO_FAVICON = '<link rel="icon" href="data:,">'
"""An empty icon: browsers otherwise request ``/favicon.ico``, which the site does not have."""
SWITCH_SCRIPT = (
    "<script>for(const a of document.querySelectorAll('a.lang-switch')){a.addEventListener('click',"
    "()=>{if(location.hash){a.href=a.href.split('#')[0]+location.hash;}});}</script>"
)


@dataclass(frozen=True)
class Menu:
    """A navbar menu: its text and the pages (paths relative to the project root) it lists."""

    text: str
    pages: tuple[str, ...]


@dataclass(frozen=True)
class SiteConfig:
    """What the static renderer takes from ``_quarto.yml``."""

    title: str
    landing: str
    pages: tuple[str, ...]
    menus: tuple[Menu, ...]
    output_dir: str


def _href(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping) and isinstance(item.get("href"), str):
        return item["href"]
    raise ValueError(f"_quarto.yml: navbar item {item!r} has no href")


def load_site_config(root: str | Path) -> SiteConfig:
    """Parse ``<root>/_quarto.yml``: render list (globs expanded), navbar menus, landing and output dir."""
    base = Path(root)
    config = yaml.safe_load((base / "_quarto.yml").read_text(encoding="utf-8"))
    project, website = config.get("project", {}), config.get("website", {})
    pages: list[str] = []
    for pattern in project.get("render", []):
        matches = sorted(glob(pattern, root_dir=base)) if any(c in pattern for c in "*?[") else [pattern]
        pages.extend(PurePosixPath(m).as_posix() for m in matches if m not in pages)
    navbar = website.get("navbar", {})
    items = [*navbar.get("left", []), *navbar.get("right", [])]
    menus = tuple(Menu(str(i["text"]), tuple(_href(p) for p in i["menu"])) for i in items if "menu" in i)
    landing = next((_href(i) for i in items if "menu" not in i), pages[0] if pages else "index.qmd")
    return SiteConfig(str(website.get("title", "")), landing, tuple(pages), menus, str(project.get("output-dir", "_site")))


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(YAML front matter, body) of a ``.qmd`` page."""
    match = FRONT_MATTER.match(text)
    if not match:
        return {}, text
    return yaml.safe_load(match.group("yaml")) or {}, text[match.end():]


def page_language(page: str, meta: Mapping[str, Any]) -> str | None:
    """``en`` / ``zh`` from the front matter ``lang`` (``zh-CN`` counts as ``zh``) or the page's folder."""
    lang = str(meta.get("lang", "")).split("-")[0]
    if lang in LANGUAGE_DIRS:
        return lang
    parts = PurePosixPath(page).parts
    return next((code for code, folder in LANGUAGE_DIRS.items() if folder in parts[:-1]), None)


def twin_page(page: str) -> str:
    """The same page in the other language: ``report/en/x.qmd`` ↔ ``report/zh/x.qmd`` (else itself)."""
    parts = list(PurePosixPath(page).parts)
    for index, part in enumerate(parts[:-1]):
        if part in ("en", "zh"):
            parts[index] = "zh" if part == "en" else "en"
            return PurePosixPath(*parts).as_posix()
    return page


def find_embeds(text: str) -> list[tuple[str, str]]:
    """Every ``(notebook path, label)`` embedded by a page."""
    return [(m.group("path"), m.group("label")) for m in EMBED_PATTERN.finditer(text)]


def cell_labels(notebook: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Label → code cell, from ``#| label: …`` lines in the cell sources."""
    labels = {}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for match in LABEL_PATTERN.finditer(source):
            labels[match.group("label")] = cell
    return labels


def cell_text(notebook: str | Path, label: str) -> str:
    """The text the cell labelled ``label`` of an executed notebook shows (its Markdown or plain-text outputs);
    ``ValueError`` when there is no such cell or it shows no text."""
    # deferred: nbformat is heavy to import
    import nbformat

    cells = cell_labels(nbformat.read(Path(notebook), as_version=4))
    if label not in cells:
        raise ValueError(f"{notebook}: no cell labelled {label!r}")
    texts = [_joined(output["data"].get("text/markdown") or output["data"]["text/plain"])
             for output in cells[label].get("outputs", []) if "text/markdown" in output.get("data", {})
             or "text/plain" in output.get("data", {})]
    if not texts:
        raise ValueError(f"{notebook}: cell {label!r} shows no text (did its notebook finish?)")
    return "\n".join(texts)


def _joined(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value)


def render_outputs(cell: Mapping[str, Any], label: str) -> str:
    """HTML for a cell's rich outputs (PNG/JPEG as data URIs, SVG inline, HTML, Markdown, else plain text).

    Streams (logs, warnings) are left out, as in a rendered report; errors are shown.
    """
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "error":
            parts.append(f"<pre class=\"error\">{html.escape(output.get('ename', ''))}: "
                         f"{html.escape(output.get('evalue', ''))}</pre>")
            continue
        data = output.get("data", {})
        if "image/png" in data or "image/jpeg" in data:
            mime = "image/png" if "image/png" in data else "image/jpeg"
            payload = _joined(data[mime]).replace("\n", "")
            parts.append(f'<img src="data:{mime};base64,{payload}" alt="{html.escape(label)}">')
        elif "image/svg+xml" in data:
            parts.append(_joined(data["image/svg+xml"]))
        elif "text/html" in data:
            parts.append(_joined(data["text/html"]))
        elif "text/markdown" in data:
            parts.append(_Renderer.create()(_joined(data["text/markdown"])))
        elif "text/plain" in data:
            parts.append(f"<pre>{html.escape(_joined(data['text/plain']))}</pre>")
    return f'<figure class="embed" id="{html.escape(label)}">{"".join(parts)}</figure>'


class _Renderer:
    """Factory for a mistune HTML renderer with explicit heading ids and ``.qmd`` → ``.html`` links."""

    @staticmethod
    def create() -> Any:
        # deferred: mistune is heavy to import
        import mistune

        class Renderer(mistune.HTMLRenderer):
            def heading(self, text: str, level: int, **attrs: Any) -> str:
                match = HEADING_ID.search(text)
                ident = match.group("id") if match else re.sub(r"[^\w-]+", "-", text.lower()).strip("-")
                body = text[: match.start()] if match else text
                return f'<h{level} id="{html.escape(ident)}">{body}</h{level}>\n'

            def block_code(self, code: str, info: str | None = None) -> str:
                if info is not None and info.strip() == RAW_HTML_INFO:  # pandoc's raw HTML block
                    return code
                return super().block_code(code, info)

            def link(self, text: str, url: str, title: str | None = None) -> str:
                path, sep, anchor = url.partition("#")
                if path.endswith(".qmd") and "://" not in path:
                    url = path[: -len(".qmd")] + ".html" + sep + anchor
                return super().link(text, url, title)

        # escape=True: raw HTML in Markdown (included run data, notebook Markdown outputs) is shown, never parsed;
        # the pages' own HTML comes in ```{=html} blocks (block_code above)
        markdown = mistune.create_markdown(renderer=Renderer(escape=True), plugins=["table", "strikethrough", "math"])
        markdown.renderer.register("inline_math", lambda _, text: tex_to_mathml(text))
        markdown.renderer.register("block_math", lambda _, text: tex_to_mathml(text, display=True) + "\n")
        return markdown


def _relative(target: str, page: str) -> str:
    return PurePosixPath(os.path.relpath(target, PurePosixPath(page).parent.as_posix() or ".")).as_posix()


def _html_path(page: str) -> str:
    return str(PurePosixPath(page).with_suffix(".html"))


def _navbar(config: SiteConfig, titles: Mapping[str, str], page: str, language: str | None) -> str:
    here = _html_path(page)
    links = [f'<a class="brand" href="{_relative(_html_path(config.landing), here)}">{html.escape(config.title)}</a>']
    for menu in config.menus:
        menu_language = page_language(menu.pages[0], {}) if menu.pages else None
        if language is None:  # bilingual landing page: one entry per language
            links.append(f'<a href="{_relative(_html_path(menu.pages[0]), here)}">{html.escape(menu.text)}</a>')
        elif menu_language == language:
            for item in menu.pages:
                active = ' class="active"' if item == page else ""
                links.append(f'<a{active} href="{_relative(_html_path(item), here)}">{html.escape(titles.get(item, item))}</a>')
    if language is not None:
        twin = twin_page(page)
        links.append(f'<a class="lang-switch" href="{_relative(_html_path(twin), here)}" '
                     f'hreflang="{"zh" if language == "en" else "en"}">{SWITCH_TEXT[language]}</a>')
    return f'<nav class="navbar">{"".join(links)}</nav>'


def _stand_in_output(notebook: Mapping[str, Any]) -> str | None:
    """The first output line of an executed notebook that names a scripted stand-in, else ``None``."""
    # deferred: the pipeline's notebook set-up imports the evaluator
    from intraskill.pipeline.notebook import STAND_IN_MARK

    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + [value for mime, value in output.get("data", {}).items()
                                                 if mime.startswith("text/")]
            for text in texts:
                line = next((line for line in _joined(text).splitlines() if STAND_IN_MARK in line), None)
                if line is not None:
                    return line.strip()
    return None


def _embed_html(path: str, label: str, build: _Build, language: str | None, shown_notes: set[str]) -> str:
    """A labelled cell's outputs; for a notebook not executed, a note (once per page for one without records)."""
    # deferred: nbformat is heavy to import
    import nbformat

    name, cache = PurePosixPath(path).stem, build.cache
    if name not in cache:
        source = build.executed_dir / f"{name}.ipynb"
        cache[name] = nbformat.read(source, as_version=4) if source.is_file() else None
    notebook = cache[name]
    if notebook is None:
        if build.notebook_record(name).get("status") == "no-records":
            if name in shown_notes:
                return ""
            shown_notes.add(name)
            return f'<div class="embed-missing no-records">{NO_RECORDS[language].format(name=html.escape(name))}</div>'
        note = MISSING_OUTPUT[language].format(label=html.escape(label), name=html.escape(name))
        return f'<div class="embed-missing">{note}</div>'
    shown = _stand_in_output(notebook)
    if shown is not None:
        raise ValueError(f"{path}#{label}: the executed {name}.ipynb evaluated a scripted stand-in ({shown!r}); a "
                         "report page shows trained models only: execute it with allow_stand_ins: false")
    cells = cell_labels(notebook)
    if label not in cells:
        raise ValueError(f"{path}: no cell labelled {label!r} in the executed {name}.ipynb")
    return render_outputs(cells[label], label)


@dataclass
class _Build:
    """State shared by the pages of one static build."""

    config: SiteConfig
    root: Path
    executed_dir: Path
    titles: dict[str, str]
    notebooks: list[str]
    cache: dict[str, Any]
    data_dir: Path | None = None
    record: Mapping[str, Any] | None = None
    """The build record (``build.json``): commit, date, mode and per notebook its status, mode and records."""

    def notebook_record(self, name: str) -> Mapping[str, Any]:
        return ((self.record or {}).get("notebooks") or {}).get(name) or {}

    def provenance(self, names: list[str], language: str | None) -> tuple[str, str]:
        """:func:`page_provenance` of this build's record."""
        return page_provenance(self.record, names, language)


def page_provenance(record: Mapping[str, Any] | None, names: list[str], language: str | None) -> tuple[str, str]:
    """A page's smoke-build banner (empty unless a notebook it embeds ran quick) and its provenance line: commit,
    date, build mode and the record directories its notebooks read (both empty without a build record)."""
    if record is None:
        return "", ""

    def notebook(name: str) -> Mapping[str, Any]:
        return ((record.get("notebooks") or {}).get(name)) or {}

    quick = ", ".join(f"<code>{html.escape(name)}</code>" for name in names if notebook(name).get("mode") == "quick")
    banner = f'<div class="smoke-build">{SMOKE_BANNER[language].format(names=quick)}</div>\n' if quick else ""
    texts = [PROVENANCE_TEXT[lang] for lang in ((language,) if language else ("en", "zh"))]
    commit = html.escape(str(record.get("commit") or "—")[:12])
    records = list(dict.fromkeys(r for name in names for r in notebook(name).get("records", [])))
    parts = []
    for text in texts:
        shown = ", ".join(f"<code>{html.escape(r)}</code> ({text['shipped' if r.startswith(SHIPPED_PREFIX) else 'own']})"
                          for r in records) or text["none"]
        parts.append(" · ".join([text["built"].format(date=html.escape(str(record.get("date", ""))[:16]),
                                                      commit=commit),
                                 text["mode"].format(mode=text[str(record.get("mode", "full"))]),
                                 f"{text['records']}: {shown}"]))
    return banner, f'<p class="provenance">{" / ".join(parts)}</p>'


def page_notebooks(body: str) -> list[str]:
    """The notebooks a page embeds, in order of first embed."""
    return list(dict.fromkeys(PurePosixPath(path).stem for path, _ in find_embeds(body)))


MAIN = re.compile(r"<main\b[^>]*>")


def stamp_page(text: str, banner: str, provenance: str, where: str) -> str:
    """A page's HTML with the smoke-build banner at the top of its ``<main>`` element and the provenance line at
    its end (:func:`page_provenance`); ``ValueError`` naming ``where`` when the page has no ``<main>``."""
    main = MAIN.search(text)
    if main is None or "</main>" not in text:
        raise ValueError(f"{where}: no <main> element to stamp")
    text = text[:main.end()] + banner + text[main.end():]
    return text.replace("</main>", f'<div class="provenance-footer">{provenance}</div>\n</main>', 1)


def stamp_quarto_site(root: str | Path, site_dir: str | Path, record: Mapping[str, Any]) -> list[Path]:
    """Put into each page Quarto rendered what the static renderer writes into its pages (:func:`stamp_page`).
    Returns the pages stamped."""
    base, site = Path(root), Path(site_dir)
    stamped = []
    for page in load_site_config(base).pages:
        target = site / _html_path(page)
        if not target.is_file():
            raise FileNotFoundError(f"{target}: Quarto rendered no page for {page}")
        meta, body = front_matter((base / page).read_text(encoding="utf-8"))
        banner, provenance = page_provenance(record, page_notebooks(body), page_language(page, meta))
        target.write_text(stamp_page(target.read_text(encoding="utf-8"), banner, provenance, str(target)),
                          encoding="utf-8")
        stamped.append(target)
    return stamped


def _include(build: _Build, page: str, path: str) -> str:
    """The Markdown of an ``{{< include >}}`` target (relative to the page; data files from the build's data)."""
    if DATA_INCLUDE in path and build.data_dir is not None:
        source = build.data_dir / PurePosixPath(path).name
    else:
        source = build.root / PurePosixPath(page).parent / path
    if not source.is_file():
        raise FileNotFoundError(f"{page}: included file {path} does not exist ({source})")
    return source.read_text(encoding="utf-8")


def render_page(build: _Build, page: str) -> str:
    """The full HTML document of one ``.qmd`` page."""
    config, root = build.config, build.root
    meta, body = front_matter((root / page).read_text(encoding="utf-8"))
    body = INCLUDE_PATTERN.sub(lambda m: _include(build, page, m.group("path")), body)
    language = page_language(page, meta)
    embeds: list[str] = []
    notes: set[str] = set()
    names = page_notebooks(body)

    def stash(match: re.Match[str]) -> str:
        embeds.append(_embed_html(match.group("path"), match.group("label"), build, language, notes))
        return f"\n\nEMBEDSLOT{len(embeds) - 1}\n\n"

    body = ESCAPED_SHORTCODE.sub(lambda m: "{{< " + m.group("body") + " >}}", EMBED_PATTERN.sub(stash, body))
    rendered = _Renderer.create()(CJK_LINE_BREAK.sub("", body))
    for index, fragment in enumerate(embeds):
        rendered = rendered.replace(f"<p>EMBEDSLOT{index}</p>", fragment)
    here = _html_path(page)
    plotly = (f'<script src="{_relative(f"assets/{PLOTLY_SCRIPT}", here)}"></script>\n'
              if any(PLOTLY_MARKER in fragment for fragment in embeds) else "")
    footer_links = " · ".join(
        f'<a href="{_relative(f"notebooks/{name}.html", here)}">{name}</a>' for name in build.notebooks
    )
    title = str(meta.get("title", PurePosixPath(page).stem))
    banner, provenance = build.provenance(names, language)
    lang_attr = {"en": "en", "zh": "zh-CN"}.get(language or "", "en")
    return (
        f'<!DOCTYPE html>\n<html lang="{lang_attr}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{NO_FAVICON}\n'
        f"<title>{html.escape(title)} · {html.escape(config.title)}</title>\n<style>{STYLE}</style>\n{plotly}</head>\n"
        f"<body>\n{_navbar(config, build.titles, page, language)}\n<main>\n<h1>{html.escape(title)}</h1>\n{banner}"
        f"{rendered}</main>\n<footer>{provenance}{FOOTER[language]} {footer_links or '—'}</footer>\n{SWITCH_SCRIPT}\n"
        "</body>\n</html>\n"
    )


def offline_notebook(notebook: Any) -> Any:
    """The notebook as its offline page shows it (in place): each Markdown cell and Markdown output rendered as
    the report pages render Markdown (inline TeX as MathML), widget views dropped so their static output shows,
    no widget state."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = f'<div class="md">\n{_Renderer.create()(_joined(cell.source))}</div>'
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            data.pop(WIDGET_VIEW, None)
            if "text/markdown" in data:
                data["text/html"] = _Renderer.create()(_joined(data.pop("text/markdown")))
    notebook.metadata.pop("widgets", None)
    return notebook


def export_notebooks(executed_dir: Path, out_dir: Path, record: Mapping[str, Any] | None = None) -> list[str]:
    """Export every executed notebook to ``out_dir/notebooks/<name>.html`` with nbconvert (the ``offline``
    template: nothing loaded from a CDN; :func:`offline_notebook`); return names. With the build ``record`` each
    page is stamped as the report pages are (:func:`stamp_page`, in both languages): the smoke-build banner when
    the notebook ran quick, and commit, date, build mode and the records it read."""
    # deferred: nbformat is heavy to import
    import nbformat

    # deferred: nbconvert is heavy to import
    from nbconvert import HTMLExporter

    target = out_dir / "notebooks"
    target.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name=OFFLINE_TEMPLATE, extra_template_basedirs=[str(TEMPLATES_DIR)])
    names = []
    for path in sorted(executed_dir.glob("*.ipynb")):
        body, _ = exporter.from_notebook_node(offline_notebook(nbformat.read(path, as_version=4)))
        if PLOTLY_MARKER in body:
            body = body.replace("</head>", f'<script src="../assets/{PLOTLY_SCRIPT}"></script>\n</head>', 1)
        if record is not None:
            body = stamp_page(body.replace("</head>", f"<style>{STAMP_STYLE}</style>\n</head>", 1),
                              *page_provenance(record, [path.stem], None), str(path))
        (target / f"{path.stem}.html").write_text(body, encoding="utf-8")
        names.append(path.stem)
    return names


def render_static_site(root: str | Path, executed_dir: str | Path, out_dir: str | Path,
                       data_dir: str | Path | None = None, record: Mapping[str, Any] | None = None) -> list[Path]:
    """Render every page of ``_quarto.yml`` and the executed notebooks into ``out_dir``.

    Writes ``<out_dir>/<page>.html`` for each page (same layout as Quarto's output), the notebook exports
    and an ``index.html`` that redirects to the landing page. Includes under ``runs/report/data/`` are read
    from ``data_dir`` when given; ``record`` (the build record) puts commit, date, mode and records into each
    page's footer and a smoke-build banner on the pages a quick notebook feeds. Returns the written pages: the
    report pages, then the notebook pages.
    """
    base, executed, out = Path(root), Path(executed_dir), Path(out_dir)
    config = load_site_config(base)
    missing = [page for page in config.pages if not (base / page).is_file()]
    if missing:
        raise FileNotFoundError(f"_quarto.yml lists pages that do not exist: {missing}")
    titles = {page: str(front_matter((base / page).read_text(encoding="utf-8"))[0].get("title", page))
              for page in config.pages}
    notebooks = export_notebooks(executed, out, record) if executed.is_dir() else []
    (out / "assets").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plotly_script_path(), out / "assets" / PLOTLY_SCRIPT)
    build = _Build(config, base, executed, titles, notebooks, {}, Path(data_dir) if data_dir is not None else None,
                   record)
    written = []
    for page in config.pages:
        target = out / _html_path(page)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_page(build, page), encoding="utf-8")
        written.append(target)
    landing = _html_path(config.landing)
    (out / "index.html").write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={landing}">'
        f'<title>{html.escape(config.title)}</title></head><body><a href="{landing}">{html.escape(config.title)}</a>'
        "</body></html>\n",
        encoding="utf-8",
    )
    return written + [out / "notebooks" / f"{name}.html" for name in notebooks]
