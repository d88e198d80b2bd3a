"""Run summaries in the release's ``shopsimrl-eval-summary-v2`` schema (docs/method.md §5.6).

Conventions (checked against the released ``eval/*/summary.json``):

* ``steps_mean`` is the mean number of *model turns* per episode (``model_steps / scored``);
* ``protocol_error_rate`` and ``policy_failure_rate`` are per model turn; a policy failure is a
  ``generation_length`` termination (a length cut-off without a tool call);
* ``total_actions`` counts environment actions (turns with a valid tool call) and
  ``invalid_action_rate = invalid_actions / total_actions``;
* ``reward_sem`` is the sample standard deviation (ddof 1) over ``sqrt(n)``.

Episodes are keyed by ``episode_id``; an episode's last completed record counts, failed attempts
only count when no attempt completed. Two completed records of one episode are refused.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from intraskill.agent.traces import EpisodeStatus, EpisodeTrace
from intraskill.evaluate.records import EvalSummary
from intraskill.shop.reward import Reward

REWARD_COMPONENTS = tuple(sorted(Reward.components()))
POLICY_FAILURE = "generation_length"


def utc_now() -> str:
    """The current UTC time in ISO 8601 (the release's ``created_at`` format)."""
    return datetime.now(timezone.utc).isoformat()


class DuplicateEpisodeError(ValueError):
    """An episode has more than one completed record (a run must never re-run a completed episode)."""


def final_records(traces: Iterable[EpisodeTrace]) -> tuple[dict[str, EpisodeTrace], dict[str, EpisodeTrace]]:
    """``(completed, failed)``: per episode, its completed record, or its last failed attempt.

    Raises :class:`DuplicateEpisodeError` naming episodes with two completed records.
    """
    completed: dict[str, EpisodeTrace] = {}
    failed: dict[str, EpisodeTrace] = {}
    duplicates: list[str] = []
    for trace in traces:
        if trace.status == EpisodeStatus.COMPLETED.value:
            if trace.episode_id in completed:
                duplicates.append(trace.episode_id)
            completed[trace.episode_id] = trace
        else:
            failed[trace.episode_id] = trace
    if duplicates:
        raise DuplicateEpisodeError(
            f"episodes with more than one completed record: {sorted(set(duplicates))}"
        )
    return completed, {k: v for k, v in failed.items() if k not in completed}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _sem(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(variance / len(values))


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def episode_metrics(trace: EpisodeTrace) -> dict[str, float]:
    """Per-episode values the paired comparison aggregates (reward, every ``r_*``, behaviour, cost).

    ``steps`` is model turns (the release's convention), ``actions`` environment actions; the rates
    are per episode (``protocol_errors / steps``, ``invalid_actions / actions``, 0 without actions).
    """
    counts, tokens = trace.counts, trace.tokens
    turns, actions = counts.get("model_steps", 0), counts.get("steps", 0)
    failures = int(trace.termination_reason == POLICY_FAILURE)
    values: dict[str, float] = trace.reward.to_dict() if trace.reward is not None else {}
    values.update({
        "steps": float(turns),
        "actions": float(actions),
        "protocol_error_rate": counts.get("protocol_errors", 0) / turns if turns else 0.0,
        "policy_failure_rate": failures / turns if turns else 0.0,
        "invalid_action_rate": counts.get("invalid_actions", 0) / actions if actions else 0.0,
        "prompt_tokens": float(tokens.get("prompt", 0)),
        "completion_tokens": float(tokens.get("completion", 0)),
        "total_tokens": float(tokens.get("prompt", 0) + tokens.get("completion", 0)),
        "duration_ms": float(trace.duration_ms),
    })
    return values


def _behavior(scored: Sequence[EpisodeTrace]) -> dict[str, Any]:
    turns = sum(t.counts.get("model_steps", 0) for t in scored)
    protocol_errors = sum(t.counts.get("protocol_errors", 0) for t in scored)
    invalid = sum(t.counts.get("invalid_actions", 0) for t in scored)
    actions = sum(t.counts.get("steps", 0) for t in scored)
    failures = sum(t.termination_reason == POLICY_FAILURE for t in scored)
    reasons = Counter(str(t.termination_reason) for t in scored)
    return {
        "steps_mean": _mean([t.counts.get("model_steps", 0) for t in scored]),
        "model_steps": turns,
        "protocol_errors": protocol_errors,
        "protocol_error_rate": _rate(protocol_errors, turns),
        "policy_failures": failures,
        "policy_failure_rate": _rate(failures, turns),
        "invalid_action_rate": _rate(invalid, actions),
        "invalid_actions": invalid,
        "total_actions": actions,
        "termination_reasons": dict(sorted(reasons.items())),
    }


def _cost(scored: Sequence[EpisodeTrace]) -> dict[str, Any]:
    prompt = sum(t.tokens.get("prompt", 0) for t in scored)
    completion = sum(t.tokens.get("completion", 0) for t in scored)
    return {
        "duration_ms_mean": _mean([float(t.duration_ms) for t in scored]),
        "tokens": {
            "completion_tokens": completion, "prompt_tokens": prompt, "total_tokens": prompt + completion,
        },
    }


def _errors(failed: Mapping[str, EpisodeTrace]) -> dict[str, int]:
    """Episodes left without a completed attempt, counted by error type (``"Type: message"``)."""
    kinds = Counter((t.error or "unknown").split(":", 1)[0] for t in failed.values())
    return dict(sorted(kinds.items()))


def summarize(traces: Iterable[EpisodeTrace], requested: int) -> EvalSummary:
    """The ``shopsimrl-eval-summary-v2`` summary of a run's trace records.

    Parameters
    ----------
    traces : every record of the run (failed attempts included), in file order.
    requested : episodes the plan asked for (``coverage = scored / requested``).

    Returns
    -------
    :class:`~intraskill.evaluate.records.EvalSummary` (``counts, primary, reward_components, behavior, cost,
    errors``).
    """
    if requested < 0:
        raise ValueError(f"requested: must be >= 0, got {requested}")
    completed, failed = final_records(traces)
    scored = [t for t in completed.values() if t.reward is not None]
    rewards = [t.reward.reward for t in scored]
    components = {key: _mean([t.reward.metric(key) for t in scored]) for key in REWARD_COMPONENTS}
    return EvalSummary.from_dict({
        "created_at": utc_now(),
        "counts": {
            "requested": requested,
            "trace_files": len(completed) + len(failed),
            "completed": len(completed),
            "failed": len(failed),
            "scored": len(scored),
            "coverage": len(scored) / requested if requested else 0.0,
        },
        "primary": {
            "reward_mean": _mean(rewards),
            "reward_sem": _sem(rewards),
            "success_rate": components["r_success"],
        },
        "reward_components": components,
        "behavior": _behavior(scored),
        "cost": _cost(scored),
        "errors": _errors(failed),
    })


def condition_record(arm: str, summary: EvalSummary) -> dict[str, Any]:
    """One flat row of a run summary: ``arm``, ``n`` (scored), reward, success, mean steps, errors."""
    counts, primary, behavior = summary.counts, summary.primary, summary.behavior
    return {"arm": arm, "n": counts.scored, "reward_mean": primary.reward_mean, "success_rate": primary.success_rate,
            "steps_mean": behavior.steps_mean, "protocol_error_rate": behavior.protocol_error_rate,
            "coverage": counts.coverage}


def summary_text(summary: EvalSummary, run_dir: str) -> str:
    """A run summary as a few readable lines: episodes, success, strict reward, steps, protocol-error and
    invalid-action rates (percentages with one decimal, means with three; ``—`` where undefined, e.g. the
    standard error of one episode)."""
    def number(value: float | None, spec: str, scale: float = 1.0) -> str:
        return "—" if value is None else format(scale * value, spec)

    counts, primary, behavior = summary.counts, summary.primary, summary.behavior
    failed = f", {counts.failed} failed" if counts.failed else ""
    return "\n".join([
        f"run: {run_dir}",
        f"episodes: {counts.scored} scored of {counts.requested} requested "
        f"({number(counts.coverage, '.1f', 100)} %){failed}",
        f"success: {number(primary.success_rate, '.1f', 100)} %   "
        f"strict reward: {number(primary.reward_mean, '.3f')} (± {number(primary.reward_sem, '.3f')} s.e.)   "
        f"steps: {number(behavior.steps_mean, '.2f')} per episode",
        f"protocol errors: {number(behavior.protocol_error_rate, '.1f', 100)} % of {behavior.model_steps} model "
        f"turns   invalid actions: {number(behavior.invalid_action_rate, '.1f', 100)} % of "
        f"{behavior.total_actions} actions",
    ])
