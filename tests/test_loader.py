"""The raw-schema loader on a hand-written ShopSimulator fixture (reference §1 get_goals, §2 load_products)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intraskill.hashing import sha256_file
from intraskill.shop.data import Catalog, get_goals, load_products, read_raw_products, write_raw_products
from intraskill.shop.splits import Splits

FIXTURES = Path(__file__).parent / "fixtures"
RAW = FIXTURES / "shopsim_raw_sample.json"
SPLITS = FIXTURES / "persona_splits_sample.json"


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return read_raw_products(RAW)


def test_bad_and_duplicate_asins_are_dropped(records: list[dict]) -> None:
    products = load_products(records)
    assert list(products) == ["747848614498", "602233445566", "611122233344", "633344455566"]
    assert products["747848614498"].title == "智能热洗洗地机 家用吸拖一体"  # first of the duplicates wins


def test_options_are_lower_cased_with_slash_mapped(records: list[dict]) -> None:
    products = load_products(records)
    washer = products["747848614498"]
    assert washer.options == {"颜色分类": ("白色 | 标准版", "黑色 | pro版")}
    assert washer.option_prices == {"颜色分类": {"白色 | 标准版": 1999.0, "黑色 | pro版": 2099.0}}
    assert washer.brand == "清洁先锋旗舰店" and washer.price_display == "1999.0 to 2099.0"
    cup = products["602233445566"]
    assert cup.options["容量"] == ("500ml", "750ml")
    assert products["633344455566"].options["尺码"] == ("m", "l", "xl")


def test_missing_pricing_becomes_100(records: list[dict]) -> None:
    cup = load_products(records)["602233445566"]
    assert cup.pricing == (100.0,) and cup.price_display == "100.0"


def test_goals_skip_empty_attributes_and_resolve_budgets(records: list[dict]) -> None:
    goals = get_goals(records)
    assert sorted(goals) == [0, 4, 6]  # task 5 has an empty attribute list: inactive
    # stored price_upper (2100) wins over the text (不超过2000元)
    assert goals[0].price_upper == 2100.0
    # no stored value: instruction_simple 价格在40元左右 -> approximate ×1.1
    assert (goals[4].price_upper, goals[4].budget_kind) == (44.0, "approximate_upper")
    # instruction_simple states no budget: fall back to the full instruction (不超过300元)
    assert (goals[6].price_upper, goals[6].budget_kind) == (300.0, "hard_upper")
    assert goals[0].asin == "747848614498" and goals[0].category == "家电›清洁电器›洗地机"
    assert goals[0].goal_options == ("白色/标准版",) and goals[0].attributes == ("智能", "热洗")
    assert goals[0].task_uid == "shopsim-aaaaaaaaaaaaaaaaaaaaaaaa"


def test_public_task_hides_goal_and_reasoning(records: list[dict]) -> None:
    goal = get_goals(records)[0]
    task = goal.public_task()
    assert task.instruction_simple == "想要一台智能洗地机"
    assert "__reasoning__" in goal.user_persona and "__reasoning__" not in task.user_persona
    assert task.user_persona["兴趣偏好"]["品牌偏好"] == ["清洁先锋旗舰店"]


def test_catalog_with_persona_split_file() -> None:
    catalog = Catalog.load(RAW, SPLITS)
    assert catalog.task_ids("val") == (4,) and catalog.task_ids("test") == (6,)
    assert [t.task_id for t in catalog.tasks("train")] == [0]
    with pytest.raises(KeyError, match="not an active task"):
        catalog.task(5)


def test_split_file_sha_mismatch_fails(tmp_path: Path) -> None:
    doc = json.loads(SPLITS.read_text(encoding="utf-8"))
    doc["splits"]["val"]["task_ids"] = [6]
    bad = tmp_path / "splits.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="sha256.val"):
        Splits.load(bad)


def test_split_listing_inactive_task_is_refused(tmp_path: Path) -> None:
    path = Splits(lists={"train": (0,), "val": (5,), "test": (6,)}).save(tmp_path / "s.json")
    with pytest.raises(ValueError, match="not active tasks"):
        Catalog.load(RAW, path)


def test_gzip_round_trip_is_deterministic(tmp_path: Path, records: list[dict]) -> None:
    first = write_raw_products(records, tmp_path / "a" / "items.json.gz")
    second = write_raw_products(records, tmp_path / "b" / "items.json.gz")
    assert sha256_file(first) == sha256_file(second)
    assert read_raw_products(first) == records
    assert Catalog.from_records(read_raw_products(first)).sha256 == Catalog.from_records(records).sha256


def test_non_list_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"asin": "1"}', encoding="utf-8")
    with pytest.raises(ValueError, match="JSON list"):
        read_raw_products(path)
