"""The gold firewall: a regex-plus-lookup check over every string of a deployable payload.

Reference: docs/method.md §4.1 ("Gold firewall"). A deployable payload (the
``deployable_abstraction`` of a failure card, a consolidated cluster, a compiled chunk or an online
candidate) must not carry task-specific gold. It is flagged for

- the word "ASIN" (any case, plural allowed);
- any run of ``MIN_DIGIT_RUN`` = 10 or more digits;
- ``task`` followed by a number (``task 12``, ``task-000123``, ``task_id=5``);
- any product title of ≥ ``MIN_TITLE_CHARS`` = 6 characters seen in the trace or the goal;
- any brand of ≥ ``MIN_BRAND_CHARS`` = 3 characters seen in the trace;
- any gold option of ≥ ``MIN_OPTION_CHARS`` = 6 characters.

Lookups are case-insensitive with whitespace collapsed. A looked-up value whose first (last)
character is an ASCII letter or digit must not touch another ASCII letter or digit on that side,
so the brand "Ace" does not trip on "replace"; values in scripts without word spaces (Chinese)
match as plain substrings. Trace text is also redacted before prompting (:func:`redact_trace_text`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

MIN_DIGIT_RUN = 10
MIN_TITLE_CHARS = 6
MIN_BRAND_CHARS = 3
MIN_OPTION_CHARS = 6

KIND_ASIN_WORD = "asin_word"
KIND_DIGIT_RUN = "digit_run"
KIND_TASK_NUMBER = "task_number"
KIND_PRODUCT_TITLE = "product_title"
KIND_BRAND = "brand"
KIND_GOLD_OPTION = "gold_option"
FINDING_KINDS = (
    KIND_ASIN_WORD, KIND_DIGIT_RUN, KIND_TASK_NUMBER, KIND_PRODUCT_TITLE, KIND_BRAND, KIND_GOLD_OPTION
)

_ASCII_ALNUM = "A-Za-z0-9"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (KIND_ASIN_WORD, re.compile(r"(?<![A-Za-z])asins?(?![A-Za-z])", re.IGNORECASE)),
    (KIND_DIGIT_RUN, re.compile(r"[0-9]{%d,}" % MIN_DIGIT_RUN)),
    (KIND_TASK_NUMBER,
     re.compile(r"(?<![A-Za-z])task(?:[\s_#:：=\-]*id)?[\s_#:：=\-]*[0-9]+", re.IGNORECASE)),
)
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class FirewallFinding:
    """One hit: the rule (``kind``), the offending text (``value``) and where it sits (``path``).

    ``path`` uses dotted keys and ``[i]`` list indices, e.g. ``procedure[2]``.
    """

    kind: str
    value: str
    path: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FirewallFinding":
        kind = data.get("kind")
        if kind not in FINDING_KINDS:
            raise ValueError(f"firewall finding.kind: expected one of {FINDING_KINDS}, got {kind!r}")
        return cls(kind=str(kind), value=str(data.get("value", "")), path=str(data.get("path", "")))


def _normalize(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip().casefold()


def _unique(values: Iterable[str], min_chars: int) -> tuple[str, ...]:
    kept: dict[str, str] = {}
    for value in values:
        if isinstance(value, str) and len(_normalize(value)) >= min_chars:
            kept.setdefault(_normalize(value), value.strip())
    return tuple(kept.values())


def seen_titles_and_brands(obj: Any) -> tuple[list[str], list[str]]:
    """Every string under a ``title`` or ``brand`` key anywhere in a nested trace object.

    Observation states list products as summaries with ``title`` and ``brand`` (results pages under
    ``products``, product pages under ``product``); purchases carry the same keys.
    """
    titles: list[str] = []
    brands: list[str] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if key == "title" and isinstance(value, str):
                    titles.append(value)
                elif key == "brand" and isinstance(value, str):
                    brands.append(value)
                else:
                    stack.append(value)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return titles, brands


@dataclass(frozen=True)
class GoldLookup:
    """The strings one payload must not contain (already filtered by the minimum lengths)."""

    titles: tuple[str, ...] = ()
    brands: tuple[str, ...] = ()
    gold_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "titles", _unique(self.titles, MIN_TITLE_CHARS))
        object.__setattr__(self, "brands", _unique(self.brands, MIN_BRAND_CHARS))
        object.__setattr__(self, "gold_options", _unique(self.gold_options, MIN_OPTION_CHARS))

    @classmethod
    def build(cls, goal: Mapping[str, Any] | None = None, trace: Any = None) -> "GoldLookup":
        """Lookup from the private goal (its product ``name``, ``goal_options``) and a trace object.

        Parameters
        ----------
        goal : mapping, optional
            The terminal ``goal`` dict (``Goal.to_dict()``); ``name`` is the gold product title.
        trace : any, optional
            Anything holding observation states or purchases (walked by :func:`seen_titles_and_brands`).
        """
        titles, brands = seen_titles_and_brands(trace) if trace is not None else ([], [])
        goal = goal or {}
        if isinstance(goal.get("name"), str):
            titles.append(goal["name"])
        options = [str(option) for option in goal.get("goal_options") or []]
        return cls(titles=tuple(titles), brands=tuple(brands), gold_options=tuple(options))

    def merged(self, other: "GoldLookup") -> "GoldLookup":
        """The union of two lookups (e.g. all traces of one consolidation batch)."""
        return GoldLookup(self.titles + other.titles, self.brands + other.brands,
                          self.gold_options + other.gold_options)


@functools.lru_cache(maxsize=1 << 16)
def _lookup_pattern(value: str) -> re.Pattern[str]:
    parts = [re.escape(part) for part in _normalize(value).split(" ")]
    body = r"\s+".join(parts)
    left = f"(?<![{_ASCII_ALNUM}])" if re.match(f"[{_ASCII_ALNUM}]", value.strip()[0]) else ""
    right = f"(?![{_ASCII_ALNUM}])" if re.match(f"[{_ASCII_ALNUM}]", value.strip()[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def scan_text(text: str, lookup: GoldLookup | None = None, path: str = "") -> list[FirewallFinding]:
    """Firewall findings in one string (regex rules first, then lookups), in rule order.

    Examples
    --------
    >>> [f.kind for f in scan_text("open task 12 and copy the ASIN")]
    ['asin_word', 'task_number']
    >>> scan_text("prices up to 123456789 cents")
    []
    """
    findings = [
        FirewallFinding(kind, match.group(0), path)
        for kind, pattern in _PATTERNS
        for match in pattern.finditer(text)
    ]
    if lookup is not None:
        for kind, values in ((KIND_PRODUCT_TITLE, lookup.titles), (KIND_BRAND, lookup.brands),
                             (KIND_GOLD_OPTION, lookup.gold_options)):
            findings += [FirewallFinding(kind, value, path) for value in values
                         if _lookup_pattern(value).search(text)]
    return findings


def scan_payload(payload: Any, lookup: GoldLookup | None = None, path: str = "") -> list[FirewallFinding]:
    """Findings over every string value of a nested payload (mapping keys are not scanned).

    Examples
    --------
    >>> lookup = GoldLookup(brands=("Acme",))
    >>> [f.to_dict() for f in scan_payload({"procedure": ["search", "prefer Acme"]}, lookup)]
    [{'kind': 'brand', 'value': 'Acme', 'path': 'procedure[1]'}]
    """
    if isinstance(payload, str):
        return scan_text(payload, lookup, path)
    findings: list[FirewallFinding] = []
    if isinstance(payload, Mapping):
        for key, value in payload.items():
            findings += scan_payload(value, lookup, f"{path}.{key}" if path else str(key))
    elif isinstance(payload, (list, tuple)):
        for index, value in enumerate(payload):
            findings += scan_payload(value, lookup, f"{path}[{index}]")
    return findings


class GoldLeakError(ValueError):
    """A deployable payload tripped the gold firewall; the message lists every finding."""

    def __init__(self, where: str, findings: Sequence[FirewallFinding]) -> None:
        super().__init__(f"{where}: gold firewall findings: "
                         + ", ".join(f"{f.kind} {f.value!r} at {f.path}" for f in findings))
        self.findings = tuple(findings)


def check_payload(payload: Any, lookup: GoldLookup | None, where: str,
                  error: type[GoldLeakError] = GoldLeakError) -> None:
    """Raise ``error`` (a :class:`GoldLeakError`) when :func:`scan_payload` finds anything."""
    findings = scan_payload(payload, lookup, where)
    if findings:
        raise error(where, findings)


def redact_trace_text(text: str, ids: Sequence[str]) -> str:
    """Trace text safe to show an analyst: product IDs, long digit runs and task numbers masked.

    Each distinct ID in ``ids`` becomes ``<item-N>`` (N by first position in ``ids``), so products
    stay distinguishable; then every remaining run of ≥ 10 digits becomes ``<number>`` and every
    ``task`` + number becomes ``<task>``.

    Examples
    --------
    >>> redact_trace_text("click B07XYZ1234 then B07ABC0001 (task-000123)", ["B07XYZ1234", "B07ABC0001"])
    'click <item-1> then <item-2> (<task>)'
    """
    ordered = list(dict.fromkeys(i for i in ids if i))
    for number, ident in sorted(enumerate(ordered, start=1), key=lambda pair: -len(pair[1])):
        text = re.sub(re.escape(ident), f"<item-{number}>", text, flags=re.IGNORECASE)
    text = _PATTERNS[1][1].sub("<number>", text)
    return _PATTERNS[2][1].sub("<task>", text)
