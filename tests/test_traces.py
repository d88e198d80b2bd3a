"""Reward validation, trace round trips through fsynced JSONL, and the gold-leak scan."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from intraskill.agent.traces import (
    TRACE_SCHEMA_VERSION,
    EpisodeTrace,
    RewardError,
    TurnRecord,
    read_traces,
    reward_from_terminal,
    scan_prompts_for_gold,
)
from intraskill.jsonl import DIGEST_KEY, JsonlWriter, record_digest
from intraskill.shop.reward import Reward

DETAIL = {"reward_version": "v", "termination_reason": "purchase", "r_type": 1.0, "r_att": 1.0,
          "r_option": 0.5, "r_price": 1.0, "r_loose": 0.75, "r_strict": 0.0, "r_success": 0,
          "target_asin_match": True, "price_upper": 2100.0, "category_match": True}


def _terminal(**changes) -> dict:
    payload = {"done": True, "reward": 0.0, "reward_detail": dict(DETAIL)}
    payload.update(changes)
    return payload


def test_reward_dict_is_reward_plus_every_r_key() -> None:
    reward = reward_from_terminal(_terminal())
    assert reward == Reward(r_type=1.0, r_att=1.0, r_option=0.5, r_price=1.0, r_loose=0.75, r_strict=0.0,
                            r_success=0.0)
    assert list(reward.to_dict().items()) == [("reward", 0.0), ("r_type", 1.0), ("r_att", 1.0), ("r_option", 0.5),
                                              ("r_price", 1.0), ("r_loose", 0.75), ("r_strict", 0.0),
                                              ("r_success", 0.0)]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (_terminal(done=False), "done"),
        (_terminal(reward_detail=None), "reward_detail"),
        (_terminal(reward=0.5), "r_strict"),
        (_terminal(reward=math.nan), "reward"),
        (_terminal(reward_detail={**DETAIL, "r_success": 0.5}), "r_success"),
        (_terminal(reward_detail={k: v for k, v in DETAIL.items() if k != "r_success"}), "r_success"),
        (_terminal(reward_detail={**DETAIL, "r_att": math.inf}), "r_att"),
    ],
)
def test_invalid_rewards_are_refused(payload: dict, field: str) -> None:
    with pytest.raises(RewardError, match=field):
        reward_from_terminal(payload)


def test_trace_round_trip_through_jsonl(tmp_path: Path) -> None:
    trace = EpisodeTrace(
        episode_id="task-000007__sample-001", task_id=7, sample_id=1, status="completed",
        provenance={"model_id": "m", "selected_skills": []}, task_instruction="买杯子",
        turns=[TurnRecord(turn=0, raw_output="x", content="", tool_calls=[{"name": "search", "arguments": "{}"}],
                          finish_reason="stop", parse_error=None, protocol_error=None, action="search[杯子]",
                          action_valid=True, page_type="search_results", prompt_tokens=3, completion_tokens=2)],
        reward=reward_from_terminal(_terminal()), counts={"steps": 1}, private_goal={"asin": "B0"},
    )
    path = tmp_path / "traces.jsonl"
    with JsonlWriter(path) as writer:
        writer.append(trace.to_dict())
        writer.append(trace.to_dict())
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"torn": ')
    loaded = read_traces(path)
    assert loaded == [trace, trace]
    assert loaded[0].schema_version == TRACE_SCHEMA_VERSION
    with pytest.raises(ValueError, match="schema_version"):
        EpisodeTrace.from_dict({**trace.to_dict(), "schema_version": "shopsimrl-episode-v4"})


OLD_TRACE_LINE = (
    '{"counts": {}, "duration_ms": 0, "episode_id": "task-000007__sample-001", "error": null, "private_goal": null, '
    '"provenance": {}, "purchase": null, "reward": {"r_att": 1.0, "r_loose": 0.75, "r_option": 0.5, "r_price": 1.0, '
    '"r_strict": 0.0, "r_success": 0.0, "r_type": 1.0, "reward": 0.0}, "reward_detail": null, "sample_id": 1, '
    '"schema_version": "intraskill-episode-v1", "status": "completed", "task_id": 7, "task_instruction": null, '
    '"termination_reason": null, "tokens": {}, "turns": []}\n'
)
"""A trace line as the dict-reward code wrote it (before the reward was typed)."""
CHAINED_TRACE_LINE = OLD_TRACE_LINE.replace(
    ', "reward": {', f', "{DIGEST_KEY}": "{record_digest(str(), json.loads(OLD_TRACE_LINE))}", "reward": {{', 1)
"""The same record as the writer appends it today: its chained digest beside the fields, in key order."""


def test_typed_reward_round_trips_through_a_trace_file(tmp_path: Path) -> None:
    reward = reward_from_terminal(_terminal())
    trace = EpisodeTrace(episode_id="task-000007__sample-001", task_id=7, sample_id=1, status="completed",
                         provenance={}, reward=reward)
    path = tmp_path / "traces.jsonl"
    with JsonlWriter(path) as writer:
        writer.append(trace.to_dict())
    assert path.read_text(encoding="utf-8") == CHAINED_TRACE_LINE
    (loaded,) = read_traces(path)
    assert isinstance(loaded.reward, Reward) and loaded.reward == reward and loaded == trace


def test_an_old_trace_file_reads_and_writes_back_unchanged(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text(OLD_TRACE_LINE, encoding="utf-8")
    (loaded,) = read_traces(old)
    assert loaded.reward == Reward(r_type=1.0, r_att=1.0, r_option=0.5, r_price=1.0, r_loose=0.75, r_strict=0.0,
                                   r_success=0.0)
    again = tmp_path / "again.jsonl"
    with JsonlWriter(again) as writer:
        writer.append(loaded.to_dict())
    assert again.read_text(encoding="utf-8") == CHAINED_TRACE_LINE  # the same record, now with its digest


def test_a_tampered_reward_in_a_trace_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(OLD_TRACE_LINE.replace('"reward": 0.0}', '"reward": 0.5}'), encoding="utf-8")
    with pytest.raises(RewardError, match="r_strict"):
        read_traces(path)


GOAL = {
    "asin": "B0GOLD0001",
    "instruction_text": "我想要一台白色的智能热洗洗地机，价格不超过2100元",
    "instruction_simple": "想要一台洗地机，2100以内",
    "attributes": ["智能", "热洗"],
    "goal_options": ["白色"],
    "user_persona": {"兴趣偏好": {"商品属性偏好": "智能"}, "__reasoning__": "目标是白色热洗款"},
}


def test_scan_is_clean_for_public_text_and_observations() -> None:
    messages = [
        {"role": "system", "content": 'prompt\n\n用户个人文档：\n{"兴趣偏好": {"商品属性偏好": "智能"}}'},
        {"role": "user", "content": "购物任务：想要一台洗地机，2100以内\n\n页面：搜索首页"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "search", "arguments": '{"query": "热洗"}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "1. 智能热洗白色洗地机\nASIN：B0GOLD0001"},
    ]
    assert scan_prompts_for_gold(messages, GOAL) == []


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "user", "content": "hint: B0GOLD0001"}, "asin"),
        ({"role": "system", "content": "选 白色"}, "goal_options:白色"),
        ({"role": "system", "content": "需要 热洗"}, "attributes:热洗"),
        ({"role": "tool", "content": GOAL["instruction_text"]}, "instruction_text"),
        ({"role": "tool", "content": "目标是白色热洗款"}, "persona.__reasoning__"),
        ({"role": "user", "content": '{"goal_options": []}'}, 'marker "goal_options"'),
    ],
)
def test_scan_finds_gold(message: dict, expected: str) -> None:
    findings = scan_prompts_for_gold([{"role": "system", "content": "ok"}, message], GOAL)
    assert any(f.startswith("message 1") and expected in f for f in findings), findings
