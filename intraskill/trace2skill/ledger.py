"""The cumulative proposal ledger (``proposal_ledger.jsonl``, one object per candidate).

Reference: docs/method.md §4.3. Each entry records a proposal (ADD/REWRITE, cold start or
online) and, after a gate, its ``validation_result`` (``selected``, ``rewrite_loser``,
``non_positive``, ``budget_excluded`` or ``retired``), ``estimated_effect`` and ``contribution_rank``,
plus one ``validation_history`` event per gate. Events are de-duplicated on (assignment_sha256,
validation_estimator, bare_validation_observations_sha256), so re-running a gate is idempotent.

For chunks that came from earlier candidates (the current slot a proposal occupies), the gate sets
``active_chunk_id`` and records ``selected`` or ``retired``. The ledger accumulates across rounds: a
round starts from the previous gate's ledger. The file is append-only JSONL written with
:class:`~intraskill.jsonl.JsonlWriter`; each line is a full snapshot of one entry and the last snapshot
of a ``candidate_id`` wins when reading.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.skills.pool import Candidate, CandidatePool, proposal_signature
from intraskill.trace2skill.cards import STAGE_ONLINE, STAGES

VALIDATION_RESULTS = ("selected", "rewrite_loser", "non_positive", "budget_excluded", "retired")
_EVENT_KEY = ("assignment_sha256", "validation_estimator", "bare_validation_observations_sha256")


class GateColumn(Protocol):
    """What the ledger reads of one gate column (a gate ``ContributionRecord``)."""

    @property
    def intervention_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def logical_chunk_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def coefficient(self) -> float: ...
    @property
    def rank(self) -> int | None: ...


class GateOutcome(Protocol):
    """What the ledger reads of a gate result (``intraskill.gate.contributions.GateContributions``)."""

    @property
    def estimator_name(self) -> str: ...
    @property
    def bare_observations_sha256(self) -> str: ...
    @property
    def pool_sha256(self) -> str: ...
    @property
    def assignment_sha256(self) -> str: ...
    @property
    def contributions(self) -> Sequence[GateColumn]: ...


class LedgerError(ValueError):
    """A ledger entry or update is inconsistent; the message names the candidate and field."""


@dataclass(frozen=True)
class LedgerEntry:
    """One proposal and its validation state (fields of §4.3)."""

    candidate_id: str
    operation: str
    target_chunk_id: str | None
    source_card_ids: tuple[str, ...]
    failure_mechanism: str
    proposal_checkpoint: str
    stage: str
    consolidation_cluster_id: str | None
    replacement_family_id: str | None
    content: str
    validation_result: str | None = None
    estimated_effect: float | None = None
    contribution_rank: int | None = None
    notes: str = ""
    active_chunk_id: str | None = None
    validation_history: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_card_ids", tuple(self.source_card_ids))
        object.__setattr__(self, "validation_history", tuple(dict(e) for e in self.validation_history))
        where = f"ledger[{self.candidate_id!r}]"
        if self.stage not in STAGES:
            raise LedgerError(f"{where}.stage: expected one of {STAGES}, got {self.stage!r}")
        if self.validation_result is not None and self.validation_result not in VALIDATION_RESULTS:
            raise LedgerError(f"{where}.validation_result: expected one of {VALIDATION_RESULTS} or null")
        expected_family = self.target_chunk_id if self.operation == "REWRITE" else None
        if self.replacement_family_id != expected_family:
            raise LedgerError(
                f"{where}.replacement_family_id: must be {expected_family!r} for a {self.operation}")

    @property
    def signature(self) -> str:
        """Fingerprint of {operation, target, rendered content}: exact repeats share it."""
        return proposal_signature(self.operation, self.target_chunk_id, self.content)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["source_card_ids"] = list(self.source_card_ids)
        record["validation_history"] = [dict(e) for e in self.validation_history]
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LedgerEntry":
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise LedgerError(f"ledger[{data.get('candidate_id')!r}]: unknown field(s) {unknown}")
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_candidate(
        cls, candidate: Candidate, *, stage: str = STAGE_ONLINE, notes: str = ""
    ) -> "LedgerEntry":
        """A fresh (unvalidated) entry for a pool candidate."""
        meta = candidate.metadata
        return cls(
            candidate_id=candidate.candidate_id, operation=candidate.operation,
            target_chunk_id=candidate.target_chunk_id,
            source_card_ids=tuple(meta.get("evidence_card_ids") or ()),
            failure_mechanism=str(meta.get("failure_mechanism", "")),
            proposal_checkpoint=str(meta.get("proposal_checkpoint", "")), stage=stage,
            consolidation_cluster_id=meta.get("consolidation_cluster_id"),
            replacement_family_id=candidate.target_chunk_id if candidate.operation == "REWRITE" else None,
            content=candidate.content, notes=notes,
        )


def ledger_signatures(entries: Iterable[LedgerEntry]) -> set[str]:
    """Signatures of every proposal in the ledger (the compiler's repeat filter)."""
    return {entry.signature for entry in entries}


def add_proposals(
    entries: Sequence[LedgerEntry], pool: CandidatePool, *, stage: str = STAGE_ONLINE
) -> list[LedgerEntry]:
    """The ledger with one new entry per pool candidate appended (history first, then pool order).

    A candidate whose ID or signature is already in the ledger is an exact repeat and is refused.
    """
    known_ids = {e.candidate_id for e in entries}
    known_signatures = ledger_signatures(entries)
    added = []
    for candidate in pool.candidates:
        if candidate.candidate_id in known_ids or candidate.signature in known_signatures:
            raise LedgerError(f"candidate {candidate.candidate_id}: exact repeat of a ledger proposal")
        added.append(LedgerEntry.from_candidate(candidate, stage=stage))
    return list(entries) + added


def _with_event(entry: LedgerEntry, event: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    key = tuple(event[k] for k in _EVENT_KEY)
    kept = tuple(e for e in entry.validation_history if tuple(e.get(k) for k in _EVENT_KEY) != key)
    return kept + (event,)


def apply_gate_results(
    entries: Sequence[LedgerEntry],
    gate: GateOutcome,
    *,
    evaluation_checkpoint: str,
) -> list[LedgerEntry]:
    """Update the ledger with one gate's result (its contributions and provenance hashes).

    - A candidate column updates its own entry with the gate's status, β and rank; a selected
      candidate becomes the holder of its slot (``active_chunk_id``).
    - A current column updates the entry that holds that slot (``active_chunk_id``), or an unvalidated
      entry with the same ID (a cold-start draft at Gate A). A previously validated holder records
      ``selected`` or ``retired`` (a current version that loses its family is retired); an unvalidated
      one records the gate status verbatim. Current chunks with no ledger history are skipped.
    - Every updated entry gains a ``validation_history`` event (de-duplicated, see the module docstring).

    Raises :class:`LedgerError` if a candidate column has no ledger entry.
    """
    updated = list(entries)
    index_by_id = {e.candidate_id: i for i, e in enumerate(updated)}
    holders = {e.active_chunk_id: i for i, e in enumerate(updated) if e.active_chunk_id is not None}
    common = {
        "evaluation_checkpoint": evaluation_checkpoint,
        "validation_estimator": gate.estimator_name,
        "bare_validation_observations_sha256": gate.bare_observations_sha256,
        "pool_sha256": gate.pool_sha256,
        "assignment_sha256": gate.assignment_sha256,
    }
    for record in gate.contributions:
        ident, slot, status = record.intervention_id, record.logical_chunk_id, str(record.status)
        if record.kind == "candidate":
            if ident not in index_by_id:
                raise LedgerError(f"candidate {ident}: in the gate but not in the proposal ledger")
            position, result = index_by_id[ident], status
        elif ident in holders:
            position, result = holders[ident], ("selected" if status == "selected" else "retired")
        elif ident in index_by_id and updated[index_by_id[ident]].validation_result is None:
            position, result = index_by_id[ident], status
        else:
            continue
        entry = updated[position]
        event = {"proposal_checkpoint": entry.proposal_checkpoint, **common, "intervention_id": ident,
                 "validation_result": result, "estimated_effect": record.coefficient,
                 "contribution_rank": record.rank}
        updated[position] = replace(
            entry, validation_result=result, estimated_effect=record.coefficient,
            contribution_rank=record.rank, active_chunk_id=slot if result == "selected" else None,
            validation_history=_with_event(entry, event))
    return updated


def read_ledger(path: str | Path) -> list[LedgerEntry]:
    """The ledger's entries: last snapshot per ``candidate_id``, in first-appearance order ([] if absent)."""
    latest: dict[str, dict[str, Any]] = {}
    for record in iter_jsonl(path):
        latest[record["candidate_id"]] = record
    return [LedgerEntry.from_dict(record) for record in latest.values()]


def append_ledger(path: str | Path, entries: Iterable[LedgerEntry]) -> Path:
    """Append entry snapshots (fsync per line); later snapshots supersede earlier ones on read."""
    with JsonlWriter(path) as writer:
        for entry in entries:
            writer.append(entry.to_dict())
    return Path(path)


def write_ledger(path: str | Path, entries: Iterable[LedgerEntry]) -> Path:
    """Write a fresh ledger file (one line per entry) atomically: a temp file, then ``os.replace``."""
    path = Path(path)
    staging = path.with_name(path.name + ".tmp")
    staging.unlink(missing_ok=True)
    append_ledger(staging, entries)
    os.replace(staging, path)
    return path

