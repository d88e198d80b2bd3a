"""Where things live: the project root, the run root and the cached store directories.

Notebooks run with their own folder as the working directory (``papermill --cwd notebooks``) or
from the repository root; both resolve the same paths through these helpers.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The repository root (the folder holding ``pyproject.toml`` and ``params/``).

    ``INTRASKILL_ROOT`` overrides; otherwise the package's parent when it is a checkout, else the
    first parent of the working directory that holds ``params/``, else the working directory.
    """
    if os.environ.get("INTRASKILL_ROOT"):
        return Path(os.environ["INTRASKILL_ROOT"]).resolve()
    if (PACKAGE_DIR.parent / "pyproject.toml").exists():
        return PACKAGE_DIR.parent
    cwd = Path.cwd().resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / "params").is_dir():
            return folder
    return cwd


def runs_root(run_root: str | os.PathLike[str] = "runs") -> Path:
    """The run root: absolute as given, or relative to the project root."""
    path = Path(run_root)
    return path if path.is_absolute() else project_root() / path


def params_path(name: str) -> Path:
    """A shipped parameter set by name (``organism`` → ``params/organism.yaml``) or an explicit path."""
    path = Path(name)
    if path.suffix in {".yaml", ".yml"} and path.exists():
        return path.resolve()
    return project_root() / "params" / f"{name}.yaml"


def release_data_dir() -> Path:
    """The shipped excerpt of the public IntraSkill release: ``<root>/data/intraskill-release``."""
    return project_root() / "data" / "intraskill-release"


def store_dir(scale: str, seed: int, run_root: str | os.PathLike[str] = "runs") -> Path:
    """The cached store of a scale and seed: ``<run_root>/store/<scale>-<seed>``."""
    return runs_root(run_root) / "store" / f"{scale}-{seed}"


def resolve_project_path(path: str | os.PathLike[str]) -> Path:
    """An absolute path, or one relative to the project root."""
    path = Path(path)
    return path if path.is_absolute() else project_root() / path
