"""The Success Analyst of the cold start: a successful train trajectory → at most two lesson cards.

Reference: docs/method.md §4.1 (the roles table: one non-interactive call over the compacted trace and its
outcome, ``current_skill: null``; ``submit_success_cards`` with {mechanism, applicable_when, observed_evidence,
decisive_behavior, generalizable_lesson, related_chunk_ids, confidence ∈ [0, 1]}; an empty list is valid) and
§1.5 (≤ 2 cards per successful trajectory).

Two analysts share :class:`SuccessAnalysis`: :class:`RuleSuccessAnalyst` (offline) replays the trace and reads
which public behaviours of :data:`~intraskill.trace2skill.mechanisms.MECHANISMS` it shows (see
:func:`observed_behaviours`), the strongest first; :class:`LLMSuccessAnalyst` asks a model. Either way every card
is screened by the gold firewall over its deployable fields (titles and brands the trace showed, the gold's);
a card with a finding is kept as evidence but is not eligible for consolidation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from intraskill.agent.traces import EpisodeTrace
from intraskill.chat.base import Policy
from intraskill.shop.budget import parse_budget
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import (
    NEXT_PAGE,
    PERSONA_OPTION_KEYS,
    instruction_words,
    persona_preferences,
)
from intraskill.trace2skill.compact import ReplayedTrace, compact_trace, gold_lookup, redact, replay_trace
from intraskill.trace2skill.firewall import FirewallFinding, GoldLookup, scan_payload
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.roles import (
    SUCCESS_ANALYST_PROMPT,
    SUCCESS_CARDS_TOOL,
    RoleConfig,
    RoleFailure,
    call_structured,
)

CHANNEL_SUCCESS = "success"
CHANNEL_FAILURE = "failure"
CHANNELS = (CHANNEL_SUCCESS, CHANNEL_FAILURE)
_DEPLOYABLE = ("mechanism", "applicable_when", "observed_evidence", "decisive_behavior", "generalizable_lesson")


class SuccessCardError(ValueError):
    """A success card (or a ``submit_success_cards`` object) is malformed; the message names the field."""


@dataclass(frozen=True)
class SuccessCard:
    """One lesson of a successful trajectory (``success-<episode_id>-NN``)."""

    card_id: str
    mechanism: str
    applicable_when: str
    observed_evidence: str
    decisive_behavior: str
    generalizable_lesson: str
    related_chunk_ids: tuple[str, ...]
    confidence: float
    firewall_findings: tuple[FirewallFinding, ...] = ()

    def __post_init__(self) -> None:
        for name in ("card_id", *_DEPLOYABLE):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise SuccessCardError(f"{name}: must be a non-empty string")
        object.__setattr__(self, "related_chunk_ids", tuple(self.related_chunk_ids))
        if not all(isinstance(c, str) for c in self.related_chunk_ids):
            raise SuccessCardError("related_chunk_ids: must be a list of strings")
        confidence = self.confidence
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not (
                math.isfinite(confidence) and 0 <= confidence <= 1):
            raise SuccessCardError(f"confidence: must be a number in [0, 1], got {confidence!r}")

    @property
    def eligible_for_consolidation(self) -> bool:
        """A card with no gold-firewall finding."""
        return not self.firewall_findings

    def deployable_view(self) -> dict[str, Any]:
        """What the consolidator sees: the card's gold-free lesson fields."""
        return {name: getattr(self, name) for name in _DEPLOYABLE}

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record.update(related_chunk_ids=list(self.related_chunk_ids),
                      firewall_findings=[f.to_dict() for f in self.firewall_findings],
                      eligible_for_consolidation=self.eligible_for_consolidation)
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SuccessCard":
        values = {k: v for k, v in data.items() if k != "eligible_for_consolidation"}
        values["firewall_findings"] = tuple(FirewallFinding.from_dict(f) for f in data.get("firewall_findings") or [])
        return cls(**values)


def screen_success_card(card: SuccessCard, lookup: GoldLookup) -> SuccessCard:
    """The card with ``firewall_findings`` = the firewall over its deployable fields."""
    return replace(card, firewall_findings=tuple(scan_payload({"success_card": card.deployable_view()}, lookup)))


@dataclass(frozen=True)
class SuccessAnalysis:
    """The Success Analyst's answer for one trajectory: its cards (screened), and for an LLM the reasons of its
    rejected drafts (``exhausted`` when none was valid: no cards then)."""

    episode_id: str
    cards: tuple[SuccessCard, ...]
    rejections: tuple[str, ...] = ()
    exhausted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "cards": [c.to_dict() for c in self.cards],
                "rejections": list(self.rejections), "exhausted": self.exhausted}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SuccessAnalysis":
        return cls(data["episode_id"], tuple(SuccessCard.from_dict(c) for c in data["cards"]),
                   tuple(data.get("rejections") or ()), bool(data.get("exhausted")))


def success_card_id(episode_id: str, index: int) -> str:
    """``success-<episode_id>-NN`` (NN from 01)."""
    return f"success-{episode_id}-{index + 1:02d}"


def parse_success_cards(arguments: Mapping[str, Any], episode_id: str, max_cards: int,
                        known_chunk_ids: Sequence[str] = ()) -> tuple[SuccessCard, ...]:
    """The cards of a ``submit_success_cards`` object (:class:`SuccessCardError` naming the field)."""
    cards = arguments.get("cards")
    if not isinstance(cards, list):
        raise SuccessCardError("cards: expected a list")
    if len(cards) > max_cards:
        raise SuccessCardError(f"cards: {len(cards)} submitted, at most {max_cards} allowed")
    parsed = []
    for index, card in enumerate(cards):
        where = f"cards[{index}]"
        if not isinstance(card, Mapping):
            raise SuccessCardError(f"{where}: expected an object")
        unknown = sorted(set(card) - {*_DEPLOYABLE, "related_chunk_ids", "confidence"})
        if unknown:
            raise SuccessCardError(f"{where}: unknown field(s) {unknown}")
        related = card.get("related_chunk_ids") or []
        stray = [c for c in related if c not in known_chunk_ids] if isinstance(related, list) else related
        if stray:
            raise SuccessCardError(f"{where}.related_chunk_ids: {stray!r} name no current chunk")
        try:
            parsed.append(SuccessCard(success_card_id(episode_id, index), **{k: card.get(k) for k in _DEPLOYABLE},
                                      related_chunk_ids=tuple(related), confidence=card.get("confidence")))
        except SuccessCardError as error:
            raise SuccessCardError(f"{where}.{error}") from None
    return tuple(parsed)


@dataclass(frozen=True)
class Behaviour:
    """A public behaviour a successful trace shows: the mechanism, how fully (``strength`` ∈ (0, 1]) and where."""

    mechanism: str
    strength: float
    evidence: str


def _clicked(action: str) -> str | None:
    return action[6:-1] if action.startswith("click[") else None


def observed_behaviours(replayed: ReplayedTrace) -> list[Behaviour]:
    """The mechanisms a successful trace shows, strongest first (ties: :data:`MECHANISMS` order).

    * ``query_formulation``: its first query carries the profile's brand or material words (share carried);
    * ``paging``: it opened the next results page (1.0);
    * ``candidate_inspection``: it opened more than one product before buying (1.0);
    * ``option_selection``: it clicked the profile's colour or size on the bought product (share of those the
      product offers);
    * ``budget_check``: the instruction states a budget and the selected price was within it (1.0).
    """
    reset = replayed.reset
    prefs = persona_preferences(reset.get("user_persona") or {})
    steps = replayed.steps
    found: list[Behaviour] = []
    profile = {w for key in ("brand", "material") for w in instruction_words(prefs.get(key, ""))}
    searches = [s.action[7:-1] for s in steps if s.action.startswith("search[") and s.valid]
    if profile and searches:
        carried = profile & set(instruction_words(searches[0]))
        if carried:
            found.append(Behaviour("query_formulation", len(carried) / len(profile),
                                   f"the first query carried {len(carried)} of {len(profile)} profile brand and "
                                   "material words"))
    pages = sum(_clicked(s.action) == NEXT_PAGE and s.valid for s in steps)
    if pages:
        found.append(Behaviour("paging", 1.0, f"it opened the next results page {pages} time(s) before buying"))
    opened = {s.response["observation_state"]["product"]["asin"] for s in steps
              if s.valid and s.state.get("page_type") == "search_results"
              and (s.response.get("observation_state") or {}).get("product")}
    if len(opened) > 1:
        found.append(Behaviour("candidate_inspection", 1.0,
                               f"it opened {len(opened)} products and went back before buying the last"))
    purchase = replayed.trace.purchase or {}
    chosen = {str(k).casefold(): str(v).casefold() for k, v in (purchase.get("options") or {}).items()}
    wanted = {k: prefs[k].casefold() for k in PERSONA_OPTION_KEYS if prefs.get(k)}
    offered = [k for k in wanted if k in chosen]
    if offered:
        matched = [k for k in offered if chosen[k] == wanted[k]]
        if matched:
            found.append(Behaviour("option_selection", len(matched) / len(offered),
                                   f"it selected the profile's value on {len(matched)} of {len(offered)} "
                                   "profile option axes"))
    budget = parse_budget(str(reset.get("task_instruction") or replayed.trace.task_instruction or "")).price_upper
    price = purchase.get("price")
    if budget is not None and isinstance(price, (int, float)) and price <= budget:
        found.append(Behaviour("budget_check", 1.0, "the selected price was within the stated budget at purchase"))
    order = list(MECHANISMS)
    return sorted(found, key=lambda b: (-b.strength, order.index(b.mechanism)))


def behaviour_card(behaviour: Behaviour, card_id: str) -> SuccessCard:
    """The success card of a behaviour: the mechanism's chunk text as the lesson, its strength as confidence."""
    mechanism = MECHANISMS[behaviour.mechanism]
    chunk = mechanism.chunk
    return SuccessCard(card_id, mechanism.key, chunk.applicable_when, behaviour.evidence,
                       "; ".join(chunk.procedure), f"{chunk.title}: {chunk.verification}", (),
                       round(behaviour.strength, 6))


class RuleSuccessAnalyst:
    """The offline Success Analyst: the trace's strongest public behaviours (:func:`observed_behaviours`)."""

    name = "rule"

    def __init__(self, engine: ShopEngine) -> None:
        self.engine = engine

    def analyze(self, trace: EpisodeTrace, max_cards: int) -> SuccessAnalysis:
        replayed = replay_trace(self.engine, trace)
        behaviours = observed_behaviours(replayed)[:max_cards]
        lookup = gold_lookup(replayed)
        cards = tuple(screen_success_card(behaviour_card(b, success_card_id(trace.episode_id, i)), lookup)
                      for i, b in enumerate(behaviours))
        return SuccessAnalysis(trace.episode_id, cards)


class LLMSuccessAnalyst:
    """The Success Analyst over any OpenAI-compatible model (one non-interactive call, repair retries)."""

    name = "llm"

    def __init__(self, policy: Policy, engine: ShopEngine, config: RoleConfig | None = None) -> None:
        self.policy = policy
        self.engine = engine
        self.config = config or RoleConfig()

    def analyze(self, trace: EpisodeTrace, max_cards: int) -> SuccessAnalysis:
        replayed = replay_trace(self.engine, trace)
        compact = compact_trace(replayed)
        payload = {"max_cards": max_cards, "current_skill": None,
                   "trace": redact({k: v for k, v in compact.items() if k != "outcome"}, replayed.product_ids()),
                   "outcome": redact(compact["outcome"], replayed.product_ids())}
        messages = [{"role": "system", "content": SUCCESS_ANALYST_PROMPT},
                    {"role": "user", "content": json.dumps(payload, ensure_ascii=False, sort_keys=True)}]
        try:
            result = call_structured(self.policy, f"success:{trace.episode_id}", messages, SUCCESS_CARDS_TOOL,
                                     lambda args: parse_success_cards(args, trace.episode_id, max_cards),
                                     self.config)
        except RoleFailure as failure:
            return SuccessAnalysis(trace.episode_id, (), tuple(a["reason"] for a in failure.attempts), True)
        lookup = gold_lookup(replayed)
        cards = tuple(screen_success_card(card, lookup) for card in result.value)
        return SuccessAnalysis(trace.episode_id, cards, tuple(a["reason"] for a in result.attempts))
