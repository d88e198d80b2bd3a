"""Markdown pieces the build writes for the pages to include, safe for any run data they show.

Run data (folder names, bank versions, gate notes, skill descriptions a model wrote) reaches the pages only
through these helpers: :func:`md_text` escapes HTML and Markdown syntax, :func:`code_span` fences a value so
that no backtick inside ends it, :func:`md_link` percent-encodes its target. Quarto passes raw HTML in
Markdown through to the browser, so escaping here is what keeps a crafted name from running as script.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-!~$^<>&])")
"""Characters that start Markdown syntax (emphasis, links, code, math, lists, HTML tags and entities), each
backslash-escaped: CommonMark and pandoc then show it as itself; ``|`` (a table cell's end) is
:func:`markdown_table`'s to escape."""


class Markdown(str):
    """A Markdown fragment built from escaped pieces (:func:`code_span`, :func:`md_link`): kept as it is."""


def _one_line(value: object) -> str:
    """``value`` as text on one line: a line break in run data would end a heading or a table row."""
    return " ".join(str(value).split())


def md_text(value: object) -> Markdown:
    """Plain text as inline Markdown that renders as exactly that text (its markup characters backslash-escaped)."""
    return Markdown(MARKDOWN_PUNCTUATION.sub(r"\\\1", _one_line(value)))


def code_span(value: object) -> Markdown:
    """``value`` as a code span: fenced by one backtick more than its longest run of backticks (so none inside
    ends it), padded when it starts or ends with one; HTML inside a code span is shown, never parsed."""
    text = _one_line(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return Markdown(f"{fence}{padded}{fence}")


def md_link(label: object, target: str) -> Markdown:
    """A link whose label is :func:`md_text` and whose relative ``target`` is percent-encoded (``/`` and ``#``
    kept), so neither can end the link or name another scheme."""
    return Markdown(f"[{md_text(label)}]({quote(target, safe='/#')})")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> str:
    """A pipe table; ``align`` holds ``l`` or ``r`` per column. A :class:`Markdown` cell is kept, any other is
    :func:`md_text`; ``|`` is escaped in every cell."""
    def cell(value: object) -> str:
        return (value if isinstance(value, Markdown) else md_text(value)).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(value) for value in row) + " |" for row in [header, *rows]]
    lines.insert(1, "|" + "|".join(":---" if side == "l" else "---:" for side in align) + "|")
    return "\n".join(lines) + "\n"
