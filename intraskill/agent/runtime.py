"""The lockstep episode runtime: many live episodes, one ``policy.generate`` per turn.

Reference: docs/method.md §6.2 (per-sample loop, turn outcomes, reward validity, unscored
placeholders) and docs/store.md §4.2/§4.4 (tools per turn, protocol errors, 30 model turns →
``action_limit``, ``finish_reason == "length"`` without one valid call → ``generation_length``,
reward 0, no retry). An exception from one episode's environment or policy marks only that episode
``failed`` (unscored, with the error recorded); the other episodes go on.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from intraskill.agent.env import Environment
from intraskill.agent.prompts import (
    build_first_user_message,
    build_system_message,
    prompt_identity,
)
from intraskill.agent.protocol import interpret_generation, observation_message, turn_messages
from intraskill.agent.tools import build_tools, tool_names
from intraskill.agent.traces import EpisodeStatus, EpisodeTrace, TurnRecord, record_step, reward_from_terminal
from intraskill.agent.views import (
    check_view,
    page_text,
    store_action,
    view_actions,
    view_hints,
    view_persona,
    view_skills,
)
from intraskill.chat.base import ChatRequest, ContextFull, Generation, Policy, SessionTokens
from intraskill.hashing import seed32
from intraskill.params import ModelParams, SamplingParams, StoreParams
from intraskill.phases import phase
from intraskill.shop.actions import LANGUAGES
from intraskill.shop.house_codes import HouseCodes
from intraskill.shop.reward import Reward
from intraskill.skills.bank import Skill
from intraskill.skills.curriculum import GroupAssignment

LOGGER = logging.getLogger(__name__)
_SAMPLING, _STORE, _MODEL = SamplingParams(), StoreParams(), ModelParams()
"""The runtime's defaults, written once in :mod:`intraskill.params`."""

ACTION_LIMIT = "action_limit"
GENERATION_LENGTH = "generation_length"


def episode_id(task_id: int, sample_id: int) -> str:
    """``task-{id:06d}__sample-{k:03d}`` (docs/store.md §1, runtime loading)."""
    return f"task-{task_id:06d}__sample-{sample_id:03d}"


def episode_seed(seed: int, task_id: int, sample_id: int) -> int:
    """The episode seed: first 4 bytes of SHA-256 of ``"seed:task_id:sample_id"`` (method §8)."""
    return seed32(f"{seed}:{task_id}:{sample_id}")


@dataclass(frozen=True)
class RuntimeConfig:
    """Decoding and budget settings of the runtime.

    What it adds to the params sections it reads (:meth:`from_params`): it joins the ``sampling`` section with the
    store's language, the model's view and its house-code table (a :class:`~intraskill.shop.house_codes.HouseCodes`,
    built once) into what one episode runs under, and it is also built without a parameter set (the slime rollout,
    evaluation budgets, tests), so it checks its own values. Defaults are the sections'.

    Parameters
    ----------
    max_turns : model turns per episode, protocol-error turns included.
    max_tokens_per_turn : completion budget of one turn.
    temperature : sampling temperature (0 is greedy).
    top_p : nucleus mass; must be 1.0 when the token stream is trained on.
    language : prompt language, ``"en"`` (default) or ``"zh"``.
    view : what the agent is shown, ``"standard"`` (default), the organism's ``"compact"``,
        ``"compact_hints"`` or ``"reader"`` (:mod:`intraskill.agent.views`).
    house_codes : the store's house codes (the reader testbed): the persona's colour is shown as its code
        (:mod:`intraskill.shop.house_codes`); ``None`` shows it as it is.
    """

    max_turns: int = _SAMPLING.max_turns
    max_tokens_per_turn: int = _SAMPLING.max_tokens_per_turn
    temperature: float = _SAMPLING.temperature
    top_p: float = _SAMPLING.top_p
    language: str = _STORE.language
    view: str = _MODEL.view
    house_codes: HouseCodes | None = None

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns: must be >= 1, got {self.max_turns}")
        if self.max_tokens_per_turn < 1:
            raise ValueError(f"max_tokens_per_turn: must be >= 1, got {self.max_tokens_per_turn}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature: must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: must be in (0, 1], got {self.top_p}")
        if self.language not in LANGUAGES:
            raise ValueError(f"language: expected one of {LANGUAGES}, got {self.language!r}")
        check_view(self.view)

    @classmethod
    def from_params(cls, sampling: SamplingParams, store: StoreParams, model: ModelParams) -> RuntimeConfig:
        """The runtime of a parameter set: its sampling section, the store's language, the model's view."""
        return cls(max_turns=sampling.max_turns, max_tokens_per_turn=sampling.max_tokens_per_turn,
                   temperature=sampling.temperature, top_p=sampling.top_p, language=store.language,
                   view=model.view,
                   house_codes=None if model.house_codes is None else HouseCodes(model.house_codes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_turns": self.max_turns,
            "max_tokens_per_turn": self.max_tokens_per_turn,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "language": self.language,
            "view": self.view,
            **({} if self.house_codes is None else {"house_codes": self.house_codes.to_dict()}),
        }


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: the task, the sample index, the injected skills (in order) and the seed.

    ``assignment`` (when given) is the group treatment the skills came from; its ``skill_ids``
    must equal the skills' IDs in order.
    """

    episode_id: str
    task_id: int
    sample_id: int
    skills: tuple[Skill, ...] = ()
    assignment: GroupAssignment | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "skills", tuple(self.skills))
        if self.assignment is not None:
            ids = tuple(skill.skill_id for skill in self.skills)
            if ids != self.assignment.skill_ids:
                raise ValueError(
                    f"job {self.episode_id}: skills {list(ids)} differ from assignment.skill_ids "
                    f"{list(self.assignment.skill_ids)}"
                )

    @classmethod
    def create(
        cls,
        task_id: int,
        sample_id: int,
        seed: int,
        skills: Sequence[Skill] = (),
        assignment: GroupAssignment | None = None,
    ) -> "EpisodeJob":
        """A job with the standard episode ID and the derived episode seed of run seed ``seed``."""
        return cls(episode_id(task_id, sample_id), task_id, sample_id, tuple(skills), assignment,
                   episode_seed(seed, task_id, sample_id))


@dataclass
class EpisodeResult:
    """The outcome of one episode; ``session_tokens`` is what the GRPO trainer trains on."""

    episode_id: str
    task_id: int
    sample_id: int
    status: str
    reward: Reward | None
    reward_detail: dict[str, Any] | None
    termination_reason: str | None
    steps: int
    model_steps: int
    protocol_errors: int
    invalid_actions: int
    tokens: dict[str, int]
    duration_ms: int
    session_tokens: SessionTokens | None = None
    assignment: GroupAssignment | None = None
    error: str | None = None
    trace: EpisodeTrace | None = None

    @property
    def scored(self) -> bool:
        """A completed episode with a validated reward."""
        return self.status == EpisodeStatus.COMPLETED.value and self.reward is not None

    @classmethod
    def from_trace(cls, trace: EpisodeTrace, session_tokens: SessionTokens | None = None,
                   assignment: GroupAssignment | None = None) -> "EpisodeResult":
        """The result a finished trace records (its counts, reward and tokens)."""
        return cls(
            episode_id=trace.episode_id, task_id=trace.task_id, sample_id=trace.sample_id, status=trace.status,
            reward=trace.reward, reward_detail=trace.reward_detail, termination_reason=trace.termination_reason,
            tokens=dict(trace.tokens), duration_ms=trace.duration_ms, session_tokens=session_tokens,
            assignment=assignment, error=trace.error, trace=trace, **trace.counts,
        )


@dataclass
class _Episode:
    """Mutable state of one live episode."""

    job: EpisodeJob
    env: Environment | None
    started: float
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)
    trace: EpisodeTrace | None = None
    terminal: dict[str, Any] | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.terminal is not None or self.error is not None


def _provenance(policy: Policy, job: EpisodeJob, config: RuntimeConfig) -> dict[str, Any]:
    """Model, prompt, skill and seed identity; the environment fields are filled in after reset."""
    identity = dict(policy.identity)
    return {
        "model_id": identity.get("model_id"),
        "checkpoint_id": identity.get("checkpoint_id"),
        "backend": identity.get("backend"),
        "prompt": prompt_identity(config.language, config.view).to_dict(),
        "skills": {
            "curriculum_state_id": job.assignment.state_id if job.assignment else None,
            "assignment": job.assignment.to_dict() if job.assignment else None,
        },
        "selected_skills": [
            {"skill_id": s.skill_id, "version": s.version, "content": s.content,
             "content_sha256": s.content_sha256}
            for s in job.skills
        ],
        "seeds": {"episode_seed": job.seed},
        "environment_version": None,
        "task_mode": None,
        "runtime": config.to_dict(),
    }


def _start(
    policy: Policy, job: EpisodeJob, env_factory: Callable[[], Environment], config: RuntimeConfig
) -> _Episode:
    """Open the environment, reset it and build the first two messages (failures mark the episode)."""
    episode = _Episode(job=job, env=None, started=time.monotonic())
    episode.trace = EpisodeTrace(job.episode_id, job.task_id, job.sample_id, EpisodeStatus.FAILED.value,
                                 provenance=_provenance(policy, job, config))
    try:
        episode.env = env_factory()
        with phase("store"):
            reset = episode.env.reset(job.task_id)
        if "goal" in reset:
            raise RuntimeError("reset payload carries the private goal; refusing to build a prompt from it")
        episode.trace.provenance["environment_version"] = reset.get("environment_version")
        episode.trace.provenance["task_mode"] = reset.get("task_mode")
        episode.trace.task_instruction = reset["task_instruction"]
        persona = view_persona(reset.get("user_persona") or {}, config.view)
        if config.house_codes is not None:
            persona = config.house_codes.encode(persona, job.seed)
        episode.messages = [
            build_system_message(persona,
                                 view_skills(job.skills, config.view), config.language, config.view),
            build_first_user_message(reset["task_instruction"], _page(reset, episode, config),
                                     config.language),
        ]
        offered, episode.aliases = view_actions(reset["observation_state"], config.view)
        episode.tools = build_tools(offered, config.language)
    except Exception as error:  # noqa: BLE001 - one episode's failure must not stop the batch
        _fail(episode, error)
    return episode


def _page(payload: dict[str, Any], episode: _Episode, config: RuntimeConfig) -> str:
    """The page text of a payload as this episode's agent sees it (its chunks' hints included)."""
    return page_text(payload, config.view, config.language, view_hints(episode.job.skills, config.view))


def _fail(episode: _Episode, error: BaseException) -> None:
    episode.error = f"{type(error).__name__}: {error}"
    LOGGER.warning("episode %s failed: %s", episode.job.episode_id, episode.error)


def _request(episode: _Episode, config: RuntimeConfig) -> ChatRequest:
    turn = len(episode.trace.turns)
    return ChatRequest(
        session_id=episode.job.episode_id,
        messages=list(episode.messages),
        tools=episode.tools,
        max_tokens=config.max_tokens_per_turn,
        temperature=config.temperature,
        top_p=config.top_p,
        seed=seed32(f"{episode.job.seed}:turn:{turn}"),
    )


def generate_isolated(policy: Policy, requests: list[ChatRequest]) -> list[Generation | BaseException]:
    """One batched call; if it raises, retry each request alone so only the culprits fail."""
    try:
        generations = policy.generate(requests)
        if len(generations) != len(requests):
            raise RuntimeError(f"policy returned {len(generations)} generations for {len(requests)} requests")
        return list(generations)
    except Exception as error:  # noqa: BLE001
        if len(requests) == 1:
            return [error]
        LOGGER.warning("batched generate failed (%s); isolating %d requests", error, len(requests))
        return [outcome for request in requests for outcome in generate_isolated(policy, [request])]


def _apply(episode: _Episode, generation: Generation, config: RuntimeConfig) -> None:
    """Advance one episode by the model's turn."""
    decision = interpret_generation(generation, episode.tools)
    record = TurnRecord(
        turn=len(episode.trace.turns),
        raw_output=generation.text,
        content=generation.content,
        tool_calls=[{"name": c.name, "arguments": c.arguments} for c in generation.tool_calls],
        finish_reason=generation.finish_reason,
        parse_error=generation.parse_error,
        protocol_error=decision.error.value if decision.error else None,
        action=decision.action,
        available_tools=tool_names(episode.tools),
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
    )
    episode.trace.turns.append(record)
    messages = turn_messages(generation, decision, episode.tools, config.language)
    if not decision.is_valid:
        if generation.finish_reason == "length":
            episode.terminal = episode.env.terminate(GENERATION_LENGTH)
            return
        episode.messages.extend(messages)
    else:
        record.action = store_action(decision.action, episode.aliases)
        with phase("store"):
            payload = episode.env.step(record.action)
        state = record_step(record, payload)
        if payload.get("done"):
            episode.terminal = payload
            return
        episode.messages.extend(messages)
        episode.messages.append(observation_message(messages[0], _page(payload, episode, config)))
        offered, episode.aliases = view_actions(state, config.view)
        episode.tools = build_tools(offered, config.language)
    if len(episode.trace.turns) >= config.max_turns:
        episode.terminal = episode.env.terminate(ACTION_LIMIT)


def _finish(policy: Policy, episode: _Episode) -> EpisodeResult:
    """Score (or mark failed), free the policy session, close the environment, build the result."""
    trace = episode.trace
    session_tokens = None
    try:
        if episode.error is None:
            trace.reward = reward_from_terminal(episode.terminal)
            trace.reward_detail = dict(episode.terminal.get("reward_detail") or {})
            trace.termination_reason = episode.terminal.get("termination_reason")
            trace.purchase = episode.terminal.get("purchase")
            trace.private_goal = episode.terminal.get("goal")
        session_tokens = policy.end_session(episode.job.episode_id)
    except Exception as error:  # noqa: BLE001
        _fail(episode, error)
    finally:
        if episode.env is not None:
            try:
                episode.env.close()
            except Exception as error:  # noqa: BLE001
                LOGGER.warning("episode %s: close failed: %s", episode.job.episode_id, error)
    turns = trace.turns
    trace.status = (EpisodeStatus.FAILED if episode.error else EpisodeStatus.COMPLETED).value
    trace.error = episode.error
    if episode.error:
        trace.reward, session_tokens = None, None
    trace.counts = {
        "steps": sum(turn.action is not None for turn in turns),
        "model_steps": len(turns),
        "protocol_errors": sum(turn.protocol_error is not None for turn in turns),
        "invalid_actions": sum(turn.action is not None and turn.action_valid is False for turn in turns),
    }
    trace.tokens = {
        "prompt": sum(turn.prompt_tokens for turn in turns),
        "completion": sum(turn.completion_tokens for turn in turns),
    }
    trace.duration_ms = int(round((time.monotonic() - episode.started) * 1000))
    return EpisodeResult.from_trace(trace, session_tokens, episode.job.assignment)


def run_episodes(
    policy: Policy,
    env_factory: Callable[[], Environment],
    jobs: Sequence[EpisodeJob],
    config: RuntimeConfig,
    trace_writer: Any | None = None,
    progress: bool = True,
) -> list[EpisodeResult]:
    """Run ``jobs`` in lockstep and return their results in job order.

    Each turn builds one :class:`ChatRequest` per live episode and calls ``policy.generate`` once for
    the whole batch, then steps each episode's environment. A finished episode gets
    ``policy.end_session`` (its :class:`SessionTokens` are attached), its environment closed, and its
    trace appended to ``trace_writer`` (anything with ``append(dict)``, e.g. a ``JsonlWriter``). An episode
    whose next prompt leaves no room in the model's context (:class:`~intraskill.chat.base.ContextFull`) ends
    as a scored ``generation_length`` terminal, as the slime path ends it; on its first prompt it fails.
    """
    ids = [job.episode_id for job in jobs]
    if len(set(ids)) != len(ids):
        raise ValueError("jobs: episode_id values must be unique within one run")
    results: dict[str, EpisodeResult] = {}
    bar = tqdm(total=len(jobs), desc="episodes", disable=not progress)

    def finish(episode: _Episode) -> None:
        result = _finish(policy, episode)
        results[result.episode_id] = result
        if trace_writer is not None:
            with phase("io"):
                trace_writer.append(result.trace.to_dict())
        bar.update(1)

    live = []
    for job in jobs:
        episode = _start(policy, job, env_factory, config)
        if episode.done:
            finish(episode)
        else:
            live.append(episode)
    while live:
        outcomes = generate_isolated(policy, [_request(episode, config) for episode in live])
        for episode, outcome in zip(live, outcomes):
            try:
                if isinstance(outcome, ContextFull) and episode.trace.turns:
                    episode.terminal = episode.env.terminate(GENERATION_LENGTH)
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    _apply(episode, outcome, config)
            except Exception as error:  # noqa: BLE001
                _fail(episode, error)
        for episode in [episode for episode in live if episode.done]:
            finish(episode)
        live = [episode for episode in live if not episode.done]
    bar.close()
    return [results[episode_id] for episode_id in ids]
