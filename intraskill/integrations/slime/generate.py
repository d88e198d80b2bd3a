"""``--custom-generate-function-path`` hook: one training episode per slime sample, group-shared skills.

Reference: ``docs/method.md`` §2.3 (one treatment per GRPO group, checked per sibling under a
lock keyed by (state_id, group_index); the last sibling to finish leads), §2.4 (per-rollout trace
``<output>/group-<9 digits>/rollout-<index>.json``, sample metadata), §3.1–3.3 (triage, the
full-skill diagnostic retry that never reaches the trainer, the analysis queue) and §6.2 (the
per-sample steps). slime awaits ``generate(args, sample, sampling_params[, evaluation])`` for each
sample of a group concurrently (``generate_and_rm_group``) and skips its reward model when the
sample already carries ``reward``. A technical failure or an SGLang abort yields an aborted
placeholder (tokens ``[0, 0]``, loss mask ``[0]``, ``remove_sample``) so one bad episode never
cancels its siblings; the filter then drops the group. No barrier is used between siblings: one
could deadlock under slime's generation semaphore.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intraskill.agent.traces import EpisodeTrace
from intraskill.integrations.slime.config import (
    RELEASE_CONTEXT_LIMIT,
    SlimeConfigError,
    SlimeRunConfig,
    check_train_only,
    load_checked_curriculum,
)
from intraskill.integrations.slime.data import TRAIN_SPLIT, task_from_metadata
from intraskill.integrations.slime.episode import (
    EpisodeSettings,
    EpisodeSpec,
    StreamedEpisode,
    TokenCodec,
    load_tokenizer,
    run_episode,
)
from intraskill.integrations.slime.rewards import (
    META_ASSIGNMENT,
    META_EPISODE_ID,
    META_GROUP_TRIAGE,
    META_REWARD,
    META_SCORED,
    META_TRACE_PATH,
)
from intraskill.jsonl import write_json
from intraskill.pipeline.rollout import RoundFiles, curriculum_identity
from intraskill.skills.curriculum import (
    CurriculumError,
    CurriculumState,
    GroupAssignment,
    GroupAssignmentRegistry,
    assign_group,
    full_skill_assignment,
)
from intraskill.trace2skill.queue import AnalysisItem
from intraskill.training.admission import FinishedGroup, RolloutOutcome
from intraskill.training.triage import (
    RETRY_TRACE_NAME,
    RetryOutcome,
    TriageClass,
    TriageRecord,
    needs_full_skill_retry,
    retry_episode_id,
    retry_sample_index,
    training_episode_id,
    triage_group,
)

RELEASE_MAX_NEW_TOKENS = 4096
PLACEHOLDER_TOKENS = (0, 0)
LOGGER = logging.getLogger(__name__)


@dataclass
class _Group:
    """The siblings of one group seen so far, and the curriculum they run under."""

    curriculum: CurriculumState
    assignment: GroupAssignment
    task_id: int
    outcomes: dict[int, RolloutOutcome] = field(default_factory=dict)


class RunState:
    """Process-wide state of one training output directory: the sibling registry and open groups.

    One registry spans every curriculum used with the directory, so a curriculum that changes
    inside a group is caught (:class:`~intraskill.skills.curriculum.GroupAssignmentRegistry`).
    Only open groups are held: the leader forgets its group, a cancelled sibling discards its group, and the
    batch end (:func:`close_open_groups`) discards the groups whose other siblings slime never started.
    """

    def __init__(self, output_dir: Path, n_samples_per_prompt: int, episode_concurrency: int) -> None:
        self.n_samples_per_prompt = n_samples_per_prompt
        self.episode_concurrency = episode_concurrency
        self.registry = GroupAssignmentRegistry(n_samples_per_prompt)
        self.groups: dict[int, _Group] = {}
        self.files = RoundFiles(output_dir)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def primitives(self) -> tuple[asyncio.Lock, asyncio.Semaphore]:
        """The group lock and the episode semaphore of the running event loop."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._lock = asyncio.Lock()
            self._semaphore = asyncio.Semaphore(self.episode_concurrency)
        return self._lock, self._semaphore

    def discard(self, group_index: int) -> None:
        """Forget a group that will not finish (no triage, no trace beyond its siblings' own)."""
        self.groups.pop(group_index, None)
        self.registry.forget(str(group_index))

    def discard_open(self) -> int:
        """Forget every open group; returns how many there were."""
        indices = list(self.groups)
        for group_index in indices:
            self.discard(group_index)
        return len(indices)


_STATES: dict[Path, RunState] = {}


def run_state(config: SlimeRunConfig, n_samples_per_prompt: int) -> RunState:
    """The process's :class:`RunState` of ``config.training_output_dir`` (created on first use)."""
    key = config.output_dir.resolve()
    state = _STATES.setdefault(key, RunState(key, n_samples_per_prompt, config.episode_concurrency))
    if state.n_samples_per_prompt != n_samples_per_prompt:
        raise CurriculumError(f"--n-samples-per-prompt: {n_samples_per_prompt} differs from the "
                              f"{state.n_samples_per_prompt} this run started with")
    return state


def close_open_groups(config: SlimeRunConfig) -> int:
    """Batch end: discard the groups of ``config``'s directory that never finished; returns their number.

    slime stops a rollout step by cancelling every pending group, and a sibling it had not started by then is
    returned aborted without calling the hook (``generate_and_rm``), so such a group never reaches its
    ``n_samples_per_prompt`` completions. No generation is in flight when slime calls the batch-end hooks.
    """
    state = _STATES.get(config.output_dir.resolve())
    count = state.discard_open() if state is not None else 0
    if count:
        LOGGER.info("%s: discarded %d unfinished groups at the batch end", config.output_dir, count)
    return count


def _episode_settings(args: Any, config: SlimeRunConfig, sampling_params: dict[str, Any]) -> EpisodeSettings:
    max_new = sampling_params.get("max_new_tokens") or getattr(args, "rollout_max_response_len", None)
    return EpisodeSettings(
        sglang_url=f"http://{args.sglang_router_ip}:{args.sglang_router_port}/generate",
        store_url=config.environment_base_url,
        store_timeout=config.environment_timeout,
        store_trust_env=config.environment_trust_env,
        persona=config.environment_persona,
        max_turns=config.max_steps,
        max_new_tokens=int(max_new or RELEASE_MAX_NEW_TOKENS),
        context_limit=int(getattr(args, "rollout_max_context_len", None) or RELEASE_CONTEXT_LIMIT),
        language=config.language,
        reasoning_parser=config.reasoning_parser,
        model_id=getattr(args, "hf_checkpoint", None),
    )


def write_trace(output_dir: Path, group_index: int, name: str, trace: EpisodeTrace) -> Path:
    """Write one trace as ``<output_dir>/group-<9 digits>/<name>`` (atomic replace); returns the path."""
    return write_json(output_dir / f"group-{group_index:09d}" / name, trace.to_dict(), indent=1)


def fill_sample(sample: Any, result: StreamedEpisode, codec: TokenCodec, assignment: GroupAssignment,
                trace_path: Path) -> None:
    """Write the episode into the slime sample: tokens, masks, log-probs, reward, status, metadata.

    A scored episode keeps its exact stream (``tokens`` = prompt + response; ``loss_mask`` and
    ``rollout_log_probs`` cover the response). An unscored one becomes the aborted placeholder.
    """
    status = type(sample).Status
    sample.rollout_id = sample.index
    if result.scored:
        stream = result.stream
        sample.tokens = stream.input_ids
        sample.response = codec.decode(stream.response_ids)
        sample.response_length = len(stream.response_ids)
        sample.loss_mask = list(stream.loss_mask)
        sample.rollout_log_probs = list(stream.log_probs)
        sample.reward = result.trace.reward.to_dict()
        sample.status = status.TRUNCATED if result.truncated else status.COMPLETED
    else:
        sample.tokens = list(PLACEHOLDER_TOKENS)
        sample.response = ""
        sample.response_length = 1
        sample.loss_mask = [0]
        sample.rollout_log_probs = [0.0]
        sample.reward = {"reward": 0.0}
        sample.remove_sample = True
        sample.status = status.ABORTED
    sample.metadata = {
        **(sample.metadata or {}),
        META_ASSIGNMENT: assignment.to_dict(),
        META_REWARD: result.trace.reward.to_dict() if result.scored else None,
        META_SCORED: result.scored,
        META_TRACE_PATH: str(trace_path),
        META_EPISODE_ID: result.trace.episode_id,
    }


async def _full_skill_retry(state: RunState, config: SlimeRunConfig, open_group: _Group, group: FinishedGroup,
                            settings: EpisodeSettings, codec: TokenCodec,
                            sampling_params: dict[str, Any]) -> tuple[RetryOutcome, EpisodeTrace]:
    """The diagnostic retry: every curriculum chunk, unmasked; its trace only (§3.2)."""
    curriculum = open_group.curriculum
    assignment = full_skill_assignment(curriculum, group.group_index)
    spec = EpisodeSpec(retry_episode_id(group), open_group.task_id, retry_sample_index(group), assignment,
                       tuple(curriculum.skills()))
    _, semaphore = state.primitives()
    async with semaphore:
        result = await run_episode(spec, settings, codec, sampling_params)
    path = write_trace(config.output_dir, group.group_index, RETRY_TRACE_NAME, result.trace)
    relative = str(path.relative_to(config.output_dir))
    reward = result.trace.reward if result.scored else None
    return RetryOutcome(relative, spec.episode_id, reward), result.trace


async def finalize_group(state: RunState, config: SlimeRunConfig, group_index: int, settings: EpisodeSettings,
                         codec: TokenCodec, sampling_params: dict[str, Any]) -> TriageRecord:
    """The leader's work: retry an all-wrong group, triage it, persist triage and the analysis queue."""
    open_group = state.groups.pop(group_index)
    state.registry.forget(str(group_index))
    finished = FinishedGroup(group_index, tuple(open_group.outcomes[i] for i in sorted(open_group.outcomes)))
    retry, retry_trace = None, None
    if needs_full_skill_retry(finished, config.full_skill_retry):
        retry, retry_trace = await _full_skill_retry(state, config, open_group, finished, settings, codec,
                                                     sampling_params)
    record = triage_group(finished, curriculum_identity(open_group.curriculum),
                          open_group.assignment.to_dict(), retry, config.full_skill_retry)
    group_dir = config.output_dir / f"group-{group_index:09d}"
    write_json(group_dir / "triage.json", record.to_dict(), indent=1)
    state.files.append_triage({**record.to_dict(), "task_id": open_group.task_id})
    if record.classification is TriageClass.FULL_SKILL_FAILURE_PENDING_ANALYSIS:
        item = AnalysisItem(retry.episode_id, group_index, open_group.task_id, TRAIN_SPLIT, True, retry_trace)
        state.files.append_queue(item.to_dict())
    return record


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    """Run one training episode for ``sample`` and return it filled in (see the module docstring).

    Parameters
    ----------
    args : slime's arguments with the ``intraskill_*`` custom-config keys merged in.
    sample : a slime ``Sample`` whose ``metadata`` is a task record (:mod:`.data`).
    sampling_params : slime's per-request SGLang sampling parameters (top_p 1.0, top_k −1).
    evaluation : refused (``True`` raises); the hook is train-only.
    """
    check_train_only(args, sampling_params, evaluation)
    config = SlimeRunConfig.from_args(args)
    task_id, split = task_from_metadata(sample.metadata)
    if split != TRAIN_SPLIT:
        raise SlimeConfigError(f"sample.metadata.split: the generate hook trains on {TRAIN_SPLIT!r} tasks "
                               f"only, got {split!r}")
    if sample.group_index is None or sample.index is None:
        raise SlimeConfigError("sample.group_index / sample.index: slime must set both")
    curriculum = load_checked_curriculum(config.curriculum_path, config.skillbank_path)
    state = run_state(config, int(args.n_samples_per_prompt))
    assignment = assign_group(curriculum, sample.group_index)
    lock, _ = state.primitives()
    async with lock:
        state.registry.register(assignment, sample.index)
        group = state.groups.setdefault(sample.group_index, _Group(curriculum, assignment, task_id))
        if group.task_id != task_id:
            raise CurriculumError(f"group {sample.group_index}: sample {sample.index} has task {task_id}, "
                                  f"its siblings task {group.task_id}")
    try:
        return await _run_sibling(args, sample, sampling_params, config, state, group)
    except asyncio.CancelledError:
        state.discard(sample.group_index)  # slime cancelled the step's pending groups: this one cannot finish
        raise


async def _run_sibling(args: Any, sample: Any, sampling_params: dict[str, Any], config: SlimeRunConfig,
                       state: RunState, group: _Group) -> Any:
    """A registered sibling's episode, trace and sample; the last to finish leads its group."""
    lock, semaphore = state.primitives()
    assignment = group.assignment
    episode_id = training_episode_id(sample.group_index, sample.index)
    skills = tuple(group.curriculum.skills(assignment.skill_ids))
    spec = EpisodeSpec(episode_id, group.task_id, sample.index, assignment, skills)
    settings = _episode_settings(args, config, sampling_params)
    codec = TokenCodec(load_tokenizer(args), config.reasoning_parser)
    async with semaphore:
        result = await run_episode(spec, settings, codec, sampling_params)
    name = f"rollout-{sample.index}.json"
    trace_path = write_trace(config.output_dir, sample.group_index, name, result.trace)
    fill_sample(sample, result, codec, assignment, trace_path)
    reward = result.trace.reward if result.scored else None
    outcome = RolloutOutcome(str(sample.index), sample.index, episode_id, reward)
    async with lock:
        if state.groups.get(sample.group_index) is not group:
            return sample  # a cancelled sibling discarded the group: it is not triaged
        group.outcomes[sample.index] = outcome
        leader = state.registry.complete(str(sample.group_index), sample.index)
    if leader:
        record = await finalize_group(state, config, sample.group_index, settings, codec, sampling_params)
        sample.metadata[META_GROUP_TRIAGE] = record.to_dict()
    return sample
