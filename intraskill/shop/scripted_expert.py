"""A scripted shopping expert with switchable competences, playing through ``engine.Session``.

The expert sees only public information: the task's ``instruction_simple``, its persona and the
``observation_state`` of each page (never the :class:`~intraskill.shop.types.Goal`). It returns
canonical action strings (``search[...]`` / ``click[...]``) and keeps within the 30-action limit.

Competences (each one a boolean of :class:`Competences`, drawn once per episode through
:meth:`ScriptedExpert.decide`, the single override point for a probabilistic, skill-conditioned
variant):

* ``read_persona`` — the query is the instruction without its budget phrase
  (:func:`instruction_core`) + persona brand + persona material; the persona's brand, material,
  colour and size become known constraints.
* ``refine_query`` — when a results page has no plausible candidate left, go back to search once
  with more words (the persona colour and size, or the instruction's content words alone).
* ``inspect_candidates`` — skip results whose title lacks a known constraint word; on a product page
  check title/attributes and that the persona colour/size is offered, else ``< prev`` and try the next.
* ``page_on`` — click ``next >`` when the page has no plausible candidate left.
* ``choose_options`` — select ``axis=value`` matching the persona colour/size; without it the first
  listed value of each axis.
* ``check_budget`` — parse the budget of ``instruction_simple`` with ``parse_budget`` (approximate
  budgets already carry the ×1.1 tolerance) and compare the resolved ``selected_price``; when over,
  try another variant (if options were not fixed by the persona) or go back to the next product.

A "plausible" result has every known constraint word in its title or key attributes.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from intraskill.shop.budget import parse_budget
from intraskill.shop.engine import ShopEngine
from intraskill.shop.recall import gold_recall
from intraskill.shop.types import Task

MAX_ACTIONS = 30
MAX_PAGE_TURNS = 3
MAX_REFINEMENTS = 1
FINISH_RESERVE = 4
"""Actions kept back to finish a purchase (open, two options, buy) once the budget runs low."""
BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE, BUY_NOW = "back to search", "< prev", "next >", "buy now"
PERSONA_OPTION_KEYS = ("color", "size")
_STOPWORDS = frozenset("a an the some i me my need want looking for please with and of to in on new".split())
_BUDGET_CUE_RE = re.compile(
    r"\b(?:under|below|around|about|approximately|roughly|within|up to|at most|less than|no more than|"
    r"not more than|max(?:imum)?)\b\s*\$?\s*\d.*$|\$?\d+(?:\.\d+)?\s*(?:dollars?|usd|元|块).*$",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_ACTION_RE = re.compile(r"^(search|click)\[(.*)\]$", re.DOTALL)


@dataclass(frozen=True)
class Competences:
    """Which competences the expert uses (all on by default)."""

    read_persona: bool = True
    refine_query: bool = True
    inspect_candidates: bool = True
    page_on: bool = True
    choose_options: bool = True
    check_budget: bool = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def without(self, name: str) -> "Competences":
        """A copy with competence ``name`` switched off."""
        if name not in self.names():
            raise ValueError(f"competence must be one of {self.names()}, got {name!r}")
        return Competences(**{**asdict(self), name: False})


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD_RE.findall(str(text))]


def instruction_core(instruction: str) -> str:
    """The instruction with its budget phrase cut off (the search ignores prices).

    >>> instruction_core("a foldable cutting board under 30 dollars")
    'a foldable cutting board'
    """
    return _BUDGET_CUE_RE.sub("", instruction).strip()


def instruction_words(instruction: str) -> list[str]:
    """Content words of a short instruction: the budget phrase and stop words removed.

    >>> instruction_words("a foldable cutting board under 30 dollars")
    ['foldable', 'cutting', 'board']
    """
    return [w for w in _words(instruction_core(instruction)) if w not in _STOPWORDS]


def persona_preferences(persona: dict[str, Any]) -> dict[str, str]:
    """The persona's ``preferences`` block as strings (brand, material, color, size, …)."""
    prefs = persona.get("preferences")
    if not isinstance(prefs, dict):
        return {}
    return {str(k): str(v) for k, v in prefs.items() if isinstance(v, (str, int, float))}


@dataclass
class _Episode:
    """What the expert remembers within one episode."""

    task: Task
    active: dict[str, bool]
    required: list[str]
    options: dict[str, str]
    budget: float | None
    actions: int = 0
    searches: int = 0
    refinements: int = 0
    page_turns: int = 0
    rejected: set[str] = field(default_factory=set)
    tried: dict[str, set[str]] = field(default_factory=dict)


class ScriptedExpert:
    """Rule-based shopper; deterministic given ``competences`` and ``rng``.

    Parameters
    ----------
    competences : which competences are available.
    rng : the random source of :meth:`decide` overrides (the base expert draws nothing).
    max_actions : the environment's action limit (30, single_turn).
    """

    def __init__(self, competences: Competences | None = None, rng: random.Random | None = None,
                 max_actions: int = MAX_ACTIONS) -> None:
        self.competences = competences or Competences()
        self.rng = rng or random.Random(0)
        self.max_actions = max_actions
        self._episode: _Episode | None = None

    # --- the override point --------------------------------------------------------------------
    def decide(self, competence: str, task: Task) -> bool:
        """Whether ``competence`` is used in this episode (drawn once per episode, in a fixed order)."""
        return bool(getattr(self.competences, competence))

    # --- episode -------------------------------------------------------------------------------
    def start(self, task: Task) -> None:
        """Begin a new episode of ``task`` (called automatically by :meth:`act` on a reset page)."""
        active = {name: self.decide(name, task) for name in Competences.names()}
        prefs = persona_preferences(task.user_persona) if active["read_persona"] else {}
        required = instruction_words(task.instruction_simple)
        required += [w for key in ("brand", "material") if prefs.get(key) for w in _words(prefs[key])]
        options = {k: prefs[k].casefold() for k in PERSONA_OPTION_KEYS if prefs.get(k)}
        budget = parse_budget(task.instruction_simple).price_upper if active["check_budget"] else None
        self._episode = _Episode(task=task, active=active, required=list(dict.fromkeys(required)),
                                 options=options, budget=budget)

    @property
    def used(self) -> tuple[str, ...]:
        """The competences the current episode uses (after :meth:`decide`), in declaration order."""
        if self._episode is None:
            return ()
        return tuple(name for name, on in self._episode.active.items() if on)

    def first_query(self, task: Task) -> str:
        """Start an episode of ``task`` and return the query its first search would send."""
        self.start(task)
        assert self._episode is not None
        return self.query(self._episode)

    def act(self, task: Task, state: dict[str, Any]) -> str:
        """The next canonical action for ``task`` on the page ``state`` (an ``observation_state``)."""
        last = (state.get("last_action") or {}).get("action")
        if self._episode is None or self._episode.task.task_uid != task.task_uid or last == "reset":
            self.start(task)
        episode = self._episode
        assert episode is not None
        page = state.get("page_type")
        if page == "search_home":
            action = f"search[{self.query(episode)}]"
            episode.searches += 1
        elif page == "search_results":
            action = self._on_results(episode, state)
        elif page == "product_detail":
            action = self._on_product(episode, state)
        else:
            raise ValueError(f"no action on page_type {page!r} (the episode has ended)")
        episode.actions += 1
        return action

    def query(self, episode: _Episode) -> str:
        """The search text: the instruction without its budget phrase (+ persona brand and material);
        a refinement adds the persona colour and size, or without a persona keeps only the
        instruction's content words."""
        task, prefs = episode.task, persona_preferences(episode.task.user_persona)
        use_persona = episode.active["read_persona"]
        extra = [prefs[k] for k in ("brand", "material") if use_persona and prefs.get(k)]
        core = instruction_core(task.instruction_simple)
        if episode.searches == 0:
            return " ".join([core, *extra])
        if use_persona:
            return " ".join([core, *extra, *episode.options.values()])
        return " ".join(instruction_words(task.instruction_simple))

    # --- pages ---------------------------------------------------------------------------------
    def _left(self, episode: _Episode) -> int:
        return self.max_actions - episode.actions

    def _plausible(self, episode: _Episode, product: dict[str, Any]) -> bool:
        text = set(_words(product.get("title", "")))
        for attribute in product.get("key_attributes") or []:
            text.update(_words(attribute))
        text.update(_words(product.get("brand", "")))
        return all(word in text for word in episode.required)

    def _on_results(self, episode: _Episode, state: dict[str, Any]) -> str:
        active, actions = episode.active, state.get("actions") or []
        fresh = [p for p in state.get("products") or [] if p["asin"] not in episode.rejected]
        plausible = [p for p in fresh if self._plausible(episode, p)]
        if plausible or self._left(episode) <= FINISH_RESERVE:
            pool = plausible if (plausible and active["inspect_candidates"]) else fresh
            if pool:
                return f"click[{pool[0]['asin']}]"
        if active["page_on"] and NEXT_PAGE in actions and episode.page_turns < MAX_PAGE_TURNS:
            episode.page_turns += 1
            return f"click[{NEXT_PAGE}]"
        if active["refine_query"] and episode.refinements < MAX_REFINEMENTS:
            episode.refinements += 1
            return f"click[{BACK_TO_SEARCH}]"
        if fresh:
            return f"click[{fresh[0]['asin']}]"
        products = state.get("products") or []
        return f"click[{products[0]['asin']}]" if products else f"click[{BACK_TO_SEARCH}]"

    def _mismatch(self, episode: _Episode, state: dict[str, Any]) -> bool:
        """Title/attributes lack a known word, or a persona option is not offered on its axis."""
        if not self._plausible(episode, state.get("product") or {}):
            return True
        available = {axis.casefold(): [v.casefold() for v in values]
                     for axis, values in (state.get("available_options") or {}).items()}
        return any(axis in available and value not in available[axis]
                   for axis, value in episode.options.items())

    def _choose(self, episode: _Episode, axis: str, values: list[str]) -> str:
        if episode.active["choose_options"]:
            wanted = episode.options.get(axis.casefold())
            matches = [v for v in values if v.casefold() == wanted] if wanted else []
            if not matches:
                matches = [v for v in values if v.casefold() in episode.options.values()]
            if matches:
                return matches[0]
        return values[0]

    def _reject(self, episode: _Episode, asin: str) -> str:
        episode.rejected.add(asin)
        return f"click[{PREV_PAGE}]"

    def _on_product(self, episode: _Episode, state: dict[str, Any]) -> str:
        active, asin = episode.active, (state.get("product") or {}).get("asin", "")
        finishing = self._left(episode) <= FINISH_RESERVE - 1
        if active["inspect_candidates"] and not finishing and self._mismatch(episode, state):
            return self._reject(episode, asin)
        available = state.get("available_options") or {}
        missing = state.get("missing_option_axes") or []
        if missing:
            axis = missing[0]
            return f"click[{axis}={self._choose(episode, axis, list(available[axis]))}]"
        price = state.get("selected_price")
        if episode.budget is not None and not finishing and (price is None or price > episode.budget):
            return self._switch_variant(episode, state, asin)
        return f"click[{BUY_NOW}]"

    def _switch_variant(self, episode: _Episode, state: dict[str, Any], asin: str) -> str:
        """Over budget: try an untried value on an axis the persona does not fix, else leave."""
        selected = state.get("selected_options") or {}
        tried = episode.tried.setdefault(asin, {f"{a}={v}" for a, v in selected.items()})
        persona_fixed = episode.active["choose_options"]
        for axis, values in (state.get("available_options") or {}).items():
            if persona_fixed and axis.casefold() in episode.options:
                continue
            for value in values:
                label = f"{axis}={value}"
                if label not in tried and label in (state.get("actions") or []):
                    tried.add(label)
                    return f"click[{label}]"
        return self._reject(episode, asin)

    # --- tools ---------------------------------------------------------------------------------
    @staticmethod
    def tool_call(action: str) -> tuple[str, dict[str, str]]:
        """The runtime function-tool call of a canonical action: ``("search", {"query": …})`` or
        ``("click", {"value": …})``."""
        match = _ACTION_RE.match(action.strip())
        if not match:
            raise ValueError(f"not a canonical action: {action!r}")
        name, argument = match.group(1), match.group(2).strip()
        return (name, {"query": argument}) if name == "search" else (name, {"value": argument})


def run_expert_episode(session: Any, expert: ScriptedExpert, task: Task,
                       on_step: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Play one episode of ``task`` on an ``engine.Session``; returns the terminal response.

    ``on_step(action, response)`` is called after every step (e.g. to record demonstrations).
    """
    response = session.reset(task.task_id)
    while not response.get("done"):
        action = expert.act(task, response["observation_state"])
        response = session.step(action)
        if on_step is not None:
            on_step(action, response)
    return response


def expert_ablation(store: tuple[Any, Any, Any], split: str = "val",
                    limit: int | None = None) -> dict[str, Any]:
    """Success rate (``r_success``) of the full expert and of the expert with each competence off.

    ``store`` is what :func:`intraskill.shop.build.open_store` returns. Returns
    ``{"split", "tasks", "success": {"all": rate, "without_<name>": rate, …}, "mean_actions": {…}}``.
    """
    catalog, index, _ = store
    engine = ShopEngine(catalog.products, catalog.goals, index)
    task_ids = list(catalog.task_ids(split))[:limit]
    arms = {"all": Competences()} | {f"without_{n}": Competences().without(n) for n in Competences.names()}
    success: dict[str, float] = {}
    mean_actions: dict[str, float] = {}
    for arm, competences in arms.items():
        expert, session = ScriptedExpert(competences, random.Random(0)), engine.new_session()
        wins, actions = 0, 0
        for task_id in task_ids:
            final = run_expert_episode(session, expert, catalog.task(task_id))
            wins += int(final["reward_detail"]["r_success"])
            actions += session.action_count
        success[arm] = wins / max(1, len(task_ids))
        mean_actions[arm] = actions / max(1, len(task_ids))
    return {"split": split, "tasks": len(task_ids), "success": success, "mean_actions": mean_actions}


def query_recall(store: tuple[Any, Any, Any], split: str = "val", limit: int | None = None,
                 ks: tuple[int, ...] = (1, 20)) -> dict[str, Any]:
    """Gold-ASIN recall@k of the expert's first query with and without the persona words.

    ``simple`` = ``instruction_simple``; ``simple_persona`` = the instruction without its budget
    phrase + persona brand + persona material (the ``read_persona`` query).
    """
    catalog, index, _ = store
    task_ids = list(catalog.task_ids(split))[:limit]
    arms = {"simple": Competences().without("read_persona"), "simple_persona": Competences()}
    recall: dict[str, dict[str, float]] = {}
    for arm, competences in arms.items():
        expert = ScriptedExpert(competences)
        pairs = ((expert.first_query(catalog.task(t)), catalog.goal(t).asin) for t in task_ids)
        scores = gold_recall(index, pairs, ks)
        recall[arm] = {f"recall@{k}": scores[f"recall@{k}"] for k in ks}
    return {"split": split, "tasks": len(task_ids), "recall": recall}
