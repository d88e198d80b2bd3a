"""Skill1's three extra reply types: their prompts and strict parsers (docs/method.md §10.1, §10.2).

Each reply is a single-turn chat of its own (no tools), written from what the agent is shown: the persona
block and the task instruction (never the goal).

- **query** (method §10.1, step 1): the reply is exactly ``<query>one sentence</query>``: the kind of strategy
  that would help with the task, no action.
- **rank** (method §10.1, step 3): the K retrieved candidates are listed as ``[1] … [K]`` (description and
  strategy); the reply is exactly ``<rank>i, j, …</rank>``, every candidate ID once, most useful first. The
  parser returns 0-based positions into the candidates, the form
  :class:`~intraskill.training.skill1_rewards.Skill1Rollout` takes.
- **distill** (method §10.1, step 5): given the task, the trajectory's actions and its outcome, the reply is
  exactly one JSON object with the reference's keys ``task_success`` (bool), ``action_lesson``,
  ``navigation_lesson`` and ``description_head`` (non-empty strings). The skill is ``desc = description_head``
  and ``strat = "Action Insight: … | Navigation Insight: …"`` (RetroAgent's join, method §10.1).

Parsers are strict and never raise on model output: a reply is well-formed or a :class:`ReplyFailure` naming
its kind and a code (a protocol error of that reply type). A leading ``<think>…</think>`` block is allowed, as
in the shopping protocol; any other text outside the tag or the JSON object is ``extra_text``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from intraskill.agent.prompts import TASK_LABELS, persona_block
from intraskill.chat.base import Generation
from intraskill.chat.chatml import drop_reasoning

ReplyKind = Literal["query", "rank", "distill"]
REPLY_KINDS: tuple[ReplyKind, ...] = ("query", "rank", "distill")
DISTILL_KEYS = ("task_success", "action_lesson", "navigation_lesson", "description_head")
"""The distillation reply's JSON keys (method §10.1, step 5)."""
GENERATION_ERROR = "generation_error"
"""Failure code of a reply the policy did not produce (an exception), not a protocol error."""

QUERY_PROMPTS: dict[str, str] = {
    "en": (
        "Before shopping, describe what kind of strategy would help with the shopping task below. "
        "Write one sentence inside <query></query> and nothing else. Do NOT output an action."
    ),
    "zh": (
        "开始购物之前，请描述哪一类策略有助于完成下面的购物任务。"
        "在 <query></query> 中写一句话，不要写其他内容。不要输出任何操作。"
    ),
}
RANK_PROMPTS: dict[str, str] = {
    "en": (
        "Rank the candidate strategies below by how useful they are for the shopping task, most useful "
        "first. Write every candidate ID once, separated by commas, inside <rank></rank> and nothing else, "
        "e.g. <rank>2, 1, 3</rank>."
    ),
    "zh": (
        "请按对购物任务的有用程度给下面的候选策略排序，最有用的在前。"
        "在 <rank></rank> 中写出每个候选编号各一次，用英文逗号分隔，不要写其他内容，例如 <rank>2, 1, 3</rank>。"
    ),
}
DISTILL_PROMPTS: dict[str, str] = {
    "en": (
        "Reflect on the shopping episode below (its search, filter, select and purchase steps) and write one "
        "JSON object and nothing else, with the keys: \"task_success\" (true or false, the outcome), "
        "\"action_lesson\" (what to do or avoid in single actions), \"navigation_lesson\" (how to move "
        "between search, results and product pages), \"description_head\" (WHEN this lesson is useful: the "
        "general task type, not the specific task)."
    ),
    "zh": (
        "请回顾下面的购物过程（搜索、筛选、选择和购买各步），只写一个 JSON 对象，包含以下键："
        "\"task_success\"（true 或 false，即结果），\"action_lesson\"（单步操作中该做或该避免的事），"
        "\"navigation_lesson\"（如何在搜索、结果和商品页之间切换），"
        "\"description_head\"（这条经验在什么情况下有用：一般的任务类型，而不是这个具体任务）。"
    ),
}
CANDIDATES_LABELS = {"en": "Candidate strategies:", "zh": "候选策略："}
CANDIDATE_FIELDS = {"en": ("Useful when: ", "Strategy: "), "zh": ("适用于：", "策略：")}
EPISODE_LABELS = {
    "en": {"actions": "Actions:", "none": "(no action)", "invalid": " (invalid)", "error": "protocol error: ",
           "end": "Ended by: ", "outcome": "Outcome: ", "success": "success", "failure": "failure"},
    "zh": {"actions": "操作：", "none": "（没有操作）", "invalid": "（无效）", "error": "协议错误：",
           "end": "结束原因：", "outcome": "结果：", "success": "成功", "failure": "失败"},
}
STRATEGY_FORMAT = "Action Insight: {action} | Navigation Insight: {navigation}"
"""How ``strat`` joins the two lessons (RetroAgent's form, method §10.1 [inferred for Skill1])."""

_QUERY = re.compile(r"<query>(.*?)</query>", re.DOTALL)
_RANK = re.compile(r"<rank>(.*?)</rank>", re.DOTALL)
_RANK_ITEM = re.compile(r"[0-9]+")
_STRATEGY = re.compile(r"Action Insight: (.*?) \| Navigation Insight: (.*)", re.DOTALL)


@dataclass(frozen=True)
class ReplyFailure:
    """A reply that did not parse: its kind, a short code and the offending detail."""

    kind: ReplyKind
    code: str
    detail: str = ""

    @property
    def is_protocol_error(self) -> bool:
        """The model wrote a malformed reply (not: the policy failed to produce one)."""
        return self.code != GENERATION_ERROR


@dataclass(frozen=True)
class QueryReply:
    """A well-formed ``<query>`` reply."""

    query: str


@dataclass(frozen=True)
class RankReply:
    """A well-formed ``<rank>`` reply: a permutation of 0-based candidate positions, most useful first."""

    order: tuple[int, ...]

    @property
    def top(self) -> int:
        return self.order[0]


@dataclass(frozen=True)
class DistillReply:
    """A well-formed distillation reply with the reference's four keys."""

    task_success: bool
    action_lesson: str
    navigation_lesson: str
    description_head: str

    @property
    def desc(self) -> str:
        """The new skill's retrieval key."""
        return self.description_head

    @property
    def strat(self) -> str:
        """The new skill's strategy text (:data:`STRATEGY_FORMAT`)."""
        return STRATEGY_FORMAT.format(action=self.action_lesson, navigation=self.navigation_lesson)


def _languages(table: Mapping[str, Any], language: str) -> Any:
    if language not in table:
        raise ValueError(f"language: expected one of {sorted(table)}, got {language!r}")
    return table[language]


def _task_text(instruction: str, language: str) -> str:
    if not instruction.strip():
        raise ValueError("task_instruction: must be non-empty")
    return f"{TASK_LABELS[language]}{instruction.strip()}"


def _chat(prompt: str, persona: Mapping[str, Any], user: str, language: str) -> list[dict[str, str]]:
    system = "\n\n".join(part for part in (prompt, persona_block(persona, language)) if part)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def query_messages(instruction: str, persona: Mapping[str, Any], language: str = "en") -> list[dict[str, str]]:
    """The query reply's chat: the query prompt and the persona block, then the task."""
    return _chat(_languages(QUERY_PROMPTS, language), persona, _task_text(instruction, language), language)


def rank_messages(
    instruction: str,
    persona: Mapping[str, Any],
    candidates: Sequence[tuple[str, str]],
    language: str = "en",
) -> list[dict[str, str]]:
    """The rank reply's chat over ``candidates`` (``(desc, strat)`` in retrieval order, IDs 1…K)."""
    if not candidates:
        raise ValueError("candidates: a rank reply needs at least one candidate")
    when, strategy = _languages(CANDIDATE_FIELDS, language)
    lines = [_task_text(instruction, language), "", CANDIDATES_LABELS[language]]
    for number, (desc, strat) in enumerate(candidates, start=1):
        lines += [f"[{number}] {when}{' '.join(desc.split())}", f"    {strategy}{' '.join(strat.split())}"]
    return _chat(RANK_PROMPTS[language], persona, "\n".join(lines), language)


def rank_candidates(user: str, language: str = "en") -> list[tuple[str, str]]:
    """The ``(desc, strat)`` candidates of a :func:`rank_messages` user message, in ID order (its inverse)."""
    when, strategy = _languages(CANDIDATE_FIELDS, language)
    pattern = re.compile(rf"^\[\d+\] {re.escape(when)}(.*)\n    {re.escape(strategy)}(.*)$", re.MULTILINE)
    return [(desc, strat) for desc, strat in pattern.findall(user)]


def parse_strategy(strat: str) -> tuple[str, str] | None:
    """``(action lesson, navigation lesson)`` of a :data:`STRATEGY_FORMAT` strategy; ``None`` for other text.

    >>> parse_strategy(STRATEGY_FORMAT.format(action="Check the budget", navigation="Go back"))
    ('Check the budget', 'Go back')
    """
    match = _STRATEGY.fullmatch(strat.strip())
    return None if match is None else (match.group(1).strip(), match.group(2).strip())


def episode_summary(actions: Sequence[tuple[str | None, bool | None, str | None]], termination_reason: str | None,
                    success: bool, language: str = "en", observations: Sequence[str | None] | None = None,
                    budget_chars: int | None = None) -> str:
    """The trajectory as the distillation prompt shows it: one line per model turn (its action, marked when
    invalid, or its protocol error), how it ended and the outcome.

    With ``observations`` (one per turn: the page the action led to) each action is followed by its page,
    indented; with ``budget_chars`` the pages share what the action lines leave of it (each page cut to an equal
    share, ``…`` marking a cut; a page gets nothing when no room is left).
    """
    labels = _languages(EPISODE_LABELS, language)
    lines = [labels["actions"]]
    for number, (action, valid, error) in enumerate(actions, start=1):
        if action is not None:
            text = action + (labels["invalid"] if valid is False else "")
        else:
            text = labels["error"] + (error or "")
        lines.append(f"{number}. {text}")
    if not actions:
        lines.append(labels["none"])
    lines.append(f"{labels['end']}{termination_reason or '-'}")
    lines.append(f"{labels['outcome']}{labels['success'] if success else labels['failure']}")
    if observations is None:
        return "\n".join(lines)
    if len(observations) != len(actions):
        raise ValueError(f"episode_summary: {len(observations)} observations for {len(actions)} turns")
    pages = [" ".join((observation or "").split()) for observation in observations]
    if budget_chars is not None:
        room = budget_chars - sum(len(line) + 1 for line in lines) - 4 * len(observations)
        pages = [_clip(page, max(room, 0) // max(len(pages), 1)) for page in pages]
    turns = [line for number, page in enumerate(pages, start=1)
             for line in (lines[number], *([f"   {page}"] if page else []))]
    return "\n".join([lines[0], *turns, *lines[len(actions) + 1:]] if actions else lines)


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ``…`` marking a cut (empty below 2 characters of room)."""
    if len(text) <= limit:
        return text
    return text[:limit - 1] + "…" if limit >= 2 else ""


def distill_messages(
    instruction: str, persona: Mapping[str, Any], summary: str, language: str = "en"
) -> list[dict[str, str]]:
    """The distillation reply's chat: the task and the :func:`episode_summary`."""
    user = f"{_task_text(instruction, language)}\n\n{summary}"
    return _chat(_languages(DISTILL_PROMPTS, language), persona, user, language)


def reply_kind(messages: Sequence[Mapping[str, Any]], language: str = "en") -> ReplyKind | None:
    """Which extra reply a chat asks for (read from its system prompt); ``None`` for a shopping turn."""
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    if not isinstance(system, str):
        return None
    for kind, prompts in (("query", QUERY_PROMPTS), ("rank", RANK_PROMPTS), ("distill", DISTILL_PROMPTS)):
        if system.startswith(_languages(prompts, language)):
            return kind
    return None


def _tagged(kind: ReplyKind, text: str, pattern: re.Pattern[str], tag: str) -> str | ReplyFailure:
    """The inside of the reply's single tag; the reply may hold nothing else (a leading think block aside)."""
    body = drop_reasoning(text).strip()
    found = pattern.findall(body)
    if not found:
        return ReplyFailure(kind, "missing_tag", f"no <{tag}>…</{tag}> in the reply")
    if len(found) > 1:
        return ReplyFailure(kind, "extra_text", f"{len(found)} <{tag}> tags")
    match = pattern.search(body)
    outside = (body[: match.start()] + body[match.end():]).strip()
    if outside:
        return ReplyFailure(kind, "extra_text", outside[:80])
    return found[0].strip()


def _truncated(kind: ReplyKind, generation: Generation) -> ReplyFailure | None:
    if generation.finish_reason == "length":
        return ReplyFailure(kind, "truncated", f"reply cut at {generation.completion_tokens} tokens")
    return None


def parse_query(generation: Generation) -> QueryReply | ReplyFailure:
    """A non-empty single-line ``<query>`` and nothing else."""
    failure = _truncated("query", generation)
    if failure:
        return failure
    inside = _tagged("query", generation.text, _QUERY, "query")
    if isinstance(inside, ReplyFailure):
        return inside
    if not inside:
        return ReplyFailure("query", "empty", "the query is empty")
    if "\n" in inside:
        return ReplyFailure("query", "multiline", "the query spans several lines")
    return QueryReply(inside)


def parse_rank(generation: Generation, k: int) -> RankReply | ReplyFailure:
    """A comma-separated permutation of the candidate IDs ``1…k`` inside ``<rank>`` and nothing else."""
    if k < 1:
        raise ValueError(f"k: a rank reply ranks at least one candidate, got {k}")
    failure = _truncated("rank", generation)
    if failure:
        return failure
    inside = _tagged("rank", generation.text, _RANK, "rank")
    if isinstance(inside, ReplyFailure):
        return inside
    items = [item.strip() for item in inside.split(",")]
    if any(_RANK_ITEM.fullmatch(item) is None for item in items):
        return ReplyFailure("rank", "not_integer", inside[:80])
    ids = [int(item) for item in items]
    outside = [i for i in ids if not 1 <= i <= k]
    if outside:
        return ReplyFailure("rank", "out_of_range", f"IDs {outside} outside 1..{k}")
    if len(set(ids)) != len(ids):
        return ReplyFailure("rank", "duplicate", f"IDs repeat: {ids}")
    if len(ids) != k:
        return ReplyFailure("rank", "incomplete", f"{len(ids)} of {k} IDs")
    return RankReply(tuple(i - 1 for i in ids))


def parse_distill(generation: Generation) -> DistillReply | ReplyFailure:
    """Exactly one JSON object with the four :data:`DISTILL_KEYS` and nothing else."""
    failure = _truncated("distill", generation)
    if failure:
        return failure
    body = drop_reasoning(generation.text).strip()
    try:
        value, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as error:
        return ReplyFailure("distill", "invalid_json", str(error)[:80])
    if body[end:].strip():
        return ReplyFailure("distill", "extra_text", body[end:].strip()[:80])
    if not isinstance(value, dict):
        return ReplyFailure("distill", "not_object", type(value).__name__)
    missing = [key for key in DISTILL_KEYS if key not in value]
    if missing:
        return ReplyFailure("distill", "missing_keys", ", ".join(missing))
    extra = sorted(set(value) - set(DISTILL_KEYS))
    if extra:
        return ReplyFailure("distill", "extra_keys", ", ".join(extra))
    if not isinstance(value["task_success"], bool):
        return ReplyFailure("distill", "bad_type", "task_success must be true or false")
    for key in DISTILL_KEYS[1:]:
        if not isinstance(value[key], str) or not value[key].strip():
            return ReplyFailure("distill", "bad_type", f"{key} must be a non-empty string")
    return DistillReply(value["task_success"], *(" ".join(value[key].split()) for key in DISTILL_KEYS[1:]))
