"""The LLM roles over real HTTP: a scripted OpenAI-compatible server and the random-init organism."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from t2s_helpers import BANK, ScriptedServer, failed_retries, scripted_analyst

from intraskill.chat.base import Generation, ToolCall
from intraskill.policy.openai_backend import OpenAIPolicy
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences, ScriptedExpert, run_expert_episode
from intraskill.shop.service import serve_in_thread
from intraskill.trace2skill.cards import REASON_FIREWALL, CardStatus
from intraskill.trace2skill.compact import replay_trace
from intraskill.trace2skill.compiler import compiler_input
from intraskill.trace2skill.llm_analyst import (
    REASON_NO_VALID_SUBMISSION,
    LLMAnalyst,
    LLMCompiler,
    compile_online,
    consolidate,
)
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.trace2skill.roles import RoleConfig, RoleFailure, SubmissionError, submission
from intraskill.trace2skill.rule_analyst import RuleAnalyst

SUBMIT = "submit_failure_card"


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[ScriptedServer, OpenAIPolicy]]:
    with scripted_analyst() as pair:
        yield pair


@pytest.fixture(scope="module")
def item(engine, small_store) -> AnalysisItem:
    return failed_retries(engine, list(small_store[2].ids("train"))[:12], "choose_options", limit=1)[0]


@pytest.fixture(scope="module")
def winning_calls(engine, item) -> list[dict[str, Any]]:
    """The full expert's successful episode of the task, as tool calls."""
    actions: list[str] = []
    final = run_expert_episode(engine.new_session(), ScriptedExpert(Competences()),
                               engine.goals[item.task_id].public_task(), lambda a, _: actions.append(a))
    assert final["reward_detail"]["r_success"] == 1
    return [dict(zip(("name", "arguments"), ScriptedExpert.tool_call(a))) for a in actions]


def card_call(content: str, status: str = "PROPOSE_ADD", drop: str | None = None) -> dict[str, Any]:
    mechanism = MECHANISMS["option_selection"]
    arguments = {
        "status": status,
        "privileged_audit": {k: "x" for k in ("gold_asin", "chosen_asin", "failure_surface", "earliest_divergence",
                                              "oracle_comparison", "replay_evidence", "minimal_repair",
                                              "repair_validation_result")},
        "deployable_abstraction": {"failure_mechanism": "option_selection",
                                   "applicable_when": mechanism.chunk.applicable_when,
                                   "observable_trigger": mechanism.observable_trigger,
                                   "corrective_procedure": "; ".join(mechanism.chunk.procedure),
                                   "verification_step": mechanism.chunk.verification,
                                   "target_chunk_id": None, "proposed_content": content},
    }
    arguments.pop(drop, None)
    return {"name": SUBMIT, "arguments": arguments}


def test_live_audit_then_a_valid_card(server, engine, item, winning_calls) -> None:
    scripted, policy = server
    content = MECHANISMS["option_selection"].content
    scripted.script(*winning_calls, card_call(content))
    card = LLMAnalyst(policy, engine).analyze(item, BANK)
    assert card.status is CardStatus.PROPOSE_ADD and card.eligible_for_consolidation
    assert card.deployable_abstraction.proposed_content == content
    assert len(card.terminal_trials) == 1 and card.terminal_trials[0].success
    assert card.grounded_live_actions and len(card.grounded_live_actions) == len(winning_calls)
    assert scripted.tools(0) == ["search", SUBMIT] and SUBMIT in scripted.tools(1)
    opening = json.dumps(scripted.requests[0]["messages"])
    assert "privileged_gold_audit" in opening and engine.goals[item.task_id].asin not in opening
    after_purchase = scripted.requests[len(winning_calls)]["messages"][-1]
    assert after_purchase["role"] == "tool" and '"terminal_trial"' in after_purchase["content"]


def test_invalid_draft_gets_a_repair_and_a_leak_is_downgraded(server, engine, item, winning_calls) -> None:
    scripted, policy = server
    replayed = replay_trace(engine, item.trace)
    brand = replayed.steps[-1].state["product"]["brand"]
    leaking = MECHANISMS["option_selection"].content + f"\n\nPrefer {brand} when unsure."
    scripted.script(*winning_calls, card_call("x", drop="deployable_abstraction"), card_call(leaking))
    card = LLMAnalyst(policy, engine).analyze(item, BANK)
    repair_request = scripted.requests[len(winning_calls) + 1]
    assert [t["function"]["name"] for t in repair_request["tools"]] == [SUBMIT]
    repair = json.loads(repair_request["messages"][-1]["content"])["repair"]
    assert repair["error"] == "deployable_abstraction: missing" and "privileged_audit" in repair["invalid_draft"]
    assert card.status is CardStatus.NO_PROPOSAL and card.downgrade_reason == REASON_FIREWALL
    assert ("brand", brand) in {(f.kind, f.value) for f in card.firewall_findings}
    assert card.successful_counterfactual_trials
    assert {"submission_attempt": 0, "error": "deployable_abstraction: missing",
            "reason": "invalid_fields"} in card.audit_transcript


def test_final_turn_offers_only_submit_and_exhaustion_falls_back(server, engine, item) -> None:
    scripted, policy = server
    scripted.script("let me think", {"name": "search", "arguments": {"query": "anything"}},
                    "card?", "still no card", "no")
    card = LLMAnalyst(policy, engine, RoleConfig(attempts=3), max_turns=3).analyze(item, BANK)
    assert len(scripted.requests) == 5
    assert scripted.tools(0) == ["search", SUBMIT] and scripted.tools(1) == ["search", SUBMIT]
    assert [scripted.tools(i) for i in (2, 3, 4)] == [[SUBMIT]] * 3
    feedback = json.loads(scripted.requests[1]["messages"][-1]["content"])
    assert feedback["type"] == "tool_protocol_error" and feedback["code"] == "tool_call_count"
    repair = json.loads(scripted.requests[4]["messages"][-1]["content"])["repair"]
    assert repair["invalid_draft"] == "still no card" and "got 0" in repair["error"]
    assert "card?" not in json.dumps(scripted.requests[4]["messages"])  # only the latest draft
    assert card.status is CardStatus.NO_PROPOSAL and card.downgrade_reason == REASON_NO_VALID_SUBMISSION
    assert card.grounded_live_actions == ("search[anything]",)


def test_online_compiler_and_consolidator_roles(server, engine, item) -> None:
    scripted, policy = server
    card = RuleAnalyst(engine).analyze(item, BANK)
    draft = {"operation": "REWRITE", "target_chunk_id": "chunk-gone", "title": "Select the profile's values",
             "failure_mechanism": "option_selection", "applicable_when": "a product page has option axes",
             "procedure": ["Click the profile's colour and size"], "verification": "all axes selected",
             "common_failure": "first listed value", "evidence_card_ids": [card.card_id]}
    fixed = {**draft, "target_chunk_id": "chunk-options"}
    scripted.script({"name": "submit_online_candidates", "arguments": {"candidates": [draft]}},
                    {"name": "submit_online_candidates", "arguments": {"candidates": [fixed]}})
    compiled = compile_online(policy, compiler_input(BANK, [card], []), active_chunk_ids=["chunk-query", "chunk-options"],
                                   eligible_card_ids=[card.card_id], ledger_signatures=set(),
                                   proposal_checkpoint="round-000")
    assert [c.target_chunk_id for c in compiled.candidates] == ["chunk-options"]
    assert compiled.rejections == ("invalid_fields",) and compiled.repair is None
    error = json.loads(scripted.requests[1]["messages"][-1]["content"])["repair"]["error"]
    assert "'chunk-gone' is not an active chunk" in error
    scripted.script(*[{"name": "submit_online_candidates", "arguments": {"candidates": [draft]}}] * 5)
    with pytest.raises(RoleFailure) as failure:
        compile_online(policy, compiler_input(BANK, [card], []), active_chunk_ids=["chunk-options"],
                       eligible_card_ids=[card.card_id], ledger_signatures=set(), proposal_checkpoint="r")
    assert len(failure.value.attempts) == 5 == len(scripted.requests)
    cluster = {k: draft[k] for k in ("applicable_when", "procedure", "verification", "common_failure",
                                     "evidence_card_ids")}
    cluster.update(workflow_stage="variant and price verification", mechanism="option_selection")
    scripted.script({"name": "submit_clusters", "arguments": {"clusters": [], "evidence_only_card_ids": []}},
                    {"name": "submit_clusters", "arguments": {"clusters": [cluster], "evidence_only_card_ids": []}})
    clusters = consolidate(policy, [card], channel="failure", batch_id="batch-001")
    assert clusters["clusters"][0]["mechanism"] == "option_selection"
    assert "missing ['" + card.card_id in json.loads(scripted.requests[1]["messages"][-1]["content"])["repair"]["error"]


@pytest.mark.e2e
def test_random_init_organism_over_serve_policy_falls_back(engine, item) -> None:
    """The real server path: a random-init organism never yields a valid card."""
    from intraskill.policy.hf import HFPolicy
    from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer
    from intraskill.policy.server import ServerConfig, create_app

    config = OrganismConfig(vocab_size=1024, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                            head_dim=32, intermediate_size=128, max_position=16384, seed=5)
    tokenizer = train_tokenizer(protocol_corpus(), config.vocab_size)
    app = create_app(HFPolicy(build_organism(config, tokenizer), tokenizer), ServerConfig(default_max_tokens=8))
    with serve_in_thread(app) as running:
        policy = OpenAIPolicy(f"{running.base_url}/v1", "intraskill-policy", max_retries=0)
        analyst = LLMAnalyst(policy, engine, RoleConfig(max_tokens=6, attempts=2), max_turns=2, max_products=1)
        card = analyst.analyze(item, BANK)
        policy.close()
    assert policy.attempts == 3  # one live turn, then two submit attempts
    assert card.status is CardStatus.NO_PROPOSAL and card.downgrade_reason == REASON_NO_VALID_SUBMISSION
    attempts = [t for t in card.audit_transcript if "submission_attempt" in t]
    assert [t["submission_attempt"] for t in attempts] == [0, 1]


def reply(text: str = "", *calls: tuple[str, str]) -> Generation:
    return Generation(text, text, [ToolCall(name, arguments) for name, arguments in calls], "stop", 1, 1)


def test_messy_replies_are_repaired_or_rejected_with_a_reason() -> None:
    card = {"status": "NO_PROPOSAL"}
    wrapped = json.dumps({"name": SUBMIT, "arguments": json.dumps(card)})
    assert submission(reply(f"Sure!\n```json\n{wrapped}\n```\nAnything else?"), SUBMIT) == (card, "json_from_text")
    assert submission(reply("", (SUBMIT, json.dumps(card) + " trailing}")), SUBMIT) == (card, "json_from_arguments")
    assert submission(reply("", (SUBMIT, json.dumps(card))), SUBMIT) == (card, None)
    for generation, reason in ((reply("I cannot find a card."), "no_tool_call"),
                               (reply("", (SUBMIT, '{"status": "NO_')), "invalid_json"),
                               (reply("", (SUBMIT, "[1, 2]")), "invalid_json"),
                               (reply("", ("search", "{}")), "wrong_tool"),
                               (reply("", (SUBMIT, "{}"), (SUBMIT, "{}")), "several_tool_calls")):
        with pytest.raises(SubmissionError) as error:
            submission(generation, SUBMIT)
        assert error.value.reason == reason


def test_an_exhausted_llm_compiler_yields_no_candidates_and_counts_its_rejections(server, engine, item) -> None:
    scripted, policy = server
    card = RuleAnalyst(engine).analyze(item, BANK)
    assert card.eligible_for_consolidation
    scripted.script("no idea", {"name": "submit_online_candidates", "arguments": "{broken"},
                    {"name": "submit_clusters", "arguments": {}}, '{"candidates": "many"}', "{}")
    result = LLMCompiler(policy)(BANK, [card], [], proposal_checkpoint="round-000", max_candidates=2, lookup=None)
    assert result.exhausted and result.candidates == ()
    assert result.rejections == ("no_tool_call", "invalid_json", "wrong_tool", "invalid_fields", "invalid_fields")
