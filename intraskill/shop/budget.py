"""Regex budget parser for instructions in Chinese and English (``instruction-budget-v1``).

Reference: ``docs/store.md`` §1 (stored ``price_upper`` wins; ``instruction_simple`` first,
then the full instruction) and §5.4 (Chinese numerals, k suffixes, ranges take the upper end,
approximate wordings ×1.1, lower bounds alone give no budget, 十几元 = base + 9, 个位数价格 = 9).

A number counts as money only when a currency word or a price cue is next to it, so ``500ml``,
``3岁以下`` or ``iPhone 15`` never become budgets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from intraskill.shop.text import normalize_money_words
from intraskill.shop.types import APPROXIMATE_BUDGET_FACTOR, BUDGET_KINDS

BUDGET_PARSER_VERSION = "instruction-budget-v1"
SINGLE_DIGIT_PRICE = 9.0
"""个位数价格 ("a single-digit price") caps the budget at 9 (§5.4)."""
FEW_INCREMENT = 9.0
"""十几元: "ten-something" is read as base + 9 (§5.4)."""


@dataclass(frozen=True)
class Budget:
    """A parsed budget: the upper price bound (``None`` when there is none) and its kind."""

    price_upper: float | None
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in BUDGET_KINDS:
            raise ValueError(f"Budget.kind must be one of {BUDGET_KINDS}, got {self.kind!r}")
        if (self.price_upper is None) != (self.kind in ("no_budget", "lower_only")):
            raise ValueError(f"Budget.price_upper={self.price_upper!r} does not fit kind {self.kind!r}")

    def to_dict(self) -> dict[str, float | str | None]:
        return {"price_upper": self.price_upper, "kind": self.kind}


NO_BUDGET = Budget(None, "no_budget")

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_MULTIPLIERS = {"k": 1000.0, "百": 100.0, "千": 1000.0, "万": 10000.0}

_AMOUNT_RE = re.compile(
    r"(?P<arabic>\d+(?:\.\d+)?)(?:\s*(?P<mult>k(?![a-z])|百|千|万)(?P<tail>\d(?![\d.]))?)?"
    r"|(?P<cn>[零〇一二两三四五六七八九十百千万]+)"
)
_LONE_UNITS = ("百", "千", "万")
_LONE_UNIT_CURRENCY_RE = re.compile(r"\s*多?\s*(?:元|块)")
_CURRENCY_AFTER = r"元|块|美元|美金|刀|dollars?\b|bucks?\b|usd\b|rmb\b|cny\b|yuan\b|\$"
_AFTER_RE = re.compile(rf"(?P<mod>\s*(?:多|来|几))?(?P<cur>(?:\s*(?:{_CURRENCY_AFTER}))+)?\s*", re.S)
_CURRENCY_BEFORE_RE = re.compile(r"(?:[$¥]|(?<![a-z])(?:rmb|usd|cny|us\$))\s*$")
_RANGE_JOIN_RE = re.compile(
    rf"^\s*(?:{_CURRENCY_AFTER})?\s*(?P<join>-|~|—|–|到|至|(?<![a-z])to\b|(?<![a-z])and\b)\s*(?:[$¥]|usd|rmb)?\s*$"
)
_BETWEEN_RE = re.compile(r"(?<![a-z])between\s*(?:[$¥]|usd|rmb)?\s*$")

_FILLER = r"(?:\s|[:,]|在|是|为|的|(?<![a-z])(?:of|is|at|be)\b)*(?:[$¥]|(?<![a-z])(?:rmb|usd|cny))?\s*$"


def _cue(words: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{words}){_FILLER}")


# Ordered: the first class whose cue ends right before the amount decides (so "no more than" is a cap
# before "more than" is a lower bound, and "不超过" before "超过").
_PREFIX_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("lower", _cue(r"(?<![a-z])(?:no|not)\s+(?:less|lower|cheaper)\s+than|不少于|不低于|不小于")),
    ("hard", _cue(
        r"(?<![a-z])(?:under|below|beneath|at\s+most|(?:no|not)\s+(?:more|higher|greater)\s+than|not\s+over"
        r"|up\s+to|max(?:imum)?|less\s+than|lower\s+than|cheaper\s+than|within|capped\s+at"
        r"|(?:not|never|don't|doesn't)\s+(?:to\s+)?exceed(?:ing)?)|<=?|≤"
        r"|不超过|别超过|不要超过|不能超过|不得超过|不可超过|不超|别超|最高|上限|不到|低于|少于|最多|不高于|不多于|不大于|小于|控制在"
    )),
    ("lower", _cue(
        r"(?<![a-z])(?:at\s+least|over|above|more\s+than|greater\s+than|higher\s+than|minimum|min|starting\s+at)"
        r"|>=?|≥|至少|超过|高于|大于|多于|起码|最少|最低"
    )),
    ("approx", _cue(
        r"(?<![a-z])(?:around|about|approximately|approx|roughly|circa|close\s+to|nearly)|~|大约|大概|约|差不多|将近|接近"
    )),
    ("budget", _cue(r"(?<![a-z])(?:budget|spend|pay)|预算|花费|花")),
    ("price", _cue(r"(?<![a-z])(?:price[ds]?|cost(?:s|ing)?)|价格|价位|价钱|售价")),
)
_SUFFIX_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hard", re.compile(
        r"以内|以下|之内|内|封顶|为上限|上限|或以下|或更少|(?:or|and)\s+(?:less|under|below|cheaper)\b"
        r"|max(?:imum)?\b|tops\b|at\s+most\b|budget\b|预算"
    )),
    ("approx", re.compile(r"左右|上下|or\s+so\b|-?ish\b")),
    ("lower", re.compile(r"以上|起|及以上|或以上|(?:or|and)\s+(?:more|above|up|over)\b|plus\b|\+")),
    ("range", re.compile(r"之间")),
)
_UNIT_RE = re.compile(
    r"(?:kg|mg|g|ml|l|cm|mm|km|m|inch(?:es)?|ft|gb|tb|mb|mah|kw|w|v|hz|pcs?|packs?|pieces?|people|persons?"
    r"|years?|months?|weeks?|days?|hours?|mins?|minutes?|lbs?|oz|x|p|cores?|seats?|sets?|pairs?|bottles?|boxes?"
    r"|bags?|units?|items?|times?)\b|%"
    r"|[个件只双包瓶盒袋支片条张台套斤克升米厘寸码号岁人天周月年时分度瓦伏层匹位款种次倍卡粒颗罐箱份斤平]"
)


@dataclass(frozen=True)
class _Mention:
    value: float
    kind: str  # hard | approx | lower


def chinese_numeral_value(text: str) -> float | None:
    """Value of a Chinese numeral such as 一千八 (1800), 两万五 (25000), 二十 (20), 十 (10).

    A digit right after 百/千/万 (no 零 in between) is read one place lower, as people speak.
    Returns ``None`` for strings that are not numerals (e.g. a lone 万 or 一二).
    """
    if not any(ch in _CN_DIGITS or ch == "十" for ch in text):
        return None
    total, section, number = 0.0, 0.0, None
    last_unit, zero_seen = 1, False
    for ch in text:
        if ch in _CN_DIGITS and _CN_DIGITS[ch] == 0:
            zero_seen = True
        elif ch in _CN_DIGITS:
            if number is not None:
                return None
            number = _CN_DIGITS[ch]
        elif ch == "万":
            section += number or 0
            total += (section or 1) * 10000
            section, number, last_unit, zero_seen = 0.0, None, 10000, False
        else:
            unit = _CN_UNITS[ch]
            section += (1 if number is None and unit == 10 else (number or 0)) * unit
            number, last_unit, zero_seen = None, unit, False
    if number is not None:
        section += number * (last_unit // 10 if last_unit >= 100 and not zero_seen else 1)
    return total + section


def _amount_value(match: re.Match[str]) -> float | None:
    cn = match.group("cn")
    if cn in _LONE_UNITS:
        # 千元以内, 万元左右: a bare unit is a number only when a currency word follows it
        return float(_CN_UNITS[cn]) if _LONE_UNIT_CURRENCY_RE.match(match.string, match.end()) else None
    if cn:
        return chinese_numeral_value(cn)
    value = float(match.group("arabic"))
    mult = match.group("mult")
    if mult:
        scale = _MULTIPLIERS[mult]
        value *= scale
        if match.group("tail"):
            value += int(match.group("tail")) * scale / 10
    return value


def _prefix_kind(before: str) -> str | None:
    for kind, pattern in _PREFIX_CUES:
        if pattern.search(before):
            return kind
    return None


def _suffix_kind(rest: str) -> str | None:
    for kind, pattern in _SUFFIX_CUES:
        if pattern.match(rest):
            return kind
    return None


def _classify(text: str, start: int, end: int, value: float, is_range: bool) -> _Mention | None:
    """Decide whether the amount at ``text[start:end]`` is money and which bound it states."""
    before = text[max(0, start - 32) : start]
    if start > 0 and re.match(r"[a-z0-9_.]", text[start - 1]) and not _CURRENCY_BEFORE_RE.search(before):
        return None  # part of a model number such as "rtx4090" or "v2"
    after = _AFTER_RE.match(text, end)  # every part is optional: it always matches
    modifier = ((after.group("mod") if after else None) or "").strip()
    currency_after = bool(after and after.group("cur"))
    rest = text[after.end() if after else end :]
    has_currency = currency_after or bool(_CURRENCY_BEFORE_RE.search(before))
    prefix = _prefix_kind(before)
    if is_range and prefix is None and _BETWEEN_RE.search(before):
        prefix = "hard"
    suffix = _suffix_kind(rest)
    if suffix is None and not currency_after and _UNIT_RE.match(rest):
        return None
    if not (has_currency or prefix or suffix):
        return None
    if modifier == "几":
        value += FEW_INCREMENT
    if prefix in ("hard", "lower", "approx"):
        kind = prefix
    elif modifier in ("多", "来"):
        kind = "approx"
    elif suffix in ("hard", "lower", "approx"):
        kind = suffix
    elif is_range or modifier == "几" or prefix == "budget" or suffix == "range":
        kind = "hard"
    else:
        kind = "approx"  # a bare price ("a 200元 kettle", "价格40元") is a target, not a ceiling
    return _Mention(value=value, kind=kind)


def _mentions(text: str) -> list[_Mention]:
    amounts = [(m, _amount_value(m)) for m in _AMOUNT_RE.finditer(text)]
    amounts = [(m, v) for m, v in amounts if v is not None]
    found: list[_Mention] = []
    i = 0
    while i < len(amounts):
        match, value = amounts[i]
        start, end, is_range = match.start(), match.end(), False
        if i + 1 < len(amounts):
            nxt, nxt_value = amounts[i + 1]
            join = _RANGE_JOIN_RE.match(text[end : nxt.start()])
            between = _BETWEEN_RE.search(text[max(0, start - 32) : start])
            if join and (join.group("join") != "and" or between):
                end, value, is_range = nxt.end(), nxt_value, True
                i += 1
        mention = _classify(text, start, end, value, is_range)
        if mention is not None:
            found.append(mention)
        i += 1
    return found


def parse_budget(text: str) -> Budget:
    """Parse the budget stated in an instruction.

    Returns the first upper bound (hard, or approximate ×1.1), else ``lower_only`` when only
    lower bounds are stated, else ``no_budget``. Values are rounded to cents.

    >>> parse_budget("价格在40元左右的保温杯")
    Budget(price_upper=44.0, kind='approximate_upper')
    >>> parse_budget("a desk lamp under $35")
    Budget(price_upper=35.0, kind='hard_upper')
    >>> parse_budget("至少100元")
    Budget(price_upper=None, kind='lower_only')
    """
    if not isinstance(text, str) or not text.strip():
        return NO_BUDGET
    raw = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    normalized = normalize_money_words(raw)
    if "个位数" in normalized:
        return Budget(SINGLE_DIGIT_PRICE, "hard_upper")
    mentions = _mentions(normalized)
    for mention in mentions:
        if mention.kind == "hard":
            return Budget(round(mention.value, 2), "hard_upper")
        if mention.kind == "approx":
            return Budget(round(mention.value * APPROXIMATE_BUDGET_FACTOR, 2), "approximate_upper")
    if mentions:
        return Budget(None, "lower_only")
    return NO_BUDGET


def resolve_goal_budget(
    price_upper_stored: float | None,
    instruction_simple: str,
    instruction: str,
    stored_kind: str = "hard_upper",
) -> Budget:
    """The scoring budget of a goal (§1): a stored ``price_upper`` wins; otherwise parse
    ``instruction_simple`` first and fall back to the full instruction.

    The budget is never derived from the gold product's price.
    """
    if price_upper_stored is not None:
        kind = stored_kind if stored_kind in ("hard_upper", "approximate_upper") else "hard_upper"
        return Budget(float(price_upper_stored), kind)
    first = parse_budget(instruction_simple or "")
    if first.price_upper is not None:
        return first
    second = parse_budget(instruction or "")
    if second.price_upper is not None:
        return second
    return first if first.kind == "lower_only" else second
