"""The scripted expert as a chat policy: demonstrations and the expert baseline.

:class:`ExpertPolicy` implements :class:`~intraskill.chat.base.Policy`. It reads only what the
runtime sends a language model — the persona from the system message, the task from the first user
message, the page from the newest observation message and the clickable values from the ``click``
tool's enum — rebuilds the public page state from that text and asks
:class:`~intraskill.shop.scripted_expert.ScriptedExpert` for the next action. The reply is the Hermes text
``<tool_call>{"name":…,"arguments":{…}}</tool_call>`` of :mod:`intraskill.chat.chatml`, so the
runtime records the expert's turns in exactly the message and tool-call format a model's turns have
(the behaviour-cloning warm start trains on those traces). The expert never sees the goal: the
messages carry none (``intraskill.agent.traces.scan_prompts_for_gold``).

Competences are switched off with :class:`~intraskill.shop.scripted_expert.Competences`; a
:class:`CompetenceLaw` (e.g. :class:`SkillConditionedLaw`) can further decide the competences per
episode from the skill IDs injected into the system message.

With ``plan`` every reply opens with a reasoning block (``<think>…</think>``, which the protocol
allows before the tool call) holding a plan line naming the competences the episode uses
(:func:`plan_line`, e.g. ``Plan: profile, options, budget``) before its tool call. The per-episode
competence draws are otherwise latent in the demonstrations; written out in the first reply — the
one a small clone conditions on its skill chunks best — and repeated in every later one, they sit
next to each later decision (an opt-in of the warm start, ``warmstart.plan``).

With ``slip_rate`` the expert makes the clone's typical mistake on purpose — ``buy now`` while it is
not offered, at most once per episode — and then carries on from the page that reports the invalid
action, so behaviour cloning sees recoveries (:mod:`intraskill.organism.demos` never trains on the slip
itself). Slips draw from their own seeded source: the competence draws are the same with or without.

Skill1's extra replies (:mod:`intraskill.agent.skill1_replies`, recognised by their system prompt) get
well-formed answers: the task instruction as the ``<query>``, the candidates in retrieval order as the
``<rank>``, and :data:`SKILL1_LESSONS` with the episode's stated outcome as the distillation JSON. With
``lessons`` (:class:`~intraskill.policy.skill1_expert.Skill1Lessons`) the ranking follows planted usefulness,
the distillation draws a chunk's lesson per session, and a strategy naming a chunk's title counts as that
chunk for the law.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from intraskill.agent.pages import latest_page_text, parse_page
from intraskill.agent.prompts import PERSONA_LABELS, TASK_LABELS
from intraskill.agent.skill1_replies import EPISODE_LABELS, ReplyKind, rank_candidates, reply_kind
from intraskill.agent.tools import CLICK, SEARCH, TOOL_ARGUMENT
from intraskill.chat.base import ChatRequest, Generation, SessionTokens
from intraskill.chat.chatml import (
    THINK_CLOSE,
    THINK_OPEN,
    message_text,
    parse_tool_calls,
    render_tool_call,
)
from intraskill.hashing import seed32
from intraskill.params import StoreParams
from intraskill.policy.skill1_expert import Skill1Lessons
from intraskill.shop.observation import PAGE_LABELS  # the renderer's labels: one source of truth
from intraskill.shop.scripted_expert import BUY_NOW, Competences, ScriptedExpert
from intraskill.shop.types import Task
from intraskill.skills.render import skill_entries

EXPERT_MODEL_ID = "scripted-expert"
EXPERT_BACKEND = "expert"
PLAN_LABELS = {"en": ("Plan: ", ", ", "none"), "zh": ("计划：", "、", "无")}
"""Per language: the plan line's label, separator and the word for a plan without competences."""
SKILL1_LESSONS = {
    "en": ("Select a value on every option axis and check the price before buying.",
           "Search with the task's key words, open the best-matching result, go back to search if none fits.",
           "buying a product that must match given attributes, options and a price limit"),
    "zh": ("购买前为每个规格选好值并核对价格。",
           "用任务中的关键词搜索，打开最匹配的结果；都不合适时返回搜索。",
           "购买必须符合指定属性、规格和价格上限的商品"),
}
"""The expert's distillation reply per language: action lesson, navigation lesson, description head."""
_CANDIDATE_ID_RE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
PLAN_WORDS = {"read_persona": "profile", "refine_query": "refine", "inspect_candidates": "compare",
              "page_on": "page", "choose_options": "options", "check_budget": "budget"}
"""The plan line's word for each competence of :class:`~intraskill.shop.scripted_expert.Competences`."""
_PLANNED = {word: name for name, word in PLAN_WORDS.items()}
DEFAULT_MAX_ACTIONS = StoreParams().max_actions
"""The store's action limit when an expert is given none (``store.max_actions``'s default)."""


def plan_line(used: tuple[str, ...], language: str = "en") -> str:
    """The plan line of an episode that uses the competences ``used``.

    >>> plan_line(("read_persona", "check_budget"))
    'Plan: profile, budget'
    >>> plan_line(())
    'Plan: none'
    """
    label, sep, empty = PLAN_LABELS[language]
    return label + (sep.join(PLAN_WORDS[name] for name in used) or empty)


def plan_text(text: str, language: str = "en") -> str | None:
    """The plan line (label included) of a reply's ``<think>`` block; ``None`` when it holds none.

    >>> plan_text("<think>Plan: profile, budget</think>\\n<tool_call>{}</tool_call>")
    'Plan: profile, budget'
    """
    start = text.find(THINK_OPEN + PLAN_LABELS[language][0])
    end = text.find(THINK_CLOSE, start)
    return None if start < 0 or end < 0 else text[start + len(THINK_OPEN):end]


def planned(text: str, language: str = "en") -> tuple[str, ...] | None:
    """The competences of the plan line in a reply's ``<think>`` block (inverse of :func:`plan_line`);
    ``None`` when the reply holds no plan line. Unknown words are dropped.

    >>> planned("<think>Plan: profile, budget</think>\\n<tool_call>{}</tool_call>")
    ('read_persona', 'check_budget')
    """
    line = plan_text(text, language)
    if line is None:
        return None
    label, sep, _ = PLAN_LABELS[language]
    return tuple(_PLANNED[word] for word in line[len(label):].split(sep) if word in _PLANNED)


class CompetenceLaw(Protocol):
    """Decides per episode which competences are used, given the injected skill IDs."""

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies the law (recorded in the policy identity)."""
        ...

    def draw(self, skill_ids: tuple[str, ...], rng: random.Random) -> frozenset[str]:
        """The competences this episode uses; ``rng`` is the episode's seeded random source."""
        ...

    def distribution(self, skill_ids: tuple[str, ...]) -> dict[frozenset[str], float]:
        """The exact distribution of :meth:`draw` (sets of probability 0 left out)."""
        ...


class IndependentLaw(ABC):
    """A :class:`CompetenceLaw` that decides each competence on its own draw, in declaration order."""

    @abstractmethod
    def probability(self, competence: str, skill_ids: tuple[str, ...]) -> float:
        """The probability that ``competence`` is used with the chunks ``skill_ids`` in context."""

    @abstractmethod
    def __call__(self, competence: str, skill_ids: tuple[str, ...], rng: random.Random) -> bool:
        """Use ``competence`` in this episode? Draws from ``rng`` when the competence is gated."""

    def draw(self, skill_ids: tuple[str, ...], rng: random.Random) -> frozenset[str]:
        """Each competence on its own draw (:meth:`__call__`)."""
        return frozenset(name for name in Competences.names() if self(name, skill_ids, rng))

    def distribution(self, skill_ids: tuple[str, ...]) -> dict[frozenset[str], float]:
        """The product of the competences' Bernoulli laws."""
        names = Competences.names()
        used = {name: self.probability(name, skill_ids) for name in names}
        sets: dict[frozenset[str], float] = {}
        for on in itertools.product((False, True), repeat=len(names)):
            probability = math.prod(used[n] if o else 1.0 - used[n] for n, o in zip(names, on))
            if probability > 0.0:
                sets[frozenset(n for n, o in zip(names, on) if o)] = probability
        return sets


@dataclass(frozen=True)
class SkillConditionedLaw(IndependentLaw):
    """A competence is used with probability ``p_with`` when its skill is injected, else ``p_without``.

    Parameters
    ----------
    skill_for : competence name → the skill ID that teaches it; other competences are always used.
    p_with, p_without : competence name → probability in [0, 1] with / without that skill.
    """

    skill_for: Mapping[str, str]
    p_with: Mapping[str, float]
    p_without: Mapping[str, float]

    def __post_init__(self) -> None:
        names = Competences.names()
        sections = (("skill_for", self.skill_for), ("p_with", self.p_with), ("p_without", self.p_without))
        for label, mapping in sections:
            unknown = sorted(set(mapping) - set(names))
            if unknown:
                raise ValueError(
                    f"SkillConditionedLaw.{label}: unknown competences {unknown}; expected {names}"
                )
        for label, mapping in (("p_with", self.p_with), ("p_without", self.p_without)):
            for name in self.skill_for:
                value = mapping.get(name)
                if value is None or not 0.0 <= value <= 1.0:
                    raise ValueError(
                        f"SkillConditionedLaw.{label}.{name}: must be a probability, got {value!r}"
                    )

    @property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "skill_conditioned",
            "skill_for": dict(sorted(self.skill_for.items())),
            "p_with": dict(sorted(self.p_with.items())),
            "p_without": dict(sorted(self.p_without.items())),
        }

    def probability(self, competence: str, skill_ids: tuple[str, ...]) -> float:
        skill = self.skill_for.get(competence)
        if skill is None:
            return 1.0
        return self.p_with[competence] if skill in skill_ids else self.p_without[competence]

    def __call__(self, competence: str, skill_ids: tuple[str, ...], rng: random.Random) -> bool:
        if competence not in self.skill_for:
            return True
        return rng.random() < self.probability(competence, skill_ids)


class _LawfulExpert(ScriptedExpert):
    """A scripted expert whose competences pass through a law (the documented ``decide`` override)."""

    def __init__(self, competences: Competences, rng: random.Random, max_actions: int,
                 law: CompetenceLaw | None, skill_ids: tuple[str, ...]) -> None:
        super().__init__(competences, rng, max_actions)
        self.law = law
        self.skill_ids = skill_ids
        self.drawn: frozenset[str] | None = None

    def start(self, task: Task) -> None:
        self.drawn = None if self.law is None else self.law.draw(self.skill_ids, self.rng)
        super().start(task)

    def decide(self, competence: str, task: Task) -> bool:
        enabled = super().decide(competence, task)
        return enabled and (self.drawn is None or competence in self.drawn)


@dataclass
class _Session:
    """One episode: its expert, the public task read from the first two messages and its slip source."""

    expert: _LawfulExpert
    task: Task
    slips: random.Random
    slipped: bool = False


def competences_tag(competences: Competences) -> str:
    """``"all"`` or ``"without:a,b"`` (the switched-off competences, in declaration order)."""
    off = [name for name, on in asdict(competences).items() if not on]
    return "all" if not off else "without:" + ",".join(off)


def competences_from_tag(tag: str) -> Competences:
    """Inverse of :func:`competences_tag`; ``ValueError`` naming an unknown competence."""
    if tag in ("", "all"):
        return Competences()
    if not tag.startswith("without:"):
        raise ValueError(f"expert competences: expected 'all' or 'without:a,b', got {tag!r}")
    competences = Competences()
    for name in filter(None, tag[len("without:"):].split(",")):
        competences = competences.without(name.strip())
    return competences


class ExpertPolicy:
    """The scripted expert behind the :class:`~intraskill.chat.base.Policy` protocol.

    Parameters
    ----------
    competences : which competences are available (all by default).
    seed : seeds each session's random source, ``seed32(f"{seed}:{session_id}")`` (used by ``law``).
    language : the prompt / observation language of the runtime (``"en"`` or ``"zh"``).
    law : optional per-episode competence law conditioned on the injected skill IDs.
    max_actions : the store's action limit (``store.max_actions``).
    slip_rate : per-turn probability of a deliberate invalid ``buy now`` (at most one per episode).
    plan : open every reply with the episode's :func:`plan_line` as its ``<think>`` reasoning.
    lessons : Skill1's planted lessons (ranking, distillation, strategy → chunk for the law).

    Examples
    --------
    >>> ExpertPolicy(Competences().without("page_on")).identity["checkpoint_id"]
    'without:page_on'
    """

    def __init__(self, competences: Competences | None = None, seed: int = 0, language: str = "en",
                 law: CompetenceLaw | None = None, max_actions: int = DEFAULT_MAX_ACTIONS, slip_rate: float = 0.0,
                 plan: bool = False, lessons: Skill1Lessons | None = None) -> None:
        if language not in PAGE_LABELS:
            raise ValueError(f"language: expected one of {sorted(PAGE_LABELS)}, got {language!r}")
        if not 0.0 <= slip_rate < 1.0:
            raise ValueError(f"slip_rate: expected a probability in [0, 1), got {slip_rate!r}")
        self.competences = competences or Competences()
        self.seed = seed
        self.language = language
        self.law = law
        self.max_actions = max_actions
        self.slip_rate = slip_rate
        self.plan = plan
        self.lessons = lessons
        self._sessions: dict[str, _Session] = {}

    @property
    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = {
            "model_id": EXPERT_MODEL_ID,
            "checkpoint_id": competences_tag(self.competences),
            "backend": EXPERT_BACKEND,
            "seed": self.seed,
        }
        if self.law is not None:
            identity["law"] = self.law.identity
        if self.slip_rate:
            identity["slip_rate"] = self.slip_rate
        if self.plan:
            identity["plan"] = True
        if self.lessons is not None:
            identity["skill1_lessons"] = self.lessons.identity
        return identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """One tool call per request, chosen by the session's scripted expert."""
        return [self._reply(request) for request in requests]

    def end_session(self, session_id: str) -> SessionTokens | None:
        """Forget the session; the expert has no token stream."""
        self._sessions.pop(session_id, None)
        return None

    def _session(self, request: ChatRequest) -> _Session:
        session = self._sessions.get(request.session_id)
        if session is None:
            system, instruction = read_task_messages(request.messages, self.language)
            rng = random.Random(seed32(f"{self.seed}:{request.session_id}"))
            ids = skill_ids_in(system) if self.lessons is None else self.lessons.skill_ids(system)
            expert = self._new_expert(rng, ids, system)
            # The messages carry no task id and the expert reads none: the session id stands in as uid.
            task = Task(task_id=-1, task_uid=request.session_id, instruction_simple=instruction,
                        user_persona=self._persona(system))
            slips = random.Random(seed32(f"{self.seed}:{request.session_id}:slip"))
            session = self._sessions[request.session_id] = _Session(expert, task, slips)
        return session

    def _new_expert(self, rng: random.Random, skill_ids: tuple[str, ...], system: str) -> _LawfulExpert:
        """A session's scripted expert (a variant's override point: ``system`` is the system message)."""
        return _LawfulExpert(self.competences, rng, self.max_actions, self.law, skill_ids)

    def _persona(self, system: str) -> dict[str, Any]:
        """The persona the expert works from (a variant's override point)."""
        return persona_in(system, self.language)

    def _slip(self, session: _Session, state: dict[str, Any]) -> bool:
        """Slip on this turn? Only where ``buy now`` is not offered, once per episode."""
        if session.slipped or not self.slip_rate or BUY_NOW in state["actions"] or not state["actions"]:
            return False
        session.slipped = session.slips.random() < self.slip_rate
        return session.slipped

    def _skill1_reply(self, kind: ReplyKind, request: ChatRequest) -> Generation:
        """A well-formed Skill1 reply: the instruction as the query, the retrieval order (with ``lessons``: planted
        usefulness, most useful first) as the ranking, and :data:`SKILL1_LESSONS` (with ``lessons``: one drawn per session) with
        the episode's outcome as the distillation."""
        user = next(message_text(m) for m in request.messages if m.get("role") == "user")
        instruction = user[len(TASK_LABELS[self.language]):].split("\n\n", 1)[0].strip()
        if kind == "query":
            text = f"<query>{' '.join(instruction.split())}</query>"
        elif kind == "rank" and self.lessons is not None:
            order = self.lessons.rank([strat for _, strat in rank_candidates(user, self.language)])
            text = f"<rank>{', '.join(str(i + 1) for i in order)}</rank>"
        elif kind == "rank":
            text = f"<rank>{', '.join(_CANDIDATE_ID_RE.findall(user))}</rank>"
        else:
            labels = EPISODE_LABELS[self.language]
            action, navigation, description = SKILL1_LESSONS[self.language]
            if self.lessons is not None:
                lesson = self.lessons.draw(random.Random(seed32(f"{self.seed}:{request.session_id}:lesson")))
                action, navigation, description = lesson.action, lesson.navigation, lesson.description
            success = user.rstrip().endswith(labels["outcome"] + labels["success"])
            text = json.dumps({"task_success": success, "action_lesson": action, "navigation_lesson": navigation,
                               "description_head": description}, ensure_ascii=False)
        return Generation(text=text, content=text, tool_calls=[], finish_reason="stop", prompt_tokens=0,
                          completion_tokens=0)

    def _reply(self, request: ChatRequest) -> Generation:
        kind = reply_kind(request.messages, self.language)
        if kind is not None:
            return self._skill1_reply(kind, request)
        session = self._session(request)
        state = page_state(latest_page_text(request.messages, self.language), request.tools, self.language)
        if self._slip(session, state):
            name, arguments = CLICK, {TOOL_ARGUMENT[CLICK]: BUY_NOW}
        else:
            name, arguments = ScriptedExpert.tool_call(session.expert.act(session.task, state))
        if name == CLICK and arguments[TOOL_ARGUMENT[CLICK]] not in state["actions"]:
            ranks = {p["asin"]: str(p["rank"]) for p in state.get("products", []) if "rank" in p}
            arguments = {TOOL_ARGUMENT[CLICK]: ranks.get(arguments[TOOL_ARGUMENT[CLICK]],
                                                         arguments[TOOL_ARGUMENT[CLICK]])}
        text = render_tool_call(name, arguments)
        content, calls, error = parse_tool_calls(text)
        if self.plan:
            text = f"{THINK_OPEN}{plan_line(session.expert.used, self.language)}{THINK_CLOSE}\n{text}"
        return Generation(text=text, content=content, tool_calls=calls, finish_reason="stop",
                          prompt_tokens=0, completion_tokens=0, parse_error=error)


# --- reading the messages -------------------------------------------------------------------------
def read_task_messages(messages: list[dict[str, Any]], language: str = "en") -> tuple[str, str]:
    """``(system text, task instruction)`` from the system and first user messages of an episode."""
    system = next((message_text(m) for m in messages if m.get("role") == "system"), "")
    first_user = next((message_text(m) for m in messages if m.get("role") == "user"), None)
    label = TASK_LABELS[language]
    if first_user is None or not first_user.startswith(label) or "\n\n" not in first_user:
        raise ValueError(f"messages: no first user message of the form '{label}<instruction>\\n\\n<page>'")
    return system, first_user[len(label):first_user.rindex("\n\n")].strip()


def persona_in(system: str, language: str = "en") -> dict[str, Any]:
    """The persona JSON of the system message's profile block (``{}`` when there is none)."""
    label = PERSONA_LABELS[language] + "\n"
    if label not in system:
        return {}
    line = system.split(label, 1)[1].split("\n", 1)[0]
    try:
        persona = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"system message: the profile block is not one JSON line ({error})") from None
    return persona if isinstance(persona, dict) else {}


def skill_ids_in(system: str) -> tuple[str, ...]:
    """The IDs of the ``<skill id=… version=…>`` chunks in the system message, in order."""
    return tuple(skill_id for skill_id, _ in skill_entries(system))


def click_values(tools: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """``(the click tool's enum, whether ``search`` is offered)`` of a turn's tools."""
    names = {tool["function"]["name"]: tool["function"] for tool in tools}
    click = names.get(CLICK)
    enum = click["parameters"]["properties"][TOOL_ARGUMENT[CLICK]].get("enum", []) if click else []
    return list(enum), SEARCH in names


def page_state(text: str, tools: list[dict[str, Any]], language: str = "en") -> dict[str, Any]:
    """The public page state the expert needs, rebuilt from a rendered page and the turn's tools.

    Keys: ``page_type``, ``actions`` (the ``click`` enum), ``search_available``, and the page fields of
    :func:`intraskill.agent.pages.parse_page` (``products`` on results; ``product``,
    ``available_options``, ``selected_options``, ``missing_option_axes``, ``selected_price`` on a
    product page).
    """
    page = parse_page(text, language)
    actions, search_available = click_values(tools)
    return {"page_type": page.pop("page_type"), "actions": actions, "search_available": search_available,
            **page}
