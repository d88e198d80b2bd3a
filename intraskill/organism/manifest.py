"""The organism warm start's manifest (``manifest.json``, ``intraskill-warmstart-v1``), typed: the checkpoint's
identity, the parameters and seeds it was made from, the demonstrations and behaviour-cloning records, the
checkpoint's file digests, the timings and the val metrics (bare, with S₀ and each chunk alone).

The parameter, demonstration and cloning blocks are the sections' own records (free-form objects); the metrics
are typed. Shipped warm starts (``params/*_warmstart``, ``data/results``) load as this model.
"""

from __future__ import annotations

from typing import Any, Literal

from intraskill.record import Record

MANIFEST_SCHEMA_VERSION = "intraskill-warmstart-v1"


class ArmMetrics(Record):
    """One val arm: episodes, scored, success and reward (unscored count 0), error rates per turn, turns and
    terminations (:func:`~intraskill.organism.truth.arm_metrics`)."""

    episodes: int
    scored: int
    success: float
    reward: float
    protocol_error_rate: float
    invalid_action_rate: float
    mean_turns: float
    terminations: dict[str, int]


class WarmstartMetrics(Record):
    split: str
    bare: ArmMetrics
    s0: ArmMetrics
    alone: dict[str, ArmMetrics]
    eval_wall_s: dict[str, float]


class WarmstartManifest(Record):
    """A finished warm start (:func:`~intraskill.organism.warmstart.run_warmstart`)."""

    schema_version: Literal[MANIFEST_SCHEMA_VERSION] = MANIFEST_SCHEMA_VERSION
    checkpoint_sha256: str
    bank_sha256: str
    catalog_sha256: str
    params: dict[str, Any]
    seeds: dict[str, int]
    demos: dict[str, Any]
    bc: dict[str, Any]
    files: dict[str, str]
    timings: dict[str, float]
    metrics: WarmstartMetrics
    ground_truth_file: str

    @property
    def final_loss(self) -> float:
        """The last logged behaviour-cloning loss."""
        return float(self.bc["losses"][-1][1])
