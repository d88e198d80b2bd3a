"""What a reader must never see on a report page: an empty section, raw TeX (``$…$``), a Python repr or a
traceback. :func:`page_problems` reads a page's HTML (as served, or as a browser's DOM after its scripts ran)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

RAW_TEX = re.compile(r"\$[^$\s][^$\n]*\$")
PYTHON_REPR = re.compile(r"\{'[^'\n]+': |<[\w.]+ object at 0x[0-9a-f]+>|\bdtype: \w+|^\s*Name: \w+, dtype", re.MULTILINE)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w+Error: ", re.MULTILINE)
HIDDEN = {"script", "style", "math", "template"}
"""Elements whose text a reader does not see as text (MathML is rendered, not read as source)."""
LITERAL = {"code", "pre"}
"""Elements shown literally: TeX there is intended (commands, shell variables)."""
CONTENT = {"img", "svg", "table", "math", "iframe", "canvas", "video"}
SECTION = {"h2", "h3"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.sections: list[list[str | bool]] = []
        self.text: list[str] = []
        self.prose: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SECTION:
            self.sections.append([tag, "", False])
        elif tag in CONTENT and self.sections:
            self.sections[-1][2] = True
        if tag not in {"img", "br", "hr", "meta", "link", "input"}:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if HIDDEN & set(self.stack) or not data.strip():
            return
        self.text.append(data)
        if not LITERAL & set(self.stack):
            self.prose.append(data)
        if self.sections:
            heading = self.sections[-1]
            if self.stack and self.stack[-1] in SECTION:
                heading[1] = str(heading[1]) + data
            else:
                heading[2] = True


def page_problems(html_text: str) -> list[str]:
    """One line per problem found on the page (empty list: none)."""
    page = _Page()
    page.feed(html_text)
    problems = [f"empty section: {str(title).strip()!r}" for _, title, filled in page.sections if not filled]
    prose, text = "\n".join(page.prose), "\n".join(page.text)
    problems += [f"raw TeX: {match.group(0)!r}" for match in RAW_TEX.finditer(prose)]
    problems += [f"Python repr: {match.group(0).strip()!r}" for match in PYTHON_REPR.finditer(text)]
    problems += [f"traceback: {match.group(0).strip()!r}" for match in TRACEBACK.finditer(text)]
    return problems
