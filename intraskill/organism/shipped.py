"""Shipped warm starts: copying a finished one into ``params/``, verifying it, and finding the one whose
manifest matches a parameter set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from intraskill.hashing import sha256_file
from intraskill.organism.cloning import CHECKPOINT_DIR

if TYPE_CHECKING:

    pass



SHIPPED_FILES = ("manifest.json", "ground_truth.json")


def ship_warmstart(out_dir: str | Path, dest: str | Path) -> Path:
    """Copy a finished warm start's checkpoint, ``manifest.json`` and ``ground_truth.json`` to ``dest``
    (the demonstrations stay behind; the manifest records their SHA-256). Returns ``dest``."""
    import shutil

    out, dest = Path(out_dir), Path(dest)
    for name in SHIPPED_FILES:
        if not (out / name).is_file():
            raise FileNotFoundError(f"{out / name}: not a finished warm start (run `intraskill warmstart`)")
    if (dest / CHECKPOINT_DIR).exists():
        shutil.rmtree(dest / CHECKPOINT_DIR)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(out / CHECKPOINT_DIR, dest / CHECKPOINT_DIR)
    for name in SHIPPED_FILES:
        shutil.copy2(out / name, dest / name)
    return dest


def verify_shipped(directory: str | Path) -> list[str]:
    """Problems of a shipped warm start: checkpoint files whose SHA-256 differs from the manifest,
    and a ground truth or weights digest that does not match (empty list = intact)."""
    from intraskill.policy.factory import weights_digest

    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    truth = json.loads((directory / "ground_truth.json").read_text(encoding="utf-8"))
    checkpoint = directory / CHECKPOINT_DIR
    problems = [f"{name}: sha256 differs from the manifest" for name, digest in manifest["files"].items()
                if not (checkpoint / name).is_file() or sha256_file(checkpoint / name) != digest]
    if weights_digest(checkpoint) != manifest["checkpoint_sha256"]:
        problems.append("checkpoint_sha256: the weights differ from the manifest")
    if truth.get("checkpoint_sha256") != manifest["checkpoint_sha256"]:
        problems.append("ground_truth.json: measured on another checkpoint")
    return problems
