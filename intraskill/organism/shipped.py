"""Shipped warm starts: copying a finished one into ``params/``, verifying it, finding the one whose
manifest matches a parameter set, and the one rule that turns ``model.checkpoint`` into a checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from intraskill.hashing import sha256_file
from intraskill.organism.cloning import CHECKPOINT_DIR
from intraskill.organism.warmstart import NOT_TRAINING, training_settings
from intraskill.params import UNTRAINED, Params, WarmstartParams
from intraskill.paths import project_root
from intraskill.policy.factory import weights_digest
from intraskill.policy.organism import splits_like_organism

SHIPPED_PATTERN = "params/*_warmstart"
"""Every shipped warm start (``make warmstart`` / ``make warmstart-additive``): one per organism params."""
SHIPPED_FILES = ("manifest.json", "ground_truth.json")


def ship_warmstart(out_dir: str | Path, dest: str | Path, files: tuple[str, ...] = SHIPPED_FILES) -> Path:
    """Copy a finished warm start's checkpoint and ``files`` (``manifest.json`` and ``ground_truth.json``) to
    ``dest`` (the demonstrations stay behind; the manifest records their SHA-256). Returns ``dest``."""
    out, dest = Path(out_dir), Path(dest)
    for name in files:
        if not (out / name).is_file():
            raise FileNotFoundError(f"{out / name}: not a finished warm start (run `intraskill warmstart`)")
    if (dest / CHECKPOINT_DIR).exists():
        shutil.rmtree(dest / CHECKPOINT_DIR)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(out / CHECKPOINT_DIR, dest / CHECKPOINT_DIR)
    for name in files:
        shutil.copy2(out / name, dest / name)
    return dest


def verify_shipped(directory: str | Path) -> list[str]:
    """Problems of a shipped warm start: checkpoint files whose SHA-256 differs from the manifest,
    and a ground truth (when the manifest names one) or weights digest that does not match (empty list =
    intact)."""
    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    checkpoint = directory / CHECKPOINT_DIR
    problems = [f"{name}: sha256 differs from the manifest" for name, digest in manifest["files"].items()
                if not (checkpoint / name).is_file() or sha256_file(checkpoint / name) != digest]
    if weights_digest(checkpoint) != manifest["checkpoint_sha256"]:
        problems.append("checkpoint_sha256: the weights differ from the manifest")
    truth_file = manifest.get("ground_truth_file")
    truth = json.loads((directory / truth_file).read_text(encoding="utf-8")) if truth_file else {}
    if truth_file and truth.get("checkpoint_sha256") != manifest["checkpoint_sha256"]:
        problems.append("ground_truth.json: measured on another checkpoint")
    return problems


def warmstart_matches(directory: Path, params: Params) -> bool:
    """A finished warm start in ``directory`` whose manifest records this store, model shape, view and
    warm-start training settings (:func:`~intraskill.organism.warmstart.training_settings`: evaluation
    settings and location aside), and whose tokenizer splits text as the organism's does now. A setting
    the manifest lacks (added after it was written) counts as its default, the behaviour of that time."""
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file() or not (directory / "ground_truth.json").is_file():
        return False
    checkpoint = directory / CHECKPOINT_DIR
    if not (checkpoint / "config.json").is_file() or not splits_like_organism(checkpoint / "tokenizer.json"):
        return False
    recorded = json.loads(manifest_path.read_text(encoding="utf-8")).get("params", {})
    expected = {"store": params.store.model_dump(mode="json"),
                "organism": params.model.organism.model_dump(mode="json"), "view": params.model.view,
                "warmstart": training_settings(params.warmstart)}
    model = recorded.get("model") or {}
    defaults = WarmstartParams().model_dump(mode="json")
    settings = {**defaults, **(recorded.get("warmstart") or {})}
    trained = {k: v for k, v in settings.items() if k not in NOT_TRAINING
               and not (k in WarmstartParams.plan_optional and v == defaults[k])}
    found = {"store": recorded.get("store"), "organism": model.get("organism"),
             "view": model.get("view", "standard"), "warmstart": trained}
    return json.loads(json.dumps(found)) == expected


def find_warmstart(params: Params) -> Path | None:
    """The first warm start whose manifest matches ``params``: a shipped one (:data:`SHIPPED_PATTERN`),
    then ``warmstart.out_dir``; ``None`` when none does."""
    out_dir = Path(params.warmstart.out_dir)
    candidates = (*sorted(project_root().glob(SHIPPED_PATTERN)),
                  out_dir if out_dir.is_absolute() else project_root() / out_dir)
    return next((directory for directory in candidates if warmstart_matches(directory, params)), None)


class MissingWarmstartError(FileNotFoundError):
    """``model.checkpoint: null`` on the organism, and no warm start matches the parameters."""


def resolve_checkpoint(params: Params, params_file: str | Path | None = None) -> tuple[str | None, Path | None]:
    """``(checkpoint, warm-start directory)`` of ``model.checkpoint``, the same for every stage.

    A directory stays as given (a relative one is read against the project root); ``untrained`` is the random-init organism (``None``); ``null`` is, for the
    organism, the checkpoint of :func:`find_warmstart` (:class:`MissingWarmstartError` naming the command
    that builds one when none matches, ``params_file`` in it) and for any other spec its own weights.
    """
    checkpoint = params.model.checkpoint
    if checkpoint == UNTRAINED or (checkpoint is None and params.model.spec != "organism"):
        return None, None
    if checkpoint is not None:
        path = Path(checkpoint)
        return str(path if path.is_absolute() else project_root() / path), None
    directory = find_warmstart(params)
    if directory is None:
        raise MissingWarmstartError(
            f"no warm start matches these parameters (looked in {SHIPPED_PATTERN} and warmstart.out_dir "
            f"{params.warmstart.out_dir}); build one with `intraskill warmstart --params {params_file or 'PARAMS'}`"
            f", or set model.checkpoint: {UNTRAINED} for the random-init organism")
    return str(directory / CHECKPOINT_DIR), directory
