"""Our ChatML rendering and the Hermes/Qwen tool-call parser, shared by every in-process model.

A message renders as ``<|im_start|>role\\n…<|im_end|>\\n``. The rendering is built so that a
growing conversation only ever *appends* text, which keeps the KV cache of earlier turns valid:

- the static tool-calling instructions live in the system message (:data:`TOOL_INSTRUCTIONS`);
- the tools offered on a turn (names, parameters, the ``click`` enum; ``docs/store.md`` §4.2) are
  rendered compactly as a trailing ``Tools:`` line inside the newest non-assistant message, the one
  the model answers; once answered, that message never changes;
- an assistant tool call renders as ``<tool_call>{"name":…,"arguments":{…}}</tool_call>``.

``render_messages(messages, tools, start=n)`` renders ``messages[n:]`` exactly as the tail of
``render_messages(messages, tools)`` would, so an in-process backend tokenizes only the new suffix.

:func:`render_spans` gives the same text as :data:`Span` pieces that tell the renderer's own markup
(``<|im_start|>``, ``<|im_end|>``, ``<tool_call>`` tags, :data:`TOOL_INSTRUCTIONS`) from text that came
with a message, a tool or a call; :class:`intraskill.chat.tokens.ChatEncoder` encodes special-token text
of the latter as plain text, so no message can forge a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
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

Span = tuple[str, bool]
"""A piece of rendered ChatML and whether it is the renderer's own markup (``True``: special-token text in it
is the special token) or text from a message, a tool or a call (``False``: always encoded as text)."""

#: Parse error code: a ``<tool_call>`` body that is not a JSON object with a string ``name`` and an
#: object ``arguments``, or a ``<tool_call>`` that is never closed. The runtime maps it to the
#: protocol error ``invalid_arguments_json`` (``docs/store.md`` §4.4).
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


def join_spans(spans: Sequence[Span]) -> str:
    """The text of rendered spans."""
    return "".join(text for text, _ in spans)


def tool_call_spans(name: str, arguments: str | dict[str, Any]) -> list[Span]:
    """The spans of ``<tool_call>{"name":…,"arguments":…}</tool_call>``; undecodable argument text is kept
    verbatim."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            quoted = json.dumps(name, ensure_ascii=False)
            return [(TOOL_CALL_OPEN, True), (f'{{"name":{quoted},"arguments":{arguments}}}', False),
                    (TOOL_CALL_CLOSE, True)]
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, separators=(",", ":"))
    return [(TOOL_CALL_OPEN, True), (body, False), (TOOL_CALL_CLOSE, True)]


def render_tool_call(name: str, arguments: str | dict[str, Any]) -> str:
    """``<tool_call>{"name":…,"arguments":…}</tool_call>``; undecodable argument text is kept verbatim."""
    return join_spans(tool_call_spans(name, arguments))


def _assistant_spans(message: dict[str, Any]) -> list[Span]:
    parts = [[(text, False)] for text in [message_text(message).strip()] if text]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        parts.append(tool_call_spans(function["name"], function.get("arguments", "{}")))
    spans: list[Span] = []
    for index, part in enumerate(parts):
        spans.extend([("\n", False), *part] if index else part)
    return spans


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


def message_spans(message: dict[str, Any], tools_block: str = "", body: list[Span] | None = None) -> list[Span]:
    """The spans of one ChatML message; ``tools_block`` (if any) is appended on its own line inside it;
    ``body`` replaces the message's own content (the system message that carries the tool instructions)."""
    role = message.get("role")
    if not role:
        raise ValueError("message.role is required")
    if body is None:
        body = _assistant_spans(message) if role == "assistant" else [(message_text(message), False)]
    if tools_block:
        body = [*body, (f"\n{tools_block}", False)] if join_spans(body) else [(tools_block, False)]
    return [(IM_START, True), (f"{role}\n", False), *body, (IM_END, True), ("\n", False)]


def render_message(message: dict[str, Any], tools_block: str = "") -> str:
    """One ChatML message; ``tools_block`` (if any) is appended on its own line inside it."""
    return join_spans(message_spans(message, tools_block))


def render_spans(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    start: int = 0,
    add_generation_prompt: bool = True,
) -> list[Span]:
    """The spans of ``messages[start:]`` as the tail of the full conversation (see :func:`render_messages`)."""
    if not 0 <= start <= len(messages):
        raise ValueError(f"start must be in [0, {len(messages)}], got {start}")
    entries: list[tuple[dict[str, Any], list[Span] | None]] = [(message, None) for message in messages]
    if tools and start == 0:
        if messages and messages[0].get("role") == "system":
            system_text = message_text(messages[0]).rstrip()
            prefix = (f"{system_text}\n\n" if system_text else "").lstrip()
            entries[0] = (messages[0], [(prefix, False), (TOOL_INSTRUCTIONS, True)])
        else:
            entries.insert(0, ({"role": "system"}, [(TOOL_INSTRUCTIONS, True)]))
    prompt_index = _newest_prompt_index([message for message, _ in entries]) if tools else -1
    spans: list[Span] = []
    for index in range(start, len(entries)):
        block = render_tools_block(tools) if index == prompt_index else ""
        message, body = entries[index]
        spans.extend(message_spans(message, block, body))
    if add_generation_prompt:
        spans.extend([(IM_START, True), ("assistant\n", False)])
    return spans


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
    return join_spans(render_spans(messages, tools, start=start, add_generation_prompt=add_generation_prompt))


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
