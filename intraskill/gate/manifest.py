"""The gate manifest (``online_gate_manifest.json`` / ``gate_a_manifest.json``, ``intraskill-gate-manifest-v1``),
typed: what a gate ran on, how, what it observed and found, and the SHA-256 of every output.

A running gate's manifest holds its status, design, config and inputs; a complete one adds the protocol, the
observed provenance, the outcomes and the output hashes (the keys a running manifest lacks stay out of its JSON).
The config is the gate's own settings record (:meth:`intraskill.pipeline.gate_run.GateConfig.to_dict`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, ClassVar, Literal

from pydantic import Field

from intraskill.layout import GATE_A, ONLINE
from intraskill.record import Record

MANIFEST_SCHEMA_VERSION = "intraskill-gate-manifest-v1"
RUNNING, COMPLETE = "running", "complete"


class GateInputs(Record):
    """What the gate's result depends on: design, pool (or draft) digest, checkpoint and its weights digest, the
    injected policy's identity, parameters, ledger, and the bare run paired with."""

    design: str
    pool_sha256: str
    checkpoint: str | None
    checkpoint_sha256: str | None
    policy_identity_sha256: str | None
    params_sha256: str
    ledger_sha256: str | None
    bare_run_dir: str


class GateProtocol(Record):
    estimator: dict[str, Any]
    mask_design: str
    mask_seed: int
    mask_redraw: int
    max_mask_redraws: int
    samples_per_task: int
    cov_type: str


class GateObserved(Record):
    model: dict[str, Any]
    masked_plan_fingerprint: str
    bare_plan_fingerprint: str
    assignment_sha256: str
    observations: int
    dropped_episode_ids: list[str]


class MeanOutcome(Record):
    """A metric's mean over the paired observations: bare, masked, and masked − bare."""

    bare_mean: float
    masked_mean: float
    delta_mean: float


class AdditivityVerdict(Record):
    testable: bool
    reason: str | None
    statistic: float | None
    p_value: float | None
    rejected: bool | None


class GateOutcomes(Record):
    """The fitted gate's headline: reward and success means, the masked run's success, columns, selection, the
    additivity verdict and the candidates (a metric the fit lacks is left out)."""

    omit_when_none: ClassVar[frozenset[str]] = frozenset({"reward", "r_success"})

    reward: MeanOutcome | None = None
    r_success: MeanOutcome | None = None
    masked_run_success_rate: float | None
    columns: int
    selected_count: int
    additivity: AdditivityVerdict | None
    candidates: int


class GateManifest(Record):
    """A gate's manifest, running or complete."""

    omit_when_none: ClassVar[frozenset[str]] = frozenset({"protocol", "observed", "outcomes", "outputs"})

    schema_version: Literal[MANIFEST_SCHEMA_VERSION] = MANIFEST_SCHEMA_VERSION
    updated_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    status: Literal[RUNNING, COMPLETE]
    design: Literal[ONLINE, GATE_A]
    config: dict[str, Any]
    inputs: GateInputs
    protocol: GateProtocol | None = None
    observed: GateObserved | None = None
    outcomes: GateOutcomes | None = None
    outputs: dict[str, str] | None = None

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE
