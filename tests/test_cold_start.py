"""The cold start: success cards, consolidation, the holistic compiler and the whole stage chain on real stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from t2s_helpers import ScriptedServer, scripted_analyst
from typer.testing import CliRunner

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.cli import app
from intraskill.hashing import sha256_json
from intraskill.params import ParamsError, load_params, params_from_dict, plan_dump, with_overrides
from intraskill.paths import params_path
from intraskill.pipeline import cold_start as cold_start_module
from intraskill.pipeline.cold_start import ColdStartPlanMismatchError, run_cold_start
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.policy.openai_backend import OpenAIPolicy
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences
from intraskill.shop.service import serve_in_thread
from intraskill.skills.bank import SkillBank, load_skillbank
from intraskill.trace2skill.consolidation import Cluster, in_batches, rule_consolidate
from intraskill.trace2skill.firewall import GoldLookup
from intraskill.trace2skill.initial_skill import (
    DRAFT_VERSION,
    InitialSkillError,
    LLMInitialCompiler,
    chunk_ids,
    rule_compile_initial,
    validate_initial_skill,
)
from intraskill.trace2skill.ledger import read_ledger
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.roles import RoleFailure
from intraskill.trace2skill.success import (
    LLMSuccessAnalyst,
    RuleSuccessAnalyst,
    SuccessCard,
    SuccessCardError,
    parse_success_cards,
)


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def successes(engine, small_store):
    """Full-expert train episodes that succeeded (bare)."""
    jobs = [EpisodeJob.create(t, 0, seed=3) for t in list(small_store[2].ids("train"))[:16]]
    results = run_episodes(ExpertPolicy(Competences()), lambda: InProcessEnvironment(engine), jobs, RuntimeConfig(),
                           progress=False)
    traces = [r.trace for r in results if r.scored and r.reward.r_success == 1]
    assert len(traces) >= 4
    return traces


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ScriptedServer, OpenAIPolicy]]:
    with scripted_analyst() as pair:
        yield pair


def card(card_id: str, mechanism: str) -> SuccessCard:
    chunk = MECHANISMS[mechanism].chunk if mechanism in MECHANISMS else MECHANISMS["paging"].chunk
    return SuccessCard(card_id, mechanism, chunk.applicable_when, "seen", "; ".join(chunk.procedure), chunk.title,
                       (), 0.5)


def cluster(cluster_id: str, mechanism: str, cards: int = 1, channel: str = "failure") -> Cluster:
    chunk = MECHANISMS[mechanism].chunk
    return Cluster(cluster_id, channel, "b", MECHANISMS[mechanism].workflow_stage, mechanism, chunk.applicable_when,
                   chunk.procedure, chunk.verification, chunk.common_failure,
                   tuple(f"{cluster_id}-card-{i}" for i in range(cards)))


def chunk_record(title: str, clusters: list[str]) -> dict:
    return {"title": title, "workflow_stage": "query formulation", "applicable_when": "the first search",
            "procedure": ["Search the task words"], "verification": "results fit", "common_failure": "vague queries",
            "evidence_cluster_ids": clusters}


def test_chunk_ids_are_title_slugs_or_fingerprints_with_numbered_collisions() -> None:
    ids = chunk_ids([("Check the budget", ["c2", "c1"]), ("check: the BUDGET", ["c3"]), ("核对预算", ["c2", "c1"]),
                     ("Check the budget", ["c4"])])
    digest = sha256_json({"title": "核对预算", "evidence_cluster_ids": ["c1", "c2"]})[:12]
    assert ids == ["check-the-budget", "check-the-budget-2", f"chunk-{digest}", "check-the-budget-3"]


def test_initial_skill_validation_names_the_field() -> None:
    clusters = ["c1", "c2", "c3"]
    good = {"skill_title": "Shopping", "chunks": [chunk_record("Search well", ["c1", "c3"]),
                                                  chunk_record("Page on", ["c2"])],
            "evidence_only_cluster_ids": [], "conflicts_resolved": ["kept both"]}
    skill = validate_initial_skill(good, clusters, 16)
    bank = skill.bank()
    assert [c.chunk_id for c in skill.chunks] == ["search-well", "page-on"]
    assert [s.metadata["draft_order"] for s in bank.skills] == [1, 2]
    assert bank.metadata["draft_only"] and {s.version for s in bank.skills} == {DRAFT_VERSION}
    assert all(s.metadata["draft_only"] for s in bank.skills)
    with pytest.raises(InitialSkillError, match="at most 1 allowed"):
        validate_initial_skill(good, clusters, 1)
    with pytest.raises(InitialSkillError, match=r"missing \['c2'\]"):
        validate_initial_skill({**good, "chunks": good["chunks"][:1]}, clusters, 16)
    with pytest.raises(InitialSkillError, match=r"repeated \['c2'\]"):
        validate_initial_skill({**good, "evidence_only_cluster_ids": ["c2"]}, clusters, 16)
    with pytest.raises(InitialSkillError, match=r"chunks\[1\].procedure"):
        validate_initial_skill({**good, "chunks": [good["chunks"][0], {**good["chunks"][1], "procedure": []}]},
                               clusters, 16)
    leak = {**good, "chunks": [chunk_record("Buy Acmefold boards", ["c1", "c3"]), good["chunks"][1]]}
    with pytest.raises(ValueError, match="gold firewall"):
        validate_initial_skill(leak, clusters, 16, GoldLookup(brands=("Acmefold",)))


def test_rule_consolidation_accounts_for_every_card_once() -> None:
    cards = ([card(f"s-{i}", "option_selection") for i in range(5)] + [card("s-q", "query_formulation")]
             + [card("s-x", "made_up_mechanism")])
    clusters = rule_consolidate(cards, channel="success", batch_id="success-batch-001", max_clusters=12, lookup=None)
    assert [c["mechanism"] for c in clusters["clusters"]] == ["option_selection", "query_formulation"]
    assert clusters["evidence_only_card_ids"] == ["s-x"]
    capped = rule_consolidate(cards, channel="success", batch_id="b", max_clusters=1, lookup=None)
    assert len(capped["clusters"]) == 1 and sorted(capped["evidence_only_card_ids"]) == ["s-q", "s-x"]
    assert [len(b) for b in in_batches(cards, 3)] == [3, 3, 1]


def test_rule_compiler_merges_channels_by_mechanism_in_workflow_order() -> None:
    clusters = [cluster("f1", "option_selection", 3), cluster("s1", "option_selection", 2, "success"),
                cluster("f2", "query_formulation", 1), cluster("f3", "paging", 4)]
    draft = rule_compile_initial(clusters, 16).skill
    assert [c.evidence_cluster_ids for c in draft.chunks] == [("f2",), ("f3",), ("f1", "s1")]
    assert [c.order for c in draft.chunks] == [1, 2, 3] and draft.evidence_only_cluster_ids == ()
    capped = rule_compile_initial(clusters, 1).skill
    assert [c.evidence_cluster_ids for c in capped.chunks] == [("f1", "s1")]
    assert sorted(capped.evidence_only_cluster_ids) == ["f2", "f3"]


def test_rule_success_analyst_writes_at_most_two_clean_cards(engine, successes) -> None:
    analyst = RuleSuccessAnalyst(engine)
    seen = set()
    for trace in successes:
        analysis = analyst.analyze(trace, 2)
        assert len(analysis.cards) <= 2 and analysis.episode_id == trace.episode_id
        for index, found in enumerate(analysis.cards):
            assert found.card_id == f"success-{trace.episode_id}-{index + 1:02d}"
            assert found.mechanism in MECHANISMS and 0 < found.confidence <= 1
            assert found.eligible_for_consolidation, found.firewall_findings
            seen.add(found.mechanism)
        assert len(analyst.analyze(trace, 1).cards) <= 1
    assert "option_selection" in seen  # the full expert picks the profile's values


def test_success_card_submissions_are_validated() -> None:
    lesson = {"mechanism": "paging", "applicable_when": "a poor page", "observed_evidence": "paged twice",
              "decisive_behavior": "open the next page", "generalizable_lesson": "page on", "related_chunk_ids": [],
              "confidence": 0.7}
    assert parse_success_cards({"cards": []}, "ep", 2) == ()
    with pytest.raises(SuccessCardError, match="at most 2"):
        parse_success_cards({"cards": [lesson] * 3}, "ep", 2)
    with pytest.raises(SuccessCardError, match=r"cards\[0\].confidence"):
        parse_success_cards({"cards": [{**lesson, "confidence": 1.5}]}, "ep", 2)
    with pytest.raises(SuccessCardError, match=r"cards\[0\].related_chunk_ids"):
        parse_success_cards({"cards": [{**lesson, "related_chunk_ids": ["chunk-x"]}]}, "ep", 2)
    with pytest.raises(SuccessCardError, match=r"cards\[1\].decisive_behavior"):
        parse_success_cards({"cards": [lesson, {**lesson, "decisive_behavior": ""}]}, "ep", 2)


def test_llm_success_analyst_and_initial_compiler_over_http(server, engine, successes) -> None:
    scripted, policy = server
    lesson = {"mechanism": "paging", "applicable_when": "a poor page", "observed_evidence": "paged",
              "decisive_behavior": "open the next page", "generalizable_lesson": "page on", "related_chunk_ids": [],
              "confidence": 0.7}
    scripted.script({"name": "submit_success_cards", "arguments": {"cards": [lesson] * 3}},
                    {"name": "submit_success_cards", "arguments": {"cards": [lesson]}})
    analysis = LLMSuccessAnalyst(policy, engine).analyze(successes[0], 2)
    assert [c.mechanism for c in analysis.cards] == ["paging"] and analysis.rejections == ("invalid_fields",)
    payload = json.loads(scripted.requests[0]["messages"][1]["content"])
    assert payload["max_cards"] == 2 and payload["current_skill"] is None
    assert successes[0].private_goal["asin"] not in json.dumps(scripted.requests[0])  # gold never shown
    clusters = [cluster("f1", "paging"), cluster("f2", "option_selection")]
    bad = {"skill_title": "S", "chunks": [chunk_record("Page on", ["f1"])], "evidence_only_cluster_ids": [],
           "conflicts_resolved": []}
    good = {**bad, "evidence_only_cluster_ids": ["f2"]}
    scripted.script({"name": "submit_initial_skill", "arguments": bad},
                    {"name": "submit_initial_skill", "arguments": good})
    compiled = LLMInitialCompiler(policy)(clusters, 16)
    assert [c.chunk_id for c in compiled.skill.chunks] == ["page-on"] and len(compiled.invalid_attempts) == 1
    scripted.script(*[{"name": "submit_initial_skill", "arguments": bad}] * 5)
    with pytest.raises(RoleFailure):
        LLMInitialCompiler(policy)(clusters, 16)


def test_cold_start_params_are_validated_before_work() -> None:
    ci = load_params(params_path("ci"))
    assert ci.cold_start.max_cards_per_success == 2 and ci.cold_start.consolidation_batch == 40
    assert "cold_start" not in plan_dump(ci)  # other runs' plans (and fingerprints) do not depend on it
    with pytest.raises(ParamsError, match="cold_start.max_cards_per_success"):
        with_overrides(ci, ["cold_start.max_cards_per_success=3"])
    with pytest.raises(ParamsError, match="cold_start.validation_dimension_cap"):
        params_from_dict({"experiment": {"name": "x"}, "cold_start": {"validation_dimension_cap": 17}})
    result = CliRunner().invoke(app, ["cold-start", "--params", "ci", "--out", "unused",
                                      "--set", "cold_start.max_clusters=13"])
    assert result.exit_code == 1 and "cold_start.max_clusters" in result.output
    assert "Traceback" not in result.output


def ci_params(tmp_path: Path, **cold_start):
    return with_overrides(load_params(params_path("ci")),
                          [f"experiment.run_root={tmp_path / 'runs'}", "experiment.allow_outside_run_root=true",
                           *(f"cold_start.{k}={v}" for k, v in cold_start.items())])


def lines(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n")


@pytest.mark.e2e
def test_tiny_cold_start_on_the_ci_organism_resumes_and_refuses_a_changed_plan(tmp_path, small_store_root,
                                                                               monkeypatch) -> None:
    params = ci_params(tmp_path, trajectories=8)
    out = tmp_path / "cold-start"
    result = run_cold_start(params, out, store_root=small_store_root, progress=False)
    stages = result.stages
    assert list(stages) == ["rollouts", "analysis", "firewall", "consolidation", "compile", "gate_a", "gate_b"]
    assert stages["rollouts"].counts["completed"] == 8
    analysis = stages["analysis"].counts
    assert analysis["input"]["total"] == 8 and analysis["failure_cards"] == analysis["input"]["failure"]
    assert 1 <= len(result.draft.skills) <= 16 and result.draft.metadata["draft_only"] is True
    assert {s.version for s in result.draft.skills} == {"draft-1"}
    assert {s.version for s in result.s0.skills} <= {"active-1"}
    assert all(s.estimated_effect > 0 for s in result.s0.skills)
    assert stages["gate_a"].counts["observations"] == 12 and stages["gate_a"].cost["episodes"] == 24
    # the random-init ci organism never succeeds: no chunk is positive, and Gate B has nothing to report on
    assert result.s0.skills == () and stages["gate_b"].counts == {"selected": 0}
    assert stages["gate_b"].cost["episodes"] == 0 and result.gate_b is None and not (out / "gate-b").exists()
    rows = result.chunk_rows()
    assert [r["chunk_id"] for r in rows] == [s.skill_id for s in result.draft.skills]
    assert {r["status"] for r in rows} <= {"selected", "non_positive", "budget_excluded"}
    assert [r["stage"] for r in result.stage_rows()] == list(stages)
    assert result.stage_rows()[-1] == {"stage": "gate_b", "counts": "selected 0", **stages["gate_b"].cost}
    assert result.manifest.cost.episodes == sum(s.cost["episodes"] for s in stages.values())
    summary = json.loads((out / "analysis_summary.json").read_text())
    assert summary["input"]["total"] == 8 and summary["evidence_cards"] == stages["firewall"].counts["evidence_cards"]
    ledger = read_ledger(out / "proposal_ledger.jsonl")
    assert [e.candidate_id for e in ledger] == [s.skill_id for s in result.draft.skills]
    assert all(e.stage == "cold_start" and e.operation == "ADD" for e in ledger)
    gate_ledger = read_ledger(out / "gate-a" / "proposal_ledger.jsonl")
    assert all(e.validation_result is not None for e in gate_ledger)
    batches = [json.loads(line) for line in (out / "cluster_batches.jsonl").read_text().splitlines()]
    eligible = [json.loads(line) for line in (out / "evidence_cards.jsonl").read_text().splitlines()]
    cited = [c for b in batches for cl in b["clusters"] for c in cl["evidence_card_ids"]]
    cited += [c for b in batches for c in b["evidence_only_card_ids"]]
    assert sorted(cited) == sorted(e["card_id"] for e in eligible if e["eligible_for_consolidation"])
    traces = lines(out / "rollouts" / "traces.jsonl")
    again = run_cold_start(params, out, store_root=small_store_root, progress=False)
    assert again.stages == stages and lines(out / "rollouts" / "traces.jsonl") == traces
    failure_cards = out / "failure_cards.jsonl"
    kept = failure_cards.read_text().splitlines()[:-1]
    failure_cards.write_text("".join(f"{line}\n" for line in kept))
    resumed = run_cold_start(params, out, store_root=small_store_root, progress=False)
    assert lines(failure_cards) == len(kept) + 1 and resumed.s0 == result.s0
    assert resumed.stages["analysis"].counts == stages["analysis"].counts
    with pytest.raises(ColdStartPlanMismatchError, match="cold_start"):
        run_cold_start(ci_params(tmp_path, trajectories=9), out, store_root=small_store_root, progress=False)

    # Gate B on a non-empty S₀: Gate A's selection forced to the first draft chunk, Gate A's record dropped
    real_gate_a = cold_start_module.run_gate_a
    monkeypatch.setattr(cold_start_module, "run_gate_a", lambda *args, **kwargs: replace(
        real_gate_a(*args, **kwargs), selected_bank=SkillBank("forced", result.draft.skills[:1])))
    (out / "stages" / "gate_a.json").unlink()
    forced = run_cold_start(params, out, store_root=small_store_root, progress=False)
    gate_b = forced.stages["gate_b"].counts
    assert gate_b["selected"] == 1 and gate_b["tasks"] == 12 and sum(gate_b["transitions"].values()) == 12
    assert forced.stages["gate_b"].cost["episodes"] == 24 and "gate_b: selected 1, tasks 12" in forced.summary()
    assert forced.gate_b.tasks == 12 and forced.gate_b.reward.difference == gate_b["reward_difference"]
    comparison = json.loads((out / "gate-b" / "comparison.json").read_text())
    assert comparison["paired"]["metrics"]["reward"]["mean_difference"] == gate_b["reward_difference"]
    assert forced.manifest.cost.episodes == sum(s.cost["episodes"] for s in forced.stages.values())


@pytest.mark.e2e
def test_cold_start_with_both_channels_on_a_flawed_expert(tmp_path, small_store_root, monkeypatch) -> None:
    params = with_overrides(ci_params(tmp_path, trajectories=24),
                            ["model.spec=expert:without:inspect_candidates", "model.checkpoint=null",
                             "sampling.max_turns=30"])
    analyze, calls = RuleSuccessAnalyst.analyze, []

    def killed_on_the_third(self, trace, max_cards):
        calls.append(trace.episode_id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return analyze(self, trace, max_cards)

    monkeypatch.setattr(RuleSuccessAnalyst, "analyze", killed_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        run_cold_start(params, tmp_path / "cs", store_root=small_store_root, progress=False)
    interrupted = json.loads((tmp_path / "cs" / "stages" / "analysis.interrupted.json").read_text())
    assert lines(tmp_path / "cs" / "success_cards.jsonl") == 2 and interrupted["wall_s"] > 0
    monkeypatch.setattr(RuleSuccessAnalyst, "analyze", analyze)
    result = run_cold_start(params, tmp_path / "cs", store_root=small_store_root, progress=False)
    analysis = result.stages["analysis"].counts
    assert lines(tmp_path / "cs" / "success_cards.jsonl") == analysis["input"]["success"]  # resumed, no repeats
    assert result.stages["analysis"].cost["wall_s"] >= round(interrupted["wall_s"], 3)
    assert not (tmp_path / "cs" / "stages" / "analysis.interrupted.json").exists()
    assert analysis["input"]["success"] > 0 and analysis["input"]["failure"] > 0
    consolidation = result.stages["consolidation"].counts
    assert consolidation["success"]["clusters"] > 0 and consolidation["failure"]["clusters"] > 0
    draft = json.loads((tmp_path / "cs" / "initial_skill_draft.json").read_text())
    assert draft["schema_version"] == "shopsimrl-initial-skill-draft-v2" and draft["gate_status"] == "not_run"
    channels = {c.split("-batch-")[0] for chunk in draft["chunks"] for c in chunk["evidence_cluster_ids"]}
    assert channels == {"success", "failure"}
    assert "select-the-profile-s-option-values" in [c["chunk_id"] for c in draft["chunks"]]
    assert load_skillbank(tmp_path / "cs" / "selected_skillbank.json") == result.s0


def llm_roles(body: dict) -> dict | str:
    """Answers every cold-start role of a request like a (lazy) model: one paging lesson per success, no proposal
    per failure, one cluster per batch, one chunk from all clusters."""
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    payload = json.loads(body["messages"][1]["content"]) if len(body["messages"]) > 1 else {}
    if "submit_success_cards" in tools:
        return {"name": "submit_success_cards", "arguments": {"cards": [{
            "mechanism": "paging", "applicable_when": "a results page fits poorly", "observed_evidence": "it paged",
            "decisive_behavior": "open the next page", "generalizable_lesson": "page on before settling",
            "related_chunk_ids": [], "confidence": 0.8}]}}
    if "submit_failure_card" in tools:
        abstraction = {k: "" for k in ("failure_mechanism", "applicable_when", "observable_trigger",
                                       "corrective_procedure", "verification_step", "proposed_content")}
        return {"name": "submit_failure_card", "arguments": {
            "status": "NO_PROPOSAL", "privileged_audit": {k: "unclear" for k in (
                "gold_asin", "chosen_asin", "failure_surface", "earliest_divergence", "oracle_comparison",
                "replay_evidence", "minimal_repair", "repair_validation_result")},
            "deployable_abstraction": {**abstraction, "target_chunk_id": None}}}
    if "submit_clusters" in tools:
        return {"name": "submit_clusters", "arguments": {"clusters": [{
            "workflow_stage": "candidate inspection and comparison", "mechanism": "paging",
            "applicable_when": "a results page fits poorly", "procedure": ["Open the next page"],
            "verification": "a fitting result appears", "common_failure": "buying a poor fit",
            "evidence_card_ids": [c["card_id"] for c in payload["cards"]]}], "evidence_only_card_ids": []}}
    if "submit_initial_skill" in tools:
        return {"name": "submit_initial_skill", "arguments": {
            "skill_title": "Shopping", "conflicts_resolved": [], "evidence_only_cluster_ids": [],
            "chunks": [{**chunk_record("Page on with care", [c["cluster_id"] for c in payload["cluster_summaries"]]),
                        "workflow_stage": "candidate inspection and comparison"}]}}
    return "no role"


@pytest.mark.e2e
def test_cold_start_with_the_llm_roles_over_http(tmp_path, small_store_root) -> None:
    from intraskill.pipeline.cold_start import ColdStartError
    from intraskill.trace2skill.analysts import AnalystSettings

    scripted = ScriptedServer(answer=llm_roles)
    params = with_overrides(ci_params(tmp_path, trajectories=8),
                            ["model.spec=expert:without:inspect_candidates", "model.checkpoint=null",
                             "sampling.max_turns=30"])
    with serve_in_thread(scripted.app) as running:
        settings = AnalystSettings("llm", f"{running.base_url}/v1", "scripted", max_turns=2)
        result = run_cold_start(params, tmp_path / "cs", analyst=settings, store_root=small_store_root,
                                progress=False)
        successes = result.stages["analysis"].counts["input"]["success"]
        failures = result.stages["analysis"].counts["input"]["failure"]
        assert successes > 0 and result.stages["analysis"].counts["success_cards"] == successes
        assert result.stages["firewall"].counts["failure"]["eligible"] == 0  # no proposal, nothing to cluster
        assert result.stages["analysis"].cost["llm_calls"] == successes + failures  # one call each
        assert result.stages["analysis"].cost["tokens"] == 2 * result.stages["analysis"].cost["llm_calls"]
        assert result.stages["consolidation"].counts["success"]["clusters"] == 1
        assert [s.skill_id for s in result.draft.skills] == ["page-on-with-care"]
        assert result.manifest.analyst == "llm"
        scripted.answer = lambda body: ({"name": "submit_success_cards", "arguments": {"cards": []}}
                                        if "submit_success_cards" in str(body.get("tools")) else llm_roles(body))
        with pytest.raises(ColdStartError, match="no eligible card"):
            run_cold_start(params, tmp_path / "empty", analyst=settings, store_root=small_store_root,
                           progress=False)
