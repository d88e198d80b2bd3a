"""The evaluation runner: a fingerprinted plan, resumable lockstep batches, append-only traces.

Reference: docs/method.md §7 (one rollout per task, ``repeats``) and §8 (the run directory
fingerprints its semantic plan — jobs, model identity, split, environment, runtime without
concurrency, prompt, skills — and refuses a different plan; traces are append-only JSONL with fsync;
episode IDs ``task-000123__sample-000``; the episode seed is the first 4 bytes of
SHA-256(``"seed:task:sample"``)).

A run directory holds ``plan.json``, ``traces.jsonl`` (every attempt, failed ones included) and
``summary.json``. Episodes run in lockstep batches of ``batch_size`` (``evaluation.batch_size``); their
traces are appended in blocks of :data:`TRACE_BLOCK` jobs, each block in the order its episodes finish
(:class:`BlockOrder`), which is the order lockstep batches of that size wrote them. An episode's turns do not
depend on the rows beside it (its own sampling generator; the model's rows computed alike), so every batch
size that is a multiple of the block writes the same files. Each trace is fsynced as it is appended, so a
kill loses at most the finished episodes of the batch in flight still waiting for their block. Re-running the
same plan skips every episode with a completed record and retries the others, up to :data:`MAX_ATTEMPTS`
attempts per episode in total.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from tqdm.auto import tqdm

from intraskill.agent.env import Environment, InProcessEnvironment
from intraskill.agent.prompts import prompt_identity
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig, run_episodes
from intraskill.agent.traces import EpisodeStatus, read_traces
from intraskill.chat.base import Policy
from intraskill.evaluate.records import EvalSummary
from intraskill.evaluate.skill1_deploy import LibraryDeployment
from intraskill.evaluate.summary import summarize
from intraskill.hashing import sha256_json
from intraskill.jsonl import JsonlWriter, write_json
from intraskill.layout import EvalDir, ModelDir
from intraskill.params import Params
from intraskill.policy.factory import build_policy
from intraskill.provenance import refuse_missing_plan, run_provenance, stored_plan, warn_on_changes
from intraskill.shop.build import open_engine
from intraskill.skills.bank import Skill, SkillBank, load_skillbank

LOGGER = logging.getLogger(__name__)

PLAN_SCHEMA_VERSION = "intraskill-eval-plan-v1"
PIPELINE_VERSION = "intraskill-eval-v1"
MAX_ATTEMPTS = 3
"""Attempts per episode in total (the first run plus retries of failed attempts)."""
TRACE_BLOCK = 32
"""Jobs per block of the trace file's order (the reference's evaluation concurrency, the batch that set it)."""
SPLITS = ("train", "val", "test", "dev")
PLAN_FIELDS = (
    "pipeline_version", "model", "split", "jobs", "environment", "runtime", "prompt", "skills", "seed",
)
NEW_OUT_HINT = "Use a new --out directory for a different evaluation."


class PlanMismatchError(RuntimeError):
    """A run directory already holds a different plan."""


class EpisodeSkills(Protocol):
    """Per-episode skills (e.g. the gate's mask assignment): its ``identity`` is the plan's ``skills``."""

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies the per-episode skill lists (recorded as the plan's ``skills`` field)."""
        ...

    def __call__(self, task_id: int, sample_id: int) -> Sequence[Skill]:
        """The skills injected (in prompt order) into episode (``task_id``, ``sample_id``)."""
        ...


@dataclass(frozen=True)
class EvalPlan:
    """The semantic identity of an evaluation run (batch size and progress are not part of it).

    Attributes
    ----------
    model : the policy's identity (``model_id``, ``checkpoint_id``, ``backend``, …).
    split : task split (``val`` or ``test``; ``train`` for diagnostics).
    jobs : ``[task_id, sample_id]`` pairs in run order.
    environment : store identity (scale, seed, catalogue SHA-256, split SHA-256, index manifest,
        contract versions, store config).
    runtime : the :class:`RuntimeConfig` fields.
    prompt : the prompt identity (version, language, system-prompt SHA-256, renderer version).
    skills : ``{"provider": "none"}`` or the bank's provider identity plus ``skill_ids``.
    seed : the run seed the episode seeds derive from.
    """

    model: dict[str, Any]
    split: str
    jobs: tuple[tuple[int, int], ...]
    environment: dict[str, Any]
    runtime: dict[str, Any]
    prompt: dict[str, Any]
    skills: dict[str, Any]
    seed: int
    pipeline_version: str = PIPELINE_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The plan fields (JSON-ready; ``jobs`` as lists)."""
        record = asdict(self)
        record["jobs"] = [list(job) for job in self.jobs]
        return record

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`to_dict`."""
        return sha256_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalPlan":
        """Parse a ``plan.json`` record (extra keys ``schema_version`` / ``fingerprint`` ignored)."""
        missing = [name for name in PLAN_FIELDS if name not in data]
        if missing:
            raise ValueError(f"plan: missing field(s) {missing}")
        fields = {name: data[name] for name in PLAN_FIELDS}
        fields["jobs"] = tuple((int(t), int(s)) for t, s in data["jobs"])
        return cls(**fields)


@dataclass(frozen=True)
class EvalRun:
    """A finished (or resumed-to-completion) evaluation run."""

    run_dir: Path
    plan: EvalPlan
    summary: EvalSummary

    @property
    def traces_path(self) -> Path:
        return EvalDir(self.run_dir).traces


def plan_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted names of the differing plan fields (one level into nested objects)."""
    names = []
    for key in PLAN_FIELDS:
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            names += [f"{key}.{sub}" for sub in sorted(set(a) | set(b)) if a.get(sub) != b.get(sub)]
        else:
            names.append(key)
    return names


def write_plan(run_dir: Path, plan: EvalPlan) -> None:
    """Write ``plan.json`` with this process's provenance beside the fingerprint, or check that the existing one is
    the same plan (a resume under another provenance warns, :func:`~intraskill.provenance.warn_on_changes`).

    Raises :class:`PlanMismatchError` naming the differing fields, or naming ``plan.json`` when it is missing
    beside the run's traces or summary (:data:`~intraskill.layout.EvalDir.OUTPUTS`).
    """
    path = EvalDir(run_dir).plan
    provenance = run_provenance()
    record = {"schema_version": PLAN_SCHEMA_VERSION, **plan.to_dict(), "provenance": provenance,
              "fingerprint": plan.fingerprint}
    if path.exists():
        stored = stored_plan(path, PlanMismatchError)
        if stored.get("fingerprint") != plan.fingerprint:
            differing = plan_differences(stored, record) or ["fingerprint"]
            raise PlanMismatchError(
                f"{run_dir} holds a different plan (fingerprint {str(stored.get('fingerprint'))[:12]}… vs "
                f"{plan.fingerprint[:12]}…); differing fields: {', '.join(differing)}. "
                + NEW_OUT_HINT
            )
        warn_on_changes(path, stored.get("provenance"), provenance)
        return
    refuse_missing_plan(path, EvalDir.OUTPUTS, what="evaluation", error=PlanMismatchError, hint=NEW_OUT_HINT)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(path, record, indent=1)


def read_plan(run_dir: str | Path) -> EvalPlan:
    """The plan of a run directory."""
    path = EvalDir(run_dir).plan
    if not path.is_file():
        raise FileNotFoundError(f"no plan.json in {run_dir} (not an evaluation run directory)")
    return EvalPlan.from_dict(json.loads(path.read_text(encoding="utf-8")))


def skills_identity(bank: SkillBank | None) -> dict[str, Any]:
    """``{"provider": "none"}`` or the bank's provider identity plus its enabled ``skill_ids``."""
    if bank is None:
        return {"provider": "none"}
    return {**bank.provider_identity(), "skill_ids": [s.skill_id for s in bank.enabled_skills()]}


def resolve_skills(skills: str | Path | SkillBank | None) -> SkillBank | None:
    """A bank from a path, ``"none"``/``None`` for a bare run, or an already loaded bank."""
    if skills is None or isinstance(skills, SkillBank):
        return skills
    if str(skills).strip().lower() in ("", "none"):
        return None
    return load_skillbank(skills)


def eval_jobs(task_ids: Sequence[int], repeats: int, limit: int | None) -> list[tuple[int, int]]:
    """``(task_id, sample_id)`` pairs: the first ``limit`` tasks in split order, ``repeats`` each."""
    if repeats < 1:
        raise ValueError(f"evaluation.repeats: must be >= 1, got {repeats}")
    chosen = list(task_ids)[:limit] if limit is not None else list(task_ids)
    return [(task, sample) for task in chosen for sample in range(repeats)]


def find_checkpoint(root: str | Path, pattern: str) -> Path | None:
    """The newest directory under ``root`` matching glob ``pattern`` that holds a ``config.json``."""
    root = Path(root)
    if not root.is_dir():
        return None
    found = [path for path in root.glob(pattern) if ModelDir(path).is_saved()]
    return max(found, key=lambda path: (path.stat().st_mtime, str(path))) if found else None


def _attempts(traces_path: Path) -> tuple[set[str], Counter[str]]:
    """Episode IDs with a completed record, and failed-attempt counts per episode."""
    completed: set[str] = set()
    failed: Counter[str] = Counter()
    for trace in read_traces(traces_path):
        if trace.status == EpisodeStatus.COMPLETED.value:
            completed.add(trace.episode_id)
        else:
            failed[trace.episode_id] += 1
    return completed, failed


def _batches(items: Sequence[EpisodeJob], size: int) -> Iterator[list[EpisodeJob]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


class BlockOrder:
    """A trace writer that appends the traces of ``episode_ids`` block by block (``block`` jobs each, in job
    order): a trace of the first unfinished block goes through as it comes, a later block's waits until every
    block before it has finished. Within a block the traces keep the order they come in."""

    def __init__(self, writer: Any, episode_ids: Sequence[str], block: int = TRACE_BLOCK) -> None:
        self.writer = writer
        self.block_of = {episode: index // block for index, episode in enumerate(episode_ids)}
        self.left = Counter(self.block_of.values())
        self.waiting: dict[int, list[dict[str, Any]]] = {}
        self.current = 0

    def append(self, record: dict[str, Any]) -> None:
        block = self.block_of[record["episode_id"]]
        self.waiting.setdefault(block, []).append(record)
        self.left[block] -= 1
        while self.current in self.waiting:
            for waiting in self.waiting.pop(self.current):
                self.writer.append(waiting)
            if self.left[self.current]:
                break
            self.current += 1


def run_eval(
    params: Params,
    split: str,
    checkpoint: str | None,
    skills: str | Path | SkillBank | None,
    out_dir: str | Path,
    *,
    policy: Policy | None = None,
    progress: bool = True,
    batch_size: int | None = None,
    limit: int | None = None,
    store_root: str | Path | None = None,
    episode_skills: EpisodeSkills | None = None,
    library: LibraryDeployment | None = None,
) -> EvalRun:
    """Evaluate one policy on ``split`` (resumably) and write ``summary.json``.

    Parameters
    ----------
    params : the parameter set (store, model, sampling, evaluation sections).
    split : ``val``, ``test`` or ``dev`` (probes; a subset of train) (``train`` allowed for diagnostics).
    checkpoint : checkpoint directory, or ``None`` for none (the CLI defaults it to
        ``params.model.checkpoint``); ignored when ``policy`` is given.
    skills : a SkillBank path, a loaded bank, or ``None`` / ``"none"`` for a bare run.
    out_dir : the run directory (created; an existing one must hold the same plan).
    policy : an already built policy (default: :func:`~intraskill.policy.factory.build_policy`).
    progress : show a progress bar.
    batch_size : episodes per lockstep batch (not part of the plan; default ``evaluation.batch_size``).
    limit : task limit overriding ``evaluation.task_limit``.
    store_root : store directory, built or reused there (default the cached store of ``params.store``,
        :func:`intraskill.shop.build.default_store_root`).
    episode_skills : per-episode skill lists instead of one bank (``skills`` must then be ``None``);
        its ``identity`` is the plan's ``skills`` field, so resume and fingerprint semantics hold.
    library : Skill1 deployed from a frozen library instead of a bank (``skills`` must then be ``None``;
        :mod:`~intraskill.evaluate.skill1_deploy`): same jobs and seeds, its identity as the plan's ``skills``.

    Returns
    -------
    EvalRun
    """
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
    batch_size = params.evaluation.batch_size if batch_size is None else batch_size
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    run_dir = Path(out_dir)
    bank = resolve_skills(skills)
    if sum(given is not None for given in (bank, episode_skills, library)) > 1:
        raise ValueError("skills: give one of a bank, episode_skills or a library")
    store = open_engine(params.store, split, store_root or None, params.experiment.run_root)
    try:
        if policy is None:
            policy, model_identity = build_policy(params.model, checkpoint, store=params.store,
                                                  experiment=params.experiment)
        else:
            model_identity = dict(policy.identity)
        config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
        provider = episode_skills if episode_skills is not None else library
        pairs = eval_jobs(store.task_ids, params.evaluation.repeats,
                          limit if limit is not None else params.evaluation.task_limit)
        plan = EvalPlan(model=model_identity, split=split, jobs=tuple(pairs), environment=store.identity,
                        runtime=config.to_dict(), prompt=prompt_identity(config.language, config.view).to_dict(),
                        skills=provider.identity if provider is not None else skills_identity(bank),
                        seed=params.experiment.seed)
        write_plan(run_dir, plan)
        injected = bank.enabled_skills() if bank else []
        jobs = [EpisodeJob.create(task, sample, params.experiment.seed,
                                  episode_skills(task, sample) if episode_skills else injected)
                for task, sample in pairs]
        runner = library.run if library is not None else partial(run_episodes, progress=False)
        with _evaluating(policy, batch_size):
            _run_pending(
                policy, lambda: InProcessEnvironment(store.engine), jobs, config, EvalDir(run_dir).traces,
                batch_size=batch_size, progress=progress, label=f"eval {split}", runner=runner,
            )
    finally:
        store.close()
    return EvalRun(run_dir, plan, write_summary(run_dir, len(jobs)))


def _run_pending(
    policy: Policy,
    env_factory: Callable[[], Environment],
    jobs: Sequence[EpisodeJob],
    config: RuntimeConfig,
    traces_path: Path,
    *,
    batch_size: int,
    progress: bool,
    label: str,
    runner: Callable[..., Sequence[EpisodeResult]],
) -> None:
    """Run every job without a completed record, batch by batch with ``runner(policy, env_factory, batch,
    config, trace_writer)``, until each has completed or used :data:`MAX_ATTEMPTS` attempts; every attempt's
    trace is appended (and fsynced) in :class:`BlockOrder` of the attempt's pending jobs."""
    completed, _ = _attempts(traces_path)
    bar = tqdm(total=len(jobs), initial=sum(job.episode_id in completed for job in jobs), desc=label,
               disable=not progress)
    with JsonlWriter(traces_path) as writer:
        for _ in range(MAX_ATTEMPTS):
            completed, failed = _attempts(traces_path)
            pending = [job for job in jobs
                       if job.episode_id not in completed and failed[job.episode_id] < MAX_ATTEMPTS]
            if not pending:
                break
            ordered = BlockOrder(writer, [job.episode_id for job in pending], TRACE_BLOCK)
            for batch in _batches(pending, batch_size):
                results = runner(policy, env_factory, batch, config, ordered)
                bar.update(sum(result.status == EpisodeStatus.COMPLETED.value for result in results))
    bar.close()


def _evaluating(policy: Policy, batch_size: int) -> AbstractContextManager[None]:
    """An in-process policy set up for evaluation's lockstep batches of ``batch_size``
    (:meth:`~intraskill.policy.hf.HFPolicy.evaluation`: one forward a batch, prefill grouped by length); restored
    after (a round's rollout keeps its own)."""
    evaluation = getattr(policy, "evaluation", None)
    return nullcontext() if evaluation is None else evaluation(batch_size)


def write_summary(run_dir: str | Path, requested: int | None = None) -> EvalSummary:
    """Rebuild ``summary.json`` of a run directory from its traces.

    ``requested`` defaults to the number of jobs in the run's plan.
    """
    files = EvalDir(run_dir)
    if requested is None:
        requested = len(read_plan(run_dir).jobs)
    summary = summarize(read_traces(files.traces), requested)
    summary.write(files.summary)
    return summary
