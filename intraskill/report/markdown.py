"""Markdown pieces the build writes for the pages to include."""

from __future__ import annotations

import html
from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> str:
    """A pipe table; ``align`` holds ``l`` or ``r`` per column; ``|``, ``<`` and ``>`` in cells are escaped."""
    def escape(cell: object) -> str:
        return html.escape(str(cell), quote=False).replace("|", "\\|")

    lines = ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in [header, *rows]]
    lines.insert(1, "|" + "|".join(":---" if side == "l" else "---:" for side in align) + "|")
    return "\n".join(lines) + "\n"
