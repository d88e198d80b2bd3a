"""A hand-built mini catalogue and goals for the store's unit tests.

The gold product and goal follow the reference's worked reward example (``docs/store.md`` §5.4,
§9): a smart hot-wash floor washer, attributes [智能, 热洗], option [白色], budget 2100.
"""

from __future__ import annotations

from dataclasses import replace

from intraskill.shop.types import Goal, Product

GOLD_ASIN = "100000000001"
GOLD = Product(
    asin=GOLD_ASIN,
    title="智能热洗白色洗地机",
    brand="洁净旗舰店",
    category="家电›清洁电器›洗地机",
    product_category="洗地机",
    sub_title="热风烘干 自清洁",
    attributes=("智能", "热洗", "自清洁", "无线"),
    options={"颜色分类": ("白色", "黑色")},
    option_prices={"颜色分类": {"白色": 1999.0, "黑色": 2099.0}},
    pricing=(1999.0, 2099.0),
    domain="appliances",
)
ALTERNATIVE = Product(
    asin="100000000002",
    title="家用智能热洗洗地机 白色款",
    brand="清风电器",
    category="家电›清洁电器›洗地机",
    product_category="洗地机",
    attributes=("智能", "热洗"),
    options={"颜色": ("白色",)},
    option_prices={"颜色": {"白色": 1599.0}},
    pricing=(1599.0,),
    domain="appliances",
)
TWO_PRICE_AXES = Product(
    asin="100000000003",
    title="智能洗地机 多规格",
    brand="洁净旗舰店",
    category="家电›清洁电器›洗地机",
    attributes=("智能",),
    options={"颜色分类": ("白色", "黑色"), "套餐": ("标准版", "豪华版")},
    option_prices={"颜色分类": {"白色": 1000.0, "黑色": 1100.0}, "套餐": {"标准版": 1000.0, "豪华版": 1500.0}},
    pricing=(1000.0, 1600.0),
)
CUP = Product(
    asin="100000000004",
    title="不锈钢保温杯",
    brand="杯具小店",
    category="家居›杯具›保温杯",
    attributes=("保温", "不锈钢"),
    pricing=(89.0,),
)
RANGE_NO_OPTIONS = Product(
    asin="100000000005",
    title="陶瓷马克杯",
    brand="杯具小店",
    category="家居›杯具›马克杯",
    attributes=("陶瓷",),
    pricing=(50.0, 80.0),
)
UNIFORM_TWO_AXES = Product(
    asin="100000000006",
    title="纯棉T恤 Cotton Tee",
    brand="衣橱",
    category="服饰›上衣›T恤",
    attributes=("纯棉",),
    options={"颜色": ("白色", "black | white"), "尺码": ("m", "l")},
    option_prices={"颜色": {"白色": 59.0, "black | white": 59.0}, "尺码": {"m": 59.0, "l": 59.0}},
    pricing=(59.0,),
)
UNPRICED_OPTIONS = Product(
    asin="100000000007",
    title="帆布袋",
    brand="衣橱",
    category="服饰›包袋›帆布袋",
    attributes=("帆布",),
    options={"颜色": ("米色", "黑色")},
    option_prices={"颜色": {"米色": None, "黑色": None}},
    pricing=(30.0, 35.0),
)


def filler_products(count: int = 45) -> list[Product]:
    """Accessories that all mention 洗地机, so one query returns more than two pages."""
    return [
        Product(
            asin=f"2000000000{i:02d}",
            title=f"洗地机配件 滚刷 第{i}款",
            brand="配件店",
            category="家电›清洁电器›配件",
            attributes=("滚刷",),
            pricing=(float(20 + i),),
        )
        for i in range(count)
    ]


def catalogue() -> list[Product]:
    """The mini catalogue: the special products above plus 45 fillers (52 products)."""
    return [GOLD, ALTERNATIVE, TWO_PRICE_AXES, CUP, RANGE_NO_OPTIONS, UNIFORM_TWO_AXES, UNPRICED_OPTIONS,
            *filler_products()]


PERSONA = {"用户ID": "u-001", "兴趣偏好": {"类目偏好": "家电", "品牌偏好": "洁净"}, "__reasoning__": "prefers white"}

GOLD_GOAL = Goal(
    task_id=7,
    task_uid="shopsim-000000000000000000000007",
    asin=GOLD_ASIN,
    category=GOLD.category,
    name=GOLD.title,
    instruction_text="我想买一台智能热洗的白色洗地机，预算2100元以内",
    instruction_simple="想要智能热洗洗地机，2100以内",
    attributes=("智能", "热洗"),
    goal_options=("白色",),
    price_upper=2100.0,
    budget_kind="hard_upper",
    user_persona=PERSONA,
)


def make_goal(**changes: object) -> Goal:
    """The gold goal with some fields replaced."""
    return replace(GOLD_GOAL, **changes)


def goals() -> dict[int, Goal]:
    """Task 7 (persona, gold above), task 8 (standard, the cup), task 9 (inactive: no attributes)."""
    standard = make_goal(task_id=8, task_uid="shopsim-000000000000000000000008", asin=CUP.asin,
                         category=CUP.category, name=CUP.title, instruction_text="a stainless steel vacuum cup under 100 yuan",
                         instruction_simple="", attributes=("保温",), goal_options=(), price_upper=100.0,
                         user_persona={})
    inactive = make_goal(task_id=9, task_uid="shopsim-000000000000000000000009", attributes=())
    return {7: GOLD_GOAL, 8: standard, 9: inactive}
