"""The store's page state machine on the hand-built catalogue (docs/store.md §4, §9)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from shop_fixtures import ALTERNATIVE, CUP, GOLD_ASIN, GOLD_GOAL, catalogue, goals

from intraskill.hashing import sha256_text
from intraskill.shop.actions import INVALID_ACTION_CODES, InvalidActionError, parse_action
from intraskill.shop.engine import (
    EpisodeFinishedError,
    SessionNotStartedError,
    ShopEngine,
    StoreConfig,
    UnknownTaskError,
)
from intraskill.shop.observation import FORBIDDEN_KEYS
from intraskill.shop.search import SearchIndex
from intraskill.shop.types import ENVIRONMENT_VERSION

QUERY = "智能 热洗 洗地机"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.build(catalogue(), tmp_path_factory.mktemp("idx") / "i.sqlite3", sha256_text("mini"))


def _engine(index: SearchIndex, **config: object) -> ShopEngine:
    return ShopEngine(catalogue(), goals(), index, StoreConfig(**config))


def _keys(obj: object) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | set().union(*(_keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(_keys(v) for v in obj)) if obj else set()
    return set()


def test_four_step_episode(index: SearchIndex) -> None:
    session = _engine(index, language="zh").new_session()
    reset = session.reset(7)
    assert reset["task_instruction"] == GOLD_GOAL.instruction_simple
    assert "__reasoning__" not in reset["user_persona"] and reset["user_persona"]["用户ID"] == "u-001"
    assert (reset["task_mode"], reset["interaction_mode"], reset["idx"]) == ("persona", "single_turn", 7)
    assert reset["environment_version"] == ENVIRONMENT_VERSION
    assert reset["observation_state"]["page_type"] == "search_home"
    assert reset["observation"].startswith("页面：搜索首页")
    assert GOLD_GOAL.instruction_text not in repr(reset)

    step = session.step(f"search[{QUERY}]")
    state = step["observation_state"]
    assert state["page_type"] == "search_results" and not step["done"] and step["reward"] == 0.0
    assert GOLD_ASIN in state["actions"] and state["search_text"] == QUERY
    assert step["action_feedback"]["valid"] and step["message"] == "Continue interaction"

    step = session.step(f"click[{GOLD_ASIN}]")
    assert step["observation_state"]["missing_option_axes"] == ["颜色分类"]
    assert "buy now" not in step["observation_state"]["actions"]

    step = session.step("click[颜色分类=白色]")
    assert step["observation_state"]["selected_price"] == 1999.0
    assert step["observation_state"]["actions"] == ["back to search", "< prev", "颜色分类=黑色", "buy now"]

    final = session.step("click[buy now]")
    assert final["done"] and final["reward"] == 1.0 and final["termination_reason"] == "purchase"
    detail = final["reward_detail"]
    assert (detail["r_type"], detail["r_att"], detail["r_option"], detail["r_price"], detail["r_success"]) == (1, 1, 1, 1, 1)
    assert detail["price_resolution"]["method"] == "selected_price_axis" and detail["target_asin_match"]
    assert final["purchase"] == {"asin": GOLD_ASIN, "category": "家电›清洁电器›洗地机", "name": "智能热洗白色洗地机",
                                 "product_category": "洗地机", "instruction_text": GOLD_GOAL.instruction_text,
                                 "attributes": ["智能", "热洗", "自清洁", "无线"], "price": 1999.0,
                                 "options": {"颜色分类": "白色"}}
    assert final["goal"] == GOLD_GOAL.to_dict()
    assert final["observation_state"]["page_type"] == "terminal" and session.done
    assert session.action_count == 4


def test_wrong_option_variant_gives_strict_zero(index: SearchIndex) -> None:
    session = _engine(index).new_session()
    session.reset(7)
    for action in (f"search[{QUERY}]", f"click[{GOLD_ASIN}]", "click[颜色分类=黑色]"):
        session.step(action)
    final = session.step("click[buy now]")
    assert final["reward"] == 0.0 and final["reward_detail"]["r_loose"] == 0.75


def test_goal_never_in_state_before_the_end(index: SearchIndex) -> None:
    session = _engine(index).new_session()
    responses = [session.reset(7)]
    for action in (f"search[{QUERY}]", f"click[{ALTERNATIVE.asin}]", "click[颜色=白色]"):
        responses.append(session.step(action))
    for response in responses:
        assert not _keys(response["observation_state"]) & FORBIDDEN_KEYS
        assert not {"goal", "reward_detail", "purchase"} & set(response)
        assert GOLD_GOAL.instruction_text not in response["observation"]
    final = session.step("click[buy now]")
    assert final["reward"] == 1.0 and not final["reward_detail"]["target_asin_match"]


def test_standard_mode_and_inactive_tasks(index: SearchIndex) -> None:
    engine = _engine(index)
    session = engine.new_session()
    standard = session.reset(8)
    assert standard["task_mode"] == "standard" and standard["user_persona"] == {}
    assert standard["task_instruction"] == "a stainless steel vacuum cup under 100 yuan"
    forced = session.reset(7, persona=False)
    assert forced["task_mode"] == "standard" and forced["task_instruction"] == GOLD_GOAL.instruction_text
    for task_id in (9, 12345):
        assert not engine.has_task(task_id)
        with pytest.raises(UnknownTaskError, match=str(task_id)):
            session.reset(task_id)
    assert engine.has_task(7) and engine.versions()["search"] == "shopsimulator-multifield-bm25-v3"
    with pytest.raises(SessionNotStartedError):
        engine.new_session().step("search[x]")


def _code(session, action: str) -> str:  # type: ignore[no-untyped-def]
    response = session.step(action)
    assert not response["done"] and response["message"] == "Invalid action"
    assert response["action_feedback"]["valid"] is False
    return response["action_feedback"]["reason"]


def test_every_invalid_action_code_from_real_steps(index: SearchIndex) -> None:
    session = _engine(index).new_session()
    session.reset(7)
    produced = [
        _code(session, "search 智能"),                      # no brackets
        _code(session, "search[a] click[b]"),               # chained
        _code(session, "search[   ]"),                      # empty
        _code(session, f"click[{GOLD_ASIN}]"),              # nothing clickable on home
    ]
    session.step(f"search[{QUERY}]")
    produced.append(_code(session, "search[again]"))        # search only on home
    session.step(f"click[{GOLD_ASIN}]")
    before = session.state
    produced.append(_code(session, "click[buy now]"))       # options incomplete
    assert session.state["last_action"]["missing_option_axes"] == ["颜色分类"]
    assert session.state["actions"] == before["actions"]    # the page does not change
    session.step("click[颜色分类=白色]")
    produced.append(_code(session, "click[颜色分类=白色]"))  # already selected
    produced.append(_code(session, "click[Buy Now]"))        # exact match only
    assert produced == ["invalid_format", "multiple_actions_not_allowed", "empty_argument", "unavailable_action",
                        "search_unavailable", "incomplete_options", "already_selected", "unavailable_action"]
    assert set(produced) == set(INVALID_ACTION_CODES)
    assert session.action_count == 11  # invalid actions count too


def test_parse_action_rules() -> None:
    assert parse_action("Thought: go.\nAction: Click[buy now]").canonical == "click[buy now]"
    assert parse_action("search[ Dyson V12 ]").argument == "Dyson V12"
    for text, code in [("", "invalid_format"), ("buy now", "invalid_format"), ("search[a] now", "invalid_format"),
                       ("open[x]", "invalid_format"), ("Action: search[a]\nAction: click[b]", "multiple_actions_not_allowed"),
                       ("search[a]; click[b]", "multiple_actions_not_allowed"), ("click[]", "empty_argument")]:
        with pytest.raises(InvalidActionError) as caught:
            parse_action(text)
        assert caught.value.code == code


def test_parse_action_is_linear_on_hostile_text() -> None:
    """Two ``\\s*`` around an optional separator tried every split of a whitespace run: ``search[a]`` + 16,000
    spaces + ``x]`` took ~7 s (minutes at the service's 64 KB body cap)."""
    started = time.monotonic()
    for text in ("search[a]" + " " * 16_000 + "x]", "search[a]" + " " * 60_000 + "x]",
                 "search[a]" + " ;" * 30_000 + " click[b]"):
        assert parse_action(text).argument.startswith("a]")
    for text in ("]" * 60_000, "] ;" * 20_000, "Action " * 9_000):
        with pytest.raises(InvalidActionError):
            parse_action(text)
    assert time.monotonic() - started < 1.0
    with pytest.raises(InvalidActionError, match="multiple_actions_not_allowed"):
        parse_action("search[a] ;  click[b]")


def test_pagination_and_back_navigation(index: SearchIndex) -> None:
    session = _engine(index).new_session()
    session.reset(7)
    first = session.step("search[洗地机 滚刷]")["observation_state"]
    total = first["total_results"]
    assert total > 40 and first["total_pages"] == -(-total // 20)
    second = session.step("click[next >]")["observation_state"]
    assert (second["page"], second["rank_start"]) == (2, 21)
    assert not set(first["actions"][2:]) & set(second["actions"][3:])
    assert session.step("click[< prev]")["observation_state"]["actions"] == first["actions"]
    session.step("click[next >]")
    product = session.step(f"click[{second['actions'][3]}]")["observation_state"]
    assert product["page_type"] == "product_detail"
    back = session.step("click[< prev]")["observation_state"]
    assert back["page"] == 2 and back["actions"] == second["actions"]
    assert session.step("click[back to search]")["observation_state"]["page_type"] == "search_home"
    again = session.step("search[洗地机  滚刷！]")["observation_state"]  # same normalised query: cached list
    assert again["actions"] == first["actions"] and again["page"] == 1


def test_selection_cleared_by_back_navigation(index: SearchIndex) -> None:
    session = _engine(index).new_session()
    session.reset(7)
    session.step(f"search[{QUERY}]")
    session.step(f"click[{GOLD_ASIN}]")
    session.step("click[颜色分类=白色]")
    session.step("click[< prev]")
    reopened = session.step(f"click[{GOLD_ASIN}]")["observation_state"]
    assert reopened["selected_options"] == {} and reopened["selected_price"] is None


def test_action_limit_terminal(index: SearchIndex) -> None:
    session = _engine(index, max_actions=3).new_session()
    session.reset(7)
    session.step(f"search[{QUERY}]")
    session.step("click[nothing]")
    final = session.step("click[nothing]")
    assert final["done"] and final["termination_reason"] == "action_limit" and final["reward"] == 0.0
    assert final["reward_detail"]["termination_reason"] == "action_limit"
    assert final["reward_detail"]["r_loose"] == 0 and final["purchase"] is None
    assert final["action_feedback"]["reason"] == "unavailable_action"
    with pytest.raises(EpisodeFinishedError):
        session.step(f"click[{GOLD_ASIN}]")


def test_purchase_on_the_last_allowed_action_is_a_purchase(index: SearchIndex) -> None:
    session = _engine(index, max_actions=3).new_session()
    session.reset(8)
    session.step("search[不锈钢保温杯]")
    session.step(f"click[{CUP.asin}]")
    final = session.step("click[buy now]")
    assert final["termination_reason"] == "purchase" and final["reward"] == 1.0


def test_terminate_generation_length_and_purchase_cannot_be_overwritten(index: SearchIndex) -> None:
    engine = _engine(index)
    session = engine.new_session()
    session.reset(7)
    session.step(f"search[{QUERY}]")
    ended = session.terminate("generation_length")
    assert ended["done"] and ended["reward"] == 0.0 and ended["termination_reason"] == "generation_length"
    assert ended["reward_detail"]["r_strict"] == 0 and ended["goal"]["asin"] == GOLD_ASIN
    with pytest.raises(ValueError, match="termination_reason"):
        session.terminate("purchase")
    bought = engine.new_session()
    bought.reset(8)
    bought.step("search[保温杯]")
    bought.step(f"click[{CUP.asin}]")
    assert bought.step("click[buy now]")["reward"] == 1.0
    with pytest.raises(EpisodeFinishedError):
        bought.terminate("action_limit")
    assert bought.termination_reason == "purchase"
    bought.reset(8)  # a reset starts a new episode
    assert not bought.done and bought.action_count == 0


def test_config_validation() -> None:
    for bad, field in [({"page_size": 21}, "page_size"), ({"top_k": 0}, "top_k"),
                       ({"max_actions": 0}, "max_actions"), ({"language": "fr"}, "language")]:
        with pytest.raises(ValueError, match=field):
            StoreConfig(**bad)  # type: ignore[arg-type]


def test_sessions_get_distinct_ids(index: SearchIndex, tmp_path: Path) -> None:
    engine = _engine(index)
    assert [engine.new_session().session_id for _ in range(2)] == ["session-1", "session-2"]
    assert engine.new_session("slot-3-1").session_id == "slot-3-1"
