"""What a run's numbers depend on beyond its plan: the code, the libraries, the threads and the machine.

A plan's fingerprint says *what* a run computes; its provenance says *with what*. Plans record it
beside the fingerprint, never in it, so that a run resumes on another machine; a resume under a
different provenance is allowed and :func:`provenance_changes` names what changed, for a warning.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_json
from intraskill.jsonl import write_json
from intraskill.paths import project_root

LOGGER = logging.getLogger(__name__)

PROVENANCE_SCHEMA_VERSION = "intraskill-provenance-v1"
UNHASHED_PLAN_FIELDS = ("schema_version", "provenance", "fingerprint", "created_at")
"""Fields a plan file holds beside the plan itself (never part of its fingerprint)."""
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


def stored_plan(path: Path, error: type[Exception]) -> dict[str, Any]:
    """The plan file at ``path`` as a JSON object; ``error`` naming the file when it is unreadable."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{path}: truncated or corrupt plan ({problem})") from None
    if not isinstance(stored, dict):
        raise error(f"{path}: expected a JSON object, got {type(stored).__name__}")
    return stored


def refuse_missing_plan(path: Path, outputs: Sequence[str], *, what: str, error: type[Exception],
                        hint: str) -> None:
    """Raise ``error`` when the plan file ``path`` is missing but its directory holds a run's outputs (entries
    matching the glob patterns ``outputs``): without the plan that made them, a resume could mix two plans, so a
    deleted plan fails closed like a changed one."""
    if path.exists() or not path.parent.is_dir():
        return
    found = sorted({match.relative_to(path.parent).as_posix() for pattern in outputs
                    for match in path.parent.glob(pattern)
                    if match != path and not match.name.startswith(f".{path.name}.tmp-")})
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise error(f"{path} is missing but {path.parent} holds {shown} of an earlier {what} run; refusing to "
                    f"resume without the plan that made them (restore {path.name}). {hint}")


def write_plan(path: Path, plan: Mapping[str, Any], *, what: str, error: type[Exception], hint: str,
               schema: str | None = None, outputs: Sequence[str] = ("*",)) -> str:
    """Write a run's plan file (``schema_version`` when given, the plan, this process's provenance, the plan's
    fingerprint) or check the stored one; returns the fingerprint.

    A stored plan with another fingerprint raises ``error`` naming the differing top-level fields and ``hint``
    (what to do instead); so does a missing plan in a directory that holds entries matching ``outputs``
    (:func:`refuse_missing_plan`; default: any entry). A stored provenance that differs only warns
    (:func:`warn_on_changes`), so a run resumes on another machine. ``what`` names the plan in the message
    (``round``, ``co-evolution``, …).
    """
    fingerprint = sha256_json(plan)
    provenance = run_provenance()
    if path.exists():
        stored = stored_plan(path, error)
        if stored.get("fingerprint") != fingerprint:
            differing = sorted(k for k in set(stored) | set(plan)
                               if k not in UNHASHED_PLAN_FIELDS and stored.get(k) != plan.get(k))
            raise error(f"{path.parent} holds a different {what} plan; differing fields: "
                        f"{', '.join(differing) or 'fingerprint'}. {hint}")
        warn_on_changes(path, stored.get("provenance"), provenance)
        return fingerprint
    refuse_missing_plan(path, outputs, what=what, error=error, hint=hint)
    header = {"schema_version": schema} if schema is not None else {}
    write_json(path, {**header, **plan, "provenance": provenance, "fingerprint": fingerprint}, indent=1)
    return fingerprint
