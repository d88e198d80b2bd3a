"""The rule compiler, the round's analysis outputs, resumability, fallback pool and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from t2s_helpers import BANK, failed_retries
from typer.testing import CliRunner

from intraskill.cli import app as cli_app
from intraskill.jsonl import JsonlWriter, read_jsonl
from intraskill.layout import RoundDir
from intraskill.shop.engine import ShopEngine
from intraskill.skills.bank import SkillBank, save_skillbank
from intraskill.skills.pool import load_pool, online_candidate_id
from intraskill.trace2skill.analysis import (
    FALLBACK_NO_ELIGIBLE,
    AnalysisConfig,
    AnalysisSummary,
    read_cards,
    run_analysis,
)
from intraskill.trace2skill.cards import FailureCard
from intraskill.trace2skill.compiler import rule_compile
from intraskill.trace2skill.ledger import LedgerEntry, read_ledger
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.trace2skill.rule_analyst import RuleAnalyst

RELEASE_KEYS = {"schema_version", "created_at", "triage_groups", "analyzed_cards", "eligible_cards", "candidates",
                "proposal_history_records", "evidence_only_card_ids", "candidate_pool_path",
                "current_skillbank_sha256", "compilation_input_sha256"}


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def items(engine, small_store) -> list[AnalysisItem]:
    ids = list(small_store[2].ids("train"))[:24]
    return (failed_retries(engine, ids, "choose_options", limit=3)
            + failed_retries(engine, ids, "check_budget", limit=2))


@pytest.fixture(scope="module")
def cards(engine, items) -> list[FailureCard]:
    return [RuleAnalyst(engine).analyze(item, BANK) for item in items]


def write_queue(round_dir: Path, items: list[AnalysisItem]) -> None:
    with JsonlWriter(RoundDir(round_dir).analysis_queue) as writer:
        for item in items:
            writer.append(item.to_dict())


class CountingAnalyst:
    """The rule analyst, counting calls (resumability) or crashing on demand (fallback)."""

    name = "rule"

    def __init__(self, engine: ShopEngine, crash: bool = False) -> None:
        self.inner, self.crash, self.calls = RuleAnalyst(engine), crash, 0

    def analyze(self, item: AnalysisItem, current_bank: SkillBank) -> FailureCard:
        self.calls += 1
        if self.crash:
            raise RuntimeError("analyst backend went away")
        return self.inner.analyze(item, current_bank)


def test_clusters_ranked_by_evidence_and_capped(cards) -> None:
    result = rule_compile(BANK, cards, [], proposal_checkpoint="round-000")
    assert [c.operation for c in result.candidates] == ["REWRITE", "ADD"]  # 3 option cards before 2 budget cards
    rewrite, add = result.candidates
    assert rewrite.target_chunk_id == "chunk-options" and add.target_chunk_id is None
    assert rewrite.metadata["evidence_card_ids"] == sorted(c.card_id for c in cards[:3])
    assert rewrite.metadata["failure_mechanism"] == "option_selection"
    assert rewrite.candidate_id == online_candidate_id("REWRITE", "chunk-options", rewrite.content)
    assert rewrite.content == cards[0].deployable_abstraction.proposed_content
    assert result.evidence_only_card_ids == ()
    capped = rule_compile(BANK, cards, [], proposal_checkpoint="round-000", max_candidates=1)
    assert [c.candidate_id for c in capped.candidates] == [rewrite.candidate_id]
    assert capped.evidence_only_card_ids == tuple(sorted(c.card_id for c in cards[3:]))


def test_ledger_repeats_are_skipped_and_the_next_cluster_fills_the_cap(cards) -> None:
    first = rule_compile(BANK, cards, [], proposal_checkpoint="round-000")
    history = [LedgerEntry.from_candidate(first.candidates[0])]
    again = rule_compile(BANK, cards, history, proposal_checkpoint="round-001", max_candidates=1)
    assert [c.operation for c in again.candidates] == ["ADD"]
    assert again.candidates[0].candidate_id == first.candidates[1].candidate_id


def test_round_outputs_pool_hash_ledger_and_resume(engine, items, tmp_path: Path) -> None:
    write_queue(tmp_path, items)
    analyst = CountingAnalyst(engine)
    config = AnalysisConfig("round-000", "organism-round-000")
    summary = run_analysis(tmp_path, engine, BANK, analyst, config)
    paths = RoundDir(tmp_path).analysis
    assert RELEASE_KEYS <= set(summary.to_dict())
    assert (summary.triage_groups, summary.analyzed_cards, summary.eligible_cards) == (5, 5, 5)
    assert summary.candidates == 2 and summary.fallback_reason is None
    pool = load_pool(paths.pool)  # verifies pool_sha256
    assert pool.pool_sha256 == summary.pool_sha256
    assert [s.skill_id for s in pool.current_skills] == ["chunk-query", "chunk-options"]
    ledger = read_ledger(paths.ledger)
    assert [e.candidate_id for e in ledger] == [c.candidate_id for c in pool.candidates]
    assert ledger[0].replacement_family_id == "chunk-options" and ledger[0].validation_result is None
    assert set(read_cards(paths.cards)) == {i.card_id for i in items}
    assert AnalysisSummary.read(paths.summary) == summary
    # resumable: a re-run analyzes nothing and rebuilds the same pool
    rerun = CountingAnalyst(engine)
    again = run_analysis(tmp_path, engine, BANK, rerun, config)
    assert rerun.calls == 0 and analyst.calls == 5
    assert again.pool_sha256 == summary.pool_sha256 and len(read_jsonl(paths.cards)) == 5
    # the next round starts from this ledger: exact repeats never come back
    next_round = run_analysis(tmp_path / "round-001", engine, BANK, CountingAnalyst(engine),
                              AnalysisConfig("round-001", "organism-round-001"), history=ledger)
    assert next_round.candidates == 0 and next_round.proposal_history_records == 2


def test_crash_and_empty_rounds_write_the_fallback_pool(engine, items, tmp_path: Path) -> None:
    write_queue(tmp_path, items[:1])
    crashed = run_analysis(tmp_path, engine, BANK, CountingAnalyst(engine, crash=True),
                           AnalysisConfig("round-000", "ckpt"))
    assert crashed.fallback_reason.startswith("analysis_failed: RuntimeError")
    pool = load_pool(RoundDir(tmp_path).analysis.pool)
    assert pool.candidates == () and len(pool.current_skills) == 2
    other = SkillBank("another-bank", BANK.skills[:1])
    empty_dir = tmp_path / "rejected"
    empty_dir.mkdir()
    write_queue(empty_dir, items[:2])
    rejected = run_analysis(empty_dir, engine, other, CountingAnalyst(engine), AnalysisConfig("round-000", "ckpt"))
    assert rejected.fallback_reason == FALLBACK_NO_ELIGIBLE and rejected.analyzed_cards == 0
    assert [r.reason.split(":")[0] for r in rejected.rejected_items] == ["injected_skills"] * 2
    assert load_pool(RoundDir(empty_dir).analysis.pool).candidates == ()


def test_cli_analyze_prints_the_summary(small_store_root, items, tmp_path: Path) -> None:
    round_dir = tmp_path / "round-000"
    round_dir.mkdir()
    write_queue(round_dir, items[3:])
    bank = save_skillbank(BANK, tmp_path / "bank.json")
    result = CliRunner().invoke(cli_app, ["trace2skill", "analyze", "--round-dir", str(round_dir), "--store",
                                          str(small_store_root), "--bank", str(bank), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["round_id"] == "round-000" and summary["candidates"] == 1 and summary["analyst"] == "rule"
    bad = CliRunner().invoke(cli_app, ["trace2skill", "analyze", "--round-dir", str(round_dir), "--store",
                                       str(small_store_root), "--bank", str(bank), "--analyst", "oracle"])
    assert bad.exit_code != 0 and "--analyst" in bad.output
