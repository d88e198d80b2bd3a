"""Skill1's extra replies: prompts carry the task (never the goal) and the parsers are strict and typed."""

from __future__ import annotations

import pytest

from intraskill.agent.skill1_replies import (
    DISTILL_KEYS,
    GENERATION_ERROR,
    DistillReply,
    QueryReply,
    RankReply,
    ReplyFailure,
    distill_messages,
    episode_summary,
    parse_distill,
    parse_query,
    parse_rank,
    query_messages,
    rank_messages,
    reply_kind,
)
from intraskill.chat.base import Generation

PERSONA = {"preferences": {"color": "red"}, "__reasoning__": "private"}


def reply(text: str, finish: str = "stop") -> Generation:
    return Generation(text, text, [], finish, 10, 5)


def failure(result: object) -> str:
    assert isinstance(result, ReplyFailure)
    return result.code


def test_query_parser() -> None:
    assert parse_query(reply("<query>a red mug under 20 dollars</query>")) == QueryReply("a red mug under 20 dollars")
    assert parse_query(reply("<think>plan</think>\n <query> mugs </query> ")) == QueryReply("mugs")
    assert failure(parse_query(reply("a red mug"))) == "missing_tag"
    assert failure(parse_query(reply("<query>mug</query> and then buy"))) == "extra_text"
    assert failure(parse_query(reply("<query>a</query><query>b</query>"))) == "extra_text"
    assert failure(parse_query(reply("<query>  </query>"))) == "empty"
    assert failure(parse_query(reply("<query>a\nb</query>"))) == "multiline"
    assert failure(parse_query(reply("<query>a red", "length"))) == "truncated"


def test_rank_parser() -> None:
    assert parse_rank(reply("<rank>2, 3, 1</rank>"), 3) == RankReply((1, 2, 0))
    assert parse_rank(reply("<rank>2,1</rank>"), 2).top == 1
    assert parse_rank(reply("<rank>1</rank>"), 1) == RankReply((0,))
    assert failure(parse_rank(reply("<rank>1, 4, 2</rank>"), 3)) == "out_of_range"
    assert failure(parse_rank(reply("<rank>0, 1, 2</rank>"), 3)) == "out_of_range"
    assert failure(parse_rank(reply("<rank>1, 1, 2</rank>"), 3)) == "duplicate"
    assert failure(parse_rank(reply("<rank>1, 2</rank>"), 3)) == "incomplete"
    assert failure(parse_rank(reply("<rank>1, two, 3</rank>"), 3)) == "not_integer"
    assert failure(parse_rank(reply("<rank>1 2 3</rank>"), 3)) == "not_integer"
    assert failure(parse_rank(reply("<rank>1, 2, 3</rank> because"), 3)) == "extra_text"
    assert failure(parse_rank(reply("1, 2, 3"), 3)) == "missing_tag"
    with pytest.raises(ValueError, match="k:"):
        parse_rank(reply("<rank>1</rank>"), 0)


def test_distill_parser() -> None:
    good = ('{"task_success": true, "action_lesson": "select every option", '
            '"navigation_lesson": "go back  to search\\nwhen no result fits", "description_head": "buying apparel"}')
    parsed = parse_distill(reply(good))
    assert parsed == DistillReply(True, "select every option", "go back to search when no result fits",
                                  "buying apparel")
    assert parsed.desc == "buying apparel"
    assert parsed.strat == ("Action Insight: select every option | "
                            "Navigation Insight: go back to search when no result fits")
    assert failure(parse_distill(reply("{not json"))) == "invalid_json"
    assert failure(parse_distill(reply(good + " done"))) == "extra_text"
    assert failure(parse_distill(reply("Here: " + good))) == "invalid_json"
    assert failure(parse_distill(reply("[1, 2]"))) == "not_object"
    assert failure(parse_distill(reply('{"task_success": true}'))) == "missing_keys"
    assert failure(parse_distill(reply(good[:-1] + ', "note": "x"}'))) == "extra_keys"
    assert failure(parse_distill(reply(good.replace("true", '"yes"')))) == "bad_type"
    assert failure(parse_distill(reply(good.replace('"buying apparel"', '" "')))) == "bad_type"
    assert failure(parse_distill(reply(good[:40], "length"))) == "truncated"
    assert not ReplyFailure("distill", GENERATION_ERROR).is_protocol_error


@pytest.mark.parametrize("language", ["en", "zh"])
def test_prompts_show_the_task_and_public_persona_only(language: str) -> None:
    query = query_messages("buy a red mug", PERSONA, language)
    rank = rank_messages("buy a red mug", PERSONA, [("mugs", "check the colour"), ("shoes", "check the size")],
                         language)
    summary = episode_summary([("search[red mug]", True, None), (None, None, "no_tool_call"),
                               ("click[buy now]", False, None)], "purchase", False, language)
    distill = distill_messages("buy a red mug", PERSONA, summary, language)
    for chat in (query, rank, distill):
        assert [m["role"] for m in chat] == ["system", "user"]
        assert "buy a red mug" in chat[1]["content"] and '"color": "red"' in chat[0]["content"]
        assert "private" not in chat[0]["content"]
    assert "[1]" in rank[1]["content"] and "[2]" in rank[1]["content"] and "check the size" in rank[1]["content"]
    assert "<query></query>" in query[0]["content"] and "<rank></rank>" in rank[0]["content"]
    assert all(f'"{key}"' in distill[0]["content"] for key in DISTILL_KEYS)
    assert [reply_kind(chat, language) for chat in (query, rank, distill)] == ["query", "rank", "distill"]
    assert reply_kind([{"role": "system", "content": "You are a shopping agent."}], language) is None
    assert "search[red mug]" in summary and "no_tool_call" in summary and "click[buy now]" in summary
    with pytest.raises(ValueError, match="candidates"):
        rank_messages("buy a red mug", PERSONA, [], language)
    with pytest.raises(ValueError, match="language"):
        query_messages("buy a red mug", PERSONA, "fr")


def test_trajectory_summary_shows_each_page_within_the_budget() -> None:
    actions = [("search[red mug]", True, None), ("click[B01]", True, None), ("buy now", False, None)]
    pages = ["Results: " + " [SEP] ".join(f"B{i:02d} red mug ${i}" for i in range(40)),
             "Product B01 red mug, options: small | large", None]
    plain = episode_summary(actions, "purchase", True)
    full = episode_summary(actions, "purchase", True, observations=pages)
    assert "B39 red mug $39" in full and "options: small | large" in full and full.startswith(plain.split("\n")[0])
    short = episode_summary(actions, "purchase", True, observations=pages, budget_chars=300)
    assert len(short) <= 300 and "…" in short and "options: small" in short
    lines = short.split("\n")
    assert lines[1] == "1. search[red mug]" and lines[2].startswith("   Results: B00") and lines[-1] == "Outcome: success"
    assert episode_summary(actions, "purchase", True, observations=pages, budget_chars=10) == plain  # no room
    with pytest.raises(ValueError, match="2 observations for 3 turns"):
        episode_summary(actions, "purchase", True, observations=pages[:2])
