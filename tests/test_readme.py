"""The front doors: README.md and README.zh-CN.md stay within 12,000 bytes; every relative link in them (and in
docs/) points at a file or folder of the repository; every section citation (``docs/<page>.md §N``, or the bare
``method §N`` that means docs/method.md) names an existing page and heading; nothing cites a file outside the
repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from intraskill.paths import project_root

ROOT = project_root()
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")
READMES = ("README.md", "README.zh-CN.md")


@pytest.mark.parametrize("name", READMES)
def test_a_readme_is_a_front_door(name: str) -> None:
    size = len((ROOT / name).read_bytes())
    assert size <= 12_000, f"{name} is {size} bytes; keep it within 12,000 (results go to docs/results.md)"


@pytest.mark.parametrize("page", [*READMES, *(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))])
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    broken = [m.group("target") for m in LINK.finditer(path.read_text(encoding="utf-8"))
              if "://" not in m.group("target") and not m.group("target").startswith("mailto:")
              and not (path.parent / m.group("target")).exists()]
    assert not broken, f"{page}: links to missing files {broken}"


CITED_DIRS = ("intraskill", "tests", "benchmarks", "notebooks", "report", "params", "docs")
CITED_SUFFIXES = {".py", ".md", ".qmd", ".ipynb", ".yaml", ".yml"}
CITATION = re.compile(r"(?:docs/(?P<page>[\w.-]+?)\.md`{0,2}|(?<![\w/.-])(?P<bare>method))\s*"
                      r"(?P<sections>§\s*\d+(?:\.\d+)*(?:\s*(?:[,/–-]|and)\s*§?\s*\d+(?:\.\d+)*)*)")
SECTION_NUMBER = re.compile(r"\d+(?:\.\d+)*")
HEADING = re.compile(r"#{1,6}\s+(?P<number>\d+(?:\.\d+)*)\.?\s")
#: the external reference files the project once cited; written so that this file does not match itself
OUTSIDE = re.compile(r"(?:intraskill-method|skill1-slime-peers|intraskill-release-data|shopsimulator)[.]md"
                     r"|shared[/]reference|\.\./shared")


def _cited_files() -> list[Path]:
    files = [ROOT / name for name in READMES]
    for folder in CITED_DIRS:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in CITED_SUFFIXES and p.is_file()]
    return files


def _section_numbers(page: Path) -> set[str]:
    """The numbers of a page's headings (``## 4.`` → "4", ``### 4.2 …`` → "4.2"), fenced code skipped."""
    numbers, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            numbers.add(match.group("number"))
    return numbers


def test_section_citations_resolve() -> None:
    """Every ``docs/<page>.md §N`` (or ``method §N``) in code, tests, notebooks, report, params and docs names an
    existing page and one of its numbered headings."""
    sections: dict[str, set[str]] = {}
    dangling = []
    for path in _cited_files():
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            page = ROOT / "docs" / f"{match.group('page') or match.group('bare')}.md"
            if not page.is_file():
                dangling.append(f"{path.relative_to(ROOT)}: {match.group(0)!r} (no such page)")
                continue
            known = sections.setdefault(page.name, _section_numbers(page))
            missing = [n for n in SECTION_NUMBER.findall(match.group("sections")) if n not in known]
            if missing:
                dangling.append(f"{path.relative_to(ROOT)}: {match.group(0)!r} (no section {', '.join(missing)})")
    assert not dangling, "dangling citations:\n" + "\n".join(dangling)


def test_nothing_points_outside_the_clone() -> None:
    hits = [f"{path.relative_to(ROOT)}: {match.group(0)}" for path in _cited_files()
            for match in OUTSIDE.finditer(path.read_text(encoding="utf-8"))]
    assert not hits, f"references outside the repository: {hits}"
