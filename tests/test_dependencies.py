"""Every third-party module the package imports is declared in ``pyproject.toml`` — as a dependency or in an
extra — so a fresh ``pip install`` never leans on what another package happened to pull in."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from intraskill.paths import project_root

NOT_ON_AN_INDEX = {"slime": "installed from its own image (docs/slime.md); the integration runs inside it"}
"""Imported modules no package index serves, with where they come from."""


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0]).lower()


def declared_distributions(pyproject: Path) -> set[str]:
    """The normalised names of the dependencies and of every extra's requirements."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values()
                                                for r in extra)]
    return {_name(r) for r in requirements}


def imported_modules(package: Path) -> dict[str, list[str]]:
    """Top-level third-party module → the files that import it (absolute imports, deferred ones included)."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("intraskill", "__future__"):
                    found.setdefault(top, []).append(path.relative_to(package.parent).as_posix())
    return found


def undeclared(package: Path, pyproject: Path) -> list[str]:
    """Imported modules whose distribution (the installed one, else the module's own name) is not declared."""
    declared, installed = declared_distributions(pyproject), packages_distributions()
    problems = []
    for module, files in sorted(imported_modules(package).items()):
        candidates = {_name(d) for d in installed.get(module, [module])}
        if module not in NOT_ON_AN_INDEX and not candidates & declared:
            problems.append(f"{module} (distribution {sorted(candidates)}) imported by {files[0]}")
    return problems


def test_every_imported_module_is_declared() -> None:
    root = project_root()
    assert undeclared(root / "intraskill", root / "pyproject.toml") == []


def test_an_undeclared_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("import json\nimport numpy as np\n\ndef f():\n    from yaml import safe_load\n",
                                  encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["numpy>=2"]\n'
                                             '[project.optional-dependencies]\nlab = []\n', encoding="utf-8")
    assert undeclared(package, tmp_path / "pyproject.toml") == [
        "yaml (distribution ['pyyaml']) imported by pkg/a.py"]
