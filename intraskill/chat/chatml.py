"""Our ChatML rendering and the Hermes/Qwen tool-call parser, shared by every in-process model.

A message renders as ``<|im_start|>role\\n…<|im_end|>\\n``. The rendering is built so that a
growing conversation only ever *appends* text, which keeps the KV cache of earlier turns valid:

- the static tool-calling instructions live in the system message (:data:`TOOL_INSTRUCTIONS`);
- the tools offered on a turn (names, parameters, the ``click`` enum; ``shopsimulator.md`` §4.2) are
  rendered compactly as a trailing ``Tools:`` line inside the newest non-assistant message, the one
  the model answers; once answered, that message never changes;
- an assistant tool call renders as ``<tool_call>{"name":…,"arguments":{…}}</tool_call>``.

``render_messages(messages, tools, start=n)`` renders ``messages[n:]`` exactly as the tail of
``render_messages(messages, tools)`` would, so an in-process backend tokenizes only the new suffix.
"""

from __future__ import annotations

import json
import re
from typing import Any

from intraskill.chat.base import Generation, ToolCall

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
ASSISTANT_PROMPT = f"{IM_START}assistant\n"
TOOLS_LABEL = "Tools: "
TOOL_INSTRUCTIONS = (
    "Answer every turn with exactly one tool call and no other text: "
    '<tool_call>{"name":"<tool>","arguments":{…}}</tool_call>. '
    f"The tools of the turn are listed after '{TOOLS_LABEL.strip()}'; copy enum values verbatim."
)

#: Parse error code: a ``<tool_call>`` body that is not a JSON object with a string ``name`` and an
#: object ``arguments``, or a ``<tool_call>`` that is never closed. The runtime maps it to the
#: protocol error ``invalid_arguments_json`` (``shopsimulator.md`` §4.4).
INVALID_ARGUMENTS_JSON = "invalid_arguments_json"

_CALL_PATTERN = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE), re.DOTALL)
_THINK_BLOCK = re.compile(rf"^\s*{re.escape(THINK_OPEN)}.*?{re.escape(THINK_CLOSE)}\s*", re.DOTALL)


def drop_reasoning(text: str) -> str:
    """``text`` without a leading ``<think>…</think>`` block: Qwen3's reasoning, which the protocol allows
    before the tool call and does not count as visible text.

    >>> drop_reasoning("<think>compare prices</think> <tool_call>{}</tool_call>")
    '<tool_call>{}</tool_call>'
    """
    return _THINK_BLOCK.sub("", text, count=1)


def message_text(message: dict[str, Any]) -> str:
    """The text of a message's ``content`` (a string, ``None`` or a list of text parts)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise ValueError(f"message.content must be a string, null or a list of parts, got {type(content).__name__}")


def render_tool_call(name: str, arguments: str | dict[str, Any]) -> str:
    """``<tool_call>{"name":…,"arguments":…}</tool_call>``; undecodable argument text is kept verbatim."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            quoted = json.dumps(name, ensure_ascii=False)
            return f'{TOOL_CALL_OPEN}{{"name":{quoted},"arguments":{arguments}}}{TOOL_CALL_CLOSE}'
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, separators=(",", ":"))
    return f"{TOOL_CALL_OPEN}{body}{TOOL_CALL_CLOSE}"


def _assistant_body(message: dict[str, Any]) -> str:
    parts = [message_text(message).strip()]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        parts.append(render_tool_call(function["name"], function.get("arguments", "{}")))
    return "\n".join(part for part in parts if part)


def _tool_signature(tool: dict[str, Any]) -> str:
    function = tool.get("function", tool)
    if "name" not in function:
        raise ValueError("tools[].function.name is required")
    schema = function.get("parameters") or {}
    required = set(schema.get("required", []))
    params = []
    for pname, spec in (schema.get("properties") or {}).items():
        label = pname if pname in required or not required else f"{pname}?"
        if "enum" in spec:
            label += ":" + json.dumps(list(spec["enum"]), ensure_ascii=False, separators=(",", ":"))
        elif spec.get("type", "string") != "string":
            label += f":{spec['type']}"
        params.append(label)
    return f"{function['name']}({', '.join(params)})"


def render_tools_block(tools: list[dict[str, Any]]) -> str:
    """The compact per-turn tool line, e.g. ``Tools: search(query); click(value:["buy now"])``."""
    return TOOLS_LABEL + "; ".join(_tool_signature(tool) for tool in tools)


def _newest_prompt_index(messages: list[dict[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "assistant":
            return index
    return -1


def render_message(message: dict[str, Any], tools_block: str = "") -> str:
    """One ChatML message; ``tools_block`` (if any) is appended on its own line inside it."""
    role = message.get("role")
    if not role:
        raise ValueError("message.role is required")
    body = _assistant_body(message) if role == "assistant" else message_text(message)
    if tools_block:
        body = f"{body}\n{tools_block}" if body else tools_block
    return f"{IM_START}{role}\n{body}{IM_END}\n"


def render_messages(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    start: int = 0,
    add_generation_prompt: bool = True,
) -> str:
    """Render ``messages[start:]`` as the tail of the full conversation's ChatML text.

    With ``start == 0`` and non-empty ``tools`` the system message (created if absent) gets
    :data:`TOOL_INSTRUCTIONS`. The tools block goes into the newest non-assistant message.
    """
    if not 0 <= start <= len(messages):
        raise ValueError(f"start must be in [0, {len(messages)}], got {start}")
    messages = list(messages)
    if tools and start == 0:
        if messages and messages[0].get("role") == "system":
            system_text = message_text(messages[0]).rstrip()
            messages[0] = {"role": "system", "content": f"{system_text}\n\n{TOOL_INSTRUCTIONS}".lstrip()}
        else:
            messages.insert(0, {"role": "system", "content": TOOL_INSTRUCTIONS})
    prompt_index = _newest_prompt_index(messages) if tools else -1
    pieces = []
    for index in range(start, len(messages)):
        block = render_tools_block(tools) if index == prompt_index else ""
        pieces.append(render_message(messages[index], block))
    if add_generation_prompt:
        pieces.append(ASSISTANT_PROMPT)
    return "".join(pieces)


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall], str | None]:
    """Split a completion into visible content, tool calls and a parse error code.

    Returns ``(content, tool_calls, error)``: ``content`` is the text outside ``<tool_call>`` tags
    (stripped); ``tool_calls`` holds every well-formed call in order, with ``arguments`` re-encoded
    as JSON text; ``error`` is :data:`INVALID_ARGUMENTS_JSON` when any call is undecodable, else
    ``None``. Counting calls and rejecting mixed or empty output is the runtime's job.

    >>> parse_tool_calls('<tool_call> {"name": "search", "arguments": {"query": "red mug"}} </tool_call>')
    ('', [ToolCall(name='search', arguments='{"query": "red mug"}')], None)
    """
    calls: list[ToolCall] = []
    error: str | None = None
    outside: list[str] = []
    cursor = 0
    for match in _CALL_PATTERN.finditer(text):
        outside.append(text[cursor : match.start()])
        cursor = match.end()
        call = _decode_call(match.group(1))
        if call is None:
            error = INVALID_ARGUMENTS_JSON
        else:
            calls.append(call)
    tail = text[cursor:]
    if TOOL_CALL_OPEN in tail:
        outside.append(tail[: tail.index(TOOL_CALL_OPEN)])
        error = INVALID_ARGUMENTS_JSON
    else:
        outside.append(tail)
    return "".join(outside).strip(), calls, error


def _decode_call(body: str) -> ToolCall | None:
    try:
        payload = json.loads(body.strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(payload["name"], json.dumps(arguments, ensure_ascii=False))


def assistant_message(generation: Generation) -> dict[str, Any]:
    """The OpenAI assistant message a runtime sends back for ``generation``."""
    message: dict[str, Any] = {"role": "assistant", "content": generation.content or None}
    if generation.tool_calls:
        message["tool_calls"] = [call.to_openai(f"call_{i}") for i, call in enumerate(generation.tool_calls)]
    elif generation.parse_error:
        message["content"] = generation.text
    return message


def assistant_matches(message: dict[str, Any], generation: Generation) -> bool:
    """Whether an echoed assistant ``message`` is the reply ``generation`` (same rendered text).

    Accepts the parsed form (content + tool calls, argument JSON compared as values) and the raw
    completion sent back as plain content.
    """
    if message.get("role") != "assistant":
        return False
    echoed = render_message(message)
    if echoed == render_message(assistant_message(generation)):
        return True
    return not message.get("tool_calls") and message_text(message).strip() == generation.text.strip()
