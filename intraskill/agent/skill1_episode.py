"""The Skill1 trajectory of Algorithm 1 (docs/method.md §10.1), batched like the lockstep runtime.

For every job (one rollout of one task): a ``<query>`` reply written from the task → top-K retrieval from
the library (the library is read, never changed: all rollouts of a step see the same state, method §10.2) → a
``<rank>`` reply over the candidates (none when nothing was retrieved) → the multi-turn shopping episode with
the selected skill's strategy in the prompt → a distillation reply about the finished episode.

Each phase is one batch over all jobs: one ``policy.generate`` for every query reply, one for every rank
reply, the episodes in one lockstep :func:`~intraskill.agent.runtime.run_episodes`, one ``generate`` for
every distillation reply. So a step of G rollouts of N tasks costs three extra single-turn batches beside
the GRPO episodes, not G× anything.

The strategy enters the episode as one skill of the job (``skill_id`` ``skill1-<library id>``, the strategy as
its content), i.e. exactly the way IntraSkill's chunks enter the system prompt (the package's hints block,
whose caveat plays the reference's "lessons may be outdated" warning); the runtime is unchanged.

Reply failures follow method §10.2: no well-formed ``<query>`` → the task instruction is the retrieval query;
a bad ``<rank>`` → the first retrieved candidate is used (the identity order; R_rerank 0 downstream); a bad
distillation → no skill. Each is a protocol error of its reply type (:attr:`Skill1Episode.protocol_errors`).
Every reply is its own policy session (``<episode id>/query|rank|distill``); in-process policies return its
exact token stream, kept in :attr:`Skill1Episode.reply_tokens` for the trainer's segments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig, generate_isolated, run_episodes
from intraskill.agent.skill1_replies import (
    GENERATION_ERROR,
    REPLY_KINDS,
    DistillReply,
    QueryReply,
    RankReply,
    ReplyFailure,
    ReplyKind,
    distill_messages,
    episode_summary,
    parse_distill,
    parse_query,
    parse_rank,
    query_messages,
    rank_messages,
)
from intraskill.agent.traces import EpisodeTrace
from intraskill.agent.views import view_persona
from intraskill.chat.base import ChatRequest, Generation, Policy, SessionTokens
from intraskill.hashing import seed32
from intraskill.params import Skill1Params
from intraskill.skills.bank import Skill
from intraskill.skills.library import LibrarySkill, SkillLibrary
from intraskill.skills.retrieval import Candidate, Encoder, retrieve

SKILL1_SKILL_PREFIX = "skill1-"
"""``skill_id`` prefix of a library skill injected into an episode."""
SKILL1_EPISODE_SCHEMA = "intraskill-skill1-episode-v1"
"""``schema_version`` of a :meth:`Skill1Episode.to_dict` record."""


@dataclass(frozen=True)
class TaskView:
    """What the agent is shown of a task before its episode: the instruction and the (viewed) persona."""

    task_id: int
    instruction: str
    persona: Mapping[str, Any]


@dataclass
class Skill1Episode:
    """One Skill1 rollout: its replies, the candidates (U as at the start of the step), the episode.

    ``rank`` is ``None`` when nothing was retrieved; ``distill`` is ``None`` when the episode failed
    technically (there is nothing to reflect on). ``reply_tokens`` holds the token stream of each reply an
    in-process policy produced; the episode's own stream is ``result.session_tokens``.
    """

    job: EpisodeJob
    task: TaskView
    query: QueryReply | ReplyFailure
    candidates: tuple[Candidate, ...]
    rank: RankReply | ReplyFailure | None
    result: EpisodeResult
    distill: DistillReply | ReplyFailure | None
    reply_tokens: dict[ReplyKind, SessionTokens] = field(default_factory=dict)

    @property
    def query_text(self) -> str:
        """The retrieval query: the reply's, or the task instruction when it did not parse (method §10.2)."""
        return self.query.query if isinstance(self.query, QueryReply) else self.task.instruction

    @property
    def retrieved(self) -> tuple[int, ...]:
        """Library ids of the candidates in retrieval order."""
        return tuple(candidate.skill.skill_id for candidate in self.candidates)

    @property
    def ranking(self) -> tuple[int, ...] | None:
        """The parsed rank reply (0-based positions into the candidates), ``None`` when there is none."""
        return self.rank.order if isinstance(self.rank, RankReply) else None

    @property
    def selected(self) -> LibrarySkill | None:
        """z: the top-ranked candidate (the first retrieved after a bad rank reply), ``None`` without any."""
        if not self.candidates:
            return None
        return self.candidates[self.ranking[0] if self.ranking else 0].skill

    @property
    def success(self) -> bool | None:
        """r = 1; ``None`` for an unscored episode."""
        return None if not self.result.scored else self.result.reward.r_success == 1.0

    @property
    def protocol_errors(self) -> dict[str, int]:
        """Malformed replies per type: ``query``, ``rank``, ``distill`` (0/1) and the episode's ``act`` turns."""
        def malformed(reply: object) -> int:
            return int(isinstance(reply, ReplyFailure) and reply.is_protocol_error)

        return {"query": malformed(self.query), "rank": malformed(self.rank), "act": self.result.protocol_errors,
                "distill": malformed(self.distill)}

    def failures(self) -> list[ReplyFailure]:
        """Every reply failure of the rollout (protocol errors and generation errors)."""
        return [reply for reply in (self.query, self.rank, self.distill) if isinstance(reply, ReplyFailure)]

    def to_dict(self) -> dict[str, Any]:
        """The JSONL record of the rollout: job, task view, replies, candidates, trace and token streams."""
        job, result = self.job, self.result
        if result.trace is None:
            raise ValueError(f"episode {job.episode_id}: a result without its trace cannot be recorded")
        return {
            "schema_version": SKILL1_EPISODE_SCHEMA,
            "job": {"episode_id": job.episode_id, "task_id": job.task_id, "sample_id": job.sample_id,
                    "seed": job.seed},
            "task": {"task_id": self.task.task_id, "instruction": self.task.instruction,
                     "persona": dict(self.task.persona)},
            "query": _reply_record(self.query),
            "candidates": [{"skill": c.skill.to_dict(), "similarity": c.similarity, "score": c.score}
                           for c in self.candidates],
            "rank": _reply_record(self.rank),
            "trace": result.trace.to_dict(),
            "session_tokens": result.session_tokens.to_dict() if result.session_tokens is not None else None,
            "distill": _reply_record(self.distill),
            "reply_tokens": {kind: tokens.to_dict() for kind, tokens in self.reply_tokens.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Skill1Episode:
        """Parse a :meth:`to_dict` record; refuses another schema version."""
        if data.get("schema_version") != SKILL1_EPISODE_SCHEMA:
            raise ValueError(f"schema_version: expected {SKILL1_EPISODE_SCHEMA!r}, got {data.get('schema_version')!r}")
        job, task = data["job"], data["task"]
        tokens = data["session_tokens"]
        return cls(
            EpisodeJob(job["episode_id"], int(job["task_id"]), int(job["sample_id"]), seed=int(job["seed"])),
            TaskView(int(task["task_id"]), task["instruction"], dict(task["persona"])),
            _reply_from_record("query", data["query"]),
            tuple(Candidate(LibrarySkill.from_dict(c["skill"]), float(c["similarity"]), float(c["score"]))
                  for c in data["candidates"]),
            _reply_from_record("rank", data["rank"]),
            EpisodeResult.from_trace(EpisodeTrace.from_dict(data["trace"]),
                                     SessionTokens.from_dict(tokens) if tokens is not None else None),
            _reply_from_record("distill", data["distill"]),
            {kind: SessionTokens.from_dict(record) for kind, record in data["reply_tokens"].items()},
        )


def _reply_record(reply: QueryReply | RankReply | DistillReply | ReplyFailure | None) -> dict[str, Any] | None:
    if reply is None:
        return None
    if isinstance(reply, ReplyFailure):
        return {"failure": {"code": reply.code, "detail": reply.detail}}
    return {"reply": asdict(reply)}


def _reply_from_record(kind: ReplyKind, record: Mapping[str, Any] | None) -> Any:
    if record is None:
        return None
    if "failure" in record:
        return ReplyFailure(kind, record["failure"]["code"], record["failure"]["detail"])
    reply = record["reply"]
    if kind == "rank":
        return RankReply(tuple(int(i) for i in reply["order"]))
    return QueryReply(**reply) if kind == "query" else DistillReply(**reply)


def protocol_error_counts(episodes: Sequence[Skill1Episode]) -> dict[str, int]:
    """Protocol errors per reply type summed over ``episodes``."""
    totals = {"query": 0, "rank": 0, "act": 0, "distill": 0}
    for episode in episodes:
        for kind, count in episode.protocol_errors.items():
            totals[kind] += count
    return totals


def library_skill_chunk(skill: LibrarySkill) -> Skill:
    """A library skill as the episode's injected skill: its strategy under ``skill1-<id>``."""
    return Skill(f"{SKILL1_SKILL_PREFIX}{skill.skill_id}", skill.strat)


def read_task(env_factory: Callable[[], Environment], task_id: int, config: RuntimeConfig) -> TaskView:
    """The task's instruction and persona as the episode's prompt will show them (one reset, then close)."""
    env = env_factory()
    try:
        reset = env.reset(task_id)
    finally:
        env.close()
    if "goal" in reset:
        raise RuntimeError(f"task {task_id}: reset payload carries the private goal; refusing to build a prompt")
    return TaskView(task_id, reset["task_instruction"], view_persona(reset.get("user_persona") or {}, config.view))


def _reply_batch(
    policy: Policy,
    kind: ReplyKind,
    jobs: Sequence[EpisodeJob],
    messages: Sequence[list[dict[str, str]]],
    config: RuntimeConfig,
    skill1: Skill1Params,
) -> list[tuple[Generation | BaseException, SessionTokens | None]]:
    """One ``generate`` over the jobs' replies of ``kind``, each in its own session, then the sessions' tokens."""
    requests = [
        ChatRequest(f"{job.episode_id}/{kind}", list(chat), [], getattr(skill1, f"{kind}_max_tokens"),
                    config.temperature, config.top_p, seed32(f"{job.seed}:{kind}"))
        for job, chat in zip(jobs, messages)
    ]
    outcomes = generate_isolated(policy, requests) if requests else []
    tokens = [policy.end_session(request.session_id) for request in requests]
    return list(zip(outcomes, tokens))


def _parsed(
    kind: ReplyKind,
    outcome: Generation | BaseException,
    parse: Callable[[Generation], Any],
) -> Any:
    if isinstance(outcome, BaseException):
        return ReplyFailure(kind, GENERATION_ERROR, f"{type(outcome).__name__}: {outcome}"[:200])
    return parse(outcome)


def run_skill1_episodes(
    policy: Policy,
    env_factory: Callable[[], Environment],
    jobs: Sequence[EpisodeJob],
    library: SkillLibrary,
    encoder: Encoder,
    config: RuntimeConfig,
    skill1: Skill1Params = Skill1Params(),
    trace_writer: Any | None = None,
    progress: bool = False,
    distill: bool = True,
) -> list[Skill1Episode]:
    """Run the Skill1 trajectory of every job (module docstring), phase by phase in batches; job order.

    ``skill1`` gives the retrieval (mode, K, UCB weights) and the replies' budgets and distillation context;
    sampling follows ``config``. Jobs carry no skills of their own (the selected library skill is injected).
    ``trace_writer`` receives
    the episodes' traces as :func:`~intraskill.agent.runtime.run_episodes` writes them. ``distill=False``
    stops after the episode (deployment: no distillation reply, :attr:`Skill1Episode.distill` ``None``).
    """
    for job in jobs:
        if job.skills or job.assignment is not None:
            raise ValueError(f"job {job.episode_id}: a Skill1 job carries no skills or assignment of its own")
    views: dict[int, TaskView] = {}
    for job in jobs:
        if job.task_id not in views:
            views[job.task_id] = read_task(env_factory, job.task_id, config)
    tasks = [views[job.task_id] for job in jobs]
    language = config.language

    query_out = _reply_batch(policy, "query", jobs,
                             [query_messages(t.instruction, t.persona, language) for t in tasks], config, skill1)
    queries = [_parsed("query", outcome, parse_query) for outcome, _ in query_out]
    texts = [q.query if isinstance(q, QueryReply) else t.instruction for q, t in zip(queries, tasks)]
    candidates = [retrieve(text, library, encoder, skill1) for text in texts]

    ranked = [i for i, found in enumerate(candidates) if found]
    rank_out = _reply_batch(
        policy, "rank", [jobs[i] for i in ranked],
        [rank_messages(tasks[i].instruction, tasks[i].persona,
                       [(c.skill.desc, c.skill.strat) for c in candidates[i]], language) for i in ranked],
        config, skill1,
    )
    ranks: list[RankReply | ReplyFailure | None] = [None] * len(jobs)
    rank_tokens: dict[int, SessionTokens | None] = {}
    for i, (outcome, tokens) in zip(ranked, rank_out):
        ranks[i] = _parsed("rank", outcome, lambda generation: parse_rank(generation, len(candidates[i])))
        rank_tokens[i] = tokens

    episode_jobs = []
    for job, found, rank in zip(jobs, candidates, ranks):
        order = rank.order if isinstance(rank, RankReply) else (0,)
        skills = (library_skill_chunk(found[order[0]].skill),) if found else ()
        episode_jobs.append(EpisodeJob(job.episode_id, job.task_id, job.sample_id, skills, None, job.seed))
    results = run_episodes(policy, env_factory, episode_jobs, config, trace_writer, progress)

    reflected = [i for i, result in enumerate(results) if result.scored and distill]
    distill_out = _reply_batch(
        policy, "distill", [jobs[i] for i in reflected],
        [distill_messages(tasks[i].instruction, tasks[i].persona, _summary(results[i], language, skill1), language)
         for i in reflected],
        config, skill1,
    )
    distills: list[DistillReply | ReplyFailure | None] = [None] * len(jobs)
    distill_tokens: dict[int, SessionTokens | None] = {}
    for i, (outcome, tokens) in zip(reflected, distill_out):
        distills[i] = _parsed("distill", outcome, parse_distill)
        distill_tokens[i] = tokens

    episodes = []
    for i, job in enumerate(jobs):
        streams = {"query": query_out[i][1], "rank": rank_tokens.get(i), "distill": distill_tokens.get(i)}
        episodes.append(Skill1Episode(
            job, tasks[i], queries[i], candidates[i], ranks[i], results[i], distills[i],
            {kind: streams[kind] for kind in REPLY_KINDS if streams[kind] is not None},
        ))
    return episodes


def _summary(result: EpisodeResult, language: str, skill1: Skill1Params) -> str:
    turns = result.trace.turns
    actions = [(turn.action, turn.action_valid, turn.protocol_error) for turn in turns]
    observations = [turn.observation for turn in turns] if skill1.distill_context == "trajectory" else None
    return episode_summary(actions, result.termination_reason, result.reward.r_success == 1.0, language,
                           observations, skill1.distill_context_chars)
