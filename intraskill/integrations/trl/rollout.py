"""A TRL ``rollout_func`` over the store: a prompt names a task, a completion is a whole episode.

TRL's ``GRPOTrainer`` calls ``rollout_func(prompts, trainer)`` with this process's prompts, each repeated
``num_generations`` times in a row (its sampler builds the groups), and expects one completion per prompt:
``prompt_ids``, ``completion_ids`` and ``logprobs`` (one per completion token). Any other field goes to the reward
functions, except ``env_mask`` (1 = a token the model sampled, 0 = a token the environment wrote), which keeps the
environment's tokens out of the loss.

A prompt here is :func:`task_prompt` of a store task. :class:`StoreRollout` plays one episode per prompt with the
package's lockstep runtime (:func:`~intraskill.agent.runtime.run_episodes`) and an
:class:`~intraskill.policy.hf.HFPolicy` over the trainer's own model, then cuts each episode's exact token stream
(:class:`~intraskill.chat.base.SessionTokens`) at its first sampled token (:func:`split_session`): before it the
prompt (system message, skills, task, first page), after it the completion (every model turn and every page the
store returned; the pages have ``env_mask`` 0 and log-prob 0). :func:`store_reward` hands TRL the store's reward
(``r_strict``, the package trainer's reward); a failed episode is unscored (``None``: TRL gives it no advantage).
Skill chunks enter the prompt through a curriculum (a bank with group-shared masks,
:func:`~intraskill.skills.curriculum.assign_group`): every episode of a group sees the same chunks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig, run_episodes
from intraskill.chat.base import SessionTokens
from intraskill.hashing import seed32
from intraskill.policy.hf import HFPolicy
from intraskill.skills.curriculum import CurriculumState, assign_group

TASK_PROMPT = re.compile(r"^store task (\d+)$")


def task_prompt(task_id: int) -> str:
    """The dataset prompt of store task ``task_id``: ``"store task <id>"``."""
    return f"store task {int(task_id)}"


def prompt_task_id(prompt: Any) -> int:
    """The task a :func:`task_prompt` names; ``ValueError`` naming the prompt otherwise."""
    match = TASK_PROMPT.match(prompt) if isinstance(prompt, str) else None
    if match is None:
        raise ValueError(f"prompt: expected 'store task <id>' (intraskill.integrations.trl.rollout.task_prompt), "
                         f"got {prompt!r}")
    return int(match.group(1))


@dataclass
class StoreClock:
    """Seconds spent inside the store (reset, step, terminate) and the number of those calls."""

    seconds: float = 0.0
    calls: int = 0


class TimedEnvironment:
    """An :class:`~intraskill.agent.env.Environment` adding the time of each store call to a :class:`StoreClock`."""

    def __init__(self, env: Environment, clock: StoreClock) -> None:
        self._env = env
        self._clock = clock

    def _timed(self, call: Callable[[Any], dict[str, Any]], argument: Any) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            return call(argument)
        finally:
            self._clock.seconds += time.perf_counter() - start
            self._clock.calls += 1

    def reset(self, task_id: int) -> dict[str, Any]:
        return self._timed(self._env.reset, task_id)

    def step(self, action: str) -> dict[str, Any]:
        return self._timed(self._env.step, action)

    def terminate(self, reason: str) -> dict[str, Any]:
        return self._timed(self._env.terminate, reason)

    def close(self) -> None:
        self._env.close()


@dataclass(frozen=True)
class SplitTokens:
    """One episode as TRL takes it: the prompt, then every later token with its log-prob and ``env_mask``."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]


def split_session(tokens: SessionTokens | None, pad_token_id: int) -> SplitTokens:
    """Cut an episode's token stream at its first sampled token.

    An episode with no sampled token (it failed before the model's first turn) becomes one padding token
    with ``env_mask`` 0, so it trains nothing; its reward is ``None`` as well.
    """
    if tokens is None or 1 not in tokens.loss_mask:
        prompt = list(tokens.input_ids) if tokens is not None and tokens.input_ids else [pad_token_id]
        return SplitTokens(prompt, [pad_token_id], [0.0], [0])
    start = tokens.loss_mask.index(1)
    return SplitTokens(list(tokens.input_ids[:start]), list(tokens.input_ids[start:]),
                       list(tokens.logprobs[start:]), list(tokens.loss_mask[start:]))


@dataclass(frozen=True)
class RolloutStats:
    """One ``rollout_func`` call: episodes, where the time went (wall, and this process's CPU), and tokens."""

    episodes: int
    scored: int
    successes: int
    seconds: float
    cpu_seconds: float
    store_seconds: float
    store_calls: int
    sampled_tokens: int
    total_tokens: int

    @property
    def generation_seconds(self) -> float:
        """The call's time outside the store: the model's turns (prefill and decoding) and the runtime."""
        return self.seconds - self.store_seconds


@dataclass
class StoreRollout:
    """TRL's ``rollout_func``: one store episode per prompt, played by the trainer's model.

    Parameters
    ----------
    env_factory : opens one environment per episode (e.g. ``lambda: InProcessEnvironment(engine)``).
    runtime : turns, tokens per turn, temperature (set TRL's ``temperature`` to the same), language, view.
    seed : every episode seed derives from it and the episode id (``trl-<call>-<group>__sample-<k>``).
    curriculum : skill chunks with group-shared masks (``None``: every episode bare).
    max_batch : episodes decoded together (:class:`~intraskill.policy.hf.HFPolicy`).
    progress : show the runtime's progress bar.

    After each call, ``results`` holds its episodes and ``stats`` gains its :class:`RolloutStats`.
    """

    env_factory: Callable[[], Environment]
    runtime: RuntimeConfig
    seed: int
    curriculum: CurriculumState | None = None
    max_batch: int = 64
    progress: bool = False
    results: list[EpisodeResult] = field(default_factory=list, init=False)
    stats: list[RolloutStats] = field(default_factory=list, init=False)

    def jobs(self, prompts: Sequence[Any], group_size: int) -> list[EpisodeJob]:
        """The episodes of one call: ``len(prompts) / group_size`` groups of consecutive equal prompts."""
        if group_size < 1 or len(prompts) % group_size:
            raise ValueError(f"prompts: {len(prompts)} prompts do not form groups of num_generations={group_size}")
        call = len(self.stats)
        jobs = []
        for group in range(len(prompts) // group_size):
            members = prompts[group * group_size:(group + 1) * group_size]
            if any(prompt != members[0] for prompt in members):
                raise ValueError(f"prompts: group {group} mixes prompts {sorted(set(map(str, members)))}; "
                                 f"TRL repeats each prompt num_generations times in a row")
            task_id = prompt_task_id(members[0])
            key = f"trl-{call:05d}-{group:03d}"
            assignment = assign_group(self.curriculum, key) if self.curriculum is not None else None
            skills = self.curriculum.skills(assignment.skill_ids) if assignment and assignment.skill_ids else []
            for sample in range(group_size):
                episode_id = f"{key}__sample-{sample:03d}"
                jobs.append(EpisodeJob(episode_id, task_id, sample, tuple(skills), assignment,
                                       seed32(f"{self.seed}:{episode_id}")))
        return jobs

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play the prompts' episodes with ``trainer.model``; TRL's rollout output (see the module docstring)."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        group_size = trainer.num_generations if model.training else trainer.num_generations_eval
        jobs = self.jobs(prompts, group_size)
        tokenizer = trainer.processing_class
        weights = next(model.parameters())
        was_training = model.training
        clock = StoreClock()
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            policy = HFPolicy(model, tokenizer, device=str(weights.device), dtype=weights.dtype,
                              max_batch=self.max_batch)
            self.results = run_episodes(policy, lambda: TimedEnvironment(self.env_factory(), clock), jobs,
                                        self.runtime, progress=self.progress)
        finally:
            model.train(was_training)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        pad = tokenizer.pad_token_id
        splits = [split_session(result.session_tokens, pad) for result in self.results]
        scored = [result.reward if result.scored else None for result in self.results]
        self.stats.append(RolloutStats(
            episodes=len(self.results), scored=sum(r is not None for r in scored),
            successes=sum(r is not None and r.r_success == 1.0 for r in scored), seconds=seconds,
            cpu_seconds=cpu_seconds, store_seconds=clock.seconds, store_calls=clock.calls,
            sampled_tokens=sum(sum(s.env_mask) for s in splits),
            total_tokens=sum(len(s.prompt_ids) + len(s.completion_ids) for s in splits)))
        return {
            "prompt_ids": [s.prompt_ids for s in splits],
            "completion_ids": [s.completion_ids for s in splits],
            "logprobs": [s.logprobs for s in splits],
            "env_mask": [s.env_mask for s in splits],
            "r_strict": [r.reward if r is not None else None for r in scored],
            "r_success": [r.r_success if r is not None else None for r in scored],
        }


def store_reward(completions: list[Any], r_strict: list[float | None], **kwargs: Any) -> list[float | None]:
    """TRL reward function: the store's reward of each episode (``r_strict``; ``None`` for an unscored one)."""
    if len(r_strict) != len(completions):
        raise ValueError(f"r_strict: {len(r_strict)} rewards for {len(completions)} completions")
    return list(r_strict)
