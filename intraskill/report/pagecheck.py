"""What a reader must never see on a report or notebook page: an empty section, raw TeX (``$…$``), a Python repr,
a JSON dump, an unformatted DataFrame or a traceback; what a page must never do: load a script, style, font or image
from another host (the site works offline); and on a Chinese page (``<html lang="zh…">``), a table header, a
paragraph or a figure caption in English. :func:`page_problems` reads a page's HTML (as served, or as a browser's DOM
after its scripts ran).

On a notebook page (nbconvert's ``jp-`` markup) the cells' code is not read (a dict literal is fine there), but
every output is: a notebook shows a formatted table, a figure or a sentence, so a bare value (``Out[ ]:`` as plain
text), a printed path on a line of its own or a printed JSON dump is a problem too.

:func:`site_problems` checks every page a report build wrote (``intraskill report build`` fails on any problem
unless it is given ``--no-check``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path

from intraskill.plots.labels import LABELS
from intraskill.plots.tables import html_label

RAW_TEX = re.compile(r"\$[^$\s][^$\n]*\$")
PYTHON_REPR = re.compile(r"\{'[^'\n]+': |<[\w.]+ object at 0x[0-9a-f]+>|\bdtype: \w+|^\s*Name: \w+, dtype"
                         r"|\b(?:Posix|Windows)Path\(|\bnp\.(?:float|u?int|bool|str|complex)\w*\(", re.MULTILINE)
JSON_DUMP = re.compile(r'\{\s*"[^"\n]+": ')
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w+Error: ", re.MULTILINE)
BARE_PATH = re.compile(r"^\s*(?:/|~/)[^\s]+\s*$", re.MULTILINE)
HIDDEN = {"script", "style", "math", "template"}
"""Elements whose text a reader does not see as text (MathML is rendered, not read as source)."""
LITERAL = {"code", "pre"}
"""Elements shown literally: TeX there is intended (commands, shell variables)."""
CONTENT = {"img", "svg", "table", "math", "iframe", "canvas", "video"}
SECTION = {"h2", "h3"}
VOID = {"img", "br", "hr", "meta", "link", "input"}
CODE_INPUT = "jp-InputArea-editor"
"""The class of a code cell's source on a notebook page (a Markdown cell's rendered text is in the input area too,
outside it)."""
OUTPUT = "jp-OutputArea-output"
"""The class of one notebook output; with ``jp-OutputArea-executeResult`` it is a cell's value (``Out[ ]:``)."""
TEXT_MIMES = {"text/plain", "application/vnd.jupyter.stdout"}
"""An output shown as plain text: a value's repr or what a cell printed (nbconvert marks stdout ``text/plain``);
stderr (warnings, logs, which quote source lines) is read only for reprs and tracebacks."""
RAW_FRAME = "dataframe"
"""The class pandas gives a DataFrame's plain HTML (a formatted Styler's table has none)."""
REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
"""A URL on another host (absolute, or scheme-relative)."""
LOADED = {"script": "src", "img": "src", "iframe": "src", "source": "src", "video": "src", "audio": "src",
          "embed": "src", "object": "data", "link": "href"}
"""Element → the attribute whose URL the browser fetches on load (a plain link, ``<a href>``, is not fetched)."""
NOT_LOADED_LINKS = {"canonical", "alternate"}
"""``<link rel>`` values that name a URL without fetching it."""
CSS_REMOTE = re.compile(r"(?:@import\s+|url\(\s*)['\"]?(?P<url>(?:https?:)?//[^'\")\s]+)", re.IGNORECASE)
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")
LANGUAGE_BLOCKS = {"th", "p", "figcaption"}
"""Elements whose text must be in the page's language on a Chinese page: table headers, paragraphs, captions."""
SENTENCE_WORDS = 3
"""English words (two letters or more) that make a paragraph or caption without Chinese an English sentence."""
NEUTRAL_HEADERS = frozenset(re.sub(r"<[^>]+>", "", html_label(english)) for english, chinese in LABELS.values()
                            if english == chinese)
"""Headers the same in both languages (``a``, ``SHA-256``, ``Spearman ρ``): fine on a Chinese page."""


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str]] = []
        self.sections: list[list[str | bool]] = []
        self.text: list[str] = []
        self.prose: list[str] = []
        self.outputs: list[tuple[str, list[str]]] = []
        self.raw_frames = 0
        self.language = ""
        self.remote: list[str] = []
        self.blocks: list[tuple[str, list[str]]] = []
        self.open_blocks: list[tuple[str, list[str]]] = []

    def _region(self) -> str:
        return next((region for _, region in reversed(self.stack) if region), "")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        if tag == "html":
            self.language = (values.get("lang") or "").lower()
        url = values.get(LOADED.get(tag, ""))
        rel = set((values.get("rel") or "").lower().split())
        if url and REMOTE.match(url) and not (tag == "link" and rel and rel <= NOT_LOADED_LINKS):
            self.remote.append(url.strip())
        if tag in LANGUAGE_BLOCKS:
            self.open_blocks.append((tag, []))
            self.blocks.append(self.open_blocks[-1])
        if tag in SECTION:
            self.sections.append([tag, "", False])
        elif tag in CONTENT and self.sections:
            self.sections[-1][2] = True
        if tag == "table" and RAW_FRAME in classes:
            self.raw_frames += 1
        region = ""
        if CODE_INPUT in classes:
            region = "input"
        elif OUTPUT in classes:
            plain = dict(attrs).get("data-mime-type") in TEXT_MIMES
            region = "output"
            self.outputs.append(("value" if plain and "jp-OutputArea-executeResult" in classes
                                 else "text" if plain else "rich", []))
        if tag not in VOID:
            self.stack.append((tag, region))

    def handle_endtag(self, tag: str) -> None:
        if tag in LANGUAGE_BLOCKS and any(open_tag == tag for open_tag, _ in self.open_blocks):
            while self.open_blocks.pop()[0] != tag:
                pass
        if any(open_tag == tag for open_tag, _ in self.stack):
            while self.stack and self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data: str) -> None:
        tags = {tag for tag, _ in self.stack}
        if "style" in tags:
            self.remote += [match.group("url") for match in CSS_REMOTE.finditer(data)]
        if HIDDEN & tags or not data.strip():
            return
        if not LITERAL & tags:
            for _, parts in self.open_blocks:
                parts.append(data)
        if self.sections:
            heading = self.sections[-1]
            if self.stack and self.stack[-1][0] in SECTION:
                heading[1] = str(heading[1]) + data
            else:
                heading[2] = True
        region = self._region()
        if region == "input":
            return
        self.text.append(data)
        if region == "output":
            self.outputs[-1][1].append(data)
        if not LITERAL & tags:
            self.prose.append(data)


def _found(kind: str, pattern: re.Pattern[str], text: str) -> list[str]:
    return [f"{kind}: {' '.join(match.group(0).split())!r}" for match in pattern.finditer(text)]


def _english(tag: str, text: str) -> bool:
    """Whether a table header (``th``), paragraph or caption of a Chinese page is written in English."""
    if CJK.search(text):
        return False
    if tag == "th":
        return bool(ENGLISH_WORD.search(text)) and text not in NEUTRAL_HEADERS
    return len(ENGLISH_WORD.findall(text)) >= SENTENCE_WORDS


def page_problems(html_text: str) -> list[str]:
    """One line per problem found on the page (empty list: none)."""
    page = _Page()
    page.feed(html_text)
    problems = [f"empty section: {str(title).strip()!r}" for _, title, filled in page.sections if not filled]
    prose, text = "\n".join(page.prose), "\n".join(page.text)
    texts = "\n".join("".join(parts) for kind, parts in page.outputs if kind == "text")
    problems += _found("raw TeX", RAW_TEX, prose)
    problems += _found("Python repr", PYTHON_REPR, text)
    problems += _found("JSON dump", JSON_DUMP, f"{prose}\n{texts}")
    problems += _found("traceback", TRACEBACK, text)
    problems += _found("bare path", BARE_PATH, texts)
    problems += [f"bare value: {''.join(parts).strip()[:80]!r}" for kind, parts in page.outputs if kind == "value"]
    problems += ["unformatted DataFrame (show it with intraskill.plots.tables.format_table)"] * page.raw_frames
    problems += [f"loads from another host: {url!r}" for url in dict.fromkeys(page.remote)]
    if page.language.startswith("zh"):
        shown = [(tag, " ".join("".join(parts).split())) for tag, parts in page.blocks]
        problems += [f"English {'table header' if tag == 'th' else 'text'} on a Chinese page: {text[:80]!r}"
                     for tag, text in dict.fromkeys(shown) if _english(tag, text)]
    return problems


def site_problems(site_dir: str | Path, pages: Iterable[str | Path]) -> dict[str, list[str]]:
    """:func:`page_problems` of each page a build wrote, for the pages that have any: page (its path relative to
    ``site_dir``) → problems."""
    base = Path(site_dir).resolve()
    found = {}
    for page in pages:
        path = Path(page).resolve()
        problems = page_problems(path.read_text(encoding="utf-8"))
        if problems:
            found[path.relative_to(base).as_posix() if path.is_relative_to(base) else str(path)] = problems
    return found
