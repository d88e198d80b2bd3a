"""One training episode against the store service and SGLang's ``/generate``, with exact token bookkeeping.

Reference: ``docs/method.md`` §6.2 (per-sample loop, turn outcomes, reward validity) and
``docs/slime.md`` §4 (the multi-turn pattern of slime's ``examples/search-r1``: POST
``http://{sglang_router_ip}:{sglang_router_port}/generate`` with ``input_ids``, the sampling
parameters and ``return_logprob``; take ids and log-probs from ``meta_info.output_token_logprobs``
(``[logprob, token_id, …]`` per token) and never re-tokenize the model's text).

The conversation is rendered with the package's append-only ChatML (:mod:`intraskill.chat.chatml`),
the same format the CPU tier trains on, so one episode is ONE token-contiguous stream: sampled
tokens (loss mask 1, their SGLang log-probs) interleaved with rendered observation / feedback /
template tokens (loss mask 0, log-prob 0.0). slime's agent adapters (``slime.agent.adapters``, an
aiohttp proxy over a ``TrajectoryManager`` that forks segments when the served chat template
re-renders history) are deliberately not used: with an append-only rendering there is nothing to
fork, and the ``/generate`` contract is the stable part of slime's public surface.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from intraskill.agent.prompts import build_first_user_message, build_system_message, prompt_identity
from intraskill.agent.protocol import interpret_generation, observation_message, turn_messages
from intraskill.agent.runtime import ACTION_LIMIT, GENERATION_LENGTH
from intraskill.agent.tools import build_tools, tool_names
from intraskill.agent.traces import EpisodeStatus, EpisodeTrace, TurnRecord, record_step, reward_from_terminal
from intraskill.chat.base import Generation
from intraskill.chat.chatml import (
    END_OF_TEXT,
    IM_END,
    drop_reasoning,
    parse_tool_calls,
    render_messages,
)
from intraskill.shop.client import AsyncShopClient
from intraskill.skills.bank import Skill
from intraskill.skills.curriculum import MODE_DIAGNOSTIC_FULL_SKILL, GroupAssignment


class EpisodeAborted(RuntimeError):
    """SGLang aborted the request (slime stops in-flight generations once a batch is full)."""


@dataclass
class TokenStream:
    """The exact token stream of one episode; response-side lists are aligned (slime's ``Sample``).

    ``loss_mask[i] == 1`` iff response token ``i`` was sampled by the model; ``log_probs[i]`` is
    its SGLang log-prob there and ``0.0`` where the mask is 0.
    """

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def last_token(self) -> int:
        return (self.response_ids or self.prompt_ids)[-1]

    def append_model(self, token_ids: Sequence[int], log_probs: Sequence[float]) -> None:
        """Append sampled tokens (mask 1); raises unless ids and finite log-probs align."""
        if len(token_ids) != len(log_probs):
            raise ValueError(f"SGLang returned {len(token_ids)} tokens but {len(log_probs)} log-probs")
        if not all(math.isfinite(value) for value in log_probs):
            raise ValueError("SGLang returned a non-finite log-prob")
        self.response_ids.extend(int(t) for t in token_ids)
        self.loss_mask.extend([1] * len(token_ids))
        self.log_probs.extend(float(v) for v in log_probs)

    def append_observation(self, token_ids: Sequence[int]) -> None:
        """Append environment / template tokens (mask 0, log-prob 0.0)."""
        self.response_ids.extend(int(t) for t in token_ids)
        self.loss_mask.extend([0] * len(token_ids))
        self.log_probs.extend([0.0] * len(token_ids))


@dataclass(frozen=True)
class SGLangTurn:
    """One ``/generate`` answer: sampled ids, their log-probs and SGLang's finish type."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: str


async def sglang_generate(
    http: httpx.AsyncClient, url: str, input_ids: list[int], sampling_params: Mapping[str, Any]
) -> SGLangTurn:
    """POST one ``/generate`` request; read ``meta_info.output_token_logprobs`` and ``finish_reason``."""
    body = {"input_ids": input_ids, "sampling_params": dict(sampling_params), "return_logprob": True}
    response = await http.post(url, json=body)
    response.raise_for_status()
    meta = response.json().get("meta_info") or {}
    pairs = meta.get("output_token_logprobs")
    if not isinstance(pairs, list):
        raise ValueError("SGLang response lacks meta_info.output_token_logprobs (send return_logprob)")
    finish = meta.get("finish_reason")
    finish_type = finish.get("type") if isinstance(finish, Mapping) else finish
    return SGLangTurn([int(p[1]) for p in pairs], [float(p[0]) for p in pairs], str(finish_type or "stop"))


@dataclass(frozen=True)
class EpisodeSettings:
    """Everything one episode needs besides its task and skills."""

    sglang_url: str
    store_url: str
    store_timeout: float
    store_trust_env: bool
    persona: bool
    max_turns: int
    max_new_tokens: int
    context_limit: int
    language: str
    reasoning_parser: str
    model_id: str | None = None


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode: its ID, task, sibling index and the treatment it runs under."""

    episode_id: str
    task_id: int
    sample_index: int
    assignment: GroupAssignment
    skills: tuple[Skill, ...]

    def __post_init__(self) -> None:
        ids = tuple(skill.skill_id for skill in self.skills)
        if ids != self.assignment.skill_ids:
            raise ValueError(f"episode {self.episode_id}: skills {list(ids)} differ from the assignment's "
                             f"{list(self.assignment.skill_ids)}")


@dataclass
class StreamedEpisode:
    """A finished slime episode: its trace, token stream (``None`` when it never reached the model) and
    reward (the agent runtime's counterpart is ``EpisodeResult``)."""

    trace: EpisodeTrace
    stream: TokenStream | None
    aborted: bool = False

    @property
    def scored(self) -> bool:
        return self.trace.status == EpisodeStatus.COMPLETED.value and self.trace.reward is not None

    @property
    def truncated(self) -> bool:
        return self.trace.termination_reason == GENERATION_LENGTH


class TokenCodec:
    """Tokenizer adapter: the ChatML stop ids, prompt tokenization and completion decoding."""

    def __init__(self, tokenizer: Any, reasoning_parser: str = "none") -> None:
        self.tokenizer = tokenizer
        self.reasoning_parser = reasoning_parser
        im_end = tokenizer.convert_tokens_to_ids(IM_END)
        if im_end is None or im_end == tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer has no {IM_END!r} token; the hooks need a ChatML tokenizer")
        self.im_end_id = int(im_end)
        eos = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
        self.stop_ids = frozenset(i for i in (self.im_end_id, eos, tokenizer.eos_token_id) if i is not None)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False)

    def generation(self, turn: SGLangTurn, prompt_tokens: int) -> Generation:
        """The sampled completion parsed into content and tool calls (reasoning dropped per the parser)."""
        stopped = bool(turn.token_ids) and turn.token_ids[-1] in self.stop_ids
        text = self.decode(turn.token_ids[:-1] if stopped else turn.token_ids)
        parsed = drop_reasoning(text) if self.reasoning_parser == "qwen3" else text
        content, calls, error = parse_tool_calls(parsed)
        return Generation(text=text, content=content, tool_calls=calls,
                          finish_reason="length" if turn.finish_reason == "length" else "stop",
                          prompt_tokens=prompt_tokens, completion_tokens=len(turn.token_ids),
                          token_ids=list(turn.token_ids), logprobs=list(turn.log_probs), parse_error=error)


@functools.lru_cache(maxsize=4)
def _pretrained_tokenizer(path: str) -> Any:
    # deferred: transformers is heavy to import
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_tokenizer(args: Any) -> Any:
    """slime's rollout tokenizer (``GenerateState(args).tokenizer``); without slime, ``--hf-checkpoint``'s."""
    try:
        # deferred: slime exists only on the scale tier's machines
        from slime.rollout.sglang_rollout import GenerateState
    except ImportError:
        checkpoint = getattr(args, "hf_checkpoint", None)
        if not checkpoint:
            raise ValueError("--hf-checkpoint: needed to load the tokenizer outside slime") from None
        return _pretrained_tokenizer(str(checkpoint))
    return GenerateState(args).tokenizer


def _provenance(spec: EpisodeSpec, settings: EpisodeSettings) -> dict[str, Any]:
    return {
        "model_id": settings.model_id,
        "checkpoint_id": None,
        "backend": "sglang",
        "prompt": prompt_identity(settings.language).to_dict(),
        "skills": {
            "curriculum_state_id": spec.assignment.state_id,
            "assignment": spec.assignment.to_dict(),
            "diagnostic_full_skill": spec.assignment.mode == MODE_DIAGNOSTIC_FULL_SKILL,
        },
        "selected_skills": [{"skill_id": s.skill_id, "version": s.version, "content": s.content,
                             "content_sha256": s.content_sha256} for s in spec.skills],
        "environment_version": None,
        "task_mode": None,
        "runtime": {"max_turns": settings.max_turns, "max_tokens_per_turn": settings.max_new_tokens,
                    "context_limit": settings.context_limit, "language": settings.language},
    }


class _Loop:
    """The mutable state of one running episode (see :func:`run_episode`)."""

    def __init__(self, spec: EpisodeSpec, settings: EpisodeSettings, codec: TokenCodec,
                 env: AsyncShopClient, http: httpx.AsyncClient, sampling_params: Mapping[str, Any]) -> None:
        self.spec, self.settings, self.codec, self.env, self.http = spec, settings, codec, env, http
        self.sampling_params = dict(sampling_params)
        self.trace = EpisodeTrace(spec.episode_id, spec.task_id, spec.sample_index,
                                  EpisodeStatus.FAILED.value, provenance=_provenance(spec, settings))
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.stream: TokenStream | None = None
        self.terminal: dict[str, Any] | None = None

    async def start(self) -> None:
        reset = await self.env.reset(self.spec.task_id, persona=self.settings.persona)
        if "goal" in reset:
            raise RuntimeError("reset payload carries the private goal; refusing to build a prompt from it")
        self.trace.provenance["environment_version"] = reset.get("environment_version")
        self.trace.provenance["task_mode"] = reset.get("task_mode")
        self.trace.task_instruction = reset["task_instruction"]
        language = self.settings.language
        self.messages = [build_system_message(reset.get("user_persona") or {}, self.spec.skills, language),
                         build_first_user_message(reset["task_instruction"], reset["observation"], language)]
        self.tools = build_tools(reset["observation_state"], language)
        self.stream = TokenStream(self.codec.encode(render_messages(self.messages, self.tools)))

    async def turn(self) -> None:
        """One model turn; sets ``terminal`` when the episode ends."""
        budget = min(self.settings.max_new_tokens, self.settings.context_limit - len(self.stream))
        if budget < 1 and not self.trace.turns:
            raise ValueError(f"the first prompt ({len(self.stream)} tokens) leaves no room below "
                             f"rollout_max_context_len={self.settings.context_limit}")
        if budget < 1:
            self.terminal = await self.env.terminate(GENERATION_LENGTH)
            return
        stops = sorted(set(self.sampling_params.get("stop_token_ids") or ()) | self.codec.stop_ids)
        params = {**self.sampling_params, "max_new_tokens": budget, "stop_token_ids": stops,
                  "no_stop_trim": True, "skip_special_tokens": False}
        result = await sglang_generate(self.http, self.settings.sglang_url, self.stream.input_ids, params)
        if result.finish_reason == "abort":
            raise EpisodeAborted(f"episode {self.spec.episode_id}: SGLang aborted the request")
        prompt_tokens = len(self.stream)
        self.stream.append_model(result.token_ids, result.log_probs)
        generation = self.codec.generation(result, prompt_tokens)
        await self._apply(generation)

    async def _apply(self, generation: Generation) -> None:
        decision = interpret_generation(generation, self.tools)
        record = TurnRecord(
            turn=len(self.trace.turns), raw_output=generation.text, content=generation.content,
            tool_calls=[{"name": c.name, "arguments": c.arguments} for c in generation.tool_calls],
            finish_reason=generation.finish_reason, parse_error=generation.parse_error,
            protocol_error=decision.error.value if decision.error else None, action=decision.action,
            available_tools=tool_names(self.tools), prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens)
        self.trace.turns.append(record)
        echo_at = len(self.messages)
        new_messages = turn_messages(generation, decision, self.tools, self.settings.language)
        if not decision.is_valid:
            if generation.finish_reason == "length":
                self.terminal = await self.env.terminate(GENERATION_LENGTH)
                return
            self.messages.extend(new_messages)
        else:
            payload = await self.env.step(decision.action)
            state = record_step(record, payload)
            if payload.get("done"):
                self.terminal = payload
                return
            self.messages.extend(new_messages)
            self.messages.append(observation_message(new_messages[0], payload["observation"]))
            self.tools = build_tools(state, self.settings.language)
        if len(self.trace.turns) >= self.settings.max_turns:
            self.terminal = await self.env.terminate(ACTION_LIMIT)
            return
        self._append_context(echo_at + 1)

    def _append_context(self, start: int) -> None:
        """Render the messages after the model's echo (plus the next assistant header) as mask-0 tokens."""
        closing = "\n" if self.stream.last_token == self.codec.im_end_id else f"{IM_END}\n"
        ids = self.codec.encode(closing + render_messages(self.messages, self.tools, start=start))
        self.stream.append_observation(ids)

    def finish(self) -> None:
        """Validate the terminal reward (an invalid reward leaves the episode unscored)."""
        terminal = self.terminal
        self.trace.reward_detail = dict(terminal.get("reward_detail") or {})
        self.trace.termination_reason = terminal.get("termination_reason")
        self.trace.purchase = terminal.get("purchase")
        self.trace.private_goal = terminal.get("goal")
        self.trace.reward = reward_from_terminal(terminal)
        self.trace.status = EpisodeStatus.COMPLETED.value


async def run_episode(spec: EpisodeSpec, settings: EpisodeSettings, codec: TokenCodec,
                      sampling_params: Mapping[str, Any]) -> StreamedEpisode:
    """Run one episode to its terminal; technical failures and aborts return an unscored result.

    ``asyncio.CancelledError`` (slime cancelling a group) propagates after the slot is released.
    """
    started = time.monotonic()
    env = AsyncShopClient(settings.store_url, settings.store_timeout, settings.store_trust_env)
    seconds = settings.store_timeout
    timeout = httpx.Timeout(connect=seconds, read=None, write=seconds, pool=None)
    aborted = False
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as http:
        loop = _Loop(spec, settings, codec, env, http, sampling_params)
        try:
            await loop.start()
            while loop.terminal is None:
                await loop.turn()
            loop.finish()
        except Exception as error:  # noqa: BLE001 - any technical failure makes the episode unscored
            aborted = isinstance(error, EpisodeAborted)
            loop.trace.status, loop.trace.reward = EpisodeStatus.FAILED.value, None
            loop.trace.error = f"{type(error).__name__}: {error}"
        finally:
            await env.close()
    turns = loop.trace.turns
    loop.trace.counts = {
        "steps": sum(turn.action is not None for turn in turns),
        "model_steps": len(turns),
        "protocol_errors": sum(turn.protocol_error is not None for turn in turns),
        "invalid_actions": sum(turn.action is not None and turn.action_valid is False for turn in turns),
    }
    loop.trace.tokens = {"prompt": sum(t.prompt_tokens for t in turns),
                         "completion": sum(t.completion_tokens for t in turns)}
    loop.trace.duration_ms = int(round((time.monotonic() - started) * 1000))
    return StreamedEpisode(loop.trace, loop.stream, aborted)
