"""Reward and SKU price resolution (docs/store.md §5) on hand-built products."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from shop_fixtures import (
    ALTERNATIVE,
    CUP,
    GOLD,
    GOLD_GOAL,
    RANGE_NO_OPTIONS,
    TWO_PRICE_AXES,
    UNIFORM_TWO_AXES,
    UNPRICED_OPTIONS,
    make_goal,
)

from intraskill.shop.price import (
    PRICE_RESOLUTION_VERSION,
    normalize_option_text,
    price_affecting_axes,
    resolve_price,
)
from intraskill.shop.reward import (
    REWARD_VERSION,
    Reward,
    RewardError,
    category_nodes,
    score_purchase,
    type_reward,
    zero_detail,
)
from intraskill.shop.types import Product

REFERENCE_KEYS = [
    "reward_version", "termination_reason", "r_type", "category_match", "title_score", "num_attr_matches",
    "num_option_matches", "r_att", "r_option", "r_price", "r_loose", "r_strict", "r_success",
    "target_asin_match", "price_verifiable", "price_upper", "price_resolution",
]


def test_gold_with_gold_option_succeeds() -> None:
    detail = score_purchase(GOLD, {"颜色分类": "白色"}, None, GOLD_GOAL)
    assert (detail.r_type, detail.r_att, detail.r_option, detail.r_price) == (1.0, 1.0, 1.0, 1.0)
    assert detail.r_loose == detail.r_strict == detail.reward == detail.r_success == 1.0
    assert detail.target_asin_match and detail.price_verifiable
    assert detail.price_resolution.method == "selected_price_axis"
    assert detail.price_resolution.price == 1999.0


def test_gold_with_wrong_option_is_strict_zero_loose_three_quarters() -> None:
    detail = score_purchase(GOLD, {"颜色分类": "黑色"}, None, GOLD_GOAL)
    assert detail.r_option == 0.0 and detail.num_option_matches == 0
    assert detail.r_price == 1.0  # 2099 <= 2100
    assert detail.r_strict == 0.0 and detail.r_success == 0.0
    assert math.isclose(detail.r_loose, (2 + 0 + 1) / 4)
    assert detail.target_asin_match


def test_over_budget_gives_zero_price_reward() -> None:
    detail = score_purchase(GOLD, {"颜色分类": "白色"}, None, make_goal(price_upper=1900.0))
    assert detail.r_price == 0.0 and detail.price_verifiable
    assert detail.r_strict == 0.0 and math.isclose(detail.r_loose, 3 / 4)


def test_unverifiable_price_gives_zero_price_reward() -> None:
    detail = score_purchase(GOLD, {}, None, GOLD_GOAL)
    assert detail.price_resolution.status == "unverifiable"
    assert detail.price_resolution.method == "price_axis_unselected"
    assert not detail.price_verifiable and detail.r_price == 0.0 and detail.r_strict == 0.0


def test_no_budget_gives_price_reward_one_even_when_unverifiable() -> None:
    detail = score_purchase(GOLD, {}, None, make_goal(price_upper=None, goal_options=()))
    assert detail.r_price == 1.0 and not detail.price_verifiable
    assert detail.r_strict == 1.0 and detail.r_success == 1.0


def test_non_gold_product_can_succeed() -> None:
    detail = score_purchase(ALTERNATIVE, {"颜色": "白色"}, None, GOLD_GOAL)
    assert detail.r_success == 1.0 and detail.reward == 1.0
    assert not detail.target_asin_match
    assert detail.price_resolution.method == "uniform_option_price"


def test_option_matching_uses_values_only_and_token_sets() -> None:
    goal = make_goal(goal_options=("白色",), price_upper=None)
    assert score_purchase(GOLD, {"任意轴": "白色 标准版"}, None, goal).r_option == 1.0
    # no colour normalisation: "white" is not 白色
    assert score_purchase(GOLD, {"颜色分类": "white"}, None, goal).r_option == 0.0


def test_attribute_matches_fuzzy_or_title_substring() -> None:
    goal = make_goal(attributes=("智能", "热洗", "白色洗地", "防水"), goal_options=(), price_upper=None)
    detail = score_purchase(GOLD, {}, None, goal)
    assert detail.num_attr_matches == 3  # 白色洗地 only as a title substring; 防水 nowhere
    assert detail.r_att == 0.75


def test_category_nodes_split_and_casefold() -> None:
    assert category_nodes("Home>Kitchen / Cups\\Mugs › TEA") == frozenset({"home", "kitchen", "cups", "mugs", "tea"})


LONG_GOLD = "智能热洗白色洗地机家用无线吸拖一体"  # 16 bigrams


@pytest.mark.parametrize(
    ("title", "category", "expected_type", "expected_score"),
    [
        ("不锈钢保温杯", "家居›杯具›保温杯", 0.0, 0.0),
        ("智能", "家居›杯具›保温杯", 0.1, 1 / 16),
        ("智能 拖一", "家居›杯具›保温杯", 0.5, 2 / 16),
        ("智能 拖一 吸拖 家用", "家居›杯具›保温杯", 1.0, 4 / 16),
        ("不锈钢保温杯", "家电›清洁电器›吸尘器", 1.0, 0.0),  # shares 家电 and 清洁电器
        ("不锈钢保温杯", "家电›厨房电器›保温杯", 0.0, 0.0),  # shares one node only
    ],
)
def test_type_reward_ladder(title: str, category: str, expected_type: float, expected_score: float) -> None:
    product = Product(asin="1", title=title, brand="b", category=category)
    r_type, _, score = type_reward(product, make_goal(name=LONG_GOLD))
    assert r_type == expected_type
    assert math.isclose(score, expected_score)


def test_title_score_exactly_point_two_is_not_above_threshold() -> None:
    gold = "aa bb cc dd ee ff gg hh ii jj"
    product = Product(asin="1", title="aa bb", brand="b", category="x›y")
    assert type_reward(product, make_goal(name=gold)) == (0.5, False, 0.2)


def test_neutral_title_score_when_gold_title_has_no_terms() -> None:
    other = Product(asin="1", title="anything", brand="b", category="家居›杯具")
    assert type_reward(other, make_goal(name="2024 家")) == (0.5, False, 0.2)
    assert type_reward(GOLD, make_goal(name="2024 家"))[0] == 1.0


def test_price_axis_detection_and_two_axes_unverifiable() -> None:
    assert price_affecting_axes(GOLD) == ["颜色分类"]
    assert price_affecting_axes(TWO_PRICE_AXES) == ["颜色分类", "套餐"]
    resolution = resolve_price(TWO_PRICE_AXES, {"颜色分类": "白色", "套餐": "标准版"})
    assert (resolution.status, resolution.method) == ("unverifiable", "multiple_price_axes")


def test_price_needs_exact_axis_name_but_normalises_values() -> None:
    assert resolve_price(GOLD, {"颜色": "白色"}).status == "unverifiable"
    assert resolve_price(GOLD, {"颜色分类": " 白色 "}).price == 1999.0
    assert normalize_option_text("Black / White") == "black|white"


@pytest.mark.parametrize(
    ("product", "selected", "status", "price", "method"),
    [
        (UNIFORM_TWO_AXES, {}, "pass", 59.0, "uniform_option_price"),
        (CUP, {}, "pass", 89.0, "single_listing_price"),
        (RANGE_NO_OPTIONS, {}, "unverifiable", None, "listing_price_range"),
        (UNPRICED_OPTIONS, {"颜色": "米色"}, "unverifiable", None, "option_prices_missing_or_mixed"),
    ],
)
def test_price_resolution_rules(product: Product, selected: dict[str, str], status: str,
                                price: float | None, method: str) -> None:
    resolution = resolve_price(product, selected)
    assert (resolution.status, resolution.price, resolution.method) == (status, price, method)
    assert resolution.to_dict()["version"] == PRICE_RESOLUTION_VERSION


def test_detail_has_every_reference_key() -> None:
    detail = score_purchase(GOLD, {"颜色分类": "白色"}, None, GOLD_GOAL).to_dict()
    assert list(detail) == REFERENCE_KEYS
    assert detail["reward_version"] == REWARD_VERSION
    assert detail["termination_reason"] == "purchase"
    assert set(detail["price_resolution"]) == {"status", "price", "version", "method", "evidence"}


@pytest.mark.parametrize("reason", ["action_limit", "generation_length"])
def test_zero_detail_same_keys_all_zero(reason: str) -> None:
    detail = zero_detail(reason).to_dict()
    assert list(detail) == REFERENCE_KEYS
    assert detail["termination_reason"] == reason
    numeric = [k for k in REFERENCE_KEYS if k.startswith(("r_", "num_")) or k == "title_score"]
    assert all(detail[k] == 0 for k in numeric)
    assert detail["category_match"] is detail["target_asin_match"] is detail["price_verifiable"] is False
    with pytest.raises(ValueError, match="termination_reason"):
        zero_detail("purchase")


def test_typed_reward_names_and_refusals() -> None:
    reward = Reward(r_type=1, r_att=0.5, r_option=1, r_price=1, r_loose=0.75, r_strict=0.5, r_success=0)
    assert reward.to_dict() == {"reward": 0.5, "r_type": 1.0, "r_att": 0.5, "r_option": 1.0, "r_price": 1.0,
                                "r_loose": 0.75, "r_strict": 0.5, "r_success": 0.0}
    assert reward.metric("reward") == reward.reward == 0.5 and reward.metric("r_loose") == 0.75
    assert Reward.from_dict(reward.to_dict()) == reward and not reward.success
    with pytest.raises(KeyError, match="title_score"):
        reward.metric("title_score")
    with pytest.raises(RewardError, match="r_att"):
        replace(reward, r_att=math.nan)
    with pytest.raises(RewardError, match="r_success"):
        replace(reward, r_success=True)
