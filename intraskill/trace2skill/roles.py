"""LLM roles of Trace2Skill: submit-tool schemas, prompts, and structured calls with repair retries.

Reference: docs/method.md §4 and §4.1. Every role answers with exactly one structured tool
call. A reply that fails validation triggers a *repair* retry whose message carries only the latest
invalid draft and the exact error; a stage allows ``ANALYST_ATTEMPTS`` = 3 attempts, the online
compiler ``COMPILER_ATTEMPTS`` = 5. A real model's messy reply is repaired where that is unambiguous
(the first JSON object of a reply without a tool call, or of malformed call arguments, optionally
wrapped as ``{"name", "arguments"}``) and otherwise rejected with one of ``REJECTION_REASONS``. Decoding defaults: temperature 0.6, top_p 0.95, max_tokens 4096
for the analyst and 8192 for the compiler, base seed 20260831.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from intraskill.chat.base import ChatRequest, Generation, Policy
from intraskill.hashing import seed32
from intraskill.trace2skill.firewall import GoldLeakError

T = TypeVar("T")

ANALYST_ATTEMPTS = 3
COMPILER_ATTEMPTS = 5
MAX_FAILURE_STEPS = 20
"""Failure-analyst LLM turns; the last is reserved for submission (≤ 19 live actions)."""
ROLE_SEED = 20260831

SUBMIT_FAILURE_CARD = "submit_failure_card"
SUBMIT_CLUSTERS = "submit_clusters"
SUBMIT_ONLINE_CANDIDATES = "submit_online_candidates"
SUBMIT_SUCCESS_CARDS = "submit_success_cards"
SUBMIT_INITIAL_SKILL = "submit_initial_skill"

REJECT_NO_TOOL_CALL = "no_tool_call"
REJECT_TOOL_CALL_COUNT = "several_tool_calls"
REJECT_WRONG_TOOL = "wrong_tool"
REJECT_INVALID_JSON = "invalid_json"
REJECT_INVALID_FIELDS = "invalid_fields"
REJECT_GOLD_LEAK = "gold_leak"
REJECTION_REASONS = (REJECT_NO_TOOL_CALL, REJECT_TOOL_CALL_COUNT, REJECT_WRONG_TOOL, REJECT_INVALID_JSON,
                     REJECT_INVALID_FIELDS, REJECT_GOLD_LEAK)
REPAIR_JSON_FROM_TEXT = "json_from_text"
"""A reply without a tool call whose first JSON object was taken as the submission."""
REPAIR_ARGUMENTS_JSON = "json_from_arguments"
"""Malformed call arguments whose first JSON object was taken as the submission."""


def _string(description: str = "") -> dict[str, Any]:
    return {"type": "string", "description": description} if description else {"type": "string"}


def _strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


_AUDIT_FIELDS = ("gold_asin", "chosen_asin", "failure_surface", "earliest_divergence", "oracle_comparison",
                 "replay_evidence", "minimal_repair", "repair_validation_result")
_ABSTRACTION_FIELDS = ("failure_mechanism", "applicable_when", "observable_trigger", "corrective_procedure",
                       "verification_step")
_CHUNK_FIELDS = {"applicable_when": _string(), "procedure": _strings(), "verification": _string(),
                 "common_failure": _string()}

FAILURE_CARD_TOOL = _tool(SUBMIT_FAILURE_CARD, "Submit the failure card of this failed trajectory.", _object({
    "status": {"type": "string", "enum": ["PROPOSE_ADD", "PROPOSE_REWRITE", "NO_PROPOSAL"]},
    "privileged_audit": _object({name: _string() for name in _AUDIT_FIELDS}),
    "deployable_abstraction": _object({
        **{name: _string() for name in _ABSTRACTION_FIELDS},
        "target_chunk_id": {"type": ["string", "null"]},
        "proposed_content": _string("The chunk Markdown; no product names, brands, IDs or gold options."),
    }),
}))
CLUSTERS_TOOL = _tool(SUBMIT_CLUSTERS, "Submit the clusters of this batch of cards.", _object({
    "clusters": {"type": "array", "items": _object({
        "workflow_stage": _string(), "mechanism": _string(), **_CHUNK_FIELDS,
        "evidence_card_ids": _strings()})},
    "evidence_only_card_ids": _strings(),
}))
ONLINE_CANDIDATES_TOOL = _tool(SUBMIT_ONLINE_CANDIDATES, "Submit this round's ADD/REWRITE candidates.", _object({
    "candidates": {"type": "array", "items": _object({
        "operation": {"type": "string", "enum": ["ADD", "REWRITE"]},
        "target_chunk_id": {"type": ["string", "null"]},
        "title": _string(), "failure_mechanism": _string(), **_CHUNK_FIELDS,
        "evidence_card_ids": _strings()})},
    "evidence_only_card_ids": _strings(),
}))

SUCCESS_CARDS_TOOL = _tool(SUBMIT_SUCCESS_CARDS, "Submit the lessons of this successful trajectory.", _object({
    "cards": {"type": "array", "items": _object({
        "mechanism": _string(), "applicable_when": _string(), "observed_evidence": _string(),
        "decisive_behavior": _string(), "generalizable_lesson": _string(), "related_chunk_ids": _strings(),
        "confidence": {"type": "number", "minimum": 0, "maximum": 1}})},
}))
INITIAL_SKILL_TOOL = _tool(SUBMIT_INITIAL_SKILL, "Submit the initial skill: its independently maskable chunks.", _object({
    "skill_title": _string(),
    "chunks": {"type": "array", "items": _object({
        "title": _string(), "workflow_stage": _string(), **_CHUNK_FIELDS, "evidence_cluster_ids": _strings()})},
    "evidence_only_cluster_ids": _strings(),
    "conflicts_resolved": _strings(),
}))

WORKFLOW_SKELETON = ("query formulation → explicit constraints → persona-grounded preferences → candidate "
                     "inspection and comparison → variant and price verification → backtracking and purchase "
                     "termination")
FAILURE_ANALYST_PROMPT = (
    "You are the gold-aware Failure Analyst of a shopping agent. You see a failed trajectory, the private "
    "gold goal and a fresh live session of the same task. Use the live search/click tools to find the "
    "earliest divergence and validate a minimal repair: a purchase ends the current trial, records its "
    "reward and starts a new trial of the same task. Then call submit_failure_card exactly once. Propose "
    "ADD (new chunk) or REWRITE (target an active chunk id) only after a successful counterfactual; "
    "otherwise NO_PROPOSAL. The deployable abstraction must be general: no product titles, brands, IDs, "
    "task numbers or gold option values. Answer every turn with exactly one tool call.")
CONSOLIDATOR_PROMPT = (
    "You are the consolidator. Group the cards' deployable abstractions into at most max_clusters clusters "
    "by mechanism; every card appears exactly once, either in one cluster or in evidence_only_card_ids. "
    "Call submit_clusters exactly once; no product titles, brands, IDs or gold options.")
SUCCESS_ANALYST_PROMPT = (
    "You are the Success Analyst of a shopping agent. You see one successful trajectory and its outcome. Name "
    "at most max_cards decisive behaviours that made it succeed and would generalize to other tasks (an empty "
    "list is valid). Call submit_success_cards exactly once; no product titles, brands, IDs, task numbers or "
    "option values of this task.")
INITIAL_COMPILER_PROMPT = (
    "You are the holistic initial skill compiler. From the cluster summaries, write one shopping skill as at "
    "most validation_dimension_cap chunks that can each be masked on its own: split mechanisms that work "
    "independently, merge steps that only work together. Organize by the workflow skeleton: "
    f"{WORKFLOW_SKELETON}. Do not fill the cap for its own sake. Every cluster appears exactly once, in one "
    "chunk's evidence_cluster_ids or in evidence_only_cluster_ids. Call submit_initial_skill exactly once; no "
    "product titles, brands, IDs or option values.")
ONLINE_COMPILER_PROMPT = (
    "You are the online candidate compiler. From the eligible failure cards, propose at most max_candidates "
    "ADD or REWRITE chunks (REWRITE targets an active chunk id). Organize by the workflow skeleton: "
    f"{WORKFLOW_SKELETON}. Do not fill the cap for its own sake, do not repeat a validated candidate with "
    "the same meaning, and list evidence the active skill already covers in evidence_only_card_ids. Call "
    "submit_online_candidates exactly once; no product titles, brands, IDs or gold options.")


@dataclass(frozen=True)
class RoleConfig:
    """Decoding and retry settings of one role (defaults: the failure analyst)."""

    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 4096
    attempts: int = ANALYST_ATTEMPTS
    seed: int = ROLE_SEED

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RoleConfig.attempts: must be >= 1, got {self.attempts}")
        if self.max_tokens < 1:
            raise ValueError(f"RoleConfig.max_tokens: must be >= 1, got {self.max_tokens}")


COMPILER_ROLE = RoleConfig(max_tokens=8192, attempts=COMPILER_ATTEMPTS)


class RoleFailure(RuntimeError):
    """Every attempt of a stage was invalid; ``attempts`` logs each draft and its error."""

    def __init__(self, message: str, attempts: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass
class StructuredResult(Generic[T]):
    """A validated submission, the log of invalid attempts before it, and the repair it needed."""

    value: T
    attempts: list[dict[str, Any]] = field(default_factory=list)
    repair: str | None = None


class SubmissionError(ValueError):
    """A reply that holds no usable submission; ``reason`` is one of ``REJECTION_REASONS``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def rejection_reason(error: ValueError) -> str:
    """The counted reason of a rejected draft: the submission's, a gold leak, or invalid fields."""
    if isinstance(error, SubmissionError):
        return error.reason
    return REJECT_GOLD_LEAK if isinstance(error, GoldLeakError) else REJECT_INVALID_FIELDS


def rejected(attempt: int, draft: str, error: ValueError) -> dict[str, Any]:
    """One log entry of an invalid attempt."""
    return {"attempt": attempt, "draft": draft, "error": str(error), "reason": rejection_reason(error)}


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object embedded in ``text`` (prose, code fences or trailing text around it).

    Examples
    --------
    >>> first_json_object('Sure! ```json {"a": [1, {"b": 2}]}``` Done. {"c": 3}')
    {'a': [1, {'b': 2}]}
    >>> first_json_object('{"a": 1') is None
    True
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _unwrapped(value: dict[str, Any], tool_name: str) -> dict[str, Any]:
    """``value``, or its ``arguments`` when it is written as a call ``{"name": tool_name, "arguments": …}``."""
    if value.get("name") != tool_name or "arguments" not in value:
        return value
    arguments = value["arguments"]
    if isinstance(arguments, str):
        arguments = first_json_object(arguments)
    if not isinstance(arguments, dict):
        raise SubmissionError(REJECT_INVALID_JSON, f"{tool_name}.arguments: expected a JSON object")
    return arguments


def submission(generation: Generation, tool_name: str) -> tuple[dict[str, Any], str | None]:
    """The argument object of the reply's ``tool_name`` submission and the repair applied (``None``: a clean
    call); :class:`SubmissionError` when the reply holds none."""
    calls = generation.tool_calls
    if not calls:
        found = first_json_object(generation.text)
        if found is None:
            raise SubmissionError(REJECT_NO_TOOL_CALL, f"tool_calls: expected exactly one {tool_name} call, got 0")
        return _unwrapped(found, tool_name), REPAIR_JSON_FROM_TEXT
    if len(calls) != 1:
        raise SubmissionError(REJECT_TOOL_CALL_COUNT,
                              f"tool_calls: expected exactly one {tool_name} call, got {len(calls)}")
    if calls[0].name != tool_name:
        raise SubmissionError(REJECT_WRONG_TOOL, f"tool_calls[0].name: expected {tool_name!r}, got {calls[0].name!r}")
    try:
        arguments = json.loads(calls[0].arguments)
        repair = None
    except (json.JSONDecodeError, TypeError):
        arguments = first_json_object(calls[0].arguments or "")
        repair = REPAIR_ARGUMENTS_JSON
        if arguments is None:
            raise SubmissionError(REJECT_INVALID_JSON, "tool_calls[0].arguments: not valid JSON") from None
    if not isinstance(arguments, dict):
        raise SubmissionError(REJECT_INVALID_JSON, "tool_calls[0].arguments: expected a JSON object")
    return _unwrapped(arguments, tool_name), repair


def draft_text(generation: Generation) -> str:
    """The draft a repair message quotes: the call's arguments, else the raw reply."""
    return generation.tool_calls[0].arguments if len(generation.tool_calls) == 1 else generation.text


def repair_message(draft: str, error: str, tool_name: str) -> dict[str, Any]:
    """The repair prompt: only the latest invalid draft and the exact validation error."""
    return {"role": "user", "content": json.dumps({
        "repair": {"invalid_draft": draft, "error": error,
                   "instruction": f"Fix the error and call {tool_name} again with the complete corrected object."}},
        ensure_ascii=False)}


def call_structured(
    policy: Policy,
    session_id: str,
    messages: list[dict[str, Any]],
    tool: dict[str, Any],
    validate: Callable[[dict[str, Any]], T],
    config: RoleConfig,
    previous: dict[str, Any] | None = None,
) -> StructuredResult[T]:
    """Call a role offering only ``tool`` until ``validate`` accepts the submission.

    Parameters
    ----------
    policy : any OpenAI-compatible policy (or in-process backend).
    session_id : a stable label (seeds are derived from it and the attempt index).
    messages : the role's conversation so far (system + user, or a live-audit transcript).
    tool : the submit tool (the only tool offered).
    validate : parses the argument object; raises ``ValueError`` with the exact error when invalid.
    config : decoding settings and the number of attempts of this stage.
    previous : an already-failed attempt of this stage (a :func:`rejected` entry); it counts as attempt 1.

    Raises
    ------
    RoleFailure
        After ``config.attempts`` invalid attempts.
    """
    name = tool["function"]["name"]
    log: list[dict[str, Any]] = []
    if previous is not None:
        log.append({**previous, "attempt": 0})
    while len(log) < config.attempts:
        attempt = len(log)
        prompt = list(messages)
        if log:
            prompt.append(repair_message(log[-1]["draft"], log[-1]["error"], name))
        request = ChatRequest(session_id=f"{session_id}:submit:{attempt}", messages=prompt, tools=[tool],
                              max_tokens=config.max_tokens, temperature=config.temperature,
                              top_p=config.top_p, seed=seed32(f"{config.seed}:{session_id}:{attempt}"))
        generation = policy.generate([request])[0]
        try:
            arguments, repair = submission(generation, name)
            return StructuredResult(validate(arguments), log, repair)
        except ValueError as error:
            log.append(rejected(attempt, draft_text(generation), error))
    raise RoleFailure(f"{name}: no valid submission in {config.attempts} attempts (last: {log[-1]['error']})", log)


def require_each_once(cited: Sequence[str], expected: Iterable[str], field: str, what: str,
                      error: type[ValueError] = ValueError) -> None:
    """Raise ``error`` naming ``field`` unless ``cited`` names every ``expected`` id exactly once (a submission
    must account for each of its inputs: repeated, missing and unknown ids are listed)."""
    known = set(expected)
    repeated = sorted({c for c in cited if cited.count(c) > 1})
    missing, stray = sorted(known - set(cited)), sorted(set(cited) - known)
    if repeated or missing or stray:
        raise error(f"{field}: every {what} exactly once (repeated {repeated}, missing {missing}, unknown {stray})")
