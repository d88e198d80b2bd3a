"""Every skill bank version of a co-evolution run, chunk by chunk, with the gate evidence behind it.

Reads what :func:`~intraskill.pipeline.coevolve.co_evolve` writes: S₀ is round 0's curriculum bank
(``round-000/curriculum.json``); the gate of round r (``round-<r>/gate``: ``contributions.json``,
``selected_skillbank.json``) turns the bank round r trained with into the next version, S_{r+1}. A gate that
was skipped (empty pool) or a run that does not evolve (the control arms) adds no version.

Each chunk of a version carries its status against the previous version — ``initial`` (S₀), ``kept``
(same slot, same text), ``rewritten`` (same slot, a REWRITE candidate's text), ``added`` (an ADD candidate's
new slot) — the unified diff of its text, the β (primary outcome ``reward``) with its 95 % CI from the gate
that produced the version, and where it came from: S₀, or the candidate (id, operation, round) and the
analyst's evidence cards (failure surface, mechanism, counterfactual trials that succeeded, repair
validation). Chunks of the previous version that the gate dropped are the version's ``retired`` entries, and
candidates it did not admit its ``rejected`` ones, each with their β.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.gate.contributions import GateContributions, load_contributions
from intraskill.layout import COEVOLVE_SUMMARY, RunDir, round_id
from intraskill.skills.bank import SkillBank, content_sha256, load_skillbank
from intraskill.skills.curriculum import load_curriculum
from intraskill.skills.pool import CandidatePool, load_pool
from intraskill.skills.render import chunk_title
from intraskill.trace2skill.analysis import read_cards
from intraskill.trace2skill.cards import FailureCard

if TYPE_CHECKING:
    import pandas as pd

    from intraskill.pipeline.coevolve import RoundSummary

INITIAL, KEPT, REWRITTEN, ADDED, RETIRED, REJECTED = "initial", "kept", "rewritten", "added", "retired", "rejected"
STATUSES = (INITIAL, KEPT, REWRITTEN, ADDED, RETIRED, REJECTED)
"""Every chunk status of a version page, in display order."""


@dataclass(frozen=True)
class CardEvidence:
    """One analyst card behind a candidate: what failed, the lesson, and its counterfactual evidence."""

    card_id: str
    status: str
    failure_surface: str
    failure_mechanism: str
    counterfactual_trials: int
    counterfactual_successes: int
    repair_validation: str

    @classmethod
    def from_card(cls, card: FailureCard) -> "CardEvidence":
        return cls(card.card_id, card.status.value, card.privileged_audit.failure_surface,
                   card.deployable_abstraction.failure_mechanism, len(card.terminal_trials),
                   len(card.successful_counterfactual_trials), card.privileged_audit.repair_validation_result)


@dataclass(frozen=True)
class ChunkOrigin:
    """Where a chunk's text came from: S₀ (``round_id`` ``None``) or a gate candidate of ``round_id``."""

    round_id: str | None
    candidate_id: str | None = None
    operation: str | None = None
    cards: tuple[CardEvidence, ...] = ()


@dataclass(frozen=True)
class ChunkEntry:
    """One chunk on a version page."""

    skill_id: str
    title: str
    content: str
    status: str
    origin: ChunkOrigin
    diff: str = ""
    beta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    gate_status: str | None = None
    rank: int | None = None

    @property
    def content_sha256(self) -> str:
        return content_sha256(self.content)


@dataclass(frozen=True)
class BankVersion:
    """S_index: its chunks in bank order, and what its gate retired and rejected."""

    index: int
    bank_version: str
    sha256: str
    chunks: tuple[ChunkEntry, ...]
    gate_round: str | None = None
    observations: int | None = None
    retired: tuple[ChunkEntry, ...] = ()
    rejected: tuple[ChunkEntry, ...] = ()

    @property
    def label(self) -> str:
        """``S0``, ``S1``, …"""
        return f"S{self.index}"


@dataclass(frozen=True)
class SkillHistory:
    """The bank versions of one co-evolution run and a note per round whose gate added no version."""

    run_dir: Path
    versions: tuple[BankVersion, ...]
    notes: tuple[str, ...] = ()

    def to_frame(self) -> "pd.DataFrame":
        """One row per (version, chunk), retired and rejected entries included."""
        # deferred: pandas is heavy to import
        import pandas as pd

        rows = [{"version": v.label, "skill_id": c.skill_id, "title": c.title, "status": c.status, "beta": c.beta,
                 "ci_low": c.ci_low, "ci_high": c.ci_high, "gate_status": c.gate_status,
                 "origin_round": c.origin.round_id, "candidate_id": c.origin.candidate_id}
                for v in self.versions for c in (*v.chunks, *v.retired, *v.rejected)]
        return pd.DataFrame(rows, columns=["version", "skill_id", "title", "status", "beta", "ci_low", "ci_high",
                                           "gate_status", "origin_round", "candidate_id"])


def text_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """The unified diff of two chunk texts (empty when equal)."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))


def _estimate(contributions: GateContributions, intervention: str) -> dict[str, Any]:
    primary = contributions.primary
    record = contributions.record(intervention)
    low, high = (primary.conf_int_95 or {}).get(intervention, (None, None))
    return {"beta": record.coefficient, "ci_low": low, "ci_high": high, "gate_status": record.status.value,
            "rank": record.rank}


def _candidate_origin(pool: CandidatePool, candidate_id: str, cards: Mapping[str, FailureCard],
                      round_name: str) -> ChunkOrigin:
    candidate = pool.candidate(candidate_id)
    evidence = tuple(CardEvidence.from_card(cards[card_id]) for card_id in candidate.metadata.get(
        "evidence_card_ids", []) if card_id in cards)
    return ChunkOrigin(round_name, candidate_id, candidate.operation, evidence)


def next_version(index: int, previous: Sequence[ChunkEntry], bank: SkillBank, contributions: GateContributions,
                 pool: CandidatePool, cards: Mapping[str, FailureCard], round_name: str) -> BankVersion:
    """S_index from the previous version's chunks and the gate of ``round_name`` (its selected ``bank``,
    its ``contributions`` over ``pool``, the analysis ``cards``)."""
    before = {chunk.skill_id: chunk for chunk in previous}
    chunks = []
    for skill in bank.skills:
        intervention = str(skill.metadata.get("selected_intervention_id", skill.skill_id))
        old = before.get(skill.skill_id)
        if old is not None and old.content == skill.content:
            status, origin = KEPT, old.origin
        else:
            status = ADDED if old is None else REWRITTEN
            origin = _candidate_origin(pool, intervention, cards, round_name)
        diff = text_diff(old.content if old else "", skill.content,
                         f"S{index - 1}/{skill.skill_id}" if old else "/dev/null", f"S{index}/{skill.skill_id}")
        chunks.append(ChunkEntry(skill.skill_id, chunk_title(skill.content), skill.content, status, origin,
                                 diff if status != KEPT else "", **_estimate(contributions, intervention)))
    kept = {skill.skill_id for skill in bank.skills}
    retired = tuple(ChunkEntry(old.skill_id, old.title, old.content, RETIRED, old.origin,
                               **_estimate(contributions, old.skill_id))
                    for old in previous if old.skill_id not in kept and old.skill_id in contributions.columns)
    selected = set(contributions.selected_intervention_ids)
    rejected = tuple(
        ChunkEntry(c.candidate_id, chunk_title(c.content), c.content, REJECTED,
                   _candidate_origin(pool, c.candidate_id, cards, round_name), **_estimate(contributions, c.candidate_id))
        for c in pool.candidates if c.candidate_id not in selected and c.candidate_id in contributions.columns)
    return BankVersion(index, bank.bank_version, bank.sha256, tuple(chunks), round_name,
                       contributions.observations, retired, rejected)


def initial_version(bank: SkillBank) -> BankVersion:
    """S₀: the starting bank, every chunk ``initial``."""
    chunks = tuple(ChunkEntry(s.skill_id, chunk_title(s.content), s.content, INITIAL, ChunkOrigin(None))
                   for s in bank.skills)
    return BankVersion(0, bank.bank_version, bank.sha256, chunks)


def _rounds(run_dir: Path) -> list[RoundSummary]:
    # deferred: the pipeline (torch, the gate runner) is heavy to import
    from intraskill.pipeline.coevolve import CoEvolveSummary

    summary = RunDir(run_dir).summary
    if not summary.is_file():
        raise FileNotFoundError(f"{summary}: no co-evolution summary (is {run_dir} a co-evolve run directory?)")
    return CoEvolveSummary.read(summary).rounds


def read_skill_versions(run_dir: str | Path) -> SkillHistory:
    """Every bank version of a co-evolution run directory (finished rounds only)."""
    # deferred: the pipeline (torch, the gate runner) is heavy to import
    from intraskill.pipeline.coevolve import curriculum_bank

    root = Path(run_dir)
    rounds = _rounds(root)
    start = RunDir(root).round(0).curriculum
    bank = curriculum_bank(load_curriculum(start) if start.is_file() else None, round_id(0))
    versions = [initial_version(bank)]
    notes = []
    for record in rounds:
        name = round_id(record.round_index)
        round_dir = RunDir(root).round(record.round_index)
        gate, analysis = round_dir.gate, round_dir.analysis
        if not gate.contributions.is_file() or not gate.selected_skillbank.is_file():
            notes.append(f"{name}: {record.gate_status}")
            continue
        cards = read_cards(analysis.cards) if analysis.cards.is_file() else {}
        versions.append(next_version(len(versions), versions[-1].chunks, load_skillbank(gate.selected_skillbank),
                                     load_contributions(gate.contributions), load_pool(analysis.pool), cards, name))
    return SkillHistory(root, tuple(versions), tuple(notes))


def find_coevolve_runs(root: str | Path) -> list[Path]:
    """Co-evolution run directories at or under ``root`` (those holding a co-evolution summary), in order."""
    return sorted(path.parent for path in Path(root).rglob(COEVOLVE_SUMMARY) if path.is_file())

