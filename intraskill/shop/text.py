"""Text helpers of the store: query normalisation, tokens, fuzzy matching and title terms.

Follows the ShopSimulator reference (``docs/store.md`` §3 query pipeline, §5.1 title terms,
§5.2 fuzzy score). One tokeniser serves the search index, the query and the reward's title terms,
so Chinese text (no spaces) is handled the same way everywhere: overlapping Han bigrams.
"""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz import fuzz

FUZZY_MATCH_THRESHOLD = 85
"""A fuzzy token-set score must be strictly greater than this to count as a match (§5.2, §5.3)."""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_WORD_CHAR = rf"[^\W_{_HAN}]"
_TOKEN_RE = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>{_WORD_CHAR}+(?:[._+\-/]{_WORD_CHAR}+)*)")
# A match starts only where a run of digits and dots starts (its leading dots kept in group 1), so each
# run is scanned once: starting at every digit of a long run would be quadratic.
_CURRENCY_WORD_RE = re.compile(r"(?<![\d.])(\.*)(\d(?:[\d.]*\d)?)\s*(?:rmb|cny|yuan)\b")
_KEEP_INSIDE_TOKENS = frozenset("._+-/")
_NON_WORD_RE = re.compile(r"\W+")


def normalize_money_words(text: str) -> str:
    """NFKC + casefold, then map 人民币/块钱 and a number followed by rmb/cny/yuan to 元."""
    out = unicodedata.normalize("NFKC", text).casefold()
    out = out.replace("人民币", "元").replace("块钱", "元")
    return _CURRENCY_WORD_RE.sub(r"\1\2元", out)


def normalize_query(text: str) -> str:
    """Normalise a search query (§3): money words to 元, Chinese and Latin punctuation to spaces.

    The characters ``._+-/`` are kept (tokens may contain them internally); whitespace is
    collapsed.

    >>> normalize_query("智能，热洗！ 洗地机 under 2000 RMB")
    '智能 热洗 洗地机 under 2000元'
    """
    out = normalize_money_words(text)
    chars = [
        " " if (unicodedata.category(ch)[0] in "PS" and ch not in _KEEP_INSIDE_TOKENS) else ch
        for ch in out
    ]
    return " ".join("".join(chars).split())


def han_bigrams(run: str) -> list[str]:
    """Overlapping bigrams of one Han run; a run of one character yields that character."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokenize(text: str) -> list[str]:
    """Tokens of a text after :func:`normalize_query`, de-duplicated in order.

    Han runs become overlapping bigrams; other letters and digits become tokens that may contain
    internal ``._+-/``.

    >>> tokenize("智能热洗 V2.0 洗地机")
    ['智能', '能热', '热洗', 'v2.0', '洗地', '地机']
    """
    seen: dict[str, None] = {}
    for match in _TOKEN_RE.finditer(normalize_query(text)):
        parts = han_bigrams(match.group("han")) if match.group("han") else [match.group("word")]
        for part in parts:
            seen.setdefault(part, None)
    return list(seen)


def _fuzzy_preprocess(text: str) -> str:
    return " ".join(_NON_WORD_RE.sub(" ", str(text).casefold()).split())


def fuzzy_score(left: str, right: str) -> int:
    """fuzzywuzzy-style token-set ratio in 0..100 (an integer, as fuzzywuzzy rounds).

    Preprocessing as the reference: casefold, non-word characters to spaces, split on whitespace.
    A Chinese string without spaces is one token, so ``"白色 标准版"`` scores 100 against ``"白色"``
    and ``"黑色"`` scores 50 against ``"白色"``.
    """
    a, b = _fuzzy_preprocess(left), _fuzzy_preprocess(right)
    if not a or not b:
        return 0
    return int(round(fuzz.token_set_ratio(a, b)))


def fuzzy_match(left: str, right: str) -> bool:
    """True when :func:`fuzzy_score` is strictly above :data:`FUZZY_MATCH_THRESHOLD`."""
    return fuzzy_score(left, right) > FUZZY_MATCH_THRESHOLD


def title_terms(title: str) -> frozenset[str]:
    """Deterministic title-term fallback of §5.1 (no spaCy): Latin tokens plus Han bigrams.

    Latin tokens are tokens with at least one letter (pure numbers are not nouns); Han runs of a
    single character are skipped because the fallback counts bigrams only.
    """
    terms: set[str] = set()
    for match in _TOKEN_RE.finditer(normalize_query(title)):
        han, word = match.group("han"), match.group("word")
        if han and len(han) > 1:
            terms.update(han_bigrams(han))
        elif word and any(ch.isalpha() for ch in word):
            terms.add(word)
    return frozenset(terms)
