"""Chunk Markdown rendering and the prompt skill block (renderer ``plain-skill-context-v1``).

Reference: docs/method.md §1.2 (the fixed chunk template: ``### title``, "- Applies when: …",
"- Procedure:" with indented numbered steps, "- Verify: …", "- Avoid: …"; English labels) and §1.6
(the skill block: an optional-hints header, a caveat line, then each chunk wrapped in
``<skill id="…" version="…">`` … ``</skill>`` with JSON-quoted attribute values, in bank order).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from intraskill.skills.bank import Skill

SKILL_RENDERER_VERSION = "plain-skill-context-v1"

SKILL_BLOCK_HEADERS: dict[str, tuple[str, str]] = {
    "en": (
        "[Optional strategy hints]",
        "These hints are general strategies; always verify them against the current task and page.",
    ),
    "zh": (
        "[可选策略提示]",
        "以下提示是通用策略，仍须结合当前任务和页面核实。",
    ),
}

_STEP = re.compile(r"^  (\d+)\. (.+)$")


@dataclass(frozen=True)
class Chunk:
    """A compiled chunk before rendering (the compiler's fields, §1.2)."""

    title: str
    applicable_when: str
    procedure: tuple[str, ...]
    verification: str
    common_failure: str

    def __post_init__(self) -> None:
        for name in ("title", "applicable_when", "verification", "common_failure"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
                raise ValueError(f"chunk.{name}: must be a non-empty single line")
        if not self.procedure:
            raise ValueError("chunk.procedure: needs at least one step")
        for index, step in enumerate(self.procedure):
            if not isinstance(step, str) or not step.strip() or "\n" in step.strip():
                raise ValueError(f"chunk.procedure[{index}]: must be a non-empty single line")


def render_chunk(chunk: Chunk) -> str:
    """The chunk's ``content`` Markdown (no trailing newline).

    Examples
    --------
    >>> print(render_chunk(Chunk("Check options", "a product has option axes", ("Pick each axis",),
    ...                          "no axis is missing", "buying early")))
    ### Check options
    <BLANKLINE>
    - Applies when: a product has option axes
    - Procedure:
      1. Pick each axis
    - Verify: no axis is missing
    - Avoid: buying early
    """
    lines = [f"### {chunk.title.strip()}", "", f"- Applies when: {chunk.applicable_when.strip()}"]
    lines.append("- Procedure:")
    lines += [f"  {number}. {step.strip()}" for number, step in enumerate(chunk.procedure, start=1)]
    lines += [f"- Verify: {chunk.verification.strip()}", f"- Avoid: {chunk.common_failure.strip()}"]
    return "\n".join(lines)


def parse_chunk(content: str) -> Chunk:
    """Inverse of :func:`render_chunk` for content in the fixed template; ``ValueError`` otherwise."""
    lines = content.strip().replace("\r\n", "\n").split("\n")
    if len(lines) < 6 or not lines[0].startswith("### ") or lines[1] != "":
        raise ValueError("chunk content: expected '### title' followed by a blank line")
    prefixes = {"applies": "- Applies when: ", "verify": "- Verify: ", "avoid": "- Avoid: "}
    if not lines[2].startswith(prefixes["applies"]) or lines[3] != "- Procedure:":
        raise ValueError("chunk content: expected '- Applies when: …' then '- Procedure:'")
    steps = []
    for number, line in enumerate(lines[4:-2], start=1):
        match = _STEP.match(line)
        if match is None or int(match.group(1)) != number:
            raise ValueError(f"chunk content: procedure step {number} is not '  {number}. …'")
        steps.append(match.group(2))
    if not lines[-2].startswith(prefixes["verify"]) or not lines[-1].startswith(prefixes["avoid"]):
        raise ValueError("chunk content: expected '- Verify: …' and '- Avoid: …' as the last two lines")
    return Chunk(
        title=lines[0][4:],
        applicable_when=lines[2][len(prefixes["applies"]):],
        procedure=tuple(steps),
        verification=lines[-2][len(prefixes["verify"]):],
        common_failure=lines[-1][len(prefixes["avoid"]):],
    )


def render_skill_block(skills: Sequence[Skill], language: str = "en") -> str:
    """The system-prompt skill section for the selected skills, in the given (bank) order.

    Returns ``""`` when ``skills`` is empty: skill-free and assisted-empty prompts get no section.

    Examples
    --------
    >>> skill = Skill("chunk-a", "### A\\n\\n- Applies when: x", version="1")
    >>> print(render_skill_block([skill]))
    [Optional strategy hints]
    These hints are general strategies; always verify them against the current task and page.
    <skill id="chunk-a" version="1">
    ### A
    <BLANKLINE>
    - Applies when: x
    </skill>
    """
    if language not in SKILL_BLOCK_HEADERS:
        raise ValueError(f"language: expected one of {sorted(SKILL_BLOCK_HEADERS)}, got {language!r}")
    if not skills:
        return ""
    header, caveat = SKILL_BLOCK_HEADERS[language]
    lines = [header, caveat]
    for skill in skills:
        lines.append(f"<skill id={json.dumps(skill.skill_id, ensure_ascii=False)} "
                     f"version={json.dumps(skill.version, ensure_ascii=False)}>")
        lines.append(skill.content.strip())
        lines.append("</skill>")
    return "\n".join(lines)


_SKILL_ELEMENT = re.compile(r'<skill id=("(?:[^"\\]|\\.)*") version=(?:"(?:[^"\\]|\\.)*")>\n(.*?)\n</skill>', re.DOTALL)


def skill_entries(text: str) -> tuple[tuple[str, str], ...]:
    """``(skill ID, content)`` of every ``<skill …>`` element :func:`render_skill_block` wrote into ``text``,
    in order (the inverse of its rendering)."""
    return tuple((json.loads(skill_id), content) for skill_id, content in _SKILL_ELEMENT.findall(text))


def chunk_title(content: str) -> str:
    """A skill's title: the ``### title`` heading of a chunk, else the first line of its text."""
    first = content.strip().split("\n", 1)[0]
    return first[4:].strip() if first.startswith("### ") else first.strip()
