"""Classifying one model turn: a valid action, or a protocol error fed back to the model.

Reference: docs/store.md §4.2/§4.4 and docs/method.md §6.2. Exactly one tool call per
turn; protocol errors never reach the environment, cost a model turn, and are fed back as the JSON
message ``{type: tool_protocol_error, code, message, instruction, available_tools}`` — as a ``tool``
message when the model produced tool calls, else as a ``user`` message. A click value outside the
enum that still parses is *not* a protocol error: the environment reports it as invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from intraskill.agent.tools import TOOL_ARGUMENT, to_action, tool_names
from intraskill.chat.base import Generation
from intraskill.chat.chatml import assistant_message

PROTOCOL_ERROR_TYPE = "tool_protocol_error"


class ProtocolErrorCode(str, Enum):
    """Why a turn produced no environment action."""

    TOOL_CALL_COUNT = "tool_call_count"
    MIXED_CONTENT = "mixed_content"
    INVALID_TOOL_ARGUMENTS = "invalid_tool_arguments"
    UNAVAILABLE_TOOL = "unavailable_tool"
    INVALID_ARGUMENTS_JSON = "invalid_arguments_json"
    EMPTY_RESPONSE = "empty_response"


_MESSAGES = {
    "en": {
        ProtocolErrorCode.TOOL_CALL_COUNT: "Call exactly one tool per turn.",
        ProtocolErrorCode.MIXED_CONTENT: "Write no visible text next to the tool call.",
        ProtocolErrorCode.INVALID_TOOL_ARGUMENTS: "The tool arguments are wrong or empty.",
        ProtocolErrorCode.UNAVAILABLE_TOOL: "That tool is not available on this page.",
        ProtocolErrorCode.INVALID_ARGUMENTS_JSON: "The tool call is not valid JSON.",
        ProtocolErrorCode.EMPTY_RESPONSE: "The reply was empty.",
        "instruction": "Retry on the same page with exactly one valid tool call.",
    },
    "zh": {
        ProtocolErrorCode.TOOL_CALL_COUNT: "每一轮只能调用一个工具。",
        ProtocolErrorCode.MIXED_CONTENT: "工具调用之外不要输出可见文字。",
        ProtocolErrorCode.INVALID_TOOL_ARGUMENTS: "工具参数错误或为空。",
        ProtocolErrorCode.UNAVAILABLE_TOOL: "当前页面不提供该工具。",
        ProtocolErrorCode.INVALID_ARGUMENTS_JSON: "工具调用不是合法的 JSON。",
        ProtocolErrorCode.EMPTY_RESPONSE: "回复为空。",
        "instruction": "请在同一页面重试，只调用一个合法的工具。",
    },
}


@dataclass(frozen=True)
class TurnDecision:
    """The outcome of one model turn: ``action`` (canonical string) or ``error`` (a protocol error)."""

    action: str | None = None
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    error: ProtocolErrorCode | None = None
    detail: str = ""

    @property
    def is_valid(self) -> bool:
        return self.action is not None


def _error(code: ProtocolErrorCode, detail: str) -> TurnDecision:
    return TurnDecision(error=code, detail=detail)


def interpret_generation(generation: Generation, tools: list[dict[str, Any]]) -> TurnDecision:
    """Classify ``generation`` against the tools offered on this turn (checks in a fixed order)."""
    calls = generation.tool_calls
    if not calls and generation.parse_error is None:
        if not generation.text.strip():
            return _error(ProtocolErrorCode.EMPTY_RESPONSE, "no text and no tool call")
        return _error(ProtocolErrorCode.TOOL_CALL_COUNT, "0 tool calls")
    if len(calls) > 1:
        return _error(ProtocolErrorCode.TOOL_CALL_COUNT, f"{len(calls)} tool calls")
    if generation.parse_error is not None:
        return _error(ProtocolErrorCode.INVALID_ARGUMENTS_JSON, f"parser: {generation.parse_error}")
    if generation.content.strip():
        visible = len(generation.content.strip())
        return _error(ProtocolErrorCode.MIXED_CONTENT, f"{visible} visible characters")
    call = calls[0]
    offered = tool_names(tools)
    if call.name not in offered:
        return _error(ProtocolErrorCode.UNAVAILABLE_TOOL, f"{call.name!r} not in {offered}")
    try:
        arguments = json.loads(call.arguments)
    except (json.JSONDecodeError, TypeError):
        return _error(ProtocolErrorCode.INVALID_ARGUMENTS_JSON, "arguments are not JSON")
    if not isinstance(arguments, dict):
        return _error(ProtocolErrorCode.INVALID_ARGUMENTS_JSON, "arguments are not a JSON object")
    key = TOOL_ARGUMENT[call.name]
    value = arguments.get(key)
    if set(arguments) != {key} or not isinstance(value, str) or not value.strip():
        return _error(ProtocolErrorCode.INVALID_TOOL_ARGUMENTS, f"expected one non-empty string {key!r}")
    return TurnDecision(action=to_action(call.name, value), tool_name=call.name, arguments=arguments)


def protocol_error_payload(
    decision: TurnDecision, tools: list[dict[str, Any]], language: str = "en"
) -> dict[str, Any]:
    """The JSON feedback object for a protocol error."""
    if decision.error is None:
        raise ValueError("protocol_error_payload: the decision is a valid action")
    text = _MESSAGES[language]
    return {
        "type": PROTOCOL_ERROR_TYPE,
        "code": decision.error.value,
        "message": text[decision.error],
        "instruction": text["instruction"],
        "available_tools": tool_names(tools),
    }


def turn_messages(
    generation: Generation, decision: TurnDecision, tools: list[dict[str, Any]], language: str = "en"
) -> list[dict[str, Any]]:
    """The messages a turn appends before the environment replies.

    Always the assistant echo of ``generation`` (the backend's own form, so in-process streams stay
    exact); for a protocol error also the feedback: one ``tool`` message per produced call, or one
    ``user`` message when there was no call.
    """
    echo = assistant_message(generation)
    if decision.is_valid:
        return [echo]
    feedback = json.dumps(protocol_error_payload(decision, tools, language), ensure_ascii=False)
    call_ids = [call["id"] for call in echo.get("tool_calls", [])]
    if call_ids:
        return [echo] + [{"role": "tool", "tool_call_id": cid, "content": feedback} for cid in call_ids]
    return [echo, {"role": "user", "content": feedback}]


def observation_message(echo: dict[str, Any], observation: str) -> dict[str, Any]:
    """The ``tool`` message answering the single call of assistant message ``echo`` with the observation."""
    return {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": observation}
