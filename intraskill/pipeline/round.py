"""A training round: rollout steps, GRPO updates, atomic checkpoints, resume, before/after bare val.

Reference: ``docs/method.md`` §6.2–6.4 (per-sample loop, hyperparameters, 20 rollout steps
per round and one checkpoint per round). The round directory
(``<run_root>/<experiment>/round-<NNN>/`` by default) holds:

* ``plan.json`` — the semantic plan and its fingerprint (a directory refuses a different plan), and the
  run's provenance outside the fingerprint (a resume under another one warns);
* ``curriculum.json`` — the round's curriculum (its ``state_id`` is part of the plan);
* ``steps/step-<NNNN>/`` — ``traces.jsonl`` and ``tokens.jsonl`` (appended with fsync as episodes
  finish), ``rollout.json`` (admitted groups, decisions, rollout metrics) and the ``step-done`` marker;
* ``retries.jsonl``, ``triage.jsonl``, ``analysis_queue.jsonl`` — round-level append-only records;
* ``metrics.jsonl`` — one flat record per step (``rollout/shopsim/*``, ``train/*``, ``time/*``);
* ``checkpoint/`` — model, optimizer, RNG state and step counter, replaced atomically per step;
* ``val-before/``, ``val-after/``, ``val-compare/`` — the bare val check and its paired comparison.

A step's rollouts are the training method's (``round.method``, :mod:`intraskill.pipeline.methods`). With
``round.method: skill1`` they are Skill1's (:class:`~intraskill.pipeline.skill1.Skill1Round`:
``steps/step-<NNNN>/skill1_episodes.jsonl`` instead of traces and tokens, no retries or triage) and the round
directory also holds ``library/`` (the skill library's append-only ``history.jsonl`` and ``snapshot.json``);
its metrics add ``skill1/*``.

A step commits in this order: episodes, (Skill1: the library's EMA and admissions, uncommitted)
``rollout.json``, trainer update + checkpoint (its ``step``), (Skill1: the library's ``commit(step)``), the
metrics record, the ``step-done`` marker. On restart a step with a marker is skipped; a step whose update is
already in the checkpoint only commits the library (replaying its update from the recorded rollouts when
the kill came first), writes its metrics and marker; any other step re-runs its rollout, which re-uses
every recorded episode and generates only the missing ones — no episode is lost or duplicated. Once a step has trained (a ``step-done`` marker, a
metrics record or a ``checkpoint/`` directory), the round resumes only from an intact checkpoint that holds
that step: a missing ``state.json`` or a file whose checksum differs is refused
(:class:`~intraskill.training.checkpoint.CheckpointError`, naming the file), never replaced by the warm start.
Opening a round verifies the digest chain of every JSONL record in it (:func:`~intraskill.jsonl.verify_jsonl_tree`),
and a missing ``plan.json`` beside :data:`~intraskill.layout.RoundDir.OUTPUTS` is refused like a changed one.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.prompts import prompt_identity
from intraskill.agent.runtime import RuntimeConfig
from intraskill.chat.base import Policy
from intraskill.evaluate.compare import compare_runs, write_comparison
from intraskill.evaluate.records import EvalSummary, PairedComparison
from intraskill.evaluate.runner import run_eval
from intraskill.hashing import sha256_json
from intraskill.jsonl import JsonlWriter, iter_jsonl, verify_jsonl_tree
from intraskill.layout import CheckpointDir, RoundDir, round_id
from intraskill.params import ExperimentParams, Params, RoundParams, section_plan
from intraskill.paths import resolve_project_path, runs_root
from intraskill.phases import phase
from intraskill.pipeline.methods import MethodSteps, training_method
from intraskill.pipeline.rollout import RoundContext, RoundEvent, RoundFiles
from intraskill.pipeline.trackers import TrackedRun, Trackers, require_trackers
from intraskill.policy.factory import build_policy
from intraskill.policy.warmstarts import resolve_checkpoint
from intraskill.provenance import write_plan
from intraskill.shop.build import StoreHandle, open_engine
from intraskill.shop.splits import TRAIN_WITHOUT_DEV, train_without_dev
from intraskill.skills.bank import load_skillbank
from intraskill.skills.curriculum import CurriculumState, build_curriculum, save_curriculum
from intraskill.training.batching import TrainSample
from intraskill.training.checkpoint import (
    CheckpointError,
    CheckpointState,
    load_checkpoint,
    recover_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from intraskill.training.grpo import GRPOTrainer, StepMetrics
from intraskill.training.metrics import RoundStepMetrics, StepTiming, read_step_metrics, train_step_metrics

ROUND_PLAN_SCHEMA = "intraskill-round-plan-v1"
PIPELINE_VERSION = "intraskill-round-v1"


class RoundPlanMismatchError(RuntimeError):
    """The round directory already holds a different plan."""


def default_round_dir(experiment: ExperimentParams, round_index: int) -> Path:
    """``<run_root>/<experiment.name>/round-<NNN>``."""
    return runs_root(experiment.run_root) / experiment.name / round_id(round_index)


def round_curriculum(round_params: RoundParams, round_index: int, skillbank: str | Path | None = None,
                     recorded_path: str | None = None) -> CurriculumState | None:
    """The round's curriculum built from ``skillbank`` (default ``round.skillbank``; ``None`` = no skills).

    α_j is each chunk's ``metadata.estimated_effect``; q, ρ_min, ρ_max and the seed come from
    ``round_params``.
    ``recorded_path`` is the bank path the curriculum records (and hashes; default ``skillbank`` as given).
    """
    source = skillbank if skillbank is not None else round_params.skillbank
    if source is None:
        return None
    path = resolve_project_path(source)
    if not path.is_file():
        raise FileNotFoundError(f"round.skillbank: no SkillBank file at {path}")
    r = round_params
    return build_curriculum(
        load_skillbank(path), round_id=round_id(round_index), skill_free_probability=r.q,
        rho_min=r.rho_min, rho_max=r.rho_max, seed=r.curriculum_seed, skillbank_path=recorded_path or str(source),
    )


def open_train_store(params: Params, store_root: str | Path | None = None, split: str = "train") -> StoreHandle:
    """Build (or reuse) the store of ``params.store`` and open an engine over ``split``'s tasks; with
    ``round.exclude_dev`` the train split's tasks are those outside dev (its identity names ``train-dev`` and that
    list's SHA-256)."""
    handle = open_engine(params.store, split, store_root, params.experiment.run_root)
    if split != "train" or not params.round.exclude_dev:
        return handle
    task_ids = train_without_dev(handle.catalog.splits)
    return replace(handle, task_ids=task_ids, identity={**handle.identity, "split": TRAIN_WITHOUT_DEV,
                                                        "split_sha256": sha256_json(list(task_ids))})


def round_plan(
    params: Params, round_index: int, model_identity: Mapping[str, Any], curriculum: CurriculumState | None,
    store_identity: Mapping[str, Any], library_start: Path | None = None,
) -> dict[str, Any]:
    """The semantic plan of a round: everything that changes which episodes run or how they train.

    Progress, logging (``report_to``, ``wandb_offline``) and the run root are not part of it. The training method
    adds its entries (:meth:`~intraskill.pipeline.methods.TrainingMethod.plan`): a Skill1 round its
    ``skill1`` section (the seed library by its digest, the reply budgets where not the defaults) and encoder,
    and a chained one the digest of the library snapshot it starts from (an IntraSkill round's plan is as
    before the method switch existed).
    """
    runtime = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    plan = {
        "pipeline_version": PIPELINE_VERSION,
        "round_index": round_index,
        "seed": params.experiment.seed,
        "model": dict(model_identity),
        "curriculum_state_id": curriculum.state_id if curriculum is not None else None,
        "environment": dict(store_identity),
        "runtime": runtime.to_dict(),
        "prompt": prompt_identity(runtime.language).to_dict(),
        "round": params.round.model_dump(mode="json", exclude={"wandb_offline", "report_to", "skillbank", "method"}),
        "grpo": params.grpo.model_dump(mode="json"),
        "evaluation": section_plan(params.evaluation),
    }
    plan.update(training_method(params).plan(params, library_start))
    return plan


def write_round_plan(root: Path, plan: Mapping[str, Any]) -> str:
    """Write ``plan.json`` or check the existing one (a missing one beside :data:`~intraskill.layout.RoundDir.OUTPUTS` is refused);
    returns the fingerprint.

    The plan records the run's ``provenance`` (:func:`~intraskill.provenance.run_provenance`) outside the
    fingerprint; a resume under a different one logs a warning. Raises :class:`RoundPlanMismatchError`
    naming the differing top-level fields.
    """
    return write_plan(RoundDir(root).plan, plan, what="round", error=RoundPlanMismatchError,
                      schema=ROUND_PLAN_SCHEMA, outputs=RoundDir.OUTPUTS,
                      hint="Use another round directory (or delete this one) to run a different plan.")


def _touch_marker(path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("done\n")
        handle.flush()
        os.fsync(handle.fileno())


@dataclass(frozen=True)
class RoundResult:
    """A finished round: its directory, checkpoint, per-step metrics and the val comparison (if run)."""

    root: Path
    checkpoint: Path
    metrics: list[RoundStepMetrics]
    comparison: PairedComparison | None

    @property
    def model_dir(self) -> Path:
        """The trained model as a policy checkpoint directory."""
        return CheckpointDir(self.checkpoint).model.root


def reference_model(model: Any, params: Params) -> Any:
    """The KL reference of a full fine-tune with ``grpo.kl_coef > 0``: a frozen copy of the round's starting
    weights (taken before a resume loads the trained ones); ``None`` otherwise (no KL, or LoRA's frozen base)."""
    if params.grpo.kl_coef == 0 or params.grpo.lora is not None:
        return None
    return copy.deepcopy(model)


def _require_trainable(policy: Policy) -> None:
    if not hasattr(policy, "model") or not hasattr(policy, "tokenizer"):
        raise TypeError(
            f"model.spec: round training needs an in-process policy (organism, smollm2 or a model "
            f"directory) that records token streams; got backend {policy.identity.get('backend')!r}"
        )


def bare_val(
    params: Params, policy: Policy, out_dir: Path, store_root: str | Path | None, progress: bool
) -> EvalSummary:
    """Run (or resume) the bare val check of ``policy`` into ``out_dir``; returns its summary."""
    run = run_eval(params, "val", None, None, out_dir, policy=policy, progress=progress,
                   limit=params.round.val_tasks, store_root=store_root)
    return run.summary


def trained_policy(params: Params, model_dir: Path) -> Policy:
    """The policy of a saved round checkpoint (its identity names the weights' digest)."""
    spec = "organism" if params.model.spec == "organism" else str(model_dir)
    model = params.model.model_copy(update={"spec": spec})
    return build_policy(model, str(model_dir), store=params.store, experiment=params.experiment)[0]


def run_round(
    params: Params,
    round_index: int = 0,
    *,
    curriculum: CurriculumState | None = None,
    initial_checkpoint: str | None = None,
    out_dir: str | Path | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
    on_event: RoundEvent | None = None,
    library_start: Path | None = None,
) -> RoundResult:
    """Run (or resume) one training round; see the module docstring for the directory and commit order.

    Parameters
    ----------
    params : the parameter set (``round``, ``grpo``, ``model``, ``sampling``, ``store`` sections).
    round_index : the round number (group indices, task draws and the directory derive from it).
    curriculum : the round's curriculum; default built from ``round.skillbank`` (``None`` there = no skills);
        none for ``round.method: skill1``.
    initial_checkpoint : the policy the round starts from (default: ``model.checkpoint`` resolved by
        :func:`~intraskill.policy.warmstarts.resolve_checkpoint`).
    out_dir : the round directory (default :func:`default_round_dir`).
    store_root : the store directory (default the cached store of ``params.store``).
    progress : show progress bars.
    on_event : called as ``on_event(name, info)`` at ``round-start``, ``step-start``, ``episode``,
        ``admitted``, ``trained``, ``metrics``, ``step-done``, ``round-done``.
    library_start : ``round.method: skill1`` only: the library snapshot a fresh round library starts from (the
        previous round's, :func:`~intraskill.pipeline.coevolve.co_evolve`) instead of ``skill1.seed_library``;
        its digest is part of the plan.
    """
    require_trackers(params.round.trackers)
    root = Path(out_dir) if out_dir is not None else default_round_dir(params.experiment, round_index)
    training_method(params).check_start(curriculum, library_start)
    if curriculum is None:
        curriculum = round_curriculum(params.round, round_index)
    checkpoint = initial_checkpoint if initial_checkpoint is not None else resolve_checkpoint(params)[0]
    run = _RoundRun(params, round_index, curriculum, root, store_root, progress, on_event, library_start)
    try:
        run.open(checkpoint)
        if params.round.val_tasks != 0:
            run.val_before()
        steps = params.round.rollout_steps
        with tqdm(total=steps, desc=f"round {round_index}", disable=not progress) as bar:
            for step in range(1, steps + 1):
                run.step(step)
                bar.update(1)
        comparison = run.val_after() if params.round.val_tasks != 0 else None
        run.emit("round-done", {"root": str(root)})
        return RoundResult(root, run.checkpoint_dir, read_step_metrics(RoundDir(root).metrics), comparison)
    finally:
        run.close()


def resume_state(root: Path, checkpoint_dir: Path) -> CheckpointState | None:
    """The verified ``state.json`` of the round's checkpoint, or ``None`` when no step has trained yet.

    Raises :class:`~intraskill.training.checkpoint.CheckpointError` naming the file when training began but the
    checkpoint's state is missing, a file's checksum differs, or it holds fewer steps than are marked done.
    """
    found = recover_checkpoint(checkpoint_dir)
    done = RoundDir(root).finished_steps()
    if found is None:
        began = checkpoint_dir.exists() or done or any(iter_jsonl(RoundDir(root).metrics))
        if not began:
            return None
        raise CheckpointError(
            f"{CheckpointDir(checkpoint_dir).state} is missing but {root} has trained steps: refusing to restart from "
            f"the initial checkpoint (restore the checkpoint, or delete {root} to run the round afresh)"
        )
    state = verify_checkpoint(found)
    if done and state.step < max(done):
        raise CheckpointError(f"{CheckpointDir(checkpoint_dir).state} holds step {state.step} but step {max(done)} "
                              f"is marked done in {root}; the checkpoint is older than the round")
    return state


class _RoundRun:
    """The state of one round run: store, policy, trainer, files and the trained-step counter."""

    def __init__(self, params: Params, round_index: int, curriculum: CurriculumState | None, root: Path,
                 store_root: str | Path | None, progress: bool, on_event: RoundEvent | None,
                 library_start: Path | None) -> None:
        self.params, self.round_index, self.curriculum = params, round_index, curriculum
        self.library_start = library_start
        self.root, self.store_root, self.progress = root, store_root, progress
        self.emit: RoundEvent = on_event or (lambda name, info: None)
        self.files = RoundFiles(root)
        self.dir = RoundDir(root)
        self.checkpoint_dir = self.dir.checkpoint.root
        self.store: StoreHandle | None = None
        self.logger: Trackers | None = None
        self.trained = 0
        self.history: dict[str, StepMetrics] = {}
        self.steps: MethodSteps | None = None

    def open(self, checkpoint: str | None) -> None:
        """Check the round's checkpoint and records, open the store, build the policy and trainer, check the plan,
        restore."""
        params = self.params
        resumed = resume_state(self.root, self.checkpoint_dir)
        verify_jsonl_tree(self.root)  # an edited trace, metrics or triage record is refused before it is reused
        self.store = store = open_train_store(params, self.store_root)
        self.policy, identity = build_policy(params.model, checkpoint, store=params.store,
                                             experiment=params.experiment)
        _require_trainable(self.policy)
        plan = round_plan(params, self.round_index, identity, self.curriculum, store.identity, self.library_start)
        fingerprint = write_round_plan(self.root, plan)
        if self.curriculum is not None and not self.dir.curriculum.exists():
            save_curriculum(self.curriculum, self.dir.curriculum)
        if params.round.trackers:
            self.logger = Trackers(params.round.trackers, TrackedRun(
                self.root, f"{params.experiment.name}-{round_id(self.round_index)}", fingerprint,
                params.model_dump(mode="json")))
        self.runtime = RuntimeConfig.from_params(params.sampling, params.store, params.model)
        self.env_factory = lambda: InProcessEnvironment(store.engine)
        self.trainer = GRPOTrainer(self.policy.model, params.grpo, temperature=params.sampling.temperature,
                                   pad_token_id=self.policy.pad_id,
                                   ref_model=reference_model(self.policy.model, params))
        if resumed is not None:
            state = load_checkpoint(self.checkpoint_dir, self.trainer, resumed)
            self.trained, self.history = state.step, dict(state.history)
        self.steps = training_method(params).open_steps(RoundContext(
            params, self.root, self.files, self.round_index, self.policy, self.env_factory, store.task_ids,
            self.runtime, self.curriculum, self.library_start, self.trained, self.emit))
        self.policy.model.eval()
        self.emit("round-start", {"root": str(self.root), "trained_steps": self.trained})

    def val_before(self) -> None:
        """The starting policy's bare val run (before any update; required to exist once training began)."""
        if self.trained:
            if not self.dir.val_before.summary.exists():
                raise RuntimeError(f"{self.root}: training started without a finished val-before run")
            return
        with phase("val"):
            bare_val(self.params, self.policy, self.dir.val_before.root, self.store_root, self.progress)

    def val_after(self) -> PairedComparison:
        """The trained checkpoint's bare val run and the paired comparison with val-before."""
        with phase("val"):
            after = trained_policy(self.params, self.dir.checkpoint.model.root)
            bare_val(self.params, after, self.dir.val_after.root, self.store_root, self.progress)
            return val_comparison(self.params, self.root)

    def step(self, step: int) -> None:
        """Run or resume one rollout step up to its ``step-done`` marker."""
        step_dir = self.files.step_dir(step)
        if step_dir.done.exists():
            return
        self.emit("step-start", {"step": step})
        timing = StepTiming().to_dict()
        if step <= self.trained:
            rollout = training_method(self.params).rollout_record.read(step_dir.rollout)
        else:
            with phase("rollout"):
                rollout, samples = self.steps.rollout(step, timing)
            start = time.perf_counter()
            with phase("io"):
                rollout.write(step_dir.rollout, indent=1)
            timing["io_s"] += time.perf_counter() - start
            self.emit("admitted", {"step": step, "admitted": len(rollout.admitted_groups)})
            start = time.perf_counter()
            with phase("train"):
                self.history[str(step)] = _train(self.trainer, samples, self.policy)
            timing["train_s"] = time.perf_counter() - start
            start = time.perf_counter()
            with phase("io"):
                save_checkpoint(self.checkpoint_dir, self.trainer, self.policy.tokenizer, step, self.history)
            timing["io_s"] += time.perf_counter() - start
            self.trained = step
            self.emit("trained", {"step": step})
        self.steps.commit(step)
        record = RoundStepMetrics(
            round=self.round_index, step=step, rollout=rollout.metrics,
            train=train_step_metrics(self.history[str(step)], self.params.grpo.global_batch_size),
            time=StepTiming(**timing))
        start = time.perf_counter()
        with phase("io"):
            _append_metrics(self.dir.metrics, record)
            if self.logger is not None:
                self.logger.log(record)
            self.emit("metrics", {"step": step, "record": record})
            _touch_marker(step_dir.done)
        timing["io_s"] += time.perf_counter() - start
        self.emit("step-done", {"step": step})

    def close(self) -> None:
        if self.steps is not None:
            self.steps.close()
        if self.store is not None:
            self.store.close()
        if self.logger is not None:
            self.logger.close()


def _train(trainer: Any, samples: list[TrainSample], policy: Any) -> StepMetrics:
    """One trainer step on the step's samples; the policy's model is left in eval mode."""
    try:
        return trainer.train_step(samples)
    finally:
        policy.model.eval()


def _append_metrics(path: Path, record: RoundStepMetrics) -> None:
    """Append the step's record unless one for that step is already there (a resumed commit)."""
    if any(existing.get("step") == record.step for existing in iter_jsonl(path)):
        return
    with JsonlWriter(path) as writer:
        writer.append(record.to_dict())


def val_comparison(params: Params, root: Path) -> PairedComparison:
    """Paired comparison of ``val-after`` against ``val-before`` (cross-checkpoint), written to ``val-compare``."""
    files = RoundDir(root)
    comparison = compare_runs(files.val_before.root, files.val_after.root, kind="cross-checkpoint",
                              samples=params.evaluation.bootstrap_samples, seed=params.evaluation.bootstrap_seed)
    write_comparison(comparison, files.val_compare.root)
    return comparison
