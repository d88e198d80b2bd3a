"""The online candidate pool (``shopsimrl-skill-candidate-pool-v1``): the gate's input, the current skills
plus a round's ADD/REWRITE candidates, hashed.

Reference: docs/method.md §1.2 (online candidate IDs), §4.2 (pool fields, ``pool_sha256``, validation rules,
fallback pool) and §4.3 (signature de-duplication). The analysts fill it
(:mod:`intraskill.trace2skill.submission`) and the gate reads it (:mod:`intraskill.gate`), both from here.

- ``signature`` = SHA-256 of the canonical JSON of {operation, target_chunk_id, content}; the
  candidate ID is ``online-`` + its first 16 hex characters, and the consolidation cluster ID is
  ``cluster-`` + the same 16 hex characters.
- ``pool_sha256`` fingerprints every pool field except ``created_at`` and ``pool_sha256``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_json
from intraskill.jsonl import write_json
from intraskill.skills.bank import Skill, SkillBank

POOL_SCHEMA_VERSION = "shopsimrl-skill-candidate-pool-v1"
OPERATIONS = ("ADD", "REWRITE")
CANDIDATE_VERSION = "candidate"
"""Version string of an online candidate (and of a winning candidate in the next bank)."""


class CandidatePoolError(ValueError):
    """A pool or a compiler submission violates the contract; the message names the field."""


def proposal_signature(operation: str, target_chunk_id: str | None, content: str) -> str:
    """Fingerprint of {operation, target_chunk_id, rendered content} (full hex)."""
    return sha256_json({"operation": operation, "target_chunk_id": target_chunk_id, "content": content})


def online_candidate_id(operation: str, target_chunk_id: str | None, content: str) -> str:
    """``online-`` + the first 16 hex characters of :func:`proposal_signature`."""
    return "online-" + proposal_signature(operation, target_chunk_id, content)[:16]


def check_operation(operation: Any, target: Any, where: str) -> None:
    """An operation of :data:`OPERATIONS` with the target it needs (errors name ``where``)."""
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
        check_operation(self.operation, self.target_chunk_id, f"candidates[{self.candidate_id!r}]")
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
