"""Page states and their rendering (shopping-observation-v7, docs/store.md §4.1, §4.3)."""

from __future__ import annotations

import copy

import pytest
from shop_fixtures import CUP, GOLD, UNIFORM_TWO_AXES, catalogue

from intraskill.shop.observation import (
    OBSERVATION_VERSION,
    ObservationError,
    home_state,
    last_action_record,
    product_state,
    render_observation,
    results_state,
    terminal_state,
)
from intraskill.shop.types import Product

PRODUCTS = {p.asin: p for p in catalogue()}
ASINS = list(PRODUCTS)  # 52
OK = last_action_record("search[x]", "executed", "search executed")


def _results(page: int) -> dict:
    return results_state("洗地机  配件", "洗地机 配件", ASINS, PRODUCTS, page, 20, OK)


def test_home_page() -> None:
    state = home_state(OK)
    assert state == {"observation_version": OBSERVATION_VERSION, "page_type": "search_home",
                     "search_available": True, "actions": [], "last_action": {**OK}}
    assert render_observation(state, "zh").splitlines()[:3] == ["页面：搜索首页", "页面能力：", "- 支持商品搜索"]
    assert render_observation(state, "en").splitlines()[:3] == ["Page: search home", "Page features:", "- product search"]


def test_results_pages_show_twenty_with_ranks_and_paging_links() -> None:
    first, second, last = _results(1), _results(2), _results(3)
    assert [len(s["products"]) for s in (first, second, last)] == [20, 20, 12]
    assert [p["rank"] for p in second["products"]] == list(range(21, 41))
    assert (second["rank_start"], second["rank_end"], second["total_pages"], second["total_results"]) == (21, 40, 3, 52)
    assert first["actions"][:2] == ["back to search", "next >"]
    assert second["actions"][:3] == ["back to search", "< prev", "next >"]
    assert last["actions"][:2] == ["back to search", "< prev"] and "next >" not in last["actions"]
    assert second["actions"][3:] == ASINS[20:40]
    assert second["search_available"] is False
    text = render_observation(second, "zh")
    assert "结果：第 2/3 页，共 52 项，当前显示排名 21-40" in text
    assert "搜索词：洗地机 配件" in text and "21. " in text and "40. " in text and "41. " not in text
    assert "Results: page 2/3, 52 items, showing ranks 21-40" in render_observation(second, "en")
    with pytest.raises(ValueError, match="page"):
        _results(4)


def test_result_entry_fields_and_missing_marker() -> None:
    bare = Product(asin="5", title="无名商品", brand="", category="")
    state = results_state("q", "q", ["5"], {"5": bare}, 1, 20, OK)
    assert set(state["products"][0]) == {"asin", "title", "brand", "category", "price", "key_attributes", "rank"}
    text = render_observation(state, "zh")
    assert "1. 无名商品\n   ASIN：5\n   价格：100.0\n   品牌：未提供\n   类别：未提供" in text
    assert "Brand: not provided" in render_observation(state, "en")


def test_product_page_selection_labels_and_buy_now() -> None:
    fresh = product_state(GOLD, {}, None, OK)
    assert fresh["actions"] == ["back to search", "< prev", "颜色分类=白色", "颜色分类=黑色"]
    assert fresh["missing_option_axes"] == ["颜色分类"] and fresh["options_complete"] is False
    chosen = product_state(GOLD, {"颜色分类": "白色"}, 1999.0, OK)
    assert chosen["actions"] == ["back to search", "< prev", "颜色分类=黑色", "buy now"]
    assert chosen["selected_options"] == {"颜色分类": "白色"} and chosen["options_complete"] is True
    zh = render_observation(chosen, "zh")
    assert "- 颜色分类：已选择 白色\n  可选值：白色 / 黑色" in zh
    assert "- 价格：1999.0" in zh
    assert "仍需选择" not in zh
    fresh_zh = render_observation(fresh, "zh")
    assert "- 颜色分类：尚未选择" in fresh_zh and "仍需选择：颜色分类" in fresh_zh
    assert "- 价格：1999.0 to 2099.0" in fresh_zh


def test_two_axes_missing_one() -> None:
    state = product_state(UNIFORM_TWO_AXES, {"尺码": "m"}, None, OK)
    assert state["missing_option_axes"] == ["颜色"] and "buy now" not in state["actions"]
    assert "尺码=m" not in state["actions"] and "尺码=l" in state["actions"]
    assert "颜色=black | white" in state["actions"]


def test_product_without_options_can_be_bought() -> None:
    state = product_state(CUP, {}, 89.0, OK)
    assert state["actions"] == ["back to search", "< prev", "buy now"]
    assert "规格选择：此商品没有规格选项" in render_observation(state, "zh")


def test_available_options_capped_at_one_hundred() -> None:
    values = tuple(f"v{i}" for i in range(130))
    big = Product(asin="7", title="t", brand="b", category="c", options={"款式": values})
    state = product_state(big, {}, None, OK)
    assert len(state["available_options"]["款式"]) == 100
    assert sum(a.startswith("款式=") for a in state["actions"]) == 100


def test_no_removed_pages_or_private_fields_in_states() -> None:
    for state in (home_state(OK), _results(1), product_state(GOLD, {}, None, OK), terminal_state(OK)):
        flat = repr(state)
        for word in ("Description", "Features", "Reviews", "goal", "reward", "target_asin", "answer"):
            assert word not in flat


@pytest.mark.parametrize("path", [("goal",), ("reward_detail",), ("last_action", "reward"),
                                  ("products", 0, "target_asin"), ("answer",)])
def test_forbidden_fields_are_refused_at_any_depth(path: tuple) -> None:
    state = copy.deepcopy(_results(1))
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "secret"
    with pytest.raises(ObservationError, match=repr(path[-1])):
        render_observation(state)


def test_more_than_twenty_products_refused() -> None:
    state = results_state("q", "q", ASINS, PRODUCTS, 1, 21, OK)
    with pytest.raises(ObservationError, match="at most 20"):
        render_observation(state)


def test_products_must_equal_clickable_asins() -> None:
    state = _results(1)
    state["actions"] = state["actions"][:-1]
    with pytest.raises(ObservationError, match="differ"):
        render_observation(state)


def test_text_never_shows_action_syntax_or_sep() -> None:
    tricky = Product(asin="8", title="search[free] click[me] [SEP] 礼盒", brand="Click[b]", category="c")
    record = last_action_record("search[search[x]", "executed", "search executed")
    states = [results_state("search[x", "search x", ["8"], {"8": tricky}, 1, 20, record),
              product_state(tricky, {}, None, record), home_state(record), terminal_state(record)]
    for state in states:
        for language in ("en", "zh"):
            text = render_observation(state, language).casefold()
            assert "search[" not in text and "click[" not in text and "[sep]" not in text


def test_invalid_feedback_block() -> None:
    record = last_action_record("click[buy now]", "incomplete_options", "缺少：颜色分类", ["颜色分类"])
    assert record["valid"] is False and record["missing_option_axes"] == ["颜色分类"]
    zh = render_observation(product_state(GOLD, {}, None, record), "zh")
    assert "上次交互结果：\n- 结果：无效\n- 说明：缺少：颜色分类\n- 原因代码：incomplete_options\n可点击元素：" in zh
    en = render_observation(product_state(GOLD, {}, None, record), "en")
    assert "Last action: invalid\nMessage: 缺少：颜色分类\nReason code: incomplete_options" in en
    ok = render_observation(home_state(OK), "zh")
    assert "原因代码" not in ok and "可点击元素：无" in ok


def test_terminal_page_and_language_check() -> None:
    assert render_observation(terminal_state(OK), "zh") == "页面：任务已结束\n无需进一步操作"
    assert render_observation(terminal_state(OK), "en").count("\n") == 1
    with pytest.raises(ValueError, match="language"):
        render_observation(home_state(OK), "fr")


def test_rendering_is_deterministic() -> None:
    assert render_observation(_results(2), "en") == render_observation(copy.deepcopy(_results(2)), "en")
