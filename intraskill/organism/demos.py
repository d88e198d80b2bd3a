"""Skill-conditioned expert demonstrations for the organism's behaviour-cloning warm start.

The scripted expert (:class:`~intraskill.policy.expert_policy.ExpertPolicy`) plays train tasks through the
agent runtime under random chunk masks of the S₀ bank, so every demonstration is the exact
conversation the organism will see (system prompt, persona, skill block, pages, per-turn tools).
Each competence runs with probability ``p_with`` when its chunk is in context and ``p_without``
otherwise (:class:`S0Law`); the harmful chunk's habit (``hasty_buy``: open the first result and
buy it without checking) switches the checking competences off with its own pair of probabilities.
:class:`AdditiveLaw` plants additive effects instead: one per-episode draw, diligent (every competence)
or not (none), with a probability that each chunk in context moves by its own weight (and each planted pair
of chunks, when both are in context, by the pair's).

A demonstration is stored as its token-stream *segments*: ``(prompt_text, completion_text)`` per
turn, rendered exactly as :class:`~intraskill.policy.hf.HFPolicy` renders a growing conversation
(the first turn's full prompt; later turns ``"\\n"`` after the previous ``<|im_end|>`` plus the new
messages). :func:`tokenize_demonstration` turns them into ``input_ids`` and a loss mask that is 1
exactly on the assistant-generated tokens, the closing ``<|im_end|>`` included. A turn whose click is
not offered (the expert's deliberate slips, ``warmstart.slip_rate``) is folded into the next prompt:
the clone reads the mistake and learns the recovery, never the mistake.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, episode_seed, run_episodes
from intraskill.agent.tools import CLICK, TOOL_ARGUMENT
from intraskill.chat.base import ChatRequest, Generation, Policy, SessionTokens
from intraskill.chat.chatml import IM_END, parse_tool_calls, render_messages
from intraskill.hashing import seed32, unit_draw
from intraskill.jsonl import JsonlWriter, read_jsonl
from intraskill.organism.instructions import READER_BANK_KIND, demo_chunks
from intraskill.policy.expert_policy import (
    CompetenceLaw,
    ExpertPolicy,
    IndependentLaw,
    SkillConditionedLaw,
    click_values,
)
from intraskill.policy.reader_expert import ReaderExpertPolicy
from intraskill.shop.house_codes import HouseCodes
from intraskill.shop.reward import Reward, parse_reward
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import Skill, SkillBank

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from intraskill.agent.env import Environment
    from intraskill.agent.runtime import EpisodeJob
    from intraskill.params import WarmstartParams

HASTY_BUY = "hasty_buy"
"""The harmful habit: open the first result and buy it at once (no candidate or budget check)."""
HABIT_SUPPRESSES = {HASTY_BUY: ("inspect_candidates", "check_budget")}
"""Competences a habit switches off when it fires."""
ROLES = ("helpful", "neutral", "harmful")
DEMO_SCHEMA_VERSION = "intraskill-demo-v1"


class S0Error(ValueError):
    """The S₀ bank or its probabilities are inconsistent; the message names the chunk or field."""


@dataclass(frozen=True)
class ChunkRole:
    """What one S₀ chunk is tied to: ``role`` and its ``competence`` (helpful) or ``habit`` (harmful)."""

    skill_id: str
    role: str
    target: str | None


def chunk_roles(bank: SkillBank) -> list[ChunkRole]:
    """The role of every enabled chunk, validated (metadata ``role``, ``competence`` / ``habit``).

    Raises :class:`S0Error` for an unknown role or competence, a competence named twice, or a bank
    without a neutral and a harmful chunk. The chunks of a reader bank (``metadata.kind``
    :data:`~intraskill.organism.instructions.READER_BANK_KIND`) are tied to nothing: their rules act.
    """
    roles: list[ChunkRole] = []
    seen: set[str] = set()
    reader = bank.metadata.get("kind") == READER_BANK_KIND
    for skill in bank.enabled_skills():
        role = skill.metadata.get("role")
        if role not in ROLES:
            raise S0Error(f"skills[{skill.skill_id!r}].metadata.role: expected one of {ROLES}, got {role!r}")
        if reader:  # a reader bank's chunks act through their rules, tied to no competence or habit
            roles.append(ChunkRole(skill.skill_id, role, None))
            continue
        target = {"helpful": skill.metadata.get("competence"), "harmful": skill.metadata.get("habit"),
                  "neutral": None}[role]
        allowed = Competences.names() if role == "helpful" else tuple(HABIT_SUPPRESSES)
        if role != "neutral" and target not in allowed:
            key = "competence" if role == "helpful" else "habit"
            raise S0Error(f"skills[{skill.skill_id!r}].metadata.{key}: expected one of {allowed}, "
                          f"got {target!r}")
        if target is not None and target in seen:
            raise S0Error(f"skills[{skill.skill_id!r}]: {target!r} is already tied to another chunk")
        seen.add(target or "")
        roles.append(ChunkRole(skill.skill_id, role, target))
    present = {r.role for r in roles}
    for needed in ("neutral", "harmful"):
        if needed not in present:
            raise S0Error(f"skills: S₀ needs at least one {needed} chunk")
    return roles


@dataclass(frozen=True)
class S0Law(IndependentLaw):
    """The skill-conditioned competence law of S₀ (a :class:`~intraskill.policy.expert_policy.CompetenceLaw`).

    A helpful chunk's competence runs with ``p_with`` / ``p_without`` (through
    :class:`~intraskill.policy.expert_policy.SkillConditionedLaw`); then each habit whose suppressed
    competences include it fires with its own ``p_with`` / ``p_without`` and switches it off.
    Competences tied to no chunk always run.
    """

    base: SkillConditionedLaw
    habit_skill: Mapping[str, str]
    habit_p_with: Mapping[str, float]
    habit_p_without: Mapping[str, float]

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.base.identity, "kind": "s0_skill_conditioned",
                "habit_skill": dict(sorted(self.habit_skill.items())),
                "habit_p_with": dict(sorted(self.habit_p_with.items())),
                "habit_p_without": dict(sorted(self.habit_p_without.items()))}

    def _habits(self, competence: str, skill_ids: tuple[str, ...]) -> list[float]:
        """The firing probability of each habit that suppresses ``competence``."""
        return [self.habit_p_with[habit] if skill in skill_ids else self.habit_p_without[habit]
                for habit, skill in self.habit_skill.items() if competence in HABIT_SUPPRESSES[habit]]

    def probability(self, competence: str, skill_ids: tuple[str, ...]) -> float:
        """The probability that ``competence`` is used with the chunks ``skill_ids`` in context: the
        base law's, times the chance that no habit suppressing it fires (each draws on its own)."""
        return math.prod((1.0 - p for p in self._habits(competence, skill_ids)),
                         start=self.base.probability(competence, skill_ids))

    def __call__(self, competence: str, skill_ids: tuple[str, ...], rng: random.Random) -> bool:
        used = self.base(competence, skill_ids, rng)
        for probability in self._habits(competence, skill_ids):
            used = (rng.random() >= probability) and used
        return used


def s0_law(bank: SkillBank, p_with: Mapping[str, float], p_without: Mapping[str, float]) -> S0Law:
    """The :class:`S0Law` of ``bank``; every tied competence / habit needs both probabilities."""
    roles = chunk_roles(bank)
    targets = {r.target for r in roles if r.target is not None}
    for label, mapping in (("p_with", p_with), ("p_without", p_without)):
        missing = sorted(targets - set(mapping))
        extra = sorted(set(mapping) - targets)
        if missing or extra:
            raise S0Error(f"warmstart.{label}: missing {missing} / not tied to any chunk {extra}")
    helpful = {r.target: r.skill_id for r in roles if r.role == "helpful"}
    habits = {r.target: r.skill_id for r in roles if r.role == "harmful"}
    base = SkillConditionedLaw(helpful, {c: p_with[c] for c in helpful}, {c: p_without[c] for c in helpful})
    return S0Law(base, habits, {h: p_with[h] for h in habits}, {h: p_without[h] for h in habits})


@dataclass(frozen=True)
class AdditiveLaw:
    """A law whose planted chunk effects add up (a :class:`~intraskill.policy.expert_policy.CompetenceLaw`).

    One draw per episode: with probability ``base`` plus the ``weights`` of the chunks in context the
    expert is *diligent* and uses every competence, otherwise it uses none of the ``tied`` ones (it
    searches the task words, opens the first result and buys it with the first listed options). Success is
    then linear in that probability, so each chunk's effect on the success rate is its weight times
    one fixed gain, whatever other chunks are in context: the model the paired gate fits. Planted
    ``interactions`` (pairs of chunks → weight added when both are in context) break that on purpose.
    """

    tied: frozenset[str]
    base: float
    weights: Mapping[str, float]
    interactions: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @property
    def identity(self) -> dict[str, Any]:
        identity = {"kind": "additive", "tied": sorted(self.tied), "base": self.base,
                    "weights": dict(sorted(self.weights.items()))}
        if self.interactions:
            identity["interactions"] = [[a, b, w] for (a, b), w in sorted(self.interactions.items())]
        return identity

    def diligence(self, skill_ids: tuple[str, ...]) -> float:
        """The probability of a diligent episode with the chunks ``skill_ids`` in context."""
        shown = set(skill_ids)
        return (self.base + sum(self.weights.get(skill_id, 0.0) for skill_id in skill_ids)
                + sum(w for (a, b), w in self.interactions.items() if a in shown and b in shown))

    def draw(self, skill_ids: tuple[str, ...], rng: random.Random) -> frozenset[str]:
        """Every competence when diligent (one draw), else only those tied to no chunk."""
        every = frozenset(Competences.names())
        return every if rng.random() < self.diligence(skill_ids) else every - self.tied

    def distribution(self, skill_ids: tuple[str, ...]) -> dict[frozenset[str], float]:
        """Two outcomes: diligent with :meth:`diligence`, else not."""
        every, diligent = frozenset(Competences.names()), self.diligence(skill_ids)
        sets = {every: diligent, every - self.tied: 1.0 - diligent}
        return {used: probability for used, probability in sets.items() if probability > 0.0}


def additive_law(bank: SkillBank, base: float, weights: Mapping[str, float],
                 interactions: Mapping[tuple[str, str], float] | None = None) -> AdditiveLaw:
    """The :class:`AdditiveLaw` of ``bank``: a weight for every enabled chunk, planted ``interactions`` between
    its chunks, and a diligence probability within [0, 1] for every chunk mask (else :class:`S0Error` naming
    the field)."""
    roles = chunk_roles(bank)
    chunks = [r.skill_id for r in roles]
    missing, extra = sorted(set(chunks) - set(weights)), sorted(set(weights) - set(chunks))
    if missing or extra:
        raise S0Error(f"warmstart.weights: missing {missing} / not a chunk of the bank {extra}")
    interactions = dict(interactions or {})
    strangers = sorted({c for pair in interactions for c in pair} - set(chunks))
    if strangers:
        raise S0Error(f"warmstart.interactions: not a chunk of the bank {strangers}")
    tied = frozenset(r.target for r in roles if r.role == "helpful" and r.target is not None)
    law = AdditiveLaw(tied, base, dict(weights), interactions)
    masks = (tuple(c for c, shown in zip(chunks, bits) if shown)
             for bits in itertools.product((False, True), repeat=len(chunks)))
    low, high = math.inf, -math.inf
    for mask in masks:
        diligence = law.diligence(mask)
        low, high = min(low, diligence), max(high, diligence)
    if low < 0.0 or high > 1.0:
        field_name = "weights and interactions" if interactions else "weights"
        raise S0Error(f"warmstart.{field_name}: base + weights must stay within [0, 1] for every mask, "
                      f"got [{low:.3f}, {high:.3f}]")
    return law


def teacher_law(bank: SkillBank, warmstart: WarmstartParams) -> S0Law | AdditiveLaw | None:
    """The teacher's law that ``warmstart.law`` names, built from its parameters (``None`` for the house-code
    reader, whose chunks act through their rules)."""
    if warmstart.law == "reader":
        chunk_roles(bank)
        return None
    if warmstart.law == "additive":
        return additive_law(bank, warmstart.base, warmstart.weights,
                            {i.chunks: i.weight for i in warmstart.interactions})
    return s0_law(bank, warmstart.p_with, warmstart.p_without)


def teacher_table(bank: SkillBank, warmstart: WarmstartParams) -> list[dict[str, Any]]:
    """One row per chunk: its role, competence or habit, title and its setting in the teacher's law
    (``p_with`` / ``p_without``, or the ``additive`` law's weight and planted interactions)."""
    titles = {s.skill_id: s.content.splitlines()[0].lstrip("# ") for s in bank.enabled_skills()}
    rows = []
    for role in chunk_roles(bank):
        if warmstart.law == "additive":
            setting: dict[str, Any] = {"weight": warmstart.weights.get(role.skill_id)}
            partners = [f"{next(c for c in i.chunks if c != role.skill_id)} {i.weight:+.2f}"
                        for i in warmstart.interactions if role.skill_id in i.chunks]
            if warmstart.interactions:
                setting["interactions"] = "; ".join(partners)
        else:
            setting = {key: (mapping.get(role.target) if role.target else None) for key, mapping in
                       (("p_with", warmstart.p_with), ("p_without", warmstart.p_without))}
        rows.append({"chunk": role.skill_id, "role": role.role, "competence or habit": role.target, **setting,
                     "title": titles[role.skill_id]})
    return rows


def chunk_mask(skills: Sequence[Skill], probability: float, key: str) -> tuple[Skill, ...]:
    """The chunks of one episode: each kept independently when ``unit_draw(f"{key}:{skill_id}") < p``."""
    return tuple(s for s in skills if unit_draw(f"{key}:{s.skill_id}") < probability)


@dataclass
class Demonstration:
    """One expert episode as exact token-stream segments ``[(prompt_text, completion_text), …]``."""

    episode_id: str
    task_id: int
    skill_ids: list[str]
    segments: list[tuple[str, str]]
    reward: Reward | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": DEMO_SCHEMA_VERSION, "episode_id": self.episode_id, "task_id": self.task_id,
                "skill_ids": self.skill_ids, "segments": [list(s) for s in self.segments],
                "reward": self.reward.to_dict() if self.reward is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Demonstration":
        if data.get("schema_version") != DEMO_SCHEMA_VERSION:
            raise ValueError(f"demonstration.schema_version: expected {DEMO_SCHEMA_VERSION!r}, "
                             f"got {data.get('schema_version')!r}")
        return cls(str(data["episode_id"]), int(data["task_id"]), list(data["skill_ids"]),
                   [(str(p), str(c)) for p, c in data["segments"]],
                   parse_reward(data.get("reward")))

    @property
    def text(self) -> str:
        """The whole conversation as the model's stream renders it (``<|im_end|>`` after each reply)."""
        return "".join(prompt + completion + IM_END for prompt, completion in self.segments)


@dataclass
class _Recording:
    turns: list[tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = field(default_factory=list)


class RecordingPolicy:
    """Wraps a policy and records each session's turns as :class:`Demonstration` segments.

    The segments follow :class:`~intraskill.policy.hf.HFPolicy`'s incremental rendering: turn 0 is
    ``render_messages(messages, tools)``; turn ``t`` is ``"\\n"`` (closing the previous
    ``<|im_end|>``) plus ``render_messages(messages, tools, start=len(previous messages) + 1)``.
    """

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.finished: dict[str, list[tuple[str, str]]] = {}
        self._live: dict[str, _Recording] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.inner.identity)

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        generations = self.inner.generate(requests)
        for request, generation in zip(requests, generations):
            if generation.finish_reason != "stop":
                raise ValueError(f"session {request.session_id}: a demonstration turn must end with a stop")
            record = self._live.setdefault(request.session_id, _Recording())
            record.turns.append((list(request.messages), request.tools, generation.text))
        return generations

    def end_session(self, session_id: str) -> SessionTokens | None:
        record = self._live.pop(session_id, None)
        if record is not None:
            self.finished[session_id] = conversation_segments(record.turns)
        return self.inner.end_session(session_id)


def offered(tools: list[dict[str, Any]], text: str) -> bool:
    """Whether a reply's ``click`` value is among the turn's offered values (any other reply: True)."""
    _, calls, error = parse_tool_calls(text)
    if error or len(calls) != 1 or calls[0].name != CLICK:
        return True
    values, _ = click_values(tools)
    return not values or json.loads(calls[0].arguments).get(TOOL_ARGUMENT[CLICK]) in values


def conversation_segments(
    turns: Sequence[tuple[list[dict[str, Any]], list[dict[str, Any]], str]],
) -> list[tuple[str, str]]:
    """``(prompt_text, completion_text)`` per turn from ``(messages, tools, reply_text)`` triples.

    A reply that clicks a value the turn did not offer becomes part of the next segment's prompt
    (a trailing one is dropped), so it is read but never cloned.
    """
    segments: list[tuple[str, str]] = []
    previous, carried = 0, ""
    for index, (messages, tools, text) in enumerate(turns):
        if index == 0:
            prompt = render_messages(messages, tools)
        else:
            prompt = "\n" + render_messages(messages, tools, start=previous + 1)
        previous = len(messages)
        if offered(tools, text):
            segments.append((carried + prompt, text))
            carried = ""
        else:
            carried += prompt + text + IM_END
    return segments


def tokenize_demonstration(
    segments: Sequence[tuple[str, str]], tokenizer: PreTrainedTokenizerBase
) -> tuple[list[int], list[int]]:
    """``(input_ids, loss_mask)``: prompts masked 0, each completion and its ``<|im_end|>`` masked 1."""
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    input_ids: list[int] = []
    mask: list[int] = []
    for prompt, completion in segments:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(completion, add_special_tokens=False)["input_ids"] + [im_end]
        input_ids += prompt_ids + reply_ids
        mask += [0] * len(prompt_ids) + [1] * len(reply_ids)
    return input_ids, mask


def demo_mask(skills: Sequence[Skill], key: str, mask_probability: float, bare_share: float = 0.0,
              alone_share: float = 0.0) -> tuple[Skill, ...]:
    """One demonstration's chunks: none with probability ``bare_share``, exactly one (uniformly) with
    ``alone_share``, else :func:`chunk_mask`. The bare and chunk-alone contexts are the ground truth's arms;
    under Bernoulli(0.5) masks alone they are rare (0.4 % and 3 % of demonstrations for eight chunks)."""
    if bare_share or alone_share:
        kind = unit_draw(f"{key}:kind")
        if kind < bare_share:
            return ()
        if kind < bare_share + alone_share and skills:
            return (skills[min(int(unit_draw(f"{key}:alone") * len(skills)), len(skills) - 1)],)
    return chunk_mask(skills, mask_probability, key)


def demo_jobs(task_ids: Sequence[int], count: int, skills: Sequence[Skill], mask_probability: float,
              seed: int, *, bare_share: float = 0.0, alone_share: float = 0.0) -> list[EpisodeJob]:
    """``count`` episode jobs over ``task_ids`` (cycled; the cycle index is the sample id), each with
    its own chunk mask (:func:`demo_mask`)."""
    if not task_ids:
        raise ValueError("demo_jobs: no tasks")
    jobs = []
    for index in range(count):
        task, sample = task_ids[index % len(task_ids)], index // len(task_ids)
        key = f"{seed}:demo-mask:{task}:{sample}"
        jobs.append(EpisodeJob.create(task, sample, seed,
                                      demo_mask(skills, key, mask_probability, bare_share, alone_share)))
    return jobs


def reader_jobs(colours: Mapping[int, str], task_ids: Sequence[int], count: int, codes: HouseCodes, seed: int,
                warmstart: WarmstartParams) -> list[EpisodeJob]:
    """``count`` episode jobs of the reader testbed over ``task_ids`` (cycled): ``warmstart.bare_share`` of them
    bare, the others with chunks generated from the episode's own code table
    (:func:`~intraskill.organism.instructions.demo_chunks`; ``colours``: each task's profile colour)."""
    if not task_ids:
        raise ValueError("reader_jobs: no tasks")
    jobs = []
    for index in range(count):
        task, sample = task_ids[index % len(task_ids)], index // len(task_ids)
        rng = random.Random(seed32(f"{seed}:reader-demo:{task}:{sample}"))
        skills = () if rng.random() < warmstart.bare_share else demo_chunks(
            rng, codes, episode_seed(seed, task, sample), colours.get(task), cover=warmstart.cover,
            max_chunks=warmstart.max_chunks, max_lines=warmstart.max_lines, stray=warmstart.stray)
        jobs.append(EpisodeJob.create(task, sample, seed, skills))
    return jobs


def collect_demonstrations(
    env_factory: Callable[[], Environment],
    jobs: Sequence[EpisodeJob],
    law: CompetenceLaw | None,
    *,
    seed: int,
    max_turns: int,
    max_actions: int,
    language: str = "en",
    view: str = "standard",
    slip_rate: float = 0.0,
    plan: bool = False,
    house_codes: HouseCodes | None = None,
    explore: float = 1.0,
    note: str = "none",
    batch_size: int = 256,
    progress: bool = True,
) -> list[Demonstration]:
    """Play ``jobs`` with the law-driven scripted expert through the lockstep runtime; one demonstration each.

    ``slip_rate``: the expert's deliberate invalid ``buy now`` per turn (recovery data; never cloned).
    ``plan``: every reply opens with the episode's plan line (:func:`~intraskill.policy.expert_policy.plan_line`).
    ``house_codes``: the reader testbed: profiles show house codes and the house-code reader
    (:class:`~intraskill.policy.reader_expert.ReaderExpertPolicy` with ``explore`` and ``note``) plays instead.
    Failed (unscored) episodes are dropped; the returned list keeps job order.
    """

    config = RuntimeConfig(max_turns=max_turns, max_tokens_per_turn=4096, temperature=0.0, language=language,
                           view=view, house_codes=house_codes)
    expert = (ReaderExpertPolicy(seed=seed, language=language, max_actions=max_actions, slip_rate=slip_rate,
                                 explore=explore, note=note) if house_codes is not None else
              ExpertPolicy(Competences(), seed=seed, language=language, law=law, max_actions=max_actions,
                           slip_rate=slip_rate, plan=plan))
    policy = RecordingPolicy(expert)
    demos: list[Demonstration] = []
    bar = tqdm(total=len(jobs), desc="expert demos", disable=not progress)
    for start in range(0, len(jobs), batch_size):
        batch = list(jobs[start:start + batch_size])
        for job, result in zip(batch, run_episodes(policy, env_factory, batch, config, progress=False)):
            segments = policy.finished.pop(job.episode_id, None)
            if result.scored and segments:
                demos.append(Demonstration(job.episode_id, job.task_id, [s.skill_id for s in job.skills],
                                           segments, result.reward))
        bar.update(len(batch))
    bar.close()
    return demos


def write_demonstrations(demos: Sequence[Demonstration], path: str | Path) -> None:
    """Write demonstrations as JSONL (one fsynced line each); an existing file is replaced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with JsonlWriter(path) as writer:
        for demo in demos:
            writer.append(demo.to_dict())


def read_demonstrations(path: str | Path) -> list[Demonstration]:
    """Read a demonstrations JSONL file."""
    return [Demonstration.from_dict(record) for record in read_jsonl(path)]
