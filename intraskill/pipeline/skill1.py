"""One Skill1 rollout step: G rollouts of each task, Algorithm 1's updates and the trainer's samples (§A.2–§A.3).

:func:`run_skill1_groups` plans one GRPO group per task (group indices and episode IDs as the GRPO rollout
step names them) and runs every rollout of every group through
:func:`~intraskill.agent.skill1_episode.run_skill1_episodes`, so the whole step is batched phase by phase.
:func:`skill1_update` then applies :func:`~intraskill.training.skill1_rewards.skill1_step` to the library
(rewards with the step's starting U, EMA, admission) and turns each rollout's four reply types into
:class:`~intraskill.training.skill1_advantages.Skill1Segment` s and trainer samples. Unscored (technically
failed) rollouts are left out of both, as the GRPO step leaves them out of its groups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig
from intraskill.agent.skill1_episode import Skill1Episode, Skill1ReplyConfig, run_skill1_episodes
from intraskill.agent.skill1_replies import DistillReply
from intraskill.chat.base import Policy
from intraskill.hashing import seed32
from intraskill.params import Skill1Params
from intraskill.pipeline.rollout import group_index
from intraskill.skills.library import SkillLibrary
from intraskill.skills.retrieval import Encoder, RetrievalConfig
from intraskill.training.batching import TrainSample
from intraskill.training.skill1_advantages import Skill1Group, Skill1Segment, skill1_train_samples
from intraskill.training.skill1_rewards import DistilledSkill, Skill1Rollout, Skill1StepResult, skill1_step
from intraskill.training.triage import training_episode_id


@dataclass(frozen=True)
class Skill1GroupRun:
    """The G rollouts of each task of one step: ``groups`` maps group index → its episodes in sample order."""

    round_index: int
    step: int
    task_ids: dict[int, int]
    groups: dict[int, tuple[Skill1Episode, ...]]

    @property
    def episodes(self) -> list[Skill1Episode]:
        return [episode for episodes in self.groups.values() for episode in episodes]


@dataclass(frozen=True)
class Skill1Update:
    """What :func:`skill1_update` did: the step's rewards and library changes, the groups and the samples."""

    step: Skill1StepResult
    groups: tuple[Skill1Group, ...]
    samples: list[TrainSample]


def skill1_jobs(task_ids: Sequence[int], n_samples: int, seed: int, round_index: int, step: int
                ) -> dict[int, tuple[int, list[EpisodeJob]]]:
    """``group index → (task, jobs)``: one group of ``n_samples`` rollouts per task, seeds from ``seed``."""
    if n_samples < 1:
        raise ValueError(f"n_samples: must be >= 1, got {n_samples}")
    plan = {}
    for slot, task_id in enumerate(task_ids):
        index = group_index(round_index, step, 0, slot, len(task_ids))
        jobs = []
        for sample in range(n_samples):
            episode_id = training_episode_id(index, sample)
            jobs.append(EpisodeJob(episode_id, task_id, sample, seed=seed32(f"{seed}:{episode_id}")))
        plan[index] = (task_id, jobs)
    return plan


def run_skill1_groups(
    policy: Policy,
    env_factory: Callable[[], Environment],
    library: SkillLibrary,
    encoder: Encoder,
    task_ids: Sequence[int],
    n_samples: int,
    runtime: RuntimeConfig,
    *,
    seed: int,
    round_index: int,
    step: int,
    retrieval: RetrievalConfig = RetrievalConfig(),
    replies: Skill1ReplyConfig = Skill1ReplyConfig(),
    trace_writer: Any | None = None,
) -> Skill1GroupRun:
    """Every rollout of one Skill1 step in one batched run (the library is only read)."""
    plan = skill1_jobs(task_ids, n_samples, seed, round_index, step)
    jobs = [job for _, group_jobs in plan.values() for job in group_jobs]
    episodes = iter(run_skill1_episodes(policy, env_factory, jobs, library, encoder, runtime, retrieval, replies,
                                        trace_writer))
    groups = {index: tuple(next(episodes) for _ in group_jobs) for index, (_, group_jobs) in plan.items()}
    return Skill1GroupRun(round_index, step, {index: task for index, (task, _) in plan.items()}, groups)


def skill1_rollout(episode: Skill1Episode) -> Skill1Rollout | None:
    """The rollout :func:`skill1_step` scores; ``None`` for an unscored episode."""
    if episode.success is None:
        return None
    distilled = episode.distill
    skill = DistilledSkill(distilled.desc, distilled.strat) if isinstance(distilled, DistillReply) else None
    return Skill1Rollout(episode.job.episode_id, episode.job.task_id, float(episode.success), episode.retrieved,
                         episode.ranking, skill)


def skill1_segments(episode: Skill1Episode) -> list[Skill1Segment]:
    """The rollout's token segments in trajectory order (query, rerank, act, distill), those it has."""
    replies = episode.reply_tokens
    streams = (("query", replies.get("query")), ("rerank", replies.get("rank")),
               ("act", episode.result.session_tokens), ("distill", replies.get("distill")))
    return [Skill1Segment(kind, tokens) for kind, tokens in streams if tokens is not None]


def skill1_update(run: Skill1GroupRun, library: SkillLibrary, params: Skill1Params = Skill1Params()) -> Skill1Update:
    """Algorithm 1's updates over the step's scored rollouts, then the trainer's samples (λ from ``params``)."""
    rollouts = [rollout for episode in run.episodes if (rollout := skill1_rollout(episode)) is not None]
    result = skill1_step(library, rollouts, run.round_index, run.step, params.ndcg_cutoff)
    rewards = {reward.rollout_id: reward for reward in result.rewards}
    groups = tuple(
        Skill1Group(index, tuple(rewards[e.job.episode_id] for e in episodes if e.job.episode_id in rewards))
        for index, episodes in run.groups.items()
    )
    segments = {episode.job.episode_id: skill1_segments(episode) for episode in run.episodes}
    samples = skill1_train_samples([group for group in groups if group.rewards], segments, params.lambda_rerank,
                                   params.lambda_distill)
    return Skill1Update(result, groups, samples)
