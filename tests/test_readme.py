"""The front doors: README.md and README.zh-CN.md stay within 12,000 bytes and every relative link in them
(and in docs/) points at a file or folder of the repository."""

from __future__ import annotations

import re

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
