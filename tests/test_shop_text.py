"""Query normalisation, tokens, fuzzy token-set score and title terms (docs/store.md §3, §5.1–5.2)."""

from __future__ import annotations

import time

import pytest

from intraskill.shop.text import (
    FUZZY_MATCH_THRESHOLD,
    fuzzy_match,
    fuzzy_score,
    normalize_money_words,
    normalize_query,
    title_terms,
    tokenize,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("智能，热洗！洗地机", "智能 热洗 洗地机"),
        ("ＡＢＣ  Shoes", "abc shoes"),
        ("价格200人民币", "价格200元"),
        ("50块钱的杯子", "50元的杯子"),
        ("under 300 RMB", "under 300元"),
        ("1000 yuan", "1000元"),
        ("99cny (new)", "99元 new"),
        ("v2.0 a+b usb-c 3/4", "v2.0 a+b usb-c 3/4"),
        ("【正品】《包邮》", "正品 包邮"),
    ],
)
def test_normalize_query(raw: str, expected: str) -> None:
    assert normalize_query(raw) == expected


def test_tokens_are_han_bigrams_plus_latin_tokens_deduplicated() -> None:
    assert tokenize("智能热洗 V2.0 洗地机") == ["智能", "能热", "热洗", "v2.0", "洗地", "地机"]
    assert tokenize("杯 杯 cup CUP") == ["杯", "cup"]
    assert tokenize("iPhone-15/Pro！") == ["iphone-15/pro"]
    assert tokenize("...") == []


def test_money_words_never_touch_plain_words() -> None:
    assert normalize_query("yuanqi cola") == "yuanqi cola"


def test_fuzzy_token_set_ratio_reference_examples() -> None:
    assert fuzzy_score("白色 标准版", "白色") == 100
    assert fuzzy_score("黑色", "白色") == 50
    assert fuzzy_score("White", "white!") == 100
    assert fuzzy_score("", "白色") == 0
    assert fuzzy_match("白色 标准版", "白色")
    assert not fuzzy_match("黑色", "白色")


def test_threshold_is_strict() -> None:
    assert FUZZY_MATCH_THRESHOLD == 85
    # ratio("abcdefg", "abcdefgh") = 2*7/15 = 93.3 -> match; "abcdef"/"abcdefgh" = 85.7 -> 86 -> match;
    # "abcde"/"abcdefg" = 83.3 -> no match.
    assert fuzzy_match("abcdefg", "abcdefgh")
    assert fuzzy_score("abcdef", "abcdefgh") == 86
    assert not fuzzy_match("abcde", "abcdefg")


def test_title_terms_fallback() -> None:
    assert title_terms("2024新款 Dyson V12 热洗洗地机 家") == frozenset(
        {"新款", "dyson", "v12", "热洗", "洗洗", "洗地", "地机"}
    )
    assert title_terms("2024 家") == frozenset()


def test_money_words_are_linear_in_the_length_of_a_digit_run() -> None:
    """A match once started at every digit of a run: 8,000 digits took 4 s, the 64 KB body cap minutes."""
    started = time.monotonic()
    for text in ("1" * 60_000, "1." * 30_000, "1" * 30_000 + " " * 30_000):
        assert normalize_money_words(text) == text
    assert normalize_money_words("x.5 rmb 1..2yuan 3 cny") == "x.5元 1..2元 3元"
    assert time.monotonic() - started < 1.0
