"""Regex budget parser (docs/store.md §1, §5.4) and the ``intraskill env budget`` command."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.shop.budget import Budget, chinese_numeral_value, parse_budget, resolve_goal_budget

HARD, APPROX, LOWER, NONE = "hard_upper", "approximate_upper", "lower_only", "no_budget"

CASES = [
    # reference examples
    ("30到50元的收纳盒", 50.0, HARD),
    ("价格在40元左右的保温杯", 44.0, APPROX),
    ("预算1万2的洗地机", 12000.0, HARD),
    ("一千八以内的空调", 1800.0, HARD),
    ("二十来块的袜子", 22.0, APPROX),
    ("至少100元", None, LOWER),
    ("超过500元的耳机", None, LOWER),
    ("4k+的显卡", None, LOWER),
    ("十几元的袜子", 19.0, HARD),
    ("个位数价格的笔", 9.0, HARD),
    ("100多元的杯子", 110.0, APPROX),
    # Chinese caps
    ("预算不超过2000元", 2000.0, HARD),
    ("别超过300块", 300.0, HARD),
    ("最高500元", 500.0, HARD),
    ("上限800", 800.0, HARD),
    ("不到100块", 100.0, HARD),
    ("200元以下的台灯", 200.0, HARD),
    ("两万五以内", 25000.0, HARD),
    ("1.2万以内", 12000.0, HARD),
    ("不超过 1千5 元", 1500.0, HARD),
    ("大约300元", 330.0, APPROX),
    ("差不多五十块", 55.0, APPROX),
    ("300上下", 330.0, APPROX),
    ("400块钱左右", 440.0, APPROX),
    ("两百多块", 220.0, APPROX),
    ("预算2k左右", 2200.0, APPROX),
    # English
    ("a desk lamp under $35", 35.0, HARD),
    ("no more than 80 dollars", 80.0, HARD),
    ("up to 80 bucks", 80.0, HARD),
    ("max $60", 60.0, HARD),
    ("less than 100 yuan", 100.0, HARD),
    ("within 500 rmb", 500.0, HARD),
    ("not exceeding $250", 250.0, HARD),
    ("$1,500 or less", 1500.0, HARD),
    ("budget of 300", 300.0, HARD),
    ("between 30 and 50", 50.0, HARD),
    ("30-50 dollars", 50.0, HARD),
    ("$30-$50 headphones", 50.0, HARD),
    ("under 2k", 2000.0, HARD),
    ("around $30", 33.0, APPROX),
    ("about 200 yuan", 220.0, APPROX),
    ("~$40", 44.0, APPROX),
    ("roughly 1.5k", 1650.0, APPROX),
    ("at least $100", None, LOWER),
    ("no less than 100 dollars", None, LOWER),
    ("over 4k", None, LOWER),
    ("at least 100 but under 200 dollars", 200.0, HARD),
    # not money
    ("500ml 的水杯", None, NONE),
    ("3岁以下儿童的玩具", None, NONE),
    ("iphone 15 手机壳", None, NONE),
    ("under 5 kg", None, NONE),
    ("千万别买假货", None, NONE),
    ("千元以内的手机", 1000.0, HARD),
    ("万元左右的电脑", 11000.0, APPROX),
    ("百搭的裙子，预算两百", 200.0, HARD),
    ("", None, NONE),
]


@pytest.mark.parametrize(("text", "upper", "kind"), CASES)
def test_parse_budget(text: str, upper: float | None, kind: str) -> None:
    assert parse_budget(text) == Budget(upper, kind)


def test_case_count_covers_both_languages() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize(
    ("numeral", "value"),
    [("一千八", 1800), ("两万五", 25000), ("二十", 20), ("十", 10), ("十五", 15), ("一百零五", 105),
     ("三百五", 350), ("一千零五十", 1050), ("万", None), ("一二", None)],
)
def test_chinese_numerals(numeral: str, value: int | None) -> None:
    assert chinese_numeral_value(numeral) == value


def test_stored_price_upper_wins_over_regex() -> None:
    assert resolve_goal_budget(2100.0, "3000元以内", "3000元以内") == Budget(2100.0, HARD)
    assert resolve_goal_budget(44.0, "", "", stored_kind=APPROX) == Budget(44.0, APPROX)


def test_simple_instruction_has_priority_then_full_instruction() -> None:
    assert resolve_goal_budget(None, "500元以内的耳机", "想要一副1000元以内的耳机").price_upper == 500.0
    assert resolve_goal_budget(None, "想要一副耳机", "想要一副1000元以内的耳机").price_upper == 1000.0
    assert resolve_goal_budget(None, "至少100元", "一副耳机") == Budget(None, LOWER)
    assert resolve_goal_budget(None, "一副耳机", "蓝牙耳机") == Budget(None, NONE)


def test_budget_rejects_inconsistent_records() -> None:
    with pytest.raises(ValueError, match="kind"):
        Budget(10.0, "no_budget")
    with pytest.raises(ValueError, match="kind"):
        Budget(None, "ceiling")


def test_cli_prints_one_json_object() -> None:
    result = CliRunner().invoke(app, ["env", "budget", "价格在40元左右", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"price_upper": 44.0, "kind": APPROX}
    result = CliRunner().invoke(app, ["env", "budget", "a red mug", "--json"])
    assert json.loads(result.stdout) == {"price_upper": None, "kind": NONE}
    readable = CliRunner().invoke(app, ["env", "budget", "a red mug"])
    assert readable.stdout.splitlines() == ["price_upper: None", f"kind: {NONE}"]
