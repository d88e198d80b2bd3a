"""One round of online failure analysis: queue → evidence cards → candidates → pool and ledger.

Reference: docs/method.md §3.3, §4.2–4.3 and docs/release.md (the
``round-000/analysis/analysis_summary.json`` keys). Outputs under ``<round_dir>/analysis/``:

- ``evidence_cards.jsonl`` — one card per analyzed retry, appended with fsync; keyed by card ID
  (``failure-<episode_id>-01``), so a re-run skips analyzed retries (resumable);
- ``candidate_pool.json`` — the hashed pool (``shopsimrl-skill-candidate-pool-v1``);
- ``proposal_ledger.jsonl`` — the cumulative ledger: the history entries plus this round's candidates;
- ``analysis_summary.json`` — the funnel (``shopsimrl-online-failure-analysis-v1``).

When no card is eligible, or the analyst or compiler fails, the pool holds only the current skills
(the fallback pool), so the gate still runs; ``fallback_reason`` says why. The summary also counts, by
reason, the LLM roles' rejected submissions (``rejections``: analyst and compiler drafts, plus
``gold_leak`` for every submitted card the firewall downgraded), the repairs their accepted replies
needed (``repairs``) and the cards' downgrades (``downgrades``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field

from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.layout import RoundDir
from intraskill.params import MAX_CANDIDATES
from intraskill.record import Record
from intraskill.shop.engine import ShopEngine
from intraskill.skills.bank import SkillBank
from intraskill.skills.pool import build_candidate_pool, fallback_pool, save_pool
from intraskill.trace2skill.audit import Analyst
from intraskill.trace2skill.cards import REASON_FIREWALL, STAGE_ONLINE, FailureCard
from intraskill.trace2skill.compact import gold_lookup, replay_trace
from intraskill.trace2skill.compiler import (
    CompileResult,
    compilation_input_sha256,
    compiler_input,
    rule_compile,
)
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.ledger import LedgerEntry, add_proposals, write_ledger
from intraskill.trace2skill.queue import AnalysisItem, read_analysis_queue, recheck_item
from intraskill.trace2skill.roles import REJECT_GOLD_LEAK

LOGGER = logging.getLogger(__name__)
SUMMARY_SCHEMA_VERSION = "shopsimrl-online-failure-analysis-v1"
FALLBACK_NO_ELIGIBLE = "no_eligible_cards"
FALLBACK_NO_NEW = "no_new_candidates"
FALLBACK_COMPILER_EXHAUSTED = "compiler_no_valid_submission"


class RejectedItem(Record):
    episode_id: str
    reason: str


class AnalysisSummary(Record):
    """``analysis/analysis_summary.json``: what the round's analysis read, produced and refused (the release's
    keys, plus the round, analyst, pool digest, fallback and the rejections, repairs and downgrades by reason)."""

    schema_version: Literal[SUMMARY_SCHEMA_VERSION] = SUMMARY_SCHEMA_VERSION
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    round_id: str
    analyst: str
    triage_groups: int
    analyzed_cards: int
    eligible_cards: int
    candidates: int
    proposal_history_records: int
    evidence_only_card_ids: list[str]
    candidate_pool_path: str
    current_skillbank_sha256: str
    compilation_input_sha256: str | None
    pool_sha256: str
    rejected_items: list[RejectedItem]
    fallback_reason: str | None
    rejections: dict[str, int]
    repairs: dict[str, int]
    downgrades: dict[str, int]


class Compiler(Protocol):
    """Eligible cards → candidates (the rule compiler, or an LLM compiler)."""

    def __call__(self, bank: SkillBank, cards: Sequence[FailureCard], history: Sequence[LedgerEntry], *,
                 proposal_checkpoint: str, max_candidates: int, lookup: GoldLookup | None) -> CompileResult:
        ...


@dataclass(frozen=True)
class AnalysisConfig:
    """Round identity and the compiler cap (``coevolve.max_candidates``): what one analysis run records on its
    candidates, not a parameter section.

    Parameters
    ----------
    round_id : e.g. ``round-000``.
    proposal_checkpoint : the checkpoint the failures came from (recorded on every candidate).
    max_candidates : ADD/REWRITE candidates per round (6; 1–16).
    """

    round_id: str
    proposal_checkpoint: str
    max_candidates: int = MAX_CANDIDATES


def read_cards(path: str | Path) -> dict[str, FailureCard]:
    """Analyzed cards by card ID (the last record of an ID wins)."""
    return {card.card_id: card for card in (FailureCard.from_dict(r) for r in iter_jsonl(path))}


def _analyze(items: Sequence[AnalysisItem], bank: SkillBank, analyst: Analyst, cards_path: Path) -> None:
    done = set(read_cards(cards_path))
    with JsonlWriter(cards_path) as writer:
        for item in items:
            if item.card_id in done:
                continue
            card = analyst.analyze(item, bank)
            writer.append(card.to_dict())
            LOGGER.info("%s: %s (%s)", card.card_id, card.status.value, card.downgrade_reason or "kept")


def _lookup(engine: ShopEngine, items: Sequence[AnalysisItem]) -> GoldLookup:
    lookup = GoldLookup()
    for item in items:
        lookup = lookup.merged(gold_lookup(replay_trace(engine, item.trace)))
    return lookup


def _counts(cards: Sequence[FailureCard], result: CompileResult | None) -> dict[str, dict[str, int]]:
    """``rejections``, ``repairs`` and ``downgrades`` by reason, sorted by reason."""
    rejections: Counter[str] = Counter(result.rejections if result else ())
    repairs: Counter[str] = Counter([result.repair] if result and result.repair else [])
    for card in cards:
        rejections.update(t.get("reason", "unrecorded") for t in card.audit_transcript
                          if "submission_attempt" in t)
        repairs.update(t["submission_repair"] for t in card.audit_transcript if "submission_repair" in t)
        if card.downgrade_reason == REASON_FIREWALL:
            rejections[REJECT_GOLD_LEAK] += 1
    downgrades = Counter(c.downgrade_reason for c in cards if c.downgrade_reason)
    return {name: dict(sorted(counter.items())) for name, counter in
            (("rejections", rejections), ("repairs", repairs), ("downgrades", downgrades))}


def run_analysis(round_dir: str | Path, engine: ShopEngine, bank: SkillBank, analyst: Analyst,
                 config: AnalysisConfig, history: Sequence[LedgerEntry] = (),
                 compiler: Compiler = rule_compile) -> AnalysisSummary:
    """Analyze ``<round_dir>/analysis_queue.jsonl`` and write the four outputs; returns the summary.

    Parameters
    ----------
    round_dir : the round's directory (the queue is read from it, outputs go to ``analysis/``).
    engine : the store the retries were played in.
    bank : the current skill bank (the retries' injected skills must equal it).
    analyst : ``RuleAnalyst`` or ``LLMAnalyst``.
    config : round identity and the candidate cap.
    history : the cumulative proposal ledger before this round.
    compiler : :func:`~intraskill.trace2skill.compiler.rule_compile` or an LLM compiler.
    """
    paths = RoundDir(round_dir).analysis
    paths.root.mkdir(parents=True, exist_ok=True)
    queue = read_analysis_queue(RoundDir(round_dir).analysis_queue)
    checks = [(item, recheck_item(item, bank)) for item in queue]
    rejected = [RejectedItem(episode_id=item.episode_id, reason=reason) for item, reason in checks if reason]
    accepted = [item for item, reason in checks if reason is None]
    cards: list[FailureCard] = []
    compile_sha, evidence_only, fallback_reason, result = None, (), None, None
    try:
        _analyze(accepted, bank, analyst, paths.cards)
        stored = read_cards(paths.cards)
        cards = [stored[i.card_id] for i in accepted if i.card_id in stored]
        compile_sha = compilation_input_sha256(compiler_input(bank, cards, history, config.max_candidates))
        result = compiler(bank, cards, history, proposal_checkpoint=config.proposal_checkpoint,
                          max_candidates=config.max_candidates, lookup=_lookup(engine, accepted))
        pool = build_candidate_pool(bank, result.candidates, round_id=config.round_id,
                                    proposal_checkpoint=config.proposal_checkpoint)
        evidence_only = result.evidence_only_card_ids
        if result.exhausted:
            fallback_reason = FALLBACK_COMPILER_EXHAUSTED
        elif not result.candidates:
            eligible = any(c.eligible_for_consolidation for c in cards)
            fallback_reason = FALLBACK_NO_NEW if eligible else FALLBACK_NO_ELIGIBLE
    except Exception as error:  # noqa: BLE001 - any analysis failure must still leave a pool for the gate
        LOGGER.exception("analysis of %s failed; writing the fallback pool", round_dir)
        pool = fallback_pool(bank, round_id=config.round_id, proposal_checkpoint=config.proposal_checkpoint)
        fallback_reason = f"analysis_failed: {type(error).__name__}: {error}"
    save_pool(pool, paths.pool)
    write_ledger(paths.ledger, add_proposals(history, pool, stage=STAGE_ONLINE))
    summary = AnalysisSummary(
        round_id=config.round_id, analyst=analyst.name, triage_groups=len(queue), analyzed_cards=len(cards),
        eligible_cards=sum(c.eligible_for_consolidation for c in cards), candidates=len(pool.candidates),
        proposal_history_records=len(history), evidence_only_card_ids=list(evidence_only),
        candidate_pool_path=str(paths.pool), current_skillbank_sha256=bank.sha256,
        compilation_input_sha256=compile_sha, pool_sha256=pool.pool_sha256,
        rejected_items=rejected, fallback_reason=fallback_reason,
        **_counts(cards, result))
    summary.write(paths.summary)
    return summary
