"""Canonical action strings and the invalid-action codes (``docs/store.md`` §4.4).

An action is ``search[query]`` or ``click[value]``. :func:`parse_action` accepts the clean canonical
string the runtime sends, or free text in "Thought: … Action: …" form from which it extracts the
single ``Action:`` line. Invalid actions raise :class:`InvalidActionError` carrying a reason code;
the engine reports it, keeps the page, and still counts the step.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

ACTION_NAMES = ("search", "click")
EXECUTED = "executed"
LANGUAGES = ("en", "zh")
"""The languages of every user-facing text: shop feedback, agent prompts, plots and reports."""

FEEDBACK_MESSAGES: dict[str, dict[str, str]] = {
    EXECUTED: {"en": "action executed", "zh": "操作已执行"},
    "invalid_format": {
        "en": "invalid action format; use exactly one search or click with a value",
        "zh": "动作格式无效，请只执行一个带参数的搜索或点击",
    },
    "multiple_actions_not_allowed": {
        "en": "only one action per step is allowed",
        "zh": "每一步只能执行一个动作",
    },
    "empty_argument": {"en": "the action value is empty", "zh": "动作参数为空"},
    "search_unavailable": {
        "en": "search is only available on the search home page; click back to search first",
        "zh": "当前页面不支持搜索，请先点击 back to search 返回搜索首页",
    },
    "already_selected": {"en": "this option is already selected", "zh": "该规格已选择"},
    "incomplete_options": {
        "en": "select every option axis before buying; missing",
        "zh": "购买前需选择所有规格，仍缺少",
    },
    "unavailable_action": {
        "en": "this value is not a clickable element of the current page",
        "zh": "该值不是当前页面的可点击元素",
    },
}
INVALID_ACTION_CODES = tuple(code for code in FEEDBACK_MESSAGES if code != EXECUTED)

EXECUTED_MESSAGES: dict[str, dict[str, str]] = {
    "reset": {"en": "new task started", "zh": "新任务已开始"},
    "search": {"en": "search executed", "zh": "搜索已执行"},
    "open_product": {"en": "product opened", "zh": "已打开商品"},
    "select_option": {"en": "option selected", "zh": "已选择规格"},
    "next_page": {"en": "moved to the next page", "zh": "已翻到下一页"},
    "prev_page": {"en": "moved to the previous page", "zh": "已翻到上一页"},
    "back_to_results": {"en": "returned to the results page", "zh": "已返回搜索结果"},
    "back_to_search": {"en": "returned to the search home page", "zh": "已返回搜索首页"},
    "purchase": {"en": "purchase completed", "zh": "购买已完成"},
    "terminate": {"en": "episode terminated", "zh": "任务已终止"},
}
"""Messages of valid actions (reason ``executed``), by event."""

_ACTION_LINE_RE = re.compile(r"(?:^|(?<=\s))action\s*[:：]", re.IGNORECASE)
# Linear time: one whitespace run per ``]`` (an optional separator then its own run); two adjacent
# ``\s*`` around an optional separator would try every split of a long run (quadratic).
_CHAINED_RE = re.compile(r"\]\s*(?:[,;，；]\s*)?(?:search|click)\s*\[", re.IGNORECASE)
_CANONICAL_RE = re.compile(r"(?P<name>[A-Za-z_]+)\[(?P<argument>.*)\]", re.DOTALL)
PARSE_CACHE_SIZE = 4096
"""Distinct short action strings whose parse is remembered (navigation and option clicks recur)."""
PARSE_CACHE_MAX_CHARS = 256
"""Longer texts (free-form model output) are parsed every time."""


@dataclass(frozen=True)
class ParsedAction:
    """A parsed canonical action: ``name`` (casefolded) and its ``argument`` (whitespace-stripped)."""

    name: str
    argument: str

    @property
    def canonical(self) -> str:
        return f"{self.name}[{self.argument}]"


class InvalidActionError(ValueError):
    """An action the environment rejects; ``code`` is one of :data:`INVALID_ACTION_CODES`."""

    def __init__(self, code: str, missing_option_axes: tuple[str, ...] = ()) -> None:
        if code not in INVALID_ACTION_CODES:
            raise ValueError(f"unknown invalid-action code {code!r}")
        super().__init__(code)
        self.code = code
        self.missing_option_axes = tuple(missing_option_axes)


def feedback_message(code: str, language: str = "en", missing_option_axes: tuple[str, ...] = ()) -> str:
    """The human-readable message of a reason code in ``language`` ("en" or "zh")."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    message = FEEDBACK_MESSAGES[code][language]
    if missing_option_axes:
        separator = "：" if language == "zh" else ": "
        message += separator + (" / ".join(missing_option_axes))
    return message


def executed_message(event: str, language: str = "en") -> str:
    """The message of a valid action of kind ``event`` (a key of :data:`EXECUTED_MESSAGES`)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return EXECUTED_MESSAGES[event][language]


def extract_action_text(text: str) -> str:
    """The single ``Action:`` payload of "Thought: … Action: …" text, or the text itself.

    Raises :class:`InvalidActionError` (``multiple_actions_not_allowed``) on more than one
    ``Action:`` marker.
    """
    markers = list(_ACTION_LINE_RE.finditer(text))
    if len(markers) > 1:
        raise InvalidActionError("multiple_actions_not_allowed")
    if not markers:
        return text
    rest = text[markers[0].end() :].strip()
    return rest.splitlines()[0] if rest else ""


def parse_action(text: object) -> ParsedAction:
    """Parse one canonical action (``search[...]`` or ``click[...]``).

    >>> parse_action("Thought: find it.\\nAction: Search[智能 洗地机]")
    ParsedAction(name='search', argument='智能 洗地机')

    Raises :class:`InvalidActionError` with ``invalid_format`` (not a non-empty string, no
    brackets, anything around ``name[arg]``, unknown name), ``multiple_actions_not_allowed``
    (several ``Action:`` lines or chained calls) or ``empty_argument``.
    """
    if not isinstance(text, str):
        raise InvalidActionError("invalid_format")
    if len(text) <= PARSE_CACHE_MAX_CHARS:
        return _parse_short(text)
    return _parse(text)


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_short(text: str) -> ParsedAction:
    return _parse(text)


def _parse(text: str) -> ParsedAction:
    if not text.strip():
        raise InvalidActionError("invalid_format")
    body = extract_action_text(text).strip()
    if _CHAINED_RE.search(body):
        raise InvalidActionError("multiple_actions_not_allowed")
    if "[" not in body or "]" not in body:
        raise InvalidActionError("invalid_format")
    match = _CANONICAL_RE.fullmatch(body)
    if match is None or match.group("name").casefold() not in ACTION_NAMES:
        raise InvalidActionError("invalid_format")
    argument = match.group("argument").strip()
    if not argument:
        raise InvalidActionError("empty_argument")
    return ParsedAction(match.group("name").casefold(), argument)
