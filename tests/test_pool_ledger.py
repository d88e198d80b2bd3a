"""Candidate pool (IDs, hash, validation, fallback), compiler hard limits and the cumulative ledger."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from intraskill.gate.selection import ContributionRecord, ContributionStatus
from intraskill.paths import release_data_dir
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.pool import (
    Candidate,
    CandidatePool,
    CandidatePoolError,
    build_candidate_pool,
    fallback_pool,
    load_pool,
    online_candidate_id,
    save_pool,
)
from intraskill.skills.render import Chunk, parse_chunk, render_chunk
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.ledger import (
    LedgerEntry,
    LedgerError,
    add_proposals,
    append_ledger,
    apply_gate_results,
    ledger_signatures,
    read_ledger,
    write_ledger,
)
from intraskill.trace2skill.submission import CandidateDraft, check_max_candidates, validate_online_submission

RELEASE = release_data_dir()
CARDS = ["card-1", "card-2", "card-3"]


def column(ident: str, kind: str, slot: str, status: str, beta: float, rank: int | None) -> ContributionRecord:
    """A gate column as the gate reports it (the ledger reads its fields)."""
    operation = None if kind == "current" else ("ADD" if slot == ident else "REWRITE")
    return ContributionRecord(ident, kind, slot, operation, 1, beta, rank, ContributionStatus(status))


def chunk(title: str) -> str:
    return render_chunk(Chunk(title, "always", (f"do {title}",), "ok", "skipping"))


def draft(
    title: str, operation: str = "ADD", target: str | None = None, cards: list[str] | None = None
) -> dict:
    return {"operation": operation, "target_chunk_id": target, "title": title,
            "failure_mechanism": f"missed {title}",
            "applicable_when": "a product page is open", "procedure": [f"check {title}", "compare prices"],
            "verification": "the page shows it", "common_failure": "buying too early",
            "evidence_card_ids": cards or ["card-1"]}


@pytest.fixture()
def bank() -> SkillBank:
    return SkillBank("b1", (Skill("chunk-a", chunk("a")), Skill("chunk-b", chunk("b"))))


def submit(drafts: list[dict], *, signatures: set[str] | None = None, max_candidates: int = 6,
           lookup: GoldLookup | None = None) -> list[Candidate]:
    return validate_online_submission({"candidates": drafts, "evidence_only_card_ids": ["card-3"]},
                                      active_chunk_ids=["chunk-a", "chunk-b"], eligible_card_ids=CARDS,
                                      ledger_signatures=signatures or set(),
                                      proposal_checkpoint="ckpt-round-000",
                                      max_candidates=max_candidates, lookup=lookup)


def test_release_candidate_ids_are_reproduced_from_their_chunks() -> None:
    path = RELEASE / "round-003" / "gate" / "selected_skillbank.json"
    bank = json.loads(path.read_text(encoding="utf-8"))
    checked = 0
    for skill in bank["skills"]:
        meta = skill["metadata"]
        if not meta["selected_intervention_id"].startswith("online-"):
            continue
        parsed = parse_chunk(skill["content"])
        raw = {"operation": meta["operation"], "target_chunk_id": meta.get("target_chunk_id"),
               "title": parsed.title, "failure_mechanism": meta["failure_mechanism"],
               "applicable_when": parsed.applicable_when, "procedure": list(parsed.procedure),
               "verification": parsed.verification, "common_failure": parsed.common_failure,
               "evidence_card_ids": meta["evidence_card_ids"]}
        candidate = CandidateDraft.from_dict(raw).to_candidate(meta["proposal_checkpoint"])
        assert candidate.candidate_id == meta["selected_intervention_id"]
        assert candidate.metadata["consolidation_cluster_id"] == meta["consolidation_cluster_id"]
        assert candidate.content == skill["content"]
        checked += 1
    assert checked == 6


def test_pool_hash_ignores_created_at_and_detects_edits(bank: SkillBank, tmp_path: Path) -> None:
    candidates = submit([draft("size check"), draft("a better", "REWRITE", "chunk-a")])
    pool = build_candidate_pool(bank, candidates, round_id="round-000", proposal_checkpoint="ckpt-round-000",
                                created_at="2026-01-01T00:00:00+00:00")
    later = build_candidate_pool(bank, candidates, round_id="round-000", proposal_checkpoint="ckpt-round-000",
                                 created_at="2026-02-02T00:00:00+00:00")
    assert pool.pool_sha256 == later.pool_sha256 and len(pool.pool_sha256) == 64
    assert pool.current_skillbank_sha256 == bank.sha256
    path = save_pool(pool, tmp_path / "candidate_pool.json")
    assert load_pool(path) == pool
    stored = json.loads(path.read_text())
    assert set(stored) == {"schema_version", "created_at", "round_id", "proposal_checkpoint",
                           "current_skillbank_sha256", "current_skills", "candidates", "pool_sha256"}
    assert set(stored["candidates"][0]["metadata"]) == {"title", "failure_mechanism", "evidence_card_ids",
                                                        "consolidation_cluster_id", "proposal_checkpoint"}
    stored["candidates"][0]["content"] += " edited"
    with pytest.raises(CandidatePoolError, match="pool_sha256"):
        CandidatePool.from_dict(stored)


def test_pool_validation_rules(bank: SkillBank) -> None:
    add = Candidate("online-1", "ADD", None, chunk("x"))
    kwargs = {"round_id": "r", "proposal_checkpoint": "c"}
    with pytest.raises(CandidatePoolError, match="duplicate candidate_id"):
        build_candidate_pool(bank, [add, add], **kwargs)
    with pytest.raises(CandidatePoolError, match="collide"):
        build_candidate_pool(bank, [Candidate("chunk-a", "ADD", None, chunk("x"))], **kwargs)
    with pytest.raises(CandidatePoolError, match="not a current chunk"):
        build_candidate_pool(bank, [Candidate("online-2", "REWRITE", "chunk-z", chunk("x"))], **kwargs)
    with pytest.raises(CandidatePoolError, match="operation"):
        Candidate("online-3", "DELETE", None, chunk("x"))
    with pytest.raises(CandidatePoolError, match="an ADD has no target"):
        Candidate("online-4", "ADD", "chunk-a", chunk("x"))


def test_fallback_pool_holds_current_skills_only(bank: SkillBank) -> None:
    pool = fallback_pool(bank, round_id="round-001", proposal_checkpoint="ckpt-round-001")
    assert pool.candidates == () and [s.skill_id for s in pool.current_skills] == ["chunk-a", "chunk-b"]
    assert pool.current_skill("chunk-b").content == chunk("b")


def test_compiler_hard_limits(bank: SkillBank) -> None:
    six = submit([draft(f"rule {i}") for i in range(6)])
    assert len(six) == 6
    assert all(c.candidate_id.startswith("online-") and len(c.candidate_id) == 23 for c in six)
    assert six[0].candidate_id == online_candidate_id("ADD", None, six[0].content)
    with pytest.raises(CandidatePoolError, match="7 submitted, at most 6"):
        submit([draft(f"rule {i}") for i in range(7)])
    assert len(submit([draft(f"rule {i}") for i in range(7)], max_candidates=16)) == 7
    for bad in (0, 17, True):
        with pytest.raises(CandidatePoolError, match="max_candidates"):
            check_max_candidates(bad)
    with pytest.raises(CandidatePoolError, match="repeat"):
        submit([draft("same"), draft("same")])
    with pytest.raises(CandidatePoolError, match=r"candidates\[0\]: exact repeat"):
        submit([draft("rule 0")], signatures={six[0].signature})
    with pytest.raises(CandidatePoolError, match="not an active chunk"):
        submit([draft("x", "REWRITE", "chunk-z")])
    with pytest.raises(CandidatePoolError, match="not eligible"):
        submit([draft("x", cards=["card-9"])])
    with pytest.raises(CandidatePoolError, match=r"candidates\[0\]\.procedure"):
        submit([{**draft("x"), "procedure": []}])
    leak = r"gold firewall.*brand 'Zephyr' at candidates\[0\]\.procedure\[0\]"
    with pytest.raises(CandidatePoolError, match=leak):
        submit([draft("Zephyr")], lookup=GoldLookup(brands=("Zephyr",)))


def test_ledger_accumulates_and_tracks_slots_across_gates(bank: SkillBank, tmp_path: Path) -> None:
    round0 = submit([draft("a better", "REWRITE", "chunk-a", ["card-1", "card-2"]), draft("new rule")])
    pool0 = build_candidate_pool(bank, round0, round_id="round-000", proposal_checkpoint="ckpt-round-000")
    ledger = add_proposals([], pool0)
    rewrite, add = round0
    assert [e.candidate_id for e in ledger] == [rewrite.candidate_id, add.candidate_id]
    assert ledger[0].replacement_family_id == "chunk-a" and ledger[1].replacement_family_id is None
    assert ledger[0].source_card_ids == ("card-1", "card-2") and ledger[0].validation_result is None
    assert ledger_signatures(ledger) == {rewrite.signature, add.signature}
    with pytest.raises(LedgerError, match="exact repeat"):
        add_proposals(ledger, pool0)

    def gate(sha: str, records: list[tuple]) -> SimpleNamespace:
        return SimpleNamespace(
            estimator_name="paired_delta_ols_main_effects_no_intercept", pool_sha256="p" + sha,
            assignment_sha256=sha, bare_observations_sha256="bare-" + sha,
            contributions=[column(i, k, s, st, b, r) for i, k, s, st, b, r in records])

    gate0 = gate("a0", [("chunk-a", "current", "chunk-a", "rewrite_loser", 0.01, None),
                        (rewrite.candidate_id, "candidate", "chunk-a", "selected", 0.05, 1),
                        ("chunk-b", "current", "chunk-b", "selected", 0.02, 2),
                        (add.candidate_id, "candidate", add.candidate_id, "non_positive", -0.01, 3)])
    after0 = apply_gate_results(ledger, gate0, evaluation_checkpoint="round-000-checkpoint")
    rerun = apply_gate_results(after0, gate0, evaluation_checkpoint="round-000-checkpoint")
    assert rerun == after0  # the same gate again adds no event
    won, lost = after0
    assert (won.validation_result, won.estimated_effect, won.contribution_rank, won.active_chunk_id) == (
        "selected", 0.05, 1, "chunk-a")
    assert (lost.validation_result, lost.active_chunk_id) == ("non_positive", None)
    assert len(won.validation_history) == 1
    event = won.validation_history[0]
    assert event["assignment_sha256"] == "a0" and event["bare_validation_observations_sha256"] == "bare-a0"
    assert event["evaluation_checkpoint"] == "round-000-checkpoint"
    assert event["proposal_checkpoint"] == "ckpt-round-000"

    path = tmp_path / "round-000" / "proposal_ledger.jsonl"
    write_ledger(path, after0)
    history = read_ledger(path)
    assert history == after0

    gate1 = gate("a1", [("chunk-a", "current", "chunk-a", "retired", -0.02, 4)])
    after1 = apply_gate_results(history, gate1, evaluation_checkpoint="round-001-checkpoint")
    assert after1[0].validation_result == "retired" and after1[0].active_chunk_id is None
    assert [e["assignment_sha256"] for e in after1[0].validation_history] == ["a0", "a1"]
    assert after1[1] == history[1]
    append_ledger(path, [after1[0]])
    assert read_ledger(path) == after1
    with pytest.raises(LedgerError, match="not in the proposal ledger"):
        stray = gate("a2", [("online-ffff", "candidate", "online-ffff", "selected", 0.1, 1)])
        apply_gate_results(after1, stray, evaluation_checkpoint="x")


def test_gate_a_updates_unvalidated_cold_start_entries_verbatim() -> None:
    entry = LedgerEntry("chunk-size", "ADD", None, ("cluster-1",), "missed size", "base", "cold_start",
                        "cluster-1", None, chunk("size"))
    gate = SimpleNamespace(estimator_name="e", pool_sha256="d", assignment_sha256="a",
                           bare_observations_sha256="b",
                           contributions=[column("chunk-size", "current", "chunk-size", "budget_excluded",
                                                 0.001, 11)])
    (updated,) = apply_gate_results([entry], gate, evaluation_checkpoint="base")
    assert updated.validation_result == "budget_excluded" and updated.active_chunk_id is None
    with pytest.raises(LedgerError, match="replacement_family_id"):
        LedgerEntry("online-x", "REWRITE", "chunk-a", (), "m", "c", "online", None, None, chunk("x"))
    with pytest.raises(LedgerError, match="stage"):
        LedgerEntry("online-x", "ADD", None, (), "m", "c", "later", None, None, chunk("x"))
