"""The online compiler's submission (``submit_online_candidates``) and its hard limits: drafts parsed and
checked, the gold firewall, at most ``max_candidates`` candidates, no repeat of a ledger signature.

Reference: docs/method.md §4.1 (online candidate compiler), §4.2 (validation rules) and §4.3 (signature
de-duplication). What passes becomes :class:`~intraskill.skills.pool.Candidate` s of the round's pool.

- A candidate's ``content`` is its chunk rendered with the fixed template (:func:`render_chunk`).
- At most ``max_candidates`` (default 6, allowed 1–16) ADD/REWRITE candidates per round; an exact
  repeat of any candidate in the cumulative ledger (same signature) is rejected.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.params import MAX_CANDIDATES, MAX_CANDIDATES_LIMITS
from intraskill.skills.pool import Candidate, CandidatePoolError, check_operation, proposal_signature
from intraskill.skills.render import Chunk, render_chunk
from intraskill.trace2skill.firewall import GoldLeakError, GoldLookup, check_payload

_DEPLOYABLE_FIELDS = (
    "title", "failure_mechanism", "applicable_when", "procedure", "verification", "common_failure"
)
"""Text fields of a submitted candidate that the gold firewall scans (IDs are not deployable text)."""


class CandidateLeakError(CandidatePoolError, GoldLeakError):
    """A compiler draft trips the gold firewall."""


def check_max_candidates(max_candidates: int) -> int:
    """Validate the per-round candidate cap (1–16); returns it."""
    low, high = MAX_CANDIDATES_LIMITS
    is_int = isinstance(max_candidates, int) and not isinstance(max_candidates, bool)
    if not is_int or not low <= max_candidates <= high:
        raise CandidatePoolError(
            f"max_candidates: must be an integer in [{low}, {high}], got {max_candidates!r}")
    return max_candidates


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
        check_operation(data.get("operation"), data.get("target_chunk_id"), where)
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
