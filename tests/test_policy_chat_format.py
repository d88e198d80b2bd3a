"""ChatML rendering (append-only across turns) and the Hermes/Qwen tool-call parser."""

from __future__ import annotations

import json

from intraskill.chat.base import Generation, ToolCall
from intraskill.chat.chatml import (
    ASSISTANT_PROMPT,
    INVALID_ARGUMENTS_JSON,
    TOOL_INSTRUCTIONS,
    assistant_matches,
    assistant_message,
    drop_reasoning,
    parse_tool_calls,
    render_messages,
    render_tool_call,
    render_tools_block,
)

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "minLength": 1}},
                       "required": ["query"]},
    },
}


def click(values: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": "click",
            "parameters": {"type": "object", "properties": {"value": {"type": "string", "enum": values}},
                           "required": ["value"]},
        },
    }


def test_tools_block_is_compact_and_keeps_enum_values_verbatim() -> None:
    block = render_tools_block([SEARCH, click(["back to search", "color=red | blue", "B01"])])
    assert block == 'Tools: search(query); click(value:["back to search","color=red | blue","B01"])'


def test_first_turn_layout() -> None:
    messages = [{"role": "system", "content": "Shop well."}, {"role": "user", "content": "Task: a mug"}]
    text = render_messages(messages, [SEARCH])
    assert text == (
        f"<|im_start|>system\nShop well.\n\n{TOOL_INSTRUCTIONS}<|im_end|>\n"
        "<|im_start|>user\nTask: a mug\nTools: search(query)<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_missing_system_message_gets_the_instructions() -> None:
    text = render_messages([{"role": "user", "content": "hi"}], [SEARCH])
    assert text.startswith(f"<|im_start|>system\n{TOOL_INSTRUCTIONS}<|im_end|>\n<|im_start|>user\nhi\n")
    assert render_messages([{"role": "user", "content": "hi"}], []) == f"<|im_start|>user\nhi<|im_end|>\n{ASSISTANT_PROMPT}"


def test_rendering_is_append_only_across_turns() -> None:
    turn1 = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    first = render_messages(turn1, [SEARCH])
    reply = '<tool_call>{"name":"search","arguments":{"query":"mug"}}</tool_call><|im_end|>\n'
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": '{"query": "mug"}'}}
    turn2 = turn1 + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": "Page: search results"},
    ]
    tools2 = [click(["back to search", "B01"])]
    delta = render_messages(turn2, tools2, start=3)
    assert delta == (
        '<|im_start|>tool\nPage: search results\nTools: click(value:["back to search","B01"])<|im_end|>\n'
        "<|im_start|>assistant\n"
    )
    # the stream a session keeps: turn-1 prompt (its tool line included), the reply, then only the delta
    stream = first + reply + delta
    assert stream.startswith(first) and "Tools: search(query)" in stream
    # a fresh render of the same messages differs only by the earlier turn's tool line
    fresh = render_messages(turn2, tools2)
    assert fresh == stream.replace("\nTools: search(query)", "")
    assert render_messages(turn2, tools2, start=2) == "<|im_start|>assistant\n" + reply + delta


def test_round_trip_render_then_parse() -> None:
    rendered = render_tool_call("click", {"value": "size=x-large | tall"}) + "\n" + render_tool_call(
        "search", '{"query": "红色 mug"}'
    )
    content, calls, error = parse_tool_calls(rendered)
    assert (content, error) == ("", None)
    assert [c.name for c in calls] == ["click", "search"]
    assert json.loads(calls[0].arguments) == {"value": "size=x-large | tall"}
    assert json.loads(calls[1].arguments) == {"query": "红色 mug"}


def test_parse_tolerates_whitespace_and_keeps_outside_text() -> None:
    text = 'I will search.\n<tool_call>\n  {"name": "search",\n "arguments": {"query": "tea"}}  \n</tool_call>\n'
    content, calls, error = parse_tool_calls(text)
    assert content == "I will search."
    assert calls == [ToolCall("search", '{"query": "tea"}')]
    assert error is None


def test_a_leading_think_block_is_reasoning_not_visible_text() -> None:
    call = '<tool_call>{"name": "search", "arguments": {"query": "tea"}}</tool_call>'
    content, calls, error = parse_tool_calls(drop_reasoning(f"<think>Plan: profile\nbudget</think>\n{call}"))
    assert (content, calls, error) == ("", [ToolCall("search", '{"query": "tea"}')], None)
    assert parse_tool_calls(drop_reasoning(f"<think>x</think> I will search. {call}"))[0] == "I will search."
    assert drop_reasoning(f"Visible. <think>x</think>{call}") == f"Visible. <think>x</think>{call}"
    assert drop_reasoning(f"<think>unclosed {call}") == f"<think>unclosed {call}"


def test_parse_errors_are_reported_distinctly() -> None:
    bad_json = '<tool_call>{"name": "search", "arguments": {"query": }</tool_call>'
    assert parse_tool_calls(bad_json) == ("", [], INVALID_ARGUMENTS_JSON)
    not_object = '<tool_call>{"name": "click", "arguments": ["x"]}</tool_call>'
    assert parse_tool_calls(not_object)[2] == INVALID_ARGUMENTS_JSON
    unclosed = 'text <tool_call>{"name": "click", "arguments": {"value": "x"}}'
    assert parse_tool_calls(unclosed) == ("text", [], INVALID_ARGUMENTS_JSON)
    string_args = '<tool_call>{"name": "click", "arguments": "{\\"value\\": \\"x\\"}"}</tool_call>'
    assert parse_tool_calls(string_args) == ("", [ToolCall("click", '{"value": "x"}')], None)
    # no calls at all is not a parse error: counting and empty output are the runtime's checks
    assert parse_tool_calls("  just words ") == ("just words", [], None)
    assert parse_tool_calls("") == ("", [], None)


def test_invalid_argument_text_renders_verbatim() -> None:
    assert render_tool_call("click", "{oops") == '<tool_call>{"name":"click","arguments":{oops}</tool_call>'


def test_assistant_echo_matching() -> None:
    generation = Generation(
        text='<tool_call>{"name": "click", "arguments": {"value": "B01"}}</tool_call>', content="",
        tool_calls=[ToolCall("click", '{"value": "B01"}')], finish_reason="stop", prompt_tokens=5, completion_tokens=9,
    )
    echoed = assistant_message(generation)
    assert assistant_matches(echoed, generation)
    compact = {"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "click", "arguments": '{"value":"B01"}'}}]}
    assert assistant_matches(compact, generation)
    assert assistant_matches({"role": "assistant", "content": generation.text}, generation)
    other = {"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "click", "arguments": '{"value": "B02"}'}}]}
    assert not assistant_matches(other, generation)
    assert not assistant_matches({"role": "user", "content": generation.text}, generation)
