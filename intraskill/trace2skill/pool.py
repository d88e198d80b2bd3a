"""The online candidate pool (``shopsimrl-skill-candidate-pool-v1``) and the compiler's hard limits.

Reference: docs/method.md §1.2 (online candidate IDs), §4.1 (online candidate compiler),
§4.2 (pool fields, ``pool_sha256``, validation rules, fallback pool) and §4.3 (signature de-duplication).

- A candidate's ``content`` is its chunk rendered with the fixed template (:func:`render_chunk`).
- ``signature`` = SHA-256 of the canonical JSON of {operation, target_chunk_id, content}; the
  candidate ID is ``online-`` + its first 16 hex characters, and the consolidation cluster ID is
  ``cluster-`` + the same 16 hex characters.
- At most ``max_candidates`` (default 6, allowed 1–16) ADD/REWRITE candidates per round; an exact
  repeat of any candidate in the cumulative ledger (same signature) is rejected.
- ``pool_sha256`` fingerprints every pool field except ``created_at`` and ``pool_sha256``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_json
from intraskill.jsonl import write_json
from intraskill.params import MAX_CANDIDATES, MAX_CANDIDATES_LIMITS
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import Chunk, render_chunk
from intraskill.trace2skill.firewall import GoldLeakError, GoldLookup, check_payload

POOL_SCHEMA_VERSION = "shopsimrl-skill-candidate-pool-v1"
OPERATIONS = ("ADD", "REWRITE")
_DEPLOYABLE_FIELDS = (
    "title", "failure_mechanism", "applicable_when", "procedure", "verification", "common_failure"
)
"""Text fields of a submitted candidate that the gold firewall scans (IDs are not deployable text)."""
CANDIDATE_VERSION = "candidate"
"""Version string of an online candidate (and of a winning candidate in the next bank)."""


class CandidatePoolError(ValueError):
    """A pool or a compiler submission violates the contract; the message names the field."""


class CandidateLeakError(CandidatePoolError, GoldLeakError):
    """A compiler draft trips the gold firewall."""


def proposal_signature(operation: str, target_chunk_id: str | None, content: str) -> str:
    """Fingerprint of {operation, target_chunk_id, rendered content} (full hex)."""
    return sha256_json({"operation": operation, "target_chunk_id": target_chunk_id, "content": content})


def online_candidate_id(operation: str, target_chunk_id: str | None, content: str) -> str:
    """``online-`` + the first 16 hex characters of :func:`proposal_signature`."""
    return "online-" + proposal_signature(operation, target_chunk_id, content)[:16]


def check_max_candidates(max_candidates: int) -> int:
    """Validate the per-round candidate cap (1–16); returns it."""
    low, high = MAX_CANDIDATES_LIMITS
    is_int = isinstance(max_candidates, int) and not isinstance(max_candidates, bool)
    if not is_int or not low <= max_candidates <= high:
        raise CandidatePoolError(
            f"max_candidates: must be an integer in [{low}, {high}], got {max_candidates!r}")
    return max_candidates


def _check_operation(operation: Any, target: Any, where: str) -> None:
    if operation not in OPERATIONS:
        raise CandidatePoolError(f"{where}.operation: expected one of {OPERATIONS}, got {operation!r}")
    if operation == "ADD" and target is not None:
        raise CandidatePoolError(f"{where}.target_chunk_id: an ADD has no target, got {target!r}")
    if operation == "REWRITE" and (not isinstance(target, str) or not target):
        raise CandidatePoolError(f"{where}.target_chunk_id: a REWRITE needs the target chunk id")


@dataclass(frozen=True)
class Candidate:
    """One pool candidate: ``metadata`` holds title, failure_mechanism, evidence_card_ids,
    consolidation_cluster_id and proposal_checkpoint."""

    candidate_id: str
    operation: str
    target_chunk_id: str | None
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_operation(self.operation, self.target_chunk_id, f"candidates[{self.candidate_id!r}]")
        if not isinstance(self.content, str) or not self.content.strip():
            raise CandidatePoolError(f"candidates[{self.candidate_id!r}].content: must be non-empty Markdown")

    @property
    def signature(self) -> str:
        """:func:`proposal_signature` of this candidate."""
        return proposal_signature(self.operation, self.target_chunk_id, self.content)

    def to_dict(self) -> dict[str, Any]:
        return {"candidate_id": self.candidate_id, "operation": self.operation,
                "target_chunk_id": self.target_chunk_id, "content": self.content,
                "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "candidate") -> "Candidate":
        missing = [key for key in ("candidate_id", "operation", "content") if key not in data]
        if missing:
            raise CandidatePoolError(f"{where}: missing {missing}")
        return cls(candidate_id=str(data["candidate_id"]), operation=data["operation"],
                   target_chunk_id=data.get("target_chunk_id"), content=data["content"],
                   metadata=dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class CandidateDraft:
    """One entry of the online compiler's ``submit_online_candidates`` tool call."""

    operation: str
    target_chunk_id: str | None
    title: str
    failure_mechanism: str
    applicable_when: str
    procedure: tuple[str, ...]
    verification: str
    common_failure: str
    evidence_card_ids: tuple[str, ...]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "candidates[0]") -> "CandidateDraft":
        """Parse and type-check one submitted candidate (errors name ``where.field``)."""
        if not isinstance(data, Mapping):
            raise CandidatePoolError(f"{where}: expected an object")
        names = [f for f in cls.__dataclass_fields__]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise CandidatePoolError(f"{where}: unknown field(s) {unknown}")
        for name in ("title", "failure_mechanism", "applicable_when", "verification", "common_failure"):
            if not isinstance(data.get(name), str) or not data[name].strip():
                raise CandidatePoolError(f"{where}.{name}: must be a non-empty string")
        for name in ("procedure", "evidence_card_ids"):
            value = data.get(name)
            strings = isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
            if not strings or not value:
                raise CandidatePoolError(f"{where}.{name}: must be a non-empty list of strings")
        _check_operation(data.get("operation"), data.get("target_chunk_id"), where)
        return cls(operation=data["operation"], target_chunk_id=data.get("target_chunk_id"),
                   title=data["title"], failure_mechanism=data["failure_mechanism"],
                   applicable_when=data["applicable_when"], procedure=tuple(data["procedure"]),
                   verification=data["verification"], common_failure=data["common_failure"],
                   evidence_card_ids=tuple(data["evidence_card_ids"]))

    @property
    def content(self) -> str:
        """The chunk rendered with the fixed template."""
        try:
            chunk = Chunk(self.title, self.applicable_when, self.procedure, self.verification,
                          self.common_failure)
        except ValueError as error:
            raise CandidatePoolError(str(error)) from None
        return render_chunk(chunk)

    def to_candidate(self, proposal_checkpoint: str) -> Candidate:
        """The pool candidate (ID and cluster ID from the signature)."""
        content = self.content
        digest = proposal_signature(self.operation, self.target_chunk_id, content)[:16]
        metadata = {"title": self.title, "failure_mechanism": self.failure_mechanism,
                    "evidence_card_ids": list(self.evidence_card_ids),
                    "consolidation_cluster_id": f"cluster-{digest}",
                    "proposal_checkpoint": proposal_checkpoint}
        return Candidate(f"online-{digest}", self.operation, self.target_chunk_id, content, metadata)


def validate_online_submission(
    submission: Mapping[str, Any],
    *,
    active_chunk_ids: Sequence[str],
    eligible_card_ids: Collection[str],
    ledger_signatures: Collection[str],
    proposal_checkpoint: str,
    max_candidates: int = MAX_CANDIDATES,
    lookup: GoldLookup | None = None,
) -> list[Candidate]:
    """Enforce the online compiler's hard limits and return the pool candidates.

    Raises :class:`CandidatePoolError` (its message is what a repair retry shows the compiler) when
    the submission has more than ``max_candidates`` candidates; a draft is malformed; a REWRITE targets
    a chunk that is not active; a candidate cites a card that is not eligible; a draft trips the gold
    firewall; or a candidate repeats a ledger signature or another candidate of the batch.
    ``evidence_only_card_ids`` must also cite eligible cards only.
    """
    check_max_candidates(max_candidates)
    raw = submission.get("candidates")
    if not isinstance(raw, list):
        raise CandidatePoolError("candidates: expected a list")
    if len(raw) > max_candidates:
        raise CandidatePoolError(f"candidates: {len(raw)} submitted, at most {max_candidates} allowed")
    eligible = set(eligible_card_ids)
    evidence_only = submission.get("evidence_only_card_ids") or []
    stray = sorted(set(evidence_only) - eligible)
    if stray:
        raise CandidatePoolError(f"evidence_only_card_ids: {stray} are not eligible cards")
    seen = set(ledger_signatures)
    candidates = []
    for index, item in enumerate(raw):
        where = f"candidates[{index}]"
        draft = CandidateDraft.from_dict(item, where)
        if draft.operation == "REWRITE" and draft.target_chunk_id not in active_chunk_ids:
            raise CandidatePoolError(
                f"{where}.target_chunk_id: {draft.target_chunk_id!r} is not an active chunk")
        unknown = sorted(set(draft.evidence_card_ids) - eligible)
        if unknown:
            raise CandidatePoolError(f"{where}.evidence_card_ids: {unknown} are not eligible cards")
        check_payload({name: item[name] for name in _DEPLOYABLE_FIELDS}, lookup, where, CandidateLeakError)
        candidate = draft.to_candidate(proposal_checkpoint)
        if candidate.signature in seen:
            raise CandidatePoolError(
                f"{where}: exact repeat of an earlier proposal (signature {candidate.signature[:16]})")
        seen.add(candidate.signature)
        candidates.append(candidate)
    return candidates


def _skill_record(skill: Skill) -> dict[str, Any]:
    return {"skill_id": skill.skill_id, "version": skill.version, "content": skill.content,
            "metadata": dict(skill.metadata)}


@dataclass(frozen=True)
class CandidatePool:
    """The gate's input: the current skills plus this round's candidates, hashed.

    ``pool_sha256`` is computed when empty and verified otherwise.
    """

    round_id: str
    proposal_checkpoint: str
    current_skillbank_sha256: str
    current_skills: tuple[Skill, ...]
    candidates: tuple[Candidate, ...]
    created_at: str = ""
    pool_sha256: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "current_skills", tuple(self.current_skills))
        object.__setattr__(self, "candidates", tuple(self.candidates))
        current = [s.skill_id for s in self.current_skills]
        if len(set(current)) != len(current):
            raise CandidatePoolError("current_skills: duplicate skill_id")
        ids = [c.candidate_id for c in self.candidates]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise CandidatePoolError(f"candidates: duplicate candidate_id {repeated}")
        clash = sorted(set(ids) & set(current))
        if clash:
            raise CandidatePoolError(f"candidates: ids {clash} collide with current skill ids")
        for candidate in self.candidates:
            if candidate.operation == "REWRITE" and candidate.target_chunk_id not in current:
                raise CandidatePoolError(
                    f"candidates[{candidate.candidate_id!r}].target_chunk_id: "
                    f"{candidate.target_chunk_id!r} is not a current chunk")
        expected = sha256_json(self._hashed_fields())
        if not self.pool_sha256:
            object.__setattr__(self, "pool_sha256", expected)
        elif self.pool_sha256 != expected:
            raise CandidatePoolError(
                f"pool_sha256: recorded {self.pool_sha256} but the pool hashes to {expected}")

    def _hashed_fields(self) -> dict[str, Any]:
        return {
            "schema_version": POOL_SCHEMA_VERSION,
            "round_id": self.round_id,
            "proposal_checkpoint": self.proposal_checkpoint,
            "current_skillbank_sha256": self.current_skillbank_sha256,
            "current_skills": [_skill_record(s) for s in self.current_skills],
            "candidates": [c.to_dict() for c in self.candidates],
        }

    def current_skill(self, skill_id: str) -> Skill:
        """The current skill with ``skill_id`` (``KeyError`` naming it otherwise)."""
        for skill in self.current_skills:
            if skill.skill_id == skill_id:
                return skill
        raise KeyError(f"{skill_id!r} is not a current skill of pool {self.pool_sha256[:12]}")

    def candidate(self, candidate_id: str) -> Candidate:
        """The candidate with ``candidate_id`` (``KeyError`` naming it otherwise)."""
        for candidate in self.candidates:
            if candidate.candidate_id == candidate_id:
                return candidate
        raise KeyError(f"{candidate_id!r} is not a candidate of pool {self.pool_sha256[:12]}")

    def to_dict(self) -> dict[str, Any]:
        record = self._hashed_fields()
        record["created_at"] = self.created_at
        record["pool_sha256"] = self.pool_sha256
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CandidatePool":
        """Parse a pool file object, re-validating it and verifying ``pool_sha256``."""
        if data.get("schema_version") != POOL_SCHEMA_VERSION:
            raise CandidatePoolError(
                f"schema_version: expected {POOL_SCHEMA_VERSION!r}, got {data.get('schema_version')!r}")
        for key in ("round_id", "proposal_checkpoint", "current_skillbank_sha256", "current_skills",
                    "candidates", "pool_sha256"):
            if key not in data:
                raise CandidatePoolError(f"{key}: missing")
        skills = tuple(Skill(skill_id=s["skill_id"], content=s["content"], version=s.get("version", "1"),
                             metadata=dict(s.get("metadata") or {})) for s in data["current_skills"])
        candidates = tuple(
            Candidate.from_dict(c, f"candidates[{i}]") for i, c in enumerate(data["candidates"]))
        return cls(round_id=data["round_id"], proposal_checkpoint=data["proposal_checkpoint"],
                   current_skillbank_sha256=data["current_skillbank_sha256"], current_skills=skills,
                   candidates=candidates, created_at=data.get("created_at", ""),
                   pool_sha256=data["pool_sha256"])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def build_candidate_pool(
    bank: SkillBank,
    candidates: Sequence[Candidate],
    *,
    round_id: str,
    proposal_checkpoint: str,
    created_at: str | None = None,
) -> CandidatePool:
    """The pool of the bank's enabled skills (bank order) and the round's candidates."""
    return CandidatePool(round_id=round_id, proposal_checkpoint=proposal_checkpoint,
                         current_skillbank_sha256=bank.sha256, current_skills=tuple(bank.enabled_skills()),
                         candidates=tuple(candidates), created_at=created_at or _now())


def fallback_pool(bank: SkillBank, *, round_id: str, proposal_checkpoint: str,
                  created_at: str | None = None) -> CandidatePool:
    """The pool used when no card is eligible or the analysis failed: current skills only."""
    return build_candidate_pool(bank, (), round_id=round_id, proposal_checkpoint=proposal_checkpoint,
                                created_at=created_at)


def save_pool(pool: CandidatePool, path: str | Path) -> Path:
    """Write ``candidate_pool.json`` (indented UTF-8, LF)."""
    path = Path(path)
    write_json(path, pool.to_dict())
    return path


def load_pool(path: str | Path) -> CandidatePool:
    """Read and verify a ``candidate_pool.json``."""
    try:
        return CandidatePool.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except CandidatePoolError as error:
        raise CandidatePoolError(f"{path}: {error}") from None
