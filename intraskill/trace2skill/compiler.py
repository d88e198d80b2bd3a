"""The online candidate compiler: eligible cards → at most ``max_candidates`` ADD/REWRITE candidates.

Reference: docs/method.md §4.1 (online compiler input and ``submit_online_candidates``), §4.2
(pool validation) and §4.3 (exact repeats rejected by signature). The rule compiler clusters eligible
cards by (operation, target chunk, failure mechanism), makes one candidate per cluster from the
cluster's most common proposed chunk, ranks clusters by evidence count (ties: cluster key), drops
exact repeats of ledger proposals, and keeps the first ``max_candidates``. Its submission goes through
the same :func:`~intraskill.trace2skill.submission.validate_online_submission` as an LLM compiler's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.hashing import sha256_json
from intraskill.params import MAX_CANDIDATES
from intraskill.skills.bank import SkillBank
from intraskill.skills.pool import Candidate, proposal_signature
from intraskill.skills.render import parse_chunk
from intraskill.trace2skill.cards import CardStatus, FailureCard
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.ledger import LedgerEntry, ledger_signatures
from intraskill.trace2skill.submission import CandidateDraft, check_max_candidates, validate_online_submission


@dataclass(frozen=True)
class CompileResult:
    """The round's candidates and the eligible cards left as evidence only; for an LLM compiler also the
    reasons of its rejected drafts, the repair its accepted reply needed, and whether it never submitted a
    valid one (``exhausted``)."""

    candidates: tuple[Candidate, ...]
    evidence_only_card_ids: tuple[str, ...]
    rejections: tuple[str, ...] = ()
    repair: str | None = None
    exhausted: bool = False


def operation_of(card: FailureCard) -> str:
    """``ADD`` or ``REWRITE`` for a proposal card."""
    return "REWRITE" if card.status is CardStatus.PROPOSE_REWRITE else "ADD"


def compiler_input(bank: SkillBank, cards: Sequence[FailureCard], history: Sequence[LedgerEntry],
                   max_candidates: int = MAX_CANDIDATES) -> dict[str, Any]:
    """The online compiler's input object (§4.1): active chunks, eligible cards' deployable views,
    and the proposal history (audit state only)."""
    check_max_candidates(max_candidates)
    return {
        "max_candidates": max_candidates,
        "active_chunks": [{"skill_id": s.skill_id, "content": s.content} for s in bank.enabled_skills()],
        "failure_cards": [{"card_id": c.card_id, "status": c.status.value,
                           "deployable_abstraction": c.to_dict()["deployable_abstraction"]}
                          for c in cards if c.eligible_for_consolidation],
        "proposal_history": [{"candidate_id": e.candidate_id, "operation": e.operation,
                              "target_chunk_id": e.target_chunk_id, "failure_mechanism": e.failure_mechanism,
                              "content": e.content, "proposal_checkpoint": e.proposal_checkpoint,
                              "validation_result": e.validation_result, "estimated_effect": e.estimated_effect}
                             for e in history],
    }


def compilation_input_sha256(compiler_input_obj: Mapping[str, Any]) -> str:
    """The fingerprint recorded as ``compilation_input_sha256`` in the analysis summary."""
    return sha256_json(compiler_input_obj)


def _cluster_draft(key: tuple[str, str | None, str], cards: Sequence[FailureCard]) -> dict[str, Any] | None:
    """The submitted candidate of one cluster (``None`` when no card's content is a template chunk)."""
    contents = Counter(c.deployable_abstraction.proposed_content.strip() for c in cards)
    for content, _ in sorted(contents.items(), key=lambda pair: (-pair[1], pair[0])):
        try:
            chunk = parse_chunk(content)
        except ValueError:
            continue
        operation, target, mechanism = key
        return {"operation": operation, "target_chunk_id": target, "title": chunk.title,
                "failure_mechanism": mechanism, "applicable_when": chunk.applicable_when,
                "procedure": list(chunk.procedure), "verification": chunk.verification,
                "common_failure": chunk.common_failure, "evidence_card_ids": sorted(c.card_id for c in cards)}
    return None


def rule_compile(bank: SkillBank, cards: Sequence[FailureCard], history: Sequence[LedgerEntry], *,
                 proposal_checkpoint: str, max_candidates: int = MAX_CANDIDATES,
                 lookup: GoldLookup | None = None) -> CompileResult:
    """Cluster, rank, de-duplicate and cap the eligible cards (see the module docstring).

    A cluster is skipped when its chunk repeats a ledger proposal or the target's current content.
    """
    check_max_candidates(max_candidates)
    eligible = [c for c in cards if c.eligible_for_consolidation]
    clusters: dict[tuple[str, str | None, str], list[FailureCard]] = {}
    for card in eligible:
        key = (operation_of(card), card.deployable_abstraction.target_chunk_id,
               card.deployable_abstraction.failure_mechanism)
        clusters.setdefault(key, []).append(card)
    ranked = sorted(clusters.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1] or "", kv[0][2]))
    seen = ledger_signatures(history)
    current = {s.skill_id: s.content.strip() for s in bank.enabled_skills()}
    drafts = []
    for key, members in ranked:
        draft = _cluster_draft(key, members)
        if draft is None or len(drafts) == max_candidates:
            continue
        content = CandidateDraft.from_dict(draft).content
        if proposal_signature(key[0], key[1], content) in seen or current.get(key[1] or "") == content:
            continue
        seen.add(proposal_signature(key[0], key[1], content))
        drafts.append(draft)
    used = {card_id for draft in drafts for card_id in draft["evidence_card_ids"]}
    evidence_only = sorted(c.card_id for c in eligible if c.card_id not in used)
    submission = {"candidates": drafts, "evidence_only_card_ids": evidence_only}
    candidates = validate_online_submission(
        submission, active_chunk_ids=list(current), eligible_card_ids=[c.card_id for c in eligible],
        ledger_signatures=ledger_signatures(history), proposal_checkpoint=proposal_checkpoint,
        max_candidates=max_candidates, lookup=lookup)
    return CompileResult(tuple(candidates), tuple(evidence_only))
