"""The rule analyst on real failed retries: surfaces, live counterfactuals, ADD/REWRITE, firewall."""

from __future__ import annotations

from dataclasses import replace

import pytest
from t2s_helpers import BANK, OPTION_CHUNK, failed_retries

from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import persona_preferences
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import render_chunk
from intraskill.trace2skill.cards import REASON_FIREWALL, CardStatus
from intraskill.trace2skill.compact import compact_trace, redact, replay_trace
from intraskill.trace2skill.mechanisms import MECHANISMS, rewrite_chunk
from intraskill.trace2skill.queue import AnalysisItem, recheck_item
from intraskill.trace2skill.rule_analyst import RuleAnalyst, _repair_action, plausible, required_words


@pytest.fixture(scope="module")
def engine(small_store) -> ShopEngine:
    catalog, index, _ = small_store
    return ShopEngine(catalog.products, catalog.goals, index)


@pytest.fixture(scope="module")
def train_ids(small_store) -> list[int]:
    return list(small_store[2].ids("train"))[:24]


@pytest.fixture(scope="module")
def option_failures(engine, train_ids) -> list[AnalysisItem]:
    return failed_retries(engine, train_ids, "choose_options", limit=3)


@pytest.fixture(scope="module")
def budget_failures(engine, train_ids) -> list[AnalysisItem]:
    items = failed_retries(engine, train_ids, "check_budget", limit=2)
    assert items, "the small store has over-budget failures without check_budget"
    return items


def test_recheck_accepts_failed_retries_and_names_the_failed_check(option_failures) -> None:
    item = option_failures[0]
    assert recheck_item(item, BANK) is None
    assert recheck_item(item, SkillBank("other", (OPTION_CHUNK,))).startswith("injected_skills")
    assert recheck_item(replace(item, split="val"), BANK).startswith("split")
    assert recheck_item(replace(item, diagnostic_full_skill=False), BANK).startswith("diagnostic_full_skill")
    won = replace(item.trace, reward=replace(item.trace.reward, r_success=1.0))
    assert recheck_item(replace(item, trace=won), BANK).startswith("r_success")


def test_replay_recovers_pages_and_redaction_hides_ids(engine, option_failures) -> None:
    replayed = replay_trace(engine, option_failures[0].trace)
    assert len(replayed.steps) == option_failures[0].trace.counts["steps"]
    view = redact(compact_trace(replayed), replayed.product_ids())
    text = str(view)
    assert not any(asin in text for asin in replayed.product_ids())
    assert "<item-1>" in text and view["outcome"]["termination"] == "purchase"


def test_wrong_option_is_repaired_live_and_rewrites_the_tagged_chunk(engine, option_failures) -> None:
    assert len(option_failures) == 3
    for item in option_failures:
        card = RuleAnalyst(engine).analyze(item, BANK)
        audit, abstraction = card.privileged_audit, card.deployable_abstraction
        assert audit.failure_surface == "wrong_option"
        assert audit.gold_asin == engine.goals[item.task_id].asin
        assert abstraction.failure_mechanism == "option_selection"
        assert card.status is CardStatus.PROPOSE_REWRITE and abstraction.target_chunk_id == OPTION_CHUNK.skill_id
        assert abstraction.proposed_content == render_chunk(rewrite_chunk(MECHANISMS["option_selection"], OPTION_CHUNK))
        assert card.successful_counterfactual_trials and card.terminal_trials[-1].success
        assert card.terminal_trials[-1].reward_detail["r_option"] == 1.0
        assert card.grounded_live_actions and card.eligible_for_consolidation
        assert card.firewall_findings == () and card.downgrade_reason is None


def test_over_budget_is_an_add_validated_by_a_within_budget_purchase(engine, budget_failures) -> None:
    card = RuleAnalyst(engine).analyze(budget_failures[0], BANK)
    assert card.privileged_audit.failure_surface == "over_budget"
    assert card.deployable_abstraction.failure_mechanism == "budget_check"
    assert card.status is CardStatus.PROPOSE_ADD and card.deployable_abstraction.target_chunk_id is None
    assert card.deployable_abstraction.proposed_content == MECHANISMS["budget_check"].content
    winning = card.successful_counterfactual_trials[-1]
    assert winning.reward_detail["r_price"] == 1.0 and winning.purchase["price"] <= winning.reward_detail["price_upper"]


def test_missing_persona_words_are_diagnosed_and_repaired(engine, train_ids) -> None:
    cards = [RuleAnalyst(engine).analyze(item, BANK)
             for item in failed_retries(engine, train_ids, "read_persona", limit=3)]
    assert cards
    for card in cards:
        assert card.privileged_audit.failure_surface in ("missing_attribute", "wrong_option", "query_never_matched",
                                                         "stopped_at_page_one")
        assert card.terminal_trials and card.eligible_for_consolidation == bool(card.successful_counterfactual_trials)


def test_query_repair_searches_the_task_without_its_budget_plus_the_profile_words(small_store, train_ids) -> None:
    tasks = [small_store[0].task(t) for t in train_ids]
    task = next(t for t in tasks if "dollars" in t.instruction_simple)
    prefs = persona_preferences(task.user_persona)
    action = _repair_action("query_formulation", task, {"page_type": "search_home", "actions": []}, None)
    assert action.startswith("search[") and "dollars" not in action
    assert prefs["brand"] in action and prefs["material"] in action
    again = _repair_action("query_formulation", task, {"page_type": "search_home", "actions": []}, action)
    assert again != action and prefs["color"] in again


def test_no_proposal_when_the_active_chunk_already_states_the_repair(engine, option_failures) -> None:
    chunk = replace(OPTION_CHUNK, content=render_chunk(rewrite_chunk(MECHANISMS["option_selection"], OPTION_CHUNK)))
    bank = SkillBank("s0-already-covered", (BANK.skills[0], chunk))
    item = failed_retries(engine, [option_failures[0].task_id], "choose_options", bank=bank)[0]
    card = RuleAnalyst(engine).analyze(item, bank)
    assert card.status is CardStatus.NO_PROPOSAL and not card.eligible_for_consolidation
    assert "already states this repair" in card.privileged_audit.repair_validation_result


def test_gold_firewall_downgrades_a_proposal_whose_text_names_a_seen_brand(engine, budget_failures) -> None:
    """A store where a product shown in the trace has the brand "Budget": the budget chunk names it."""
    item = budget_failures[0]
    replayed = replay_trace(engine, item.trace)
    words = required_words(engine.goals[item.task_id].public_task())
    shown = [p for state in replayed.states for p in state.get("products") or [] if not plausible(p, words)]
    victim = shown[-1]["asin"]
    products = {**engine.products, victim: replace(engine.products[victim], brand="Budget")}
    leaky = ShopEngine(products, engine.goals, engine.index)
    leaky_item = failed_retries(leaky, [item.task_id], "check_budget")[0]
    card = RuleAnalyst(leaky).analyze(leaky_item, BANK)
    assert card.status is CardStatus.NO_PROPOSAL and card.downgrade_reason == REASON_FIREWALL
    assert {(f.kind, f.value) for f in card.firewall_findings} == {("brand", "Budget")}
    assert card.successful_counterfactual_trials  # the repair itself worked; only the text leaked
    clean = RuleAnalyst(engine).analyze(item, BANK)
    assert clean.eligible_for_consolidation and clean.firewall_findings == ()


def test_rewrite_at_cold_start_is_downgraded(engine, option_failures) -> None:
    card = RuleAnalyst(engine, stage="cold_start").analyze(option_failures[0], BANK)
    assert card.status is CardStatus.NO_PROPOSAL and card.downgrade_reason == "rewrite_at_cold_start"


def test_unknown_tag_means_add(engine, option_failures) -> None:
    bank = SkillBank("s0-untagged", (Skill("chunk-x", OPTION_CHUNK.content, version="active-1"),))
    item = failed_retries(engine, [option_failures[0].task_id], "choose_options", bank=bank)[0]
    card = RuleAnalyst(engine).analyze(item, bank)
    assert card.status is CardStatus.PROPOSE_ADD
    assert card.deployable_abstraction.proposed_content == MECHANISMS["option_selection"].content
