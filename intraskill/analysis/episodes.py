"""Episodes as the episode browser reads them: a summary row per episode and the full step-through view.

A *trace file* (any of :data:`~intraskill.analysis.export.TRACE_FILES`: an evaluation condition, a gate
arm, a round's rollout step, its retries, a Skill1 step) is one run of the browser. :func:`read_trace_file`
turns it into :class:`EpisodeSummary` rows (what the filters need: task, split, success, skill context,
failure class, length) and :func:`episode_view` turns one trace into the turn-by-turn view: the page the
policy answered, its reply and reasoning, the parsed action, the store's feedback and tokens, then the
final reward with its ``r_*`` parts. The store's private goal appears only in the view's ``final`` block
(the browser shows it on the final reward panel alone).

:func:`failure_class` is the part of the rule analyst's failure surface
(:func:`intraskill.trace2skill.rule_analyst.diagnose`) that the trace alone decides, without replaying
searches in the store: ``success``, ``technical_error``, or one of the surfaces
``protocol_errors``, ``action_limit``, ``wrong_type``, ``missing_attribute``, ``wrong_option``,
``over_budget`` and ``unverifiable_price``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from intraskill.agent.traces import EpisodeStatus, EpisodeTrace
from intraskill.analysis.behaviour import reasoning_text
from intraskill.analysis.export import trace_records, trace_split
from intraskill.skills.bank import content_sha256
from intraskill.skills.render import chunk_title
from intraskill.trace2skill import mechanisms as mech

SUCCESS = "success"
TECHNICAL_ERROR = "technical_error"
GENERATION_LENGTH = "generation_length"
FAILURE_CLASSES = (SUCCESS, TECHNICAL_ERROR, mech.PROTOCOL_ERRORS, mech.ACTION_LIMIT, mech.WRONG_TYPE,
                   mech.MISSING_ATTRIBUTE, mech.WRONG_OPTION, mech.OVER_BUDGET, mech.UNVERIFIABLE_PRICE)
"""Every value of :func:`failure_class`, in the browser's filter order."""


def failure_class(trace: EpisodeTrace) -> str:
    """``success``, ``technical_error`` or the failure surface the trace's ending and reward parts decide."""
    if trace.status != EpisodeStatus.COMPLETED.value or trace.reward is None:
        return TECHNICAL_ERROR
    reward = trace.reward
    if reward.r_success == 1.0:
        return SUCCESS
    if trace.termination_reason != "purchase":
        counts = trace.counts
        valid = counts.get("steps", 0) - counts.get("invalid_actions", 0)
        errors = counts.get("protocol_errors", 0)
        if trace.termination_reason == GENERATION_LENGTH or (errors and errors >= valid):
            return mech.PROTOCOL_ERRORS
        return mech.ACTION_LIMIT
    if reward.r_type < 1:
        return mech.WRONG_TYPE
    if reward.r_att < 1:
        return mech.MISSING_ATTRIBUTE
    if reward.r_option < 1:
        return mech.WRONG_OPTION
    return mech.OVER_BUDGET if (trace.reward_detail or {}).get("price_verifiable") else mech.UNVERIFIABLE_PRICE


@dataclass(frozen=True)
class EpisodeSummary:
    """One episode of a trace file as the browser's list and filters show it."""

    index: int
    line: int
    episode_id: str
    task_id: int
    sample_id: int
    status: str
    success: bool | None
    reward: float | None
    failure: str
    turns: int
    steps: int | None
    skills: tuple[str, ...]
    tokens: int | None


@dataclass(frozen=True)
class TraceFileEpisodes:
    """A trace file read for the browser: its split, its episodes' summaries and the skill titles by id."""

    split: str | None
    episodes: list[EpisodeSummary]
    skills: dict[str, str] = field(default_factory=dict)


def _skills(trace: EpisodeTrace, titles: dict[str, str]) -> list[dict[str, str]]:
    """The skill context of the prompt: id, title (a chunk's heading, a Skill1 skill's description), text and
    the text's SHA-256 (the key of its skill-version page)."""
    selected = trace.provenance.get("selected_skills") or []
    out = []
    for skill in selected:
        skill_id, content = str(skill["skill_id"]), str(skill.get("content", ""))
        out.append({"id": skill_id, "title": titles.get(skill_id) or chunk_title(content), "content": content,
                    "sha256": content_sha256(content)})
    return out


def summarize_trace(index: int, line: int, trace: EpisodeTrace, titles: dict[str, str]) -> EpisodeSummary:
    """The :class:`EpisodeSummary` of the ``index``-th trace of a file (at ``line``)."""
    completion = trace.tokens.get("completion")
    return EpisodeSummary(
        index=index, line=line, episode_id=trace.episode_id, task_id=trace.task_id, sample_id=trace.sample_id,
        status=trace.status, success=trace.reward.r_success == 1.0 if trace.reward is not None else None,
        reward=trace.reward.reward if trace.reward is not None else None, failure=failure_class(trace),
        turns=len(trace.turns), steps=trace.counts.get("steps"),
        skills=tuple(skill["id"] for skill in _skills(trace, titles)),
        tokens=completion if completion else None,
    )


def read_trace_file(path: str | Path, run_dir: str | Path) -> TraceFileEpisodes:
    """Every episode of one trace file (``run_dir``: the run it belongs to, for its split)."""
    source, root = Path(path), Path(run_dir)
    episodes, skills = [], {}
    for index, (line, trace, titles) in enumerate(trace_records(source)):
        episodes.append(summarize_trace(index, line, trace, titles))
        skills.update({skill["id"]: skill["title"] for skill in _skills(trace, titles)})
    return TraceFileEpisodes(trace_split(source, root), episodes, dict(sorted(skills.items())))


def episode_view(index: int, line: int, trace: EpisodeTrace, titles: dict[str, str]) -> dict[str, Any]:
    """The step-through view of one episode (JSON-ready); the private goal only under ``final``."""
    turns = [
        {
            "turn": turn.turn,
            "raw_output": turn.raw_output,
            "reasoning": reasoning_text(turn.raw_output),
            "tool_calls": turn.tool_calls,
            "action": turn.action,
            "parse_error": turn.parse_error,
            "protocol_error": turn.protocol_error,
            "finish_reason": turn.finish_reason,
            "feedback": turn.action_feedback,
            "valid": turn.action_valid,
            "page_type": turn.page_type,
            "observation": turn.observation,
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
        }
        for turn in trace.turns
    ]
    provenance = trace.provenance
    return {
        "summary": asdict(summarize_trace(index, line, trace, titles)),
        "task_instruction": trace.task_instruction,
        "model_id": provenance.get("model_id"),
        "checkpoint_id": provenance.get("checkpoint_id"),
        "seed": (provenance.get("seeds") or {}).get("episode_seed"),
        "skills": _skills(trace, titles),
        "turns": turns,
        "tokens": trace.tokens,
        "final": {
            "status": trace.status,
            "termination_reason": trace.termination_reason,
            "reward": trace.reward.to_dict() if trace.reward is not None else None,
            "reward_detail": trace.reward_detail,
            "purchase": trace.purchase,
            "error": trace.error,
            "duration_ms": trace.duration_ms,
            "private_goal": trace.private_goal,
        },
    }


def read_episode(path: str | Path, index: int) -> dict[str, Any]:
    """The :func:`episode_view` of the ``index``-th episode of a trace file; ``IndexError`` past its end."""
    if index < 0:
        raise IndexError(f"episode index must be >= 0, got {index}")
    count = 0
    for position, (line, trace, titles) in enumerate(trace_records(Path(path))):
        if position == index:
            return episode_view(index, line, trace, titles)
        count = position + 1
    raise IndexError(f"{path}: has no episode {index} (it holds {count})")
