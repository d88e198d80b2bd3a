"""One rollout step: oversampled GRPO groups with group-shared treatments, triage, retries, admission.

Reference: ``docs/method.md`` §2 (group-shared treatments), §3 (triage, the full-skill
diagnostic retry, the dynamic sampling filter) and §6.2 (per-sample loop). A step runs in waves:

1. a wave plans ``over_sampling_batch_size`` groups (tasks drawn from the train split with a
   seeded permutation of the step), each with one treatment from the curriculum (q, ρ_j) and
   ``n_samples_per_prompt`` siblings; every sibling of every group of the wave runs in ONE
   lockstep :func:`~intraskill.agent.runtime.run_episodes` batch;
2. every sibling's treatment is checked (:class:`~intraskill.skills.curriculum.GroupAssignmentRegistry`
   at start, the trace's injected skills at the end);
3. each all-wrong group gets one full-skill diagnostic retry (all retries of the wave in one
   lockstep batch; never trained on); each group is triaged;
4. the groups are offered to :class:`~intraskill.training.admission.GroupAdmission` in group order;
   a new wave starts only while too few groups can still be admitted.

Persistence makes the step idempotent: each finished episode's token stream (``tokens.jsonl``) and
then its trace (``traces.jsonl``) are appended with fsync as it finishes; re-running a step re-uses
every episode already recorded (by episode ID) and generates only the missing ones, so a kill at
any point loses and duplicates nothing. Retry traces go to the round's ``retries.jsonl``; triage
records and the analysis queue are appended once per group (``triage.jsonl``,
``analysis_queue.jsonl``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intraskill.agent.env import Environment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig
from intraskill.agent.traces import EpisodeTrace
from intraskill.chat.base import Policy, SessionTokens
from intraskill.hashing import seed32
from intraskill.jsonl import JsonlWriter, iter_jsonl
from intraskill.layout import RoundDir, StepDir
from intraskill.params import Params, RoundParams
from intraskill.pipeline.episode_log import EpisodeCallback, EpisodeLog, EpisodeRecord
from intraskill.record import Record
from intraskill.skills.curriculum import (
    MODE_SKILL_FREE,
    CurriculumError,
    CurriculumState,
    GroupAssignment,
    GroupAssignmentRegistry,
    assign_group,
    full_skill_assignment,
)
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.training.admission import (
    AdmissionResult,
    FinishedGroup,
    GroupAdmission,
    GroupDecision,
    RolloutOutcome,
)
from intraskill.training.metrics import MetricValue
from intraskill.training.triage import (
    RetryOutcome,
    TriageClass,
    TriageRecord,
    needs_full_skill_retry,
    retry_episode_id,
    retry_sample_index,
    training_episode_id,
    triage_group,
)

NO_CURRICULUM_STATE = "no-curriculum"
"""``state_id`` of the treatments of a round without skills (every group skill-free)."""
GROUPS_PER_STEP = 10_000
"""Group-index slots of one step: ``index = (round · 1000 + step) · 10⁴ + wave · over_sampling + slot``."""
MAX_WAVES = 8
"""Waves per step before giving up (each extra wave follows technical drops). ``round.over_sampling_batch_size``
is at most 1000, so a step's waves fit its :data:`GROUPS_PER_STEP` slots."""
RoundEvent = Callable[[str, Mapping[str, Any]], None]
"""``on_event(name, info)`` of a round (:func:`~intraskill.pipeline.round.run_round`)."""


def group_index(round_index: int, step: int, wave: int, slot: int, over_sampling: int) -> int:
    """The round-unique integer group index (also the curriculum's group key).

    >>> group_index(0, 3, 1, 5, 32)
    30037
    """
    return (round_index * 1000 + step) * GROUPS_PER_STEP + wave * over_sampling + slot


def wave_tasks(task_ids: Sequence[int], seed: int, round_index: int, step: int, wave: int, size: int) -> list[int]:
    """The tasks of one wave: consecutive slices of a permutation of ``task_ids`` seeded per step.

    Waves of one step use disjoint tasks until the split is exhausted (then the permutation wraps).
    """
    if not task_ids:
        raise ValueError("task_ids: the split has no tasks")
    order = list(task_ids)
    random.Random(seed32(f"{seed}:round-{round_index}:step-{step}:tasks")).shuffle(order)
    return [order[(wave * size + k) % len(order)] for k in range(size)]


def no_curriculum_assignment(key: str | int) -> GroupAssignment:
    """The treatment of every group when the round has no skills."""
    return GroupAssignment(NO_CURRICULUM_STATE, str(key), MODE_SKILL_FREE)


@dataclass(frozen=True)
class PlannedGroup:
    """One GRPO group: its index, task, wave and the treatment all its siblings share."""

    group_index: int
    task_id: int
    wave: int
    assignment: GroupAssignment

    def episode_ids(self, n: int) -> list[str]:
        return [training_episode_id(self.group_index, k) for k in range(n)]


def plan_wave(
    curriculum: CurriculumState | None,
    task_ids: Sequence[int],
    round_params: RoundParams,
    seed: int,
    round_index: int,
    step: int,
    wave: int,
) -> list[PlannedGroup]:
    """The ``round.over_sampling_batch_size`` groups of one wave with their treatments, drawn from the run
    ``seed`` (a pure function of its arguments)."""
    size = round_params.over_sampling_batch_size
    tasks = wave_tasks(task_ids, seed, round_index, step, wave, size)
    groups = []
    for slot, task in enumerate(tasks):
        index = group_index(round_index, step, wave, slot, size)
        assignment = assign_group(curriculum, index) if curriculum else no_curriculum_assignment(index)
        groups.append(PlannedGroup(index, task, wave, assignment))
    return groups


def _job(curriculum: CurriculumState | None, episode_id: str, task_id: int, sample: int,
         assignment: GroupAssignment, seed: int) -> EpisodeJob:
    skills = curriculum.skills(assignment.skill_ids) if curriculum and assignment.skill_ids else []
    return EpisodeJob(episode_id, task_id, sample, tuple(skills), assignment, seed32(f"{seed}:{episode_id}"))


@dataclass
class RolloutStepResult:
    """What one rollout step produced.

    ``groups`` holds every generated group (plans by index); ``finished`` the groups in offer
    order; ``records`` every training episode; ``triage`` one record per generated group.
    """

    step: int
    admission: AdmissionResult
    groups: dict[int, PlannedGroup]
    finished: list[FinishedGroup]
    records: dict[str, EpisodeRecord]
    triage: list[TriageRecord]
    retries: dict[int, EpisodeRecord]
    waves: int
    rollout_s: float
    retry_s: float
    generated_episodes: int = 0
    generated_retries: int = 0

    def tokens_by_rollout(self, groups: Sequence[FinishedGroup] | None = None) -> dict[str, list[SessionTokens]]:
        """``rollout_id → [SessionTokens]`` of the given (default: admitted) groups' recorded episodes."""
        chosen = self.admission.accepted if groups is None else groups
        out: dict[str, list[SessionTokens]] = {}
        for group in chosen:
            for rollout in group.rollouts:
                tokens = self.records[rollout.episode_id].tokens
                out[rollout.rollout_id] = [tokens] if tokens is not None else []
        return out


@dataclass
class RoundFiles:
    """The round-level append-only files a rollout step writes to."""

    root: Path
    _triaged: set[int] | None = field(default=None, repr=False)
    _queued: set[int] | None = field(default=None, repr=False)

    @property
    def retries(self) -> Path:
        return RoundDir(self.root).retries

    @property
    def triage(self) -> Path:
        return RoundDir(self.root).triage

    @property
    def analysis_queue(self) -> Path:
        return RoundDir(self.root).analysis_queue

    def step_dir(self, step: int) -> StepDir:
        return RoundDir(self.root).step(step)

    def _keys(self, path: Path) -> set[int]:
        return {int(record["group_index"]) for record in iter_jsonl(path)}

    def append_triage(self, record: dict[str, Any]) -> None:
        """Append a triage record unless its group is already recorded (idempotent on resume)."""
        if self._triaged is None:
            self._triaged = self._keys(self.triage)
        if record["group_index"] not in self._triaged:
            with JsonlWriter(self.triage) as writer:
                writer.append(record)
            self._triaged.add(record["group_index"])

    def append_queue(self, record: dict[str, Any]) -> None:
        """Append an analysis-queue record unless its group is already queued."""
        if self._queued is None:
            self._queued = self._keys(self.analysis_queue)
        if record["group_index"] not in self._queued:
            with JsonlWriter(self.analysis_queue) as writer:
                writer.append(record)
            self._queued.add(record["group_index"])


class StepRollout(Record):
    """A step's ``rollout.json`` (:meth:`~intraskill.pipeline.methods.MethodSteps.rollout`): the round and step, the
    admitted groups, the episodes generated and the rollout metrics the step's ``metrics.jsonl`` line carries;
    each training method's record adds its own fields (:class:`CurriculumStepRollout`,
    :class:`~intraskill.pipeline.skill1.Skill1StepRollout`)."""

    round: int
    step: int
    admitted_groups: list[int]
    generated_episodes: int
    metrics: dict[str, MetricValue]


class CurriculumStepRollout(StepRollout):
    """The curriculum method's step: every finished group's admission decision, the waves generated and the run of
    unscored groups carried into the next step."""

    decisions: list[GroupDecision]
    waves: int
    unscored_streak: int


@dataclass(frozen=True)
class RoundContext:
    """An open round as a training method's steps see it (:mod:`intraskill.pipeline.methods`): its parameters,
    directory and files, policy, store tasks, settings, the starting curriculum or library, the steps the
    checkpoint already holds (``trained``) and the round's event callback."""

    params: Params
    root: Path
    files: RoundFiles
    round_index: int
    policy: Policy
    env_factory: Callable[[], Environment]
    task_ids: Sequence[int]
    runtime: RuntimeConfig
    curriculum: CurriculumState | None
    library_start: Path | None
    trained: int
    emit: RoundEvent


def _check_siblings(group: PlannedGroup, records: Sequence[EpisodeRecord]) -> None:
    """Every sibling's trace carries the group's treatment and exactly its skills (§2.3)."""
    expected = group.assignment.to_dict()
    for record in records:
        if record.assignment != expected:
            raise CurriculumError(
                f"group {group.group_index}: episode {record.episode_id} ran under {record.assignment}, "
                f"the group's treatment is {expected} (a changed curriculum or seed?)"
            )
        if record.injected_skill_ids != group.assignment.skill_ids:
            raise CurriculumError(
                f"group {group.group_index}: episode {record.episode_id} injected "
                f"{list(record.injected_skill_ids)}, expected {list(group.assignment.skill_ids)}"
            )


def _finished_group(group: PlannedGroup, records: Sequence[EpisodeRecord]) -> FinishedGroup:
    rollouts = tuple(
        RolloutOutcome(record.episode_id, sample, record.episode_id, record.reward)
        for sample, record in enumerate(records)
    )
    return FinishedGroup(group.group_index, rollouts)


def curriculum_identity(curriculum: CurriculumState | None) -> dict[str, Any]:
    """What the triage record names as the curriculum."""
    if curriculum is None:
        return {"state_id": NO_CURRICULUM_STATE}
    return {"state_id": curriculum.state_id, "draw_id": curriculum.draw_id, "round_id": curriculum.round_id,
            "skillbank_sha256": curriculum.source.get("skillbank_sha256")}


def run_rollout_step(
    policy: Policy,
    env_factory: Callable[[], Environment],
    curriculum: CurriculumState | None,
    task_ids: Sequence[int],
    round_params: RoundParams,
    runtime: RuntimeConfig,
    files: RoundFiles,
    *,
    seed: int,
    round_index: int,
    step: int,
    unscored_streak: int = 0,
    on_event: EpisodeCallback | None = None,
) -> RolloutStepResult:
    """Generate, check, retry, triage and admit the groups of one rollout step (see the module doc).

    Parameters
    ----------
    policy : the rollout policy (an in-process one records token streams for training).
    env_factory : opens one environment per episode.
    curriculum : the round's curriculum, or ``None`` for a round without skills.
    task_ids : the train split's task IDs.
    round_params, runtime : the step shape (``round``: group size, admission target, groups per wave, retry,
        unscored-streak limit) and the decoding settings.
    seed : the run seed; task draws and episode seeds derive from it.
    files : the round's files; the step writes under ``files.step_dir(step)``.
    round_index, step : identify the step (group indices and task draws derive from them).
    unscored_streak : consecutive unscored groups carried over from the previous step.
    on_event : called with ``("episode", {"episode_id"})`` after each persisted episode.

    Raises
    ------
    UnscoredStreakError
        After ``max_consecutive_failed_groups`` consecutive unscored groups.
    RuntimeError
        If :data:`MAX_WAVES` waves do not fill the admission target.
    """
    step_dir = files.step_dir(step)
    episodes = EpisodeLog(step_dir.traces, step_dir.tokens)
    retries = EpisodeLog(files.retries)
    retry_enabled = round_params.full_skill_retry and curriculum is not None and bool(curriculum.chunks)
    n = round_params.n_samples_per_prompt
    registry = GroupAssignmentRegistry(n)
    admission = GroupAdmission(round_params.rollout_batch_size, round_params.max_consecutive_failed_groups,
                               unscored_streak)
    groups: dict[int, PlannedGroup] = {}
    finished: list[FinishedGroup] = []
    triage: list[TriageRecord] = []
    retry_records: dict[int, EpisodeRecord] = {}
    rollout_s = retry_s = 0.0
    generated = generated_retries = 0
    wave = 0
    while not admission.done:
        if wave >= MAX_WAVES:
            raise RuntimeError(
                f"step {step}: {MAX_WAVES} waves admitted only {len(admission.accepted)} of "
                f"{round_params.rollout_batch_size} groups (technical drops: check the store and the policy)"
            )
        planned = plan_wave(curriculum, task_ids, round_params, seed, round_index, step, wave)
        admission.submit(len(planned))
        jobs = []
        for group in planned:
            groups[group.group_index] = group
            for sample, episode_id in enumerate(group.episode_ids(n)):
                registry.register(group.assignment, sample)
                jobs.append(_job(curriculum, episode_id, group.task_id, sample, group.assignment, seed))
        before = len(episodes.records)
        start = time.perf_counter()
        episodes.run(policy, env_factory, jobs, runtime,
                     {"round": round_index, "step": step, "wave": wave, "role": "rollout"}, on_event)
        rollout_s += time.perf_counter() - start
        generated += len(episodes.records) - before
        wave_groups = []
        for group in planned:
            records = [episodes.records[episode_id] for episode_id in group.episode_ids(n)]
            for sample in range(n):
                registry.complete(group.group_index, sample)
            _check_siblings(group, records)
            wave_groups.append(_finished_group(group, records))
        start = time.perf_counter()
        generated_retries += _run_retries(policy, env_factory, curriculum, planned, wave_groups, retries,
                                          retry_records, seed, runtime, retry_enabled,
                                          {"round": round_index, "step": step, "wave": wave,
                                           "role": "full_skill_retry"}, on_event)
        retry_s += time.perf_counter() - start
        for group, done in zip(planned, wave_groups):
            record = _triage(group, done, curriculum, retry_records.get(group.group_index), files, retry_enabled)
            triage.append(record)
            _persist_triage(files, record, group, round_index, step, retry_records.get(group.group_index),
                            step_dir)
            finished.append(done)
            admission.offer(done)
        wave += 1
    result = AdmissionResult(
        accepted=tuple(admission.accepted), decisions=tuple(admission.decisions),
        generated=tuple(admission.offered), submitted=admission.submitted, complete=admission.done,
        unscored_streak=admission.unscored_streak,
    )
    return RolloutStepResult(step, result, groups, finished, episodes.records, triage, retry_records, wave,
                             rollout_s, retry_s, generated, generated_retries)


def _run_retries(
    policy: Policy,
    env_factory: Callable[[], Environment],
    curriculum: CurriculumState | None,
    planned: Sequence[PlannedGroup],
    finished: Sequence[FinishedGroup],
    retries: EpisodeLog,
    out: dict[int, EpisodeRecord],
    seed: int,
    runtime: RuntimeConfig,
    retry_enabled: bool,
    provenance: Mapping[str, Any],
    on_event: EpisodeCallback | None,
) -> int:
    """One lockstep batch of full-skill retries for the wave's all-wrong groups; returns how many ran."""
    if not retry_enabled:
        return 0
    jobs = []
    for group, done in zip(planned, finished):
        if needs_full_skill_retry(done, retry_enabled):
            assignment = full_skill_assignment(curriculum, group.group_index)
            jobs.append(_job(curriculum, retry_episode_id(done), group.task_id, retry_sample_index(done),
                             assignment, seed))
    before = len(retries.records)
    retries.run(policy, env_factory, jobs, runtime, provenance, on_event)
    for group, done in zip(planned, finished):
        if needs_full_skill_retry(done, retry_enabled):
            out[group.group_index] = retries.records[retry_episode_id(done)]
    return len(retries.records) - before


def _triage(
    group: PlannedGroup,
    done: FinishedGroup,
    curriculum: CurriculumState | None,
    retry: EpisodeRecord | None,
    files: RoundFiles,
    retry_enabled: bool,
) -> TriageRecord:
    outcome = None
    if retry is not None:
        outcome = RetryOutcome(files.retries.name, retry.episode_id, retry.reward)
    return triage_group(done, curriculum_identity(curriculum), group.assignment.to_dict(), outcome, retry_enabled)


def _persist_triage(
    files: RoundFiles,
    record: TriageRecord,
    group: PlannedGroup,
    round_index: int,
    step: int,
    retry: EpisodeRecord | None,
    step_dir: Path,
) -> None:
    location = {"round": round_index, "step": step, "wave": group.wave, "task_id": group.task_id}
    files.append_triage({**record.to_dict(), **location})
    if record.classification is TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS and retry is not None:
        item = AnalysisItem(episode_id=retry.episode_id, group_index=group.group_index, task_id=group.task_id,
                            split="train", diagnostic_full_skill=True, trace=EpisodeTrace.from_dict(retry.trace))
        files.append_queue({
            **item.to_dict(),
            **location,
            "classification": record.classification.value,
            "sibling_episode_ids": [r.episode_id for r in record.group.rollouts],
            "sibling_traces": str(step_dir.traces.relative_to(files.root)),
        })
