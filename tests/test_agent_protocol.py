"""Tools per page, protocol-error classification for each code, feedback messages and prompt layout."""

from __future__ import annotations

import json

import pytest

from intraskill.agent.prompts import (
    PROMPT_VERSION,
    build_first_user_message,
    build_system_message,
    prompt_identity,
    system_prompt,
)
from intraskill.agent.protocol import (
    ProtocolErrorCode,
    interpret_generation,
    observation_message,
    turn_messages,
)
from intraskill.agent.tools import build_tools, to_action
from intraskill.chat.base import Generation, ToolCall
from intraskill.chat.chatml import parse_tool_calls
from intraskill.hashing import sha256_text
from intraskill.skills import Skill

HOME = {"page_type": "search_home", "search_available": True, "actions": []}
PRODUCT = {"page_type": "product_detail", "search_available": False,
           "actions": ["back to search", "< prev", "颜色分类=白色", "buy now"]}


def _gen(text: str, finish_reason: str = "stop") -> Generation:
    content, calls, error = parse_tool_calls(text)
    return Generation(text=text, content=content, tool_calls=calls, finish_reason=finish_reason,
                      prompt_tokens=10, completion_tokens=5, parse_error=error)


def _call(name: str, arguments: dict | str) -> str:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f'<tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>'


def test_tools_follow_the_page_state() -> None:
    home = build_tools(HOME)
    assert [t["function"]["name"] for t in home] == ["search"]
    query = home[0]["function"]["parameters"]["properties"]["query"]
    assert query["type"] == "string" and query["minLength"] == 1
    product = build_tools(PRODUCT)
    assert [t["function"]["name"] for t in product] == ["click"]
    assert product[0]["function"]["parameters"]["properties"]["value"]["enum"] == PRODUCT["actions"]
    assert product[0]["function"]["parameters"]["required"] == ["value"]
    assert build_tools({"page_type": "terminal", "search_available": False, "actions": []}) == []


def test_to_action_strips_arguments() -> None:
    assert to_action("search", "  red mug ") == "search[red mug]"
    assert to_action("click", "buy now\n") == "click[buy now]"


def test_valid_calls_become_canonical_actions() -> None:
    decision = interpret_generation(_gen(_call("search", {"query": " 白色 洗地机 "})), build_tools(HOME))
    assert decision.is_valid and decision.action == "search[白色 洗地机]" and decision.error is None
    decision = interpret_generation(_gen(_call("click", {"value": "颜色分类=白色"})), build_tools(PRODUCT))
    assert decision.action == "click[颜色分类=白色]"


def test_out_of_enum_click_goes_to_the_environment() -> None:
    decision = interpret_generation(_gen(_call("click", {"value": "Buy Now"})), build_tools(PRODUCT))
    assert decision.is_valid and decision.action == "click[Buy Now]"


@pytest.mark.parametrize(
    ("text", "tools", "code"),
    [
        (_call("search", {"query": "a"}) + _call("search", {"query": "b"}), HOME, "tool_call_count"),
        ("I will search for a mug.", HOME, "tool_call_count"),
        ("Let me look. " + _call("search", {"query": "mug"}), HOME, "mixed_content"),
        (_call("search", {"q": "mug"}), HOME, "invalid_tool_arguments"),
        (_call("search", {"query": "   "}), HOME, "invalid_tool_arguments"),
        (_call("search", {"query": "mug", "page": "2"}), HOME, "invalid_tool_arguments"),
        (_call("click", {"value": 3}), PRODUCT, "invalid_tool_arguments"),
        (_call("search", {"query": "mug"}), PRODUCT, "unavailable_tool"),
        (_call("finish", {"value": "x"}), PRODUCT, "unavailable_tool"),
        ('<tool_call>{"name": "search", "arguments": {"query": "mug"</tool_call>', HOME, "invalid_arguments_json"),
        ('<tool_call>{"name": "search", "arguments": {"query": "mug"}}', HOME, "invalid_arguments_json"),
        ("", HOME, "empty_response"),
        ("  \n ", HOME, "empty_response"),
    ],
)
def test_protocol_error_codes(text: str, tools: dict, code: str) -> None:
    decision = interpret_generation(_gen(text), build_tools(tools))
    assert not decision.is_valid and decision.action is None
    assert decision.error == ProtocolErrorCode(code)


def test_arguments_that_are_not_json_objects() -> None:
    tools = build_tools(HOME)
    for arguments in ("not json", '["query"]'):
        generation = Generation(text="x", content="", tool_calls=[ToolCall("search", arguments)],
                                finish_reason="stop", prompt_tokens=1, completion_tokens=1)
        assert interpret_generation(generation, tools).error == ProtocolErrorCode.INVALID_ARGUMENTS_JSON


def test_error_feedback_is_a_tool_message_when_calls_were_made() -> None:
    tools = build_tools(HOME)
    generation = _gen(_call("click", {"value": "buy now"}))
    decision = interpret_generation(generation, tools)
    messages = turn_messages(generation, decision, tools)
    assert [m["role"] for m in messages] == ["assistant", "tool"]
    assert messages[1]["tool_call_id"] == messages[0]["tool_calls"][0]["id"]
    payload = json.loads(messages[1]["content"])
    assert payload["type"] == "tool_protocol_error"
    assert payload["code"] == "unavailable_tool"
    assert payload["available_tools"] == ["search"]
    assert "same page" in payload["instruction"]


def test_error_feedback_answers_every_call_id() -> None:
    tools = build_tools(HOME)
    generation = _gen(_call("search", {"query": "a"}) + _call("search", {"query": "b"}))
    messages = turn_messages(generation, interpret_generation(generation, tools), tools)
    ids = [call["id"] for call in messages[0]["tool_calls"]]
    assert [m.get("tool_call_id") for m in messages[1:]] == ids and len(ids) == 2


def test_error_feedback_is_a_user_message_without_calls() -> None:
    tools = build_tools(PRODUCT)
    generation = _gen("buy now please")
    messages = turn_messages(generation, interpret_generation(generation, tools), tools, language="zh")
    assert [m["role"] for m in messages] == ["assistant", "user"]
    payload = json.loads(messages[1]["content"])
    assert payload["code"] == "tool_call_count" and payload["available_tools"] == ["click"]
    assert "同一页面" in payload["instruction"]


def test_valid_turn_messages_and_observation_reply() -> None:
    tools = build_tools(HOME)
    generation = _gen(_call("search", {"query": "mug"}))
    messages = turn_messages(generation, interpret_generation(generation, tools), tools)
    assert len(messages) == 1 and messages[0]["tool_calls"][0]["function"]["name"] == "search"
    reply = observation_message(messages[0], "Page: search results")
    assert reply == {"role": "tool", "tool_call_id": messages[0]["tool_calls"][0]["id"],
                     "content": "Page: search results"}


def test_system_message_layout() -> None:
    persona = {"b": "品牌偏好", "a": 1, "__reasoning__": "gold says white"}
    skills = [Skill("chunk-a", "### A", version="1")]
    message = build_system_message(persona, skills)
    sections = message["content"].split("\n\n")
    assert message["role"] == "system"
    assert sections[0] == system_prompt("en")
    assert sections[1] == 'User profile document:\n{"a": 1, "b": "品牌偏好"}'
    assert sections[2].startswith("[Optional strategy hints]\n")
    assert sections[2].endswith('<skill id="chunk-a" version="1">\n### A\n</skill>')
    assert "gold says white" not in message["content"]
    bare = build_system_message(persona, [])
    assert "[Optional strategy hints]" not in bare["content"]
    assert build_system_message({}, [])["content"] == system_prompt("en")


def test_chinese_twin_and_first_user_message() -> None:
    zh = build_system_message({"城市": "杭州"}, [], language="zh")["content"]
    assert zh.startswith(system_prompt("zh")) and '用户个人文档：\n{"城市": "杭州"}' in zh
    assert build_first_user_message("买一台洗地机", "页面：搜索首页", "zh")["content"] == "购物任务：买一台洗地机\n\n页面：搜索首页"
    assert build_first_user_message(" a mug ", "Page: home")["content"] == "Shopping task: a mug\n\nPage: home"
    assert len(system_prompt("en")) < 600  # a tiny model reads it every turn


def test_prompt_identity() -> None:
    identity = prompt_identity("zh")
    assert identity.prompt_version == PROMPT_VERSION
    assert identity.system_prompt_sha256 == sha256_text(system_prompt("zh"))
    assert identity.skill_renderer_version == "plain-skill-context-v1"
    assert prompt_identity("en").system_prompt_sha256 != identity.system_prompt_sha256
