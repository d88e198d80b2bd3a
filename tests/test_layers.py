"""The layer contract, read from the code's own imports (module-level and in-function alike).

Imports point one way: store → skills → agent → policy → evaluation / training core → analysts / gate →
stage orchestration → organism testbed / control experiment → integrations / analysis / plots → report → command
line. A subpackage may import itself and the layers below it; no two modules import each other, even through
a chain. The organism is a testbed beside the product: no stage, evaluation, gate, experiment or command imports
it, except the commands that are the testbed's own (:data:`TESTBED_VERBS`).
"""

from __future__ import annotations

import ast
import functools
import shutil
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "intraskill"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("hashing", "jsonl", "layout", "record", "paths", "params", "phases", "chat", "provenance", "http_limits"),
    ("shop",),
    ("skills",),
    ("agent",),
    ("policy",),
    ("evaluate", "training"),
    ("trace2skill", "gate"),
    ("pipeline",),
    ("organism", "experiment"),
    ("integrations", "analysis", "plots"),
    ("report",),
    ("cli",),
    ("__main__",),
)
"""Bottom to top; a package may import packages of lower layers only (the leaf utilities of the first
layer may import each other where that makes no cycle)."""

RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}

TESTBED = "organism"
TESTBED_FREE = ("evaluate", "gate", "pipeline", "experiment", "cli")
"""Packages that never import the testbed: what the stages read of a warm start (``model.checkpoint``) is
:mod:`intraskill.policy.warmstarts`'."""
TESTBED_VERBS = ("intraskill.cli.organism",)
"""The testbed's own commands (``intraskill warmstart``, ``warmstart-skill1``), which build it."""


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every ``intraskill`` module ``path`` imports, wherever the import statement sits."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return set(imports_in(path.read_text(encoding="utf-8"), package, root.name))


@functools.cache
def syntax_tree(source: str) -> ast.Module:
    """``ast.parse(source)``, parsed once per distinct source for all the checks below."""
    return ast.parse(source)


@functools.cache
def imports_in(source: str, package: str, root_name: str) -> frozenset[str]:
    """The ``root_name`` modules that ``source`` (a module of ``package``) imports; cached by content, so the
    planted copies of the package parse only the file they change."""
    found: set[str] = set()
    for node in ast.walk(syntax_tree(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(module for module in found if module.split(".")[0] == root_name)


def import_graph(root: Path) -> nx.DiGraph:
    """Modules of the package under ``root`` and the imports between them."""
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in imported_modules(path, root)
                             if target in modules and target != name)
    return graph


def subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def layer_violations(root: Path) -> list[str]:
    """Imports that point up or sideways between layers, and modules outside every layer."""
    problems = []
    for source, target in sorted(import_graph(root).edges):
        above, below = subpackage(source), subpackage(target)
        if above == below or above == "(root)":
            continue
        if above not in RANK or below not in RANK:
            problems.append(f"{source} -> {target}: {above if above not in RANK else below} is in no layer")
        elif RANK[below] > RANK[above] or (RANK[below] == RANK[above] and RANK[above] > 0):
            problems.append(f"{source} -> {target}: {above} may not import {below}")
    return problems


def imports_of_the_testbed(root: Path) -> list[str]:
    """Imports of the organism testbed from a package that must not know it (:data:`TESTBED_FREE`)."""
    return [f"{source} -> {target}: {subpackage(source)} may not import the {TESTBED} testbed"
            for source, target in sorted(import_graph(root).edges)
            if subpackage(source) in TESTBED_FREE and subpackage(target) == TESTBED and source not in TESTBED_VERBS]


def module_cycles(root: Path) -> list[list[str]]:
    """Groups of modules that import each other, directly or through a chain (package ``__init__``
    re-exports of their own submodules aside)."""
    graph = import_graph(root)
    graph.remove_edges_from([(source, target) for source, target in list(graph.edges)
                             if target.startswith(f"{source}.") or source.startswith(f"{target}.")])
    return [sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]


def undeclared_deferrals(root: Path) -> list[str]:
    """Imports inside functions that no ``# deferred: reason`` comment heads (only heavy libraries, or a
    command's stage, are imported late). One comment heads a run of consecutive late imports."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        late = [node for function in ast.walk(syntax_tree(source))
                if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
                for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))]
        import_lines = {number for node in late for number in range(node.lineno, node.end_lineno + 1)}
        for node in late:
            above = node.lineno - 1
            while above in import_lines:
                above -= 1
            if not lines[above - 1].strip().startswith("# deferred: "):
                problems.append(f"{path.relative_to(root.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return problems


def test_imports_follow_the_layers() -> None:
    assert layer_violations(PACKAGE) == []


def test_no_stage_imports_the_testbed() -> None:
    assert imports_of_the_testbed(PACKAGE) == []


def test_late_imports_say_why() -> None:
    assert undeclared_deferrals(PACKAGE) == []


def test_no_module_imports_itself_through_a_chain() -> None:
    assert module_cycles(PACKAGE) == []


def planted_copy(tmp_path: Path, module: str, planted: str) -> Path:
    """A copy of the package whose ``module`` ends with the ``planted`` import (inside a function when indented)."""
    root = tmp_path / "intraskill"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / module
    body = f"def _planted() -> None:\n{planted}\n" if planted.startswith(" ") else f"{planted}\n"
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + body, encoding="utf-8")
    return root


@pytest.mark.parametrize("module, planted", [
    ("shop/engine.py", "from intraskill.training.grpo import GRPOTrainer"),
    ("policy/hf.py", "    from intraskill.pipeline.round import run_round"),
    ("evaluate/runner.py", "import intraskill.trace2skill.submission"),
    ("gate/design.py", "from intraskill.trace2skill.submission import CandidateDraft"),
])
def test_a_planted_upward_import_is_caught(tmp_path: Path, module: str, planted: str) -> None:
    root = planted_copy(tmp_path, module, planted)
    problems = layer_violations(root)
    assert len(problems) == 1 and problems[0].startswith(module_name(root / module, root)), problems


@pytest.mark.parametrize("module, planted, allowed", [
    ("pipeline/round.py", "from intraskill.organism.warmstart import run_warmstart", False),
    ("cli/gate.py", "    from intraskill.organism.shipped import ensure_warmstart", False),
    ("experiment/matrix.py", "import intraskill.organism.truth", False),
    ("cli/organism.py", "    from intraskill.organism.shipped import ensure_warmstart", True),
])
def test_a_planted_testbed_import_is_caught(tmp_path: Path, module: str, planted: str, allowed: bool) -> None:
    root = planted_copy(tmp_path, module, planted)
    problems = imports_of_the_testbed(root)
    caught = len(problems) == 1 and problems[0].startswith(module_name(root / module, root))
    assert problems == [] if allowed else caught, problems


def test_a_planted_cycle_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "intraskill"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "organism" / "drills.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n\ndef _planted() -> None:\n"
                    "    from intraskill.organism.warmstart import run_warmstart\n", encoding="utf-8")
    assert any("intraskill.organism.drills" in group for group in module_cycles(root))
