"""Episode traces (``intraskill-episode-v1``): records, reward validation and the gold-leak scan.

One JSONL record per episode attempt, appended with fsync (:class:`intraskill.jsonl.JsonlWriter`).
The reward is a typed :class:`~intraskill.shop.reward.Reward` (docs/method.md §6.2 item 6:
``reward`` plus every ``r_*`` of the terminal ``reward_detail``), valid only when the episode is done,
all values are finite, ``r_success`` ∈ {0, 1} and ``reward == r_strict``; it becomes its JSON dict
only in :meth:`EpisodeTrace.to_dict` and is parsed back in :meth:`EpisodeTrace.from_dict`. The environment's terminal ``goal`` is kept only
under ``private_goal`` for analysis: it never enters a message sent to the policy
(docs/store.md §8 item 3), which :func:`scan_prompts_for_gold` checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from intraskill.jsonl import iter_jsonl
from intraskill.shop.reward import PRIMARY_REWARD, Reward, RewardError, parse_reward

TRACE_SCHEMA_VERSION = "intraskill-episode-v1"


class EpisodeStatus(str, Enum):
    """``completed``: a scored terminal; ``failed``: a technical error (unscored, never trained on)."""

    COMPLETED = "completed"
    FAILED = "failed"


def reward_from_terminal(payload: Mapping[str, Any]) -> Reward:
    """The validated :class:`Reward` of a terminal payload (its ``reward`` and detail's ``r_*``)."""
    if not payload.get("done"):
        raise RewardError("done: the episode has not ended")
    detail = payload.get("reward_detail")
    if not isinstance(detail, Mapping):
        raise RewardError("reward_detail: missing from the terminal payload")
    return Reward.from_dict({**detail, PRIMARY_REWARD: payload.get("reward")})


@dataclass
class TurnRecord:
    """One model turn: what the model wrote, how it was read, and what the environment did."""

    turn: int
    raw_output: str
    content: str
    tool_calls: list[dict[str, str]]
    finish_reason: str
    parse_error: str | None
    protocol_error: str | None
    action: str | None
    action_feedback: Any = None
    action_valid: bool | None = None
    page_type: str | None = None
    observation: str | None = None
    available_tools: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def record_step(record: TurnRecord, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Fill a turn record from the environment's step payload; returns the new ``observation_state``."""
    state = dict(payload.get("observation_state") or {})
    last = state.get("last_action") or {}
    record.action_feedback = payload.get("action_feedback")
    record.action_valid = last.get("valid") if "valid" in last else payload.get("message") != "Invalid action"
    record.page_type = state.get("page_type")
    record.observation = payload.get("observation")
    return state


@dataclass
class EpisodeTrace:
    """The full record of one episode attempt (``schema_version`` ``intraskill-episode-v1``)."""

    episode_id: str
    task_id: int
    sample_id: int
    status: str
    provenance: dict[str, Any]
    task_instruction: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    reward: Reward | None = None
    reward_detail: dict[str, Any] | None = None
    termination_reason: str | None = None
    purchase: dict[str, Any] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    error: str | None = None
    private_goal: dict[str, Any] | None = None
    schema_version: str = TRACE_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record (the reward as its JSON dict)."""
        data = asdict(self)
        data["reward"] = self.reward.to_dict() if self.reward is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EpisodeTrace":
        """Parse a trace record; refuses another schema version."""
        if data.get("schema_version") != TRACE_SCHEMA_VERSION:
            raise ValueError(
                f"schema_version: expected {TRACE_SCHEMA_VERSION!r}, got {data.get('schema_version')!r}"
            )
        fields = dict(data)
        fields["turns"] = [TurnRecord(**turn) for turn in data.get("turns", [])]
        fields["reward"] = parse_reward(data.get("reward"))
        return cls(**fields)


def read_traces(path: str | Path) -> list[EpisodeTrace]:
    """All episode traces of a JSONL file (a torn last line is skipped)."""
    return [EpisodeTrace.from_dict(record) for record in iter_jsonl(path)]


def _message_text(message: Mapping[str, Any]) -> str:
    parts = [str(message.get("content") or "")]
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def _public_text(goal: Mapping[str, Any]) -> str:
    persona = {k: v for k, v in (goal.get("user_persona") or {}).items() if k != "__reasoning__"}
    instruction = str(goal.get("instruction_simple") or "")
    return instruction + "\n" + json.dumps(persona, ensure_ascii=False, sort_keys=True)


def scan_prompts_for_gold(messages: Sequence[Mapping[str, Any]], goal: Mapping[str, Any]) -> list[str]:
    """Gold fields of ``goal`` found where the policy could read them; ``[]`` means clean.

    Every message is scanned for the full private ``instruction_text`` and the persona's private
    ``__reasoning__`` (unless those texts are also public) and for goal-dict markers
    (``"goal_options"``, ``"price_upper"``, ``"target_asin"``). Messages the runtime writes itself
    (``system``, ``user``) are also scanned for the gold ASIN and for goal attribute and option
    strings that the public instruction and persona do not already contain. Environment observations
    (``tool`` messages) legitimately list catalogue ASINs and attributes, so those two checks skip them.
    """
    public = _public_text(goal)
    always = {"instruction_text": str(goal.get("instruction_text") or "")}
    reasoning = (goal.get("user_persona") or {}).get("__reasoning__")
    if reasoning:
        always["persona.__reasoning__"] = reasoning if isinstance(reasoning, str) else json.dumps(
            reasoning, ensure_ascii=False, sort_keys=True)
    always = {name: text for name, text in always.items() if text.strip() and text not in public}
    authored = {"asin": str(goal.get("asin") or "")}
    for kind in ("attributes", "goal_options"):
        for value in goal.get(kind) or []:
            if value and str(value) not in public:
                authored[f"{kind}:{value}"] = str(value)
    markers = ('"goal_options"', '"price_upper"', '"target_asin"', "private_goal")
    findings = []
    for index, message in enumerate(messages):
        role = message.get("role")
        text = _message_text(message)
        hits = [name for name, value in always.items() if value in text]
        hits += [f"marker {marker}" for marker in markers if marker in text]
        if role in ("system", "user"):
            hits += [name for name, value in authored.items() if value and value in text]
        findings += [f"message {index} ({role}): {hit}" for hit in hits]
    return findings
