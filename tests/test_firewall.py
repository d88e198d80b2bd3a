"""Gold firewall rules (hits and misses), trace redaction, and failure-card downgrades."""

from __future__ import annotations

import pytest

from intraskill.trace2skill.cards import (
    REASON_FIREWALL,
    REASON_NO_GROUNDED_ACTION,
    REASON_NO_SUCCESSFUL_COUNTERFACTUAL,
    REASON_REWRITE_AT_COLD_START,
    REASON_REWRITE_TARGET_NOT_ACTIVE,
    CardError,
    CardStatus,
    FailureCard,
    apply_downgrades,
    screen_card,
)
from intraskill.trace2skill.firewall import (
    GoldLookup,
    redact_trace_text,
    scan_payload,
    scan_text,
    seen_titles_and_brands,
)

TRACE = {
    "turns": [
        {"observation_state": {"products": [
            {"asin": "B0TEST0001", "title": "Trail Runner Pro Shoe", "brand": "Zephyr", "price": "59.0"},
            {"asin": "B0TEST0002", "title": "Mug", "brand": "LG", "price": "9.0"},
        ]}},
        {"observation_state": {"product": {"asin": "B0TEST0001", "title": "Trail Runner Pro Shoe",
                                           "brand": "Zephyr"}}},
    ],
    "purchase": {"title": "Sunrise Kettle 1.7L", "brand": "Ace"},
}
GOAL = {"name": "Velvet Cushion Cover", "goal_options": ["navy blue", "large", "18x18 inch"]}


@pytest.fixture()
def lookup() -> GoldLookup:
    return GoldLookup.build(GOAL, TRACE)


def kinds(text: str, lookup: GoldLookup | None = None) -> list[str]:
    return [finding.kind for finding in scan_text(text, lookup)]


@pytest.mark.parametrize("text", ["copy the ASIN first", "asin: x", "两个ASIN码", "check the ASINs"])
def test_asin_word_trips_in_any_case(text: str) -> None:
    assert kinds(text) == ["asin_word"]


@pytest.mark.parametrize("text", ["a basin for the sink", "Asinine choices", "casing"])
def test_asin_inside_other_words_passes(text: str) -> None:
    assert kinds(text) == []


def test_digit_runs_trip_at_ten_digits() -> None:
    assert kinds("call 123456789 now") == []
    assert kinds("call 1234567890 now") == ["digit_run"]
    assert [f.value for f in scan_text("id B01234567890X")] == ["01234567890"]


@pytest.mark.parametrize("text", ["in task 12 the user", "task-000123", "Task_ID=7", "task#4", "task：9"])
def test_task_followed_by_a_number_trips(text: str) -> None:
    assert kinds(text) == ["task_number"]


@pytest.mark.parametrize("text", ["the task is hard", "multitask 3 items", "tasks remain"])
def test_task_without_a_number_passes(text: str) -> None:
    assert kinds(text) == []


def test_lookup_collects_titles_brands_and_gold_options(lookup: GoldLookup) -> None:
    assert set(lookup.titles) == {"Trail Runner Pro Shoe", "Sunrise Kettle 1.7L", "Velvet Cushion Cover"}
    assert set(lookup.brands) == {"Zephyr", "Ace"}  # "LG" is shorter than 3 characters
    assert set(lookup.gold_options) == {"navy blue", "18x18 inch"}  # "large" is shorter than 6
    titles, brands = seen_titles_and_brands(TRACE)
    assert "Mug" in titles and "LG" in brands


def test_seen_title_trips_case_and_space_insensitive(lookup: GoldLookup) -> None:
    assert kinds("prefer the trail  runner PRO shoe", lookup) == ["product_title"]
    assert kinds("buy the velvet cushion cover", lookup) == ["product_title"]
    assert kinds("buy a Mug", lookup) == []  # a 3-character title is below the 6-character floor


def test_brand_rule_respects_length_and_word_edges(lookup: GoldLookup) -> None:
    assert kinds("prefer Zephyr items", lookup) == ["brand"]
    assert kinds("choose the ACE kettle", lookup) == ["brand"]
    assert kinds("replace the lid", lookup) == []  # "ace" inside a word is not the brand
    assert kinds("LG screens", lookup) == []  # two-character brand passes


def test_cjk_lookup_matches_as_substring() -> None:
    lookup = GoldLookup(brands=("小米科技",), titles=("智能保温杯大容量",))
    assert kinds("优先选择小米科技的商品", lookup) == ["brand"]
    assert kinds("点击智能保温杯大容量款", lookup) == ["product_title"]


def test_gold_options_trip_only_from_six_characters(lookup: GoldLookup) -> None:
    assert kinds("pick Navy Blue", lookup) == ["gold_option"]
    assert kinds("pick the 18x18 inch size", lookup) == ["gold_option"]
    assert kinds("pick large", lookup) == []


def test_scan_payload_reports_paths(lookup: GoldLookup) -> None:
    payload = {"title": "Size check", "procedure": ["open the page", "pick navy blue"],
               "nested": {"note": "see task 3"}}
    findings = scan_payload(payload, lookup)
    assert [(f.kind, f.path) for f in findings] == [
        ("gold_option", "procedure[1]"), ("task_number", "nested.note")]
    assert scan_payload({"procedure": ["open the page", "compare prices"]}, lookup) == []


def test_redact_trace_text_masks_ids_numbers_and_tasks() -> None:
    text = "clicked B0TEST0001, then b0test0002 and B0TEST0001 again; order 98765432101 in task-000042"
    redacted = redact_trace_text(text, ["B0TEST0001", "B0TEST0002"])
    assert redacted == "clicked <item-1>, then <item-2> and <item-1> again; order <number> in <task>"
    assert scan_text(redacted) == []


def card(
    status: str = "PROPOSE_ADD",
    *,
    target: str | None = None,
    actions: tuple[str, ...] = ("search[mug]",),
    success: bool = True,
    content: str = "### Verify sizes\n\n- Applies when: sizes differ",
) -> FailureCard:
    trial = {"reward": 1.0 if success else 0.2, "reward_detail": {"r_success": 1.0 if success else 0.0},
             "purchase": None, "termination": "purchase", "success": success}
    return FailureCard.from_dict({
        "card_id": "failure-train-group-000000001-sample-000000008-full-skill-retry-01",
        "status": status,
        "privileged_audit": {"gold_asin": "B0TEST0001", "chosen_asin": "B0TEST0002",
                             "failure_surface": "options",
                             "earliest_divergence": "turn 3", "oracle_comparison": "wrong size",
                             "replay_evidence": "turn 5", "minimal_repair": "pick size",
                             "repair_validation_result": "success"},
        "deployable_abstraction": {"failure_mechanism": "size left unselected",
                                   "applicable_when": "sizes differ",
                                   "observable_trigger": "size axis", "corrective_procedure": "select size",
                                   "verification_step": "size shown", "target_chunk_id": target,
                                   "proposed_content": content},
        "terminal_trials": [trial],
        "grounded_live_actions": list(actions),
    })


def test_passing_proposals_keep_their_status() -> None:
    add = apply_downgrades(card(), [], "cold_start")
    assert add.status is CardStatus.PROPOSE_ADD and add.downgrade_reason is None
    assert add.eligible_for_consolidation and len(add.successful_counterfactual_trials) == 1
    rewrite = apply_downgrades(card("PROPOSE_REWRITE", target="chunk-a"), ["chunk-a"], "online")
    assert rewrite.status is CardStatus.PROPOSE_REWRITE and rewrite.eligible_for_consolidation


@pytest.mark.parametrize(
    ("made", "active", "stage", "reason"),
    [
        (card(actions=()), [], "online", REASON_NO_GROUNDED_ACTION),
        (card(success=False), [], "online", REASON_NO_SUCCESSFUL_COUNTERFACTUAL),
        (card("PROPOSE_REWRITE", target="chunk-a", success=False), ["chunk-a"], "online",
         REASON_NO_SUCCESSFUL_COUNTERFACTUAL),
        (card("PROPOSE_REWRITE", target="chunk-a"), ["chunk-a"], "cold_start", REASON_REWRITE_AT_COLD_START),
        (card("PROPOSE_REWRITE", target="chunk-z"), ["chunk-a"], "online", REASON_REWRITE_TARGET_NOT_ACTIVE),
    ],
)
def test_each_downgrade_rule(made: FailureCard, active: list[str], stage: str, reason: str) -> None:
    result = apply_downgrades(made, active, stage)
    assert result.status is CardStatus.NO_PROPOSAL
    assert result.downgrade_reason == reason
    assert not result.eligible_for_consolidation


def test_firewall_finding_downgrades_and_blocks_consolidation(lookup: GoldLookup) -> None:
    leaky = card(content="### Sizes\n\n- Applies when: buying the Velvet Cushion Cover")
    screened = screen_card(leaky, lookup)
    assert [(f.kind, f.path) for f in screened.firewall_findings] == [
        ("product_title", "deployable_abstraction.proposed_content")]
    result = apply_downgrades(screened, [], "online")
    assert result.status is CardStatus.NO_PROPOSAL and result.downgrade_reason == REASON_FIREWALL
    clean = screen_card(card(), lookup)
    assert clean.firewall_findings == () and apply_downgrades(clean, [], "online").eligible_for_consolidation


def test_no_proposal_cards_are_left_alone_and_round_trip() -> None:
    made = apply_downgrades(card("NO_PROPOSAL", actions=()), [], "online")
    assert made.status is CardStatus.NO_PROPOSAL and made.downgrade_reason is None
    downgraded = apply_downgrades(card(success=False), [], "online")
    assert FailureCard.from_dict(downgraded.to_dict()) == downgraded
    record = downgraded.to_dict()
    record["eligible_for_consolidation"] = True
    with pytest.raises(CardError, match="eligible_for_consolidation"):
        FailureCard.from_dict(record)
    with pytest.raises(CardError, match="status"):
        FailureCard.from_dict({**downgraded.to_dict(), "status": "MAYBE"})
    with pytest.raises(CardError, match="privileged_audit.gold_asin"):
        FailureCard.from_dict({**downgraded.to_dict(),
                               "privileged_audit": {**record["privileged_audit"], "gold_asin": None}})
    with pytest.raises(CardError, match="stage"):
        apply_downgrades(card(), [], "offline")
