"""Skill bank versions of co-evolution runs (intraskill.analysis.skill_versions) and their en/zh pages
(intraskill.report.skill_pages): a real planted gate, a real ci co-evolve round with analyst cards, and a real
Skill1 round's library."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from skill_history import ADD_ID, ADD_TEXT, NEUTRAL, PERSONA, REWRITE_ID, REWRITE_TEXT

from intraskill.analysis.episodes import read_episode, read_trace_file
from intraskill.analysis.skill_versions import read_skill_versions
from intraskill.gate.contributions import load_contributions
from intraskill.report.skill_pages import library_markdown, write_skill_pages
from intraskill.skills.bank import content_sha256
from intraskill.trace2skill.analysis import read_cards


def test_versions_of_a_planted_gate(browser_runs: Path) -> None:
    run = browser_runs / "runs" / "planted" / "co-evolve"
    history = read_skill_versions(run)
    s0, s1 = history.versions
    assert [(c.skill_id, c.status, c.origin.round_id) for c in s0.chunks] == [("persona", "initial", None),
                                                                             ("neutral", "initial", None)]
    contributions = load_contributions(run / "round-000" / "gate" / "contributions.json")
    ci = contributions.primary.conf_int_95
    chunks = {c.skill_id: c for c in s1.chunks}
    assert list(chunks) == ["persona", ADD_ID] and s1.gate_round == "round-000" and s1.observations == 40
    rewritten, added = chunks["persona"], chunks[ADD_ID]
    assert (rewritten.status, rewritten.content, rewritten.origin.candidate_id, rewritten.origin.operation) == (
        "rewritten", REWRITE_TEXT, REWRITE_ID, "REWRITE")
    assert rewritten.beta == contributions.record(REWRITE_ID).coefficient > 0
    assert (rewritten.ci_low, rewritten.ci_high) == tuple(ci[REWRITE_ID]) and rewritten.gate_status == "selected"
    assert "-- Search with the profile brand." in rewritten.diff and "+- Search with every profile preference." in (
        rewritten.diff)
    assert (added.status, added.content, added.origin.operation) == ("added", ADD_TEXT, "ADD")
    assert added.diff.startswith("--- /dev/null\n+++ S1/")
    assert [line for line in added.diff.splitlines()[3:]] == ["+" + line for line in ADD_TEXT.splitlines()]
    [retired] = s1.retired
    assert (retired.skill_id, retired.status, retired.content) == ("neutral", "retired", NEUTRAL.content)
    assert retired.beta == contributions.record("neutral").coefficient and retired.gate_status == "retired"
    assert s1.rejected == () and history.notes == ()
    assert len(history.to_frame()) == 5


def test_version_pages_in_both_languages(browser_runs: Path, tmp_path: Path) -> None:
    pages = write_skill_pages([("planted", browser_runs / "runs" / "planted")], tmp_path, "../../data")
    base = "skills/planted/co-evolve"
    assert sorted(pages.pages) == sorted(f"{base}/S{k}.{lang}.html" for k in (0, 1) for lang in ("en", "zh"))
    assert pages.links[content_sha256(PERSONA.content)] == f"{base}/S0#chunk-persona"
    assert pages.links[content_sha256(REWRITE_TEXT)] == f"{base}/S1#chunk-persona"
    assert pages.links[content_sha256(ADD_TEXT)] == f"{base}/S1#chunk-{ADD_ID}"
    english = (tmp_path / base / "S1.en.html").read_text(encoding="utf-8")
    chinese = (tmp_path / base / "S1.zh.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in english and '<html lang="zh-CN">' in chinese
    for status in ("rewritten", "added", "retired"):
        assert f'<span class="status">{status}</span>' in english
    for status in ("改写", "新增", "退役"):
        assert f'<span class="status">{status}</span>' in chinese
    assert '<a href="#chunk-persona">Read the profile (rewritten)</a>' in english
    assert "Diff to S0" in english and "相对 S0 的差异" in chinese and "入选" in chinese
    for page in (english, chinese):  # prev / language twin / index links resolve in the site layout
        for target in re.findall(r'href="([^"#]+\.html)"', page):
            resolved = (tmp_path / base / target).resolve()
            assert resolved.is_file() or resolved == (tmp_path.parent / "report" / "en" / "skills.html").resolve() or (
                resolved == (tmp_path.parent / "report" / "zh" / "skills.html").resolve()), target
    index = (tmp_path / "skills.zh.md").read_text(encoding="utf-8")
    assert f"[S1](../../data/{base}/S1.zh.html)" in index and "| 改写 |" in index
    assert "No Skill1 round" in (tmp_path / "skill1-library.en.md").read_text(encoding="utf-8")


@pytest.mark.e2e
def test_versions_of_a_ci_coevolve_round_carry_the_analyst_cards(tmp_path: Path, small_store_root: Path) -> None:
    """One real co-evolution round of the random-init ci organism: the gate retires both S0 chunks (no
    effect) and does not admit the analysis' candidate, whose evidence cards the page carries."""
    from test_coevolve import ci_params, start

    from intraskill.pipeline.coevolve import CoEvolveConfig, co_evolve

    params = ci_params(tmp_path / "runs")
    co_evolve(params, 1, start=start(params), config=CoEvolveConfig(max_candidates=2), out_dir=tmp_path / "co-evolve",
              store_root=small_store_root, progress=False)
    s0, s1 = read_skill_versions(tmp_path / "co-evolve").versions
    assert [c.skill_id for c in s0.chunks] == ["tidy", "budget"] and s1.chunks == ()
    assert [(c.skill_id, c.status) for c in s1.retired] == [("tidy", "retired"), ("budget", "retired")]
    assert s1.rejected, "the analysis compiled a candidate the untrained organism cannot make useful"
    cards = read_cards(tmp_path / "co-evolve" / "round-000" / "analysis" / "evidence_cards.jsonl")
    for candidate in s1.rejected:
        assert candidate.status == "rejected" and candidate.origin.round_id == "round-000" and candidate.origin.cards
        for evidence in candidate.origin.cards:
            card = cards[evidence.card_id]
            assert evidence.failure_surface == card.privileged_audit.failure_surface
            assert evidence.counterfactual_successes == len(card.successful_counterfactual_trials)
    pages = write_skill_pages([("ci", tmp_path)], tmp_path / "data", "../../data")
    english = (tmp_path / "data" / "skills" / "ci" / "co-evolve" / "S1.en.html").read_text(encoding="utf-8")
    assert "Candidates not admitted" in english and s1.rejected[0].origin.cards[0].card_id in english
    assert len(pages.pages) == 4


@pytest.mark.e2e
def test_skill1_library_growth_admissions_and_evictions(tmp_path: Path, small_store_root: Path) -> None:
    """A real two-step Skill1 round of the untrained organism over the seed library."""
    from test_skill1_round import skill1_params

    from intraskill.analysis.skill1 import read_skill1_round
    from intraskill.pipeline.round import run_round

    run_round(skill1_params(tmp_path), 0, out_dir=tmp_path / "runs" / "round-000", store_root=small_store_root,
              progress=False)
    record = read_skill1_round(tmp_path / "runs" / "round-000")
    growth = record.library_by_step()
    text = library_markdown([("ci/round-000", tmp_path / "runs" / "round-000")], "en")
    for row in growth.itertuples():
        assert f"| {row.step} | {row.size} | {row.admissions} | {row.evictions} | {row.updates} |" in text
    admitted = record.history[record.history["event"] == "admit"]
    assert text.count("| admitted |") == len(admitted) > 0
    assert all(str(skill["desc"]) in text for skill in admitted["skill"])
    assert "| 纳入 |" in library_markdown([("ci/round-000", tmp_path / "runs" / "round-000")], "zh")
    written = write_skill_pages([("ci", tmp_path / "runs")], tmp_path / "data", "../../data")
    assert written.pages == [] and "admitted" in (tmp_path / "data" / "skill1-library.en.md").read_text()
    # the episode browser reads the Skill1 rollouts: the selected skill by its description
    steps = sorted((tmp_path / "runs" / "round-000" / "steps").glob("step-*/skill1_episodes.jsonl"))
    read = read_trace_file(steps[0], tmp_path / "runs" / "round-000")
    assert read.split == "train" and len(read.episodes) == 4
    assert read.skills and all(ident.startswith("skill1-") for ident in read.skills)
    assert set(read.skills.values()) <= {str(desc) for desc in admitted["skill"].map(lambda skill: skill["desc"])}
    index = next(row.index for row in read.episodes if row.skills)
    view = read_episode(steps[0], index)
    assert view["skills"][0]["title"] == read.skills[view["skills"][0]["id"]] and view["turns"]
