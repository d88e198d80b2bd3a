"""Replaying a recorded trace in the store, the compact trace an analyst reads, and the gold audit.

Reference: docs/method.md §4.1 (the analyst's input: a compacted trace with redacted IDs, per
step the page type, action, feedback and product title/brand/category/price, options, missing
option axes and selected price; the outcome; and ``privileged_gold_audit`` {goal, chosen_purchase}).

A trace records each turn's raw output, action, feedback and rendered observation. The store is
deterministic, so replaying the trace's actions in a fresh :class:`~intraskill.shop.engine.Session`
recovers every structured page state; :func:`replay_trace` checks each replayed observation against
the recorded one and raises :class:`TraceReplayError` when they differ (a different store or bank).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from intraskill.agent.traces import EpisodeTrace
from intraskill.shop.engine import ShopEngine
from intraskill.trace2skill.firewall import GoldLookup, redact_trace_text

DEFAULT_MAX_PRODUCTS = 8
"""Results shown per compact results step (the opened product is always kept)."""
_PRODUCT_KEYS = ("title", "brand", "category", "price")


class TraceReplayError(RuntimeError):
    """The trace cannot be replayed in this store (the message names the turn)."""


@dataclass(frozen=True)
class ReplayStep:
    """One environment action of a replayed trace: the page it was taken on and what followed."""

    index: int
    turn: int
    action: str
    state: dict[str, Any]
    response: dict[str, Any]

    @property
    def valid(self) -> bool:
        return bool((self.response.get("observation_state") or {}).get("last_action", {}).get("valid"))


@dataclass(frozen=True)
class ReplayedTrace:
    """The replayed environment steps of a trace, its protocol-error turns and the start payload."""

    trace: EpisodeTrace
    reset: dict[str, Any]
    steps: tuple[ReplayStep, ...]
    protocol_error_turns: tuple[int, ...]

    @property
    def states(self) -> list[dict[str, Any]]:
        """Every page state seen: the reset page, then each step's resulting page."""
        return [self.reset["observation_state"]] + [s.response["observation_state"] for s in self.steps]

    def product_ids(self) -> list[str]:
        """Every product ID seen on a page, in first-seen order."""
        ids: list[str] = []
        for state in self.states:
            ids += [p["asin"] for p in state.get("products") or []]
            if state.get("product"):
                ids.append(state["product"]["asin"])
        return list(dict.fromkeys(ids))


def replay_trace(engine: ShopEngine, trace: EpisodeTrace) -> ReplayedTrace:
    """Replay ``trace``'s environment actions in a fresh session of the same task.

    Raises
    ------
    TraceReplayError
        When a replayed observation differs from the recorded one.
    """
    session = engine.new_session(f"replay-{trace.episode_id}")
    reset = session.reset(trace.task_id)
    steps: list[ReplayStep] = []
    errors: list[int] = []
    for turn in trace.turns:
        if turn.action is None:
            errors.append(turn.turn)
            continue
        if session.done:
            raise TraceReplayError(f"turn {turn.turn}: the replayed episode already ended")
        state = session.state
        response = session.step(turn.action)
        if turn.observation is not None and response.get("observation") != turn.observation:
            raise TraceReplayError(f"turn {turn.turn}: the replayed observation differs from the trace "
                                   f"(another store version or catalogue?)")
        steps.append(ReplayStep(len(steps), turn.turn, turn.action, state, response))
    return ReplayedTrace(trace, reset, tuple(steps), tuple(errors))


def _product_view(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": summary.get("asin"), **{k: summary.get(k) for k in _PRODUCT_KEYS}}


def _page_view(state: Mapping[str, Any], action: str | None, max_products: int) -> dict[str, Any]:
    page = state.get("page_type")
    view: dict[str, Any] = {"page_type": page}
    if page == "search_results":
        opened = action[6:-1] if action and action.startswith("click[") else None
        shown = [p for i, p in enumerate(state.get("products") or [])
                 if i < max_products or p["asin"] == opened]
        view.update({"search_text": state.get("search_text"), "page": state.get("page"),
                     "total_pages": state.get("total_pages"),
                     "products": [{"rank": p.get("rank"), **_product_view(p)} for p in shown]})
    elif page == "product_detail":
        view.update({"product": _product_view(state["product"]),
                     "options": state.get("available_options"),
                     "selected_options": state.get("selected_options"),
                     "missing_option_axes": state.get("missing_option_axes"),
                     "selected_price": state.get("selected_price")})
    return view


def public_purchase(purchase: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The purchase without private goal text (``instruction_text`` dropped)."""
    if purchase is None:
        return None
    return {"id": purchase.get("asin"), "title": purchase.get("name"), "category": purchase.get("category"),
            "price": purchase.get("price"), "options": purchase.get("options")}


def compact_trace(replayed: ReplayedTrace, max_products: int = DEFAULT_MAX_PRODUCTS) -> dict[str, Any]:
    """The analyst's view of the failed trajectory: steps, protocol errors and outcome (IDs raw).

    Pass the result through :func:`redact` before showing it to a model.
    """
    trace = replayed.trace
    turns = {turn.turn: turn for turn in trace.turns}
    steps = []
    for step in replayed.steps:
        feedback = step.response["observation_state"].get("last_action") or {}
        steps.append({"step": step.index, "turn": step.turn, **_page_view(step.state, step.action, max_products),
                      "action": step.action, "valid": feedback.get("valid"), "feedback": feedback.get("reason"),
                      "reasoning": turns[step.turn].content or None})
    reward_detail = trace.reward_detail or {}
    return {
        "task_instruction": trace.task_instruction,
        "steps": steps,
        "protocol_errors": [{"turn": t, "code": turns[t].protocol_error} for t in replayed.protocol_error_turns],
        "outcome": {"reward": trace.reward.reward if trace.reward is not None else None,
                    "reward_detail": {k: v for k, v in reward_detail.items() if k.startswith("r_")},
                    "termination": trace.termination_reason,
                    "purchase": public_purchase(trace.purchase)},
    }


def privileged_gold_audit(trace: EpisodeTrace) -> dict[str, Any]:
    """{goal, chosen_purchase}: the private goal (never deployable) next to what was bought."""
    goal = trace.private_goal or {}
    keep = ("asin", "name", "category", "attributes", "goal_options", "price_upper", "budget_kind")
    return {"goal": {k: goal.get(k) for k in keep}, "chosen_purchase": public_purchase(trace.purchase)}


def redact(payload: Any, ids: list[str]) -> Any:
    """``payload`` with product IDs, long digit runs and task numbers masked in every string
    (:func:`redact_trace_text`); numbers, keys and structure are kept."""
    if isinstance(payload, str):
        return redact_trace_text(payload, ids)
    if isinstance(payload, Mapping):
        return {key: redact(value, ids) for key, value in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [redact(value, ids) for value in payload]
    return payload


def gold_lookup(replayed: ReplayedTrace) -> GoldLookup:
    """The firewall lookup of one trace: titles and brands seen on its pages, the gold title and options."""
    return GoldLookup.build(replayed.trace.private_goal, replayed.states)
