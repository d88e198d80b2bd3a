"""The per-turn function tools and their conversion to canonical environment actions.

Reference: docs/store.md §4.2. Before every turn the tools are rebuilt from
``observation_state``: ``search(query: string, minLength 1)`` only where ``search_available``;
``click(value)`` with an enum of the current ``actions`` only when that list is non-empty. A valid
call becomes ``search[query.strip()]`` or ``click[value.strip()]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEARCH = "search"
CLICK = "click"
TOOL_ARGUMENT = {SEARCH: "query", CLICK: "value"}

_DESCRIPTIONS = {
    "en": {
        SEARCH: "Search the store with keywords.",
        "query": "Search keywords.",
        CLICK: "Click one element of the current page.",
        "value": "One value copied verbatim from the current options.",
    },
    "zh": {
        SEARCH: "用关键词搜索商店。",
        "query": "搜索关键词。",
        CLICK: "点击当前页面上的一个元素。",
        "value": "从当前可选项中原样复制的一个值。",
    },
}


def _function(name: str, argument: str, spec: dict[str, Any], language: str) -> dict[str, Any]:
    text = _DESCRIPTIONS[language]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": text[name],
            "parameters": {
                "type": "object",
                "properties": {argument: {"type": "string", "description": text[argument], **spec}},
                "required": [argument],
                "additionalProperties": False,
            },
        },
    }


def build_tools(observation_state: Mapping[str, Any], language: str = "en") -> list[dict[str, Any]]:
    """OpenAI function tools offered on the page described by ``observation_state``.

    Examples
    --------
    >>> [t["function"]["name"] for t in build_tools({"search_available": True, "actions": []})]
    ['search']
    >>> build_tools({"search_available": False, "actions": ["buy now"]})[0]["function"]["parameters"][
    ...     "properties"]["value"]["enum"]
    ['buy now']
    """
    if language not in _DESCRIPTIONS:
        raise ValueError(f"language: expected one of {sorted(_DESCRIPTIONS)}, got {language!r}")
    tools = []
    if observation_state.get("search_available"):
        tools.append(_function(SEARCH, "query", {"minLength": 1}, language))
    actions = list(observation_state.get("actions") or [])
    if actions:
        tools.append(_function(CLICK, "value", {"enum": actions}, language))
    return tools


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The names of ``tools`` in order."""
    return [tool["function"]["name"] for tool in tools]


def to_action(name: str, argument: str) -> str:
    """The canonical action of a valid call: ``search[…]`` or ``click[…]``, argument stripped."""
    if name not in TOOL_ARGUMENT:
        raise ValueError(f"tool name: expected one of {sorted(TOOL_ARGUMENT)}, got {name!r}")
    return f"{name}[{argument.strip()}]"
