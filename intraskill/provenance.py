"""What a run's numbers depend on beyond its plan: the code, the libraries, the threads and the machine.

A plan's fingerprint says *what* a run computes; its provenance says *with what*. Plans record it
beside the fingerprint, never in it, so that a run resumes on another machine; a resume under a
different provenance is allowed and :func:`provenance_changes` names what changed, for a warning.
"""

from __future__ import annotations

import logging
import os
import platform
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from intraskill.paths import project_root

LOGGER = logging.getLogger(__name__)

PROVENANCE_SCHEMA_VERSION = "intraskill-provenance-v1"
LIBRARIES = ("torch", "transformers", "numpy", "scipy", "statsmodels")
"""The libraries a round's numbers pass through (training and sampling, the gate's OLS fit)."""


def git_commit(root: str | os.PathLike[str] | None = None) -> str | None:
    """HEAD of the checkout at ``root`` (default the project root), ``+dirty`` when tracked files changed;
    ``None`` outside a git checkout or without git."""
    folder = Path(root) if root is not None else project_root()
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def _library_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _torch_runtime() -> dict[str, Any]:
    """Torch's thread count and CPU kernel level, and the GPU when one is visible."""
    # deferred: torch is heavy to import
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"torch_threads": torch.get_num_threads(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "cuda": torch.version.cuda,
            "gpu": gpu}


def run_provenance() -> dict[str, Any]:
    """The current process's provenance: package version and git commit, Python, library versions, torch
    threads (and ``OMP_NUM_THREADS``), CPU kernel level, GPU and platform."""
    return {
        "schema_version": PROVENANCE_SCHEMA_VERSION,
        "intraskill": _library_version("intraskill"),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "libraries": {name: _library_version(name) for name in LIBRARIES},
        **_torch_runtime(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def provenance_changes(stored: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """``field: stored → current`` for each field that differs (nested libraries by name); a plan
    written before provenance was recorded gives one entry saying so."""
    if stored is None:
        return ["provenance: not recorded"]
    changes = []
    for key in sorted(set(stored) | set(current)):
        old, new = stored.get(key), current.get(key)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            changes += [f"{key}.{name}: {old.get(name)} → {new.get(name)}"
                        for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
        elif old != new:
            changes.append(f"{key}: {old} → {new}")
    return changes


def warn_on_changes(where: str | os.PathLike[str], stored: Mapping[str, Any] | None,
                    current: Mapping[str, Any]) -> list[str]:
    """Log one warning naming what changed since ``where`` (a plan file) recorded ``stored``; returns the
    changes (empty when none)."""
    changes = provenance_changes(stored, current)
    if changes:
        LOGGER.warning("%s: resuming under a different provenance (%s); its numbers may differ from a run "
                       "under the recorded one", where, "; ".join(changes))
    return changes
