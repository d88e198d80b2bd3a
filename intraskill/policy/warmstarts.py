"""What ``model.checkpoint`` means for every command: the warm start on disk whose manifest matches a
parameter set (a shipped ``params/*_warmstart/``, then ``warmstart.out_dir``), and the one rule that turns
``model.checkpoint`` into a checkpoint (:func:`resolve_checkpoint`).

The organism testbed (:mod:`intraskill.organism`) writes warm starts in this layout (``checkpoint/``,
``manifest.json``, ``ground_truth.json``); the stages only read them, so they never import the testbed. The
ground truth, which the curriculum's α and the gate's validation read, is typed here (:class:`GroundTruth`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from intraskill.layout import WarmstartDir
from intraskill.params import UNTRAINED, Params, WarmstartParams, section_plan
from intraskill.paths import project_root
from intraskill.policy.organism import splits_like_organism
from intraskill.record import Record

SHIPPED_PATTERN = "params/*_warmstart"
"""Every shipped warm start (``make warmstart`` / ``make warmstart-additive``): one per organism params."""
EVAL_ONLY = ("eval_episodes", "ground_truth_episodes", "eval_batch_size")
"""Warm-start settings of the evaluation alone: changing them re-evaluates, it never retrains."""
NOT_TRAINING = (*EVAL_ONLY, "out_dir")
"""Warm-start settings that do not change the trained model (the evaluation's and the location)."""
GROUND_TRUTH_SCHEMA_VERSION = "intraskill-ground-truth-v1"


class ChunkTruth(Record):
    """One chunk alone against bare, paired by task and episode seed: the role and competence or habit it is tied
    to (``None``: a neutral or reader chunk), both arms' success, the effect (alone − bare) with its paired 95 %
    CI and pair count, and the alone arm's protocol-error rate per model turn."""

    role: str
    target: str | None
    bare_success: float
    alone_success: float
    effect: float
    ci95: tuple[float, float]
    pairs: int
    protocol_error_rate: float


class GroundTruth(Record):
    """``ground_truth.json``: each chunk's measured effect on ``metric`` (task-level paired bootstrap), with what it
    was measured on — the checkpoint's weights (``None`` for the scripted teacher, and then left out), the bank, the
    catalogue, the split, the episodes per arm and the episode seed."""

    omit_when_none = frozenset({"checkpoint_sha256"})

    schema_version: Literal[GROUND_TRUTH_SCHEMA_VERSION] = GROUND_TRUTH_SCHEMA_VERSION
    checkpoint_sha256: str | None = None
    bank_sha256: str
    catalog_sha256: str
    split: str
    episodes_per_arm: int
    seed: int
    metric: str
    method: str
    bootstrap_samples: int
    seed_base: int
    chunks: dict[str, ChunkTruth]

    @property
    def effects(self) -> dict[str, float]:
        """Chunk ID → its measured effect."""
        return {chunk_id: chunk.effect for chunk_id, chunk in self.chunks.items()}


def read_ground_truth(directory: str | Path) -> GroundTruth:
    """The ``ground_truth.json`` of the warm start in ``directory`` (:class:`FileNotFoundError` naming the command
    that makes one; :class:`ValueError` naming the file and field of a bad one)."""
    path = WarmstartDir(directory).ground_truth
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no ground truth (run `intraskill warmstart`)")
    return GroundTruth.read(path)


def training_settings(warmstart: WarmstartParams) -> dict[str, Any]:
    """The warm-start settings that decide the trained model (:data:`NOT_TRAINING` left out, later fields at
    their defaults too: :func:`~intraskill.params.section_plan`), as JSON."""
    return {key: value for key, value in section_plan(warmstart).items() if key not in NOT_TRAINING}


def warmstart_matches(directory: Path, params: Params) -> bool:
    """A finished warm start in ``directory`` whose manifest records this store, model shape, view and
    warm-start training settings (:func:`training_settings`: evaluation settings and location aside), and whose
    tokenizer splits text as the organism's does now. A setting the manifest lacks (added after it was written)
    counts as its default, the behaviour of that time."""
    files = WarmstartDir(directory)
    manifest_path = files.manifest
    if not manifest_path.is_file() or not files.ground_truth.is_file():
        return False
    if not files.checkpoint.is_saved() or not splits_like_organism(files.checkpoint.tokenizer):
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

    A directory stays as given (a relative one is read against the project root); ``untrained`` is the
    random-init organism (``None``); ``null`` is, for the organism, the checkpoint of :func:`find_warmstart`
    (:class:`MissingWarmstartError` naming the command that builds one when none matches, ``params_file`` in it)
    and for any other spec its own weights.
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
    return str(WarmstartDir(directory).checkpoint.root), directory
