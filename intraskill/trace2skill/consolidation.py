"""Cold-start consolidation: eligible cards of one channel, in batches, → clusters (every card once).

Reference: docs/method.md §4.4 step 3 (per channel, success and failure, in batches of 40 eligible cards),
§4.1 (the Consolidator: ``{channel, batch_id, max_clusters, cards: deployable view only}`` →
``submit_clusters`` with clusters {workflow_stage, mechanism, applicable_when, procedure, verification,
common_failure, evidence_card_ids} and ``evidence_only_card_ids``; every card accounted for exactly once) and
§1.5 (at most min(12, batch size) clusters per batch).

Two consolidators share one validation (:func:`~intraskill.trace2skill.llm_analyst.validate_clusters`):
:func:`rule_consolidate` groups cards by their mechanism key and writes each group's cluster from the
mechanism's chunk template (the largest groups first; cards of an unknown mechanism, or beyond the cluster cap,
are evidence only); :class:`LLMConsolidator` asks a model (:func:`~intraskill.trace2skill.llm_analyst.consolidate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from intraskill.chat.base import Policy
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.llm_analyst import EvidenceCard, consolidate, validate_clusters
from intraskill.trace2skill.mechanisms import MECHANISMS


@dataclass(frozen=True)
class Cluster:
    """One consolidated cluster (``<batch_id>-cluster-NN``) of one channel's batch."""

    cluster_id: str
    channel: str
    batch_id: str
    workflow_stage: str
    mechanism: str
    applicable_when: str
    procedure: tuple[str, ...]
    verification: str
    common_failure: str
    evidence_card_ids: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        """The compiler's view of the cluster: its fields and evidence count (card IDs left out)."""
        return {"cluster_id": self.cluster_id, "channel": self.channel, "workflow_stage": self.workflow_stage,
                "mechanism": self.mechanism, "applicable_when": self.applicable_when,
                "procedure": list(self.procedure), "verification": self.verification,
                "common_failure": self.common_failure, "evidence_count": len(self.evidence_card_ids)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "batch_id": self.batch_id, "evidence_card_ids": list(self.evidence_card_ids)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Cluster":
        return cls(data["cluster_id"], data["channel"], data["batch_id"], data["workflow_stage"], data["mechanism"],
                   data["applicable_when"], tuple(data["procedure"]), data["verification"], data["common_failure"],
                   tuple(data["evidence_card_ids"]))


@dataclass(frozen=True)
class ClusterBatch:
    """One consolidation call's result: the batch's cards, its clusters and its evidence-only cards."""

    channel: str
    batch_id: str
    card_ids: tuple[str, ...]
    clusters: tuple[Cluster, ...]
    evidence_only_card_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "batch_id": self.batch_id, "card_ids": list(self.card_ids),
                "clusters": [c.to_dict() for c in self.clusters],
                "evidence_only_card_ids": list(self.evidence_only_card_ids)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClusterBatch":
        return cls(data["channel"], data["batch_id"], tuple(data["card_ids"]),
                   tuple(Cluster.from_dict(c) for c in data["clusters"]), tuple(data["evidence_only_card_ids"]))


class Consolidator(Protocol):
    """One channel's batch of eligible cards → a ``submit_clusters`` object (validated)."""

    def __call__(self, cards: Sequence[EvidenceCard], *, channel: str, batch_id: str, max_clusters: int,
                 lookup: GoldLookup | None) -> dict[str, Any]:
        ...


def batch_ids(channel: str, count: int) -> list[str]:
    """``<channel>-batch-001`` … for ``count`` batches."""
    return [f"{channel}-batch-{index + 1:03d}" for index in range(count)]


def in_batches(cards: Sequence[EvidenceCard], size: int) -> list[list[EvidenceCard]]:
    """``cards`` in order, cut into batches of ``size`` (the last may be smaller)."""
    if size < 1:
        raise ValueError(f"size: must be >= 1, got {size}")
    return [list(cards[start:start + size]) for start in range(0, len(cards), size)]


def mechanism_of(card: EvidenceCard) -> str:
    """The card's mechanism key: a success card's ``mechanism``, a failure card's ``failure_mechanism``."""
    view = card.deployable_view()
    return str(view.get("mechanism") or view.get("failure_mechanism") or "")


def rule_consolidate(cards: Sequence[EvidenceCard], *, channel: str, batch_id: str, max_clusters: int,
                     lookup: GoldLookup | None) -> dict[str, Any]:
    """Group ``cards`` by mechanism key; the largest groups (ties: :data:`MECHANISMS` order) become clusters."""
    groups: dict[str, list[str]] = {}
    unknown: list[str] = []
    for card in cards:
        key = mechanism_of(card)
        (groups.setdefault(key, []) if key in MECHANISMS else unknown).append(card.card_id)
    order = list(MECHANISMS)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), order.index(kv[0])))
    cap = min(max_clusters, len(cards))
    clusters = []
    for key, ids in ranked[:cap]:
        mechanism = MECHANISMS[key]
        chunk = mechanism.chunk
        clusters.append({"workflow_stage": mechanism.workflow_stage, "mechanism": key,
                         "applicable_when": chunk.applicable_when, "procedure": list(chunk.procedure),
                         "verification": chunk.verification, "common_failure": chunk.common_failure,
                         "evidence_card_ids": ids})
    left = [card_id for _, ids in ranked[cap:] for card_id in ids] + unknown
    submission = {"clusters": clusters, "evidence_only_card_ids": left}
    return validate_clusters(submission, [c.card_id for c in cards], cap, lookup)


class LLMConsolidator:
    """The Consolidator role over a model (:func:`~intraskill.trace2skill.llm_analyst.consolidate`)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self, cards: Sequence[EvidenceCard], *, channel: str, batch_id: str, max_clusters: int,
                 lookup: GoldLookup | None) -> dict[str, Any]:
        return consolidate(self.policy, cards, channel=channel, batch_id=batch_id, lookup=lookup,
                           max_clusters=max_clusters)


def cluster_batch(channel: str, batch_id: str, cards: Sequence[EvidenceCard],
                  submission: Mapping[str, Any]) -> ClusterBatch:
    """A validated ``submit_clusters`` object as a :class:`ClusterBatch` (cluster IDs assigned in order)."""
    clusters = tuple(
        Cluster(f"{batch_id}-cluster-{index + 1:02d}", channel, batch_id, c["workflow_stage"], c["mechanism"],
                c["applicable_when"], tuple(c["procedure"]), c["verification"], c["common_failure"],
                tuple(c["evidence_card_ids"]))
        for index, c in enumerate(submission["clusters"]))
    return ClusterBatch(channel, batch_id, tuple(c.card_id for c in cards), clusters,
                        tuple(submission.get("evidence_only_card_ids") or ()))
