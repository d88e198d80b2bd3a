"""Shipped warm starts: copying a finished one into ``params/``, verifying it, and building the one a
parameter set asks for when none matches (finding it is :mod:`intraskill.policy.warmstarts`')."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from intraskill.hashing import sha256_file
from intraskill.layout import WarmstartDir
from intraskill.organism.manifest import WarmstartManifest, read_manifest
from intraskill.organism.warmstart import run_warmstart
from intraskill.params import Params
from intraskill.paths import resolve_project_path
from intraskill.policy.factory import weights_digest
from intraskill.policy.warmstarts import GroundTruth, find_warmstart

LOGGER = logging.getLogger(__name__)


def ship_warmstart(out_dir: str | Path, dest: str | Path, files: tuple[str, ...] = WarmstartDir.SHIPPED) -> Path:
    """Copy a finished warm start's checkpoint and ``files`` (``manifest.json`` and ``ground_truth.json``) to
    ``dest`` (the demonstrations stay behind; the manifest records their SHA-256). Returns ``dest``."""
    out, dest = Path(out_dir), Path(dest)
    for name in files:
        if not (out / name).is_file():
            raise FileNotFoundError(f"{out / name}: not a finished warm start (run `intraskill warmstart`)")
    source, target = WarmstartDir(out).checkpoint.root, WarmstartDir(dest).checkpoint.root
    if target.exists():
        shutil.rmtree(target)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    for name in files:
        shutil.copy2(out / name, dest / name)
    return dest


def verify_shipped(directory: str | Path) -> list[str]:
    """Problems of a shipped warm start: checkpoint files whose SHA-256 differs from the manifest,
    and a ground truth (when the manifest names one) or weights digest that does not match (empty list =
    intact)."""
    directory = Path(directory)
    manifest = read_manifest(WarmstartDir(directory).manifest)
    checkpoint = WarmstartDir(directory).checkpoint.root
    problems = [f"{name}: sha256 differs from the manifest" for name, digest in manifest.files.items()
                if not (checkpoint / name).is_file() or sha256_file(checkpoint / name) != digest]
    if weights_digest(checkpoint) != manifest.checkpoint_sha256:
        problems.append("checkpoint_sha256: the weights differ from the manifest")
    if isinstance(manifest, WarmstartManifest):
        truth = GroundTruth.read(directory / manifest.ground_truth_file)
        if truth.checkpoint_sha256 != manifest.checkpoint_sha256:
            problems.append("ground_truth.json: measured on another checkpoint")
    return problems


def ensure_warmstart(params: Params, progress: bool = True) -> Path:
    """The warm-start directory of ``params``: the matching one :func:`~intraskill.policy.warmstarts.find_warmstart`
    finds, or a fresh run into ``warmstart.out_dir`` (the cold start builds it on purpose; stages refuse instead)."""
    found = find_warmstart(params)
    if found is not None:
        return found
    out = resolve_project_path(params.warmstart.out_dir)
    LOGGER.info("no matching warm start found; running it into %s", out)
    run_warmstart(params, out, progress=progress)
    return out
