"""One Skill1 rollout step: G rollouts of each task, Algorithm 1's updates and the trainer's samples
(method §10.1–§10.3).

:func:`run_skill1_groups` plans one GRPO group per task (group indices and episode IDs as the GRPO rollout
step names them) and runs every rollout of every group through
:func:`~intraskill.agent.skill1_episode.run_skill1_episodes`, so the whole step is batched phase by phase.
:func:`skill1_update` then applies :func:`~intraskill.training.skill1_rewards.skill1_step` to the library
(rewards with the step's starting U, EMA, admission) and turns each rollout's four reply types into
:class:`~intraskill.training.skill1_advantages.Skill1Segment` s and trainer samples. Unscored (technically
failed) rollouts are left out of both, as the GRPO step leaves them out of its groups. With ``skill1.oversample``
a step plays waves of ``round.over_sampling_batch_size`` groups (at most :data:`MAX_WAVES`) until
``round.rollout_batch_size`` groups have varying J_util rewards, as the GRPO step's dynamic-sampling filter
does; every played rollout updates the library, only the admitted groups train (topped up in plan order with
the other scored groups when too few vary, so a step always trains the same number of episodes).
:class:`Skill1Round` is a training round's Skill1 step (``round.method: skill1``): the library in the round
directory, the rollouts' append-only records and the library commit after the round's checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig
from intraskill.agent.skill1_episode import Skill1Episode, run_skill1_episodes
from intraskill.agent.skill1_replies import DistillReply
from intraskill.chat.base import Policy
from intraskill.hashing import seed32, sha256_file
from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.layout import RoundDir
from intraskill.params import METHOD_SPECS, MethodName, Params, Skill1Params, section_plan
from intraskill.paths import resolve_project_path
from intraskill.pipeline.rollout import RoundContext, RoundFiles, StepRollout, group_index, wave_tasks
from intraskill.skills.curriculum import CurriculumState
from intraskill.skills.library import LibraryStore, SkillLibrary
from intraskill.skills.retrieval import Encoder, SentenceEncoder, encoder_identity
from intraskill.training.batching import TrainSample
from intraskill.training.checkpoint import CheckpointError
from intraskill.training.metrics import skill1_step_metrics
from intraskill.training.skill1_advantages import Skill1Group, Skill1Segment, skill1_train_samples
from intraskill.training.skill1_rewards import DistilledSkill, Skill1Rollout, Skill1StepResult, skill1_step
from intraskill.training.triage import training_episode_id

MAX_WAVES = 4
"""Waves of one oversampled Skill1 step, at most (then the step is topped up with non-varying groups)."""


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
    admitted: tuple[int, ...]

    @property
    def trained(self) -> int:
        """The scored rollouts of the admitted groups: what the trainer receives."""
        return sum(len(group.rewards) for group in self.groups if group.group_index in self.admitted)


def skill1_jobs(task_ids: Sequence[int], n_samples: int, seed: int, round_index: int, step: int, wave: int = 0
                ) -> dict[int, tuple[int, list[EpisodeJob]]]:
    """``group index → (task, jobs)``: one group of ``n_samples`` rollouts per task, seeds from ``seed``."""
    if n_samples < 1:
        raise ValueError(f"n_samples: must be >= 1, got {n_samples}")
    plan = {}
    for slot, task_id in enumerate(task_ids):
        index = group_index(round_index, step, wave, slot, len(task_ids))
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
    skill1: Skill1Params = Skill1Params(),
    trace_writer: Any | None = None,
    recorded: Mapping[str, Skill1Episode] | None = None,
    on_episode: Callable[[Skill1Episode], None] | None = None,
    wave: int = 0,
) -> Skill1GroupRun:
    """Every rollout of one wave of a Skill1 step in one batched run (the library is only read).

    Rollouts in ``recorded`` (by episode ID, e.g. read back after a kill) are re-used; the others run in one
    batch and each is passed to ``on_episode`` in job order.
    """
    recorded = dict(recorded or {})
    plan = skill1_jobs(task_ids, n_samples, seed, round_index, step, wave)
    missing = [job for _, group_jobs in plan.values() for job in group_jobs if job.episode_id not in recorded]
    if missing:
        for episode in run_skill1_episodes(policy, env_factory, missing, library, encoder, runtime, skill1,
                                           trace_writer):
            recorded[episode.job.episode_id] = episode
            if on_episode is not None:
                on_episode(episode)
    groups = {index: tuple(recorded[job.episode_id] for job in group_jobs)
              for index, (_, group_jobs) in plan.items()}
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


def util_reward(episode: Skill1Episode, kind: str) -> float:
    """The J_util reward of a scored episode: r_success (the paper's r) or r_strict (plain GRPO's)."""
    reward = episode.result.reward
    return reward.r_success if kind == "success" else reward.r_strict


def varying_groups(run: Skill1GroupRun, kind: str) -> list[int]:
    """The fully scored groups whose J_util rewards (``kind``) vary, in plan order (the zero-variance filter)."""
    return [index for index, episodes in run.groups.items()
            if all(e.success is not None for e in episodes)
            and len({util_reward(e, kind) for e in episodes}) > 1]


def admitted_groups(run: Skill1GroupRun, params: Skill1Params, size: int) -> tuple[int, ...]:
    """The groups a step trains on: every group with a scored rollout; with ``oversample`` the first ``size``
    :func:`varying_groups`, topped up in plan order with the other scored groups."""
    scored = [index for index, episodes in run.groups.items() if any(e.success is not None for e in episodes)]
    if not params.oversample:
        return tuple(scored)
    chosen = varying_groups(run, params.util_reward)[:size]
    chosen += [index for index in scored if index not in chosen][:size - len(chosen)]
    return tuple(sorted(chosen, key=list(run.groups).index))


def merge_runs(runs: Sequence[Skill1GroupRun]) -> Skill1GroupRun:
    """The waves of one step as one run (groups in plan order)."""
    first = runs[0]
    return Skill1GroupRun(first.round_index, first.step, {k: v for r in runs for k, v in r.task_ids.items()},
                          {k: v for r in runs for k, v in r.groups.items()})


def skill1_update(run: Skill1GroupRun, library: SkillLibrary, params: Skill1Params = Skill1Params(),
                  admitted: Sequence[int] | None = None, episodes_per_update: int | None = None) -> Skill1Update:
    """Algorithm 1's updates over every scored rollout of the step, then the trainer's samples of the
    ``admitted`` groups (``None``: every group; :func:`admitted_groups`) with ``params``' objective."""
    rollouts = [rollout for episode in run.episodes if (rollout := skill1_rollout(episode)) is not None]
    result = skill1_step(library, rollouts, run.round_index, run.step, params.ndcg_cutoff, params.rerank_baseline)
    rewards = {reward.rollout_id: reward for reward in result.rewards}
    groups = tuple(
        Skill1Group(index, tuple(rewards[e.job.episode_id] for e in episodes if e.job.episode_id in rewards))
        for index, episodes in run.groups.items()
    )
    admitted = tuple(group.group_index for group in groups if group.rewards) if admitted is None else tuple(admitted)
    segments = {episode.job.episode_id: skill1_segments(episode) for episode in run.episodes}
    utils = {e.job.episode_id: util_reward(e, params.util_reward) for e in run.episodes if e.success is not None}
    samples = skill1_train_samples([group for group in groups if group.rewards and group.group_index in admitted],
                                   segments, params.lambda_rerank, params.lambda_distill,
                                   objective=params.objective, episodes_per_update=episodes_per_update,
                                   util_rewards=utils)
    return Skill1Update(result, groups, samples, admitted)


class Skill1StepRollout(StepRollout):
    """A Skill1 step's ``rollout.json``: the method, the rollouts played in its groups and the skills the library
    admitted."""

    method: Literal["skill1"] = "skill1"
    episodes: int
    admitted_skills: list[int]


class Skill1Round:
    """The Skill1 side of a training round (``round.method: skill1``): its library, encoder and rollout steps.

    The library lives in ``<round>/library`` (:class:`~intraskill.skills.library.LibraryStore`); each step's
    rollouts are appended with fsync to ``steps/step-<NNNN>/skill1_episodes.jsonl`` as they finish. A step's
    tasks are the first ``round.rollout_batch_size`` of the GRPO step's draw
    (:func:`~intraskill.pipeline.rollout.wave_tasks`, wave 0), each with ``round.n_samples_per_prompt``
    rollouts. :meth:`rollout` re-uses every recorded rollout, runs the missing ones, then applies Algorithm 1's
    library updates (uncommitted) and returns the trainer's samples; :meth:`commit` closes the library's step
    after the round's checkpoint. ``library_start`` (a chained round: the previous round's committed snapshot)
    starts a fresh library from that state instead of ``seed_path``. A kill before the commit leaves the
    step's library events uncommitted (they are discarded on reopening), so a re-run applies them once; a kill
    between the checkpoint and the commit replays the update from the recorded rollouts.
    """

    def __init__(self, params: Params, root: Path, round_index: int, policy: Policy,
                 env_factory: Callable[[], Environment], task_ids: Sequence[int], runtime: RuntimeConfig,
                 trained: int, seed_path: Path | None = None,
                 on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
                 library_start: Path | None = None) -> None:
        s = params.skill1
        self.params, self.round_index, self.policy, self.env_factory = params, round_index, policy, env_factory
        self.task_ids, self.runtime, self.files = list(task_ids), runtime, RoundFiles(root)
        self.emit = on_event or (lambda name, info: None)
        self.store = LibraryStore.open(RoundDir(root).library.root, s.capacity, s.ema_rate, s.initial_utility,
                                       seed_path if library_start is None else None, library_start)
        committed = self.store.step or 0
        if not trained - 1 <= committed <= trained:
            self.store.close()
            raise CheckpointError(f"{self.store.snapshot_path} holds step {committed} but the round's checkpoint "
                                  f"holds step {trained}; the library and the checkpoint are from different runs")
        self.encoder = SentenceEncoder()
        self._updated: int | None = None

    @property
    def library(self) -> SkillLibrary:
        return self.store.library

    def episodes_path(self, step: int) -> Path:
        """A Skill1 step's rollout records (:meth:`~intraskill.agent.skill1_episode.Skill1Episode.to_dict`)."""
        return self.files.step_dir(step).skill1_episodes

    def _groups(self, step: int) -> tuple[Skill1GroupRun, int]:
        """The step's rollouts (recorded ones re-used, missing ones run and appended) and how many ran: one
        wave of ``round.rollout_batch_size`` groups, or with ``skill1.oversample`` waves of
        ``round.over_sampling_batch_size`` until enough groups vary (module docstring)."""
        path = self.episodes_path(step)
        recorded: dict[str, Skill1Episode] = {}
        for record in iter_jsonl(path):
            episode = Skill1Episode.from_dict(record)
            if episode.job.episode_id in recorded:
                raise RuntimeError(f"{path}: episode {episode.job.episode_id} is recorded twice")
            recorded[episode.job.episode_id] = episode
        r, s = self.params.round, self.params.skill1
        size = r.over_sampling_batch_size if s.oversample else r.rollout_batch_size
        ran = 0
        runs: list[Skill1GroupRun] = []
        with JsonlWriter(path) as writer:
            def persist(episode: Skill1Episode) -> None:
                nonlocal ran
                writer.append(episode.to_dict())
                ran += 1
                self.emit("episode", {"episode_id": episode.job.episode_id})

            for wave in range(MAX_WAVES if s.oversample else 1):
                tasks = wave_tasks(self.task_ids, self.params.experiment.seed, self.round_index, step, wave, size)
                runs.append(run_skill1_groups(
                    self.policy, self.env_factory, self.library, self.encoder, tasks, r.n_samples_per_prompt,
                    self.runtime, seed=self.params.experiment.seed, round_index=self.round_index, step=step,
                    skill1=s, recorded=recorded, on_episode=persist,
                    wave=wave))
                if len(varying_groups(merge_runs(runs), s.util_reward)) >= r.rollout_batch_size:
                    break
        return merge_runs(runs), ran

    def _update(self, step: int) -> tuple[Skill1GroupRun, int, Skill1Update]:
        run, ran = self._groups(step)
        admitted = admitted_groups(run, self.params.skill1, self.params.round.rollout_batch_size)
        update = skill1_update(run, self.library, self.params.skill1, admitted, self.params.grpo.global_batch_size)
        return run, ran, update

    def rollout(self, step: int, timing: dict[str, float]) -> tuple[Skill1StepRollout, list[TrainSample]]:
        """Run (or re-use) the step's rollouts and apply the library updates; the ``rollout.json`` record and
        the trainer's samples (their time, library updates included, is ``timing["rollout_s"]``)."""
        start = time.perf_counter()
        run, ran, update = self._update(step)
        self._updated = step
        if not update.samples:
            raise RuntimeError(f"step {step}: no scored Skill1 rollout to train on (check the store and the policy)")
        record = Skill1StepRollout(
            round=self.round_index, step=step, admitted_groups=list(update.admitted), generated_episodes=ran,
            metrics=skill1_step_metrics(run.episodes, update.step, len(self.library), trained=update.trained),
            episodes=len(run.episodes),
            admitted_skills=[admission.skill.skill_id for admission in update.step.admissions])
        timing["rollout_s"] = time.perf_counter() - start
        return record, update.samples

    def commit(self, step: int) -> None:
        """Commit the library's step ``step`` (once its θ update is in the checkpoint)."""
        if self.store.step is not None and self.store.step >= step:
            return
        if self._updated != step:
            self._update(step)
        self.store.commit(step)
        self._updated = None

    def close(self) -> None:
        self.store.close()


def skill1_seed_path(params: Params) -> Path | None:
    """``skill1.seed_library`` resolved against the project root (``None`` when unset)."""
    if params.skill1.seed_library is None:
        return None
    path = resolve_project_path(params.skill1.seed_library)
    if not path.is_file():
        raise FileNotFoundError(f"skill1.seed_library: no seed library file at {path}")
    return path


@dataclass(frozen=True)
class Skill1Method:
    """Skill1 as a training method (:class:`~intraskill.pipeline.methods.TrainingMethod`): no curriculum, its own
    library in the round (:class:`Skill1Round`), carried to the next round from its committed snapshot."""

    name: MethodName = "skill1"
    uses_curriculum: bool = METHOD_SPECS["skill1"].uses_curriculum
    rollout_record: type[StepRollout] = Skill1StepRollout

    def plan(self, params: Params, library_start: Path | None) -> dict[str, Any]:
        """The ``skill1`` section (the seed library by its digest, the reply budgets where not the defaults), the
        encoder, and a chained round's starting snapshot by its digest."""
        seeds = skill1_seed_path(params)
        section = {k: v for k, v in section_plan(params.skill1).items() if k != "seed_library"}
        plan = {"method": self.name, **section, "seed_library_sha256": sha256_file(seeds) if seeds is not None else None,
                "encoder": encoder_identity()}
        if library_start is not None:
            plan["library_start_sha256"] = sha256_file(library_start)
        return {"skill1": plan}

    def check_start(self, curriculum: CurriculumState | None, library_start: Path | None) -> None:
        if curriculum is not None:
            raise ValueError(f"round.method: {self.name} retrieves from its own library; a curriculum was given "
                             "(pass none, or set round.method: intraskill)")

    def open_steps(self, context: RoundContext) -> Skill1Round:
        return Skill1Round(context.params, context.root, context.round_index, context.policy, context.env_factory,
                           context.task_ids, context.runtime, context.trained, skill1_seed_path(context.params),
                           context.emit, context.library_start)

    def library(self, round_root: Path) -> Path | None:
        return RoundDir(round_root).library.snapshot
