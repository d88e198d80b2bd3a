"""The paired validation gate as a run: the online gate and Gate A on a frozen checkpoint.

Reference: docs/method.md §5.1 (frozen checkpoint, required ``checkpoint_id``, reused bare val,
one masked rollout per task), §5.2 (masks drawn and written before any rollout), §5.3 (pairing),
§5.4–5.5 (estimator, selection), §5.6 (artifacts), §4.4 step 5 (Gate A) and §6.4 (the next
curriculum: q 0.20, ρ 0.20–0.90).

A gate directory holds, in the order they are written:

- ``mask_assignments.json`` — drawn and rank-checked before any rollout; a singular draw is redrawn (its
  ``redraw`` index recorded there and in the manifest's ``protocol.mask_redraw``), and a design that stays
  singular, or has no more jobs than columns, aborts with nothing written;
- the bare val run (``bare_run_dir``, default ``<gate_dir>/bare-val``): reused when it exists with the
  same plan, otherwise run (skills none) through :func:`~intraskill.evaluate.runner.run_eval`;
- ``plan.json``, ``traces.jsonl``, ``summary.json`` — the masked run: the same jobs, runtime and
  evaluator, each episode injecting its assignment's versions in slot order;
- ``contributions.json`` (Gate A also ``contributions.csv``), ``selected_skillbank.json``,
  ``selected_skill.md``, ``proposal_ledger.jsonl`` (when a ledger is given), ``curriculum.json``
  (the next round's, when a chunk is selected) and the manifest (``online_gate_manifest.json`` or
  ``gate_a_manifest.json``: status, config, protocol, input hashes, observed provenance, output hashes).

``contributions.json`` carries the additivity test of the selected chunks (:mod:`intraskill.gate.additivity`),
and the manifest's ``outcomes.additivity`` its verdict. The optional ranking check
(:func:`run_ranking_check`) adds ``ranking/<arm>/`` val runs of fixed top-K, bottom-K and random-K banks and
``ranking_check.json``.

Every stage resumes (the evaluator skips completed episodes); a gate whose manifest is complete for
the same inputs and whose outputs still hash as recorded is skipped. With ``samples_per_task`` m > 1
the bare run has m samples per task too (sample ids 0..m−1, paired by episode ID) and the standard
errors are clustered by task.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from intraskill.agent.traces import read_traces
from intraskill.chat.base import Policy
from intraskill.evaluate.compare import check_plans
from intraskill.evaluate.records import EvalSummary
from intraskill.evaluate.runner import eval_jobs, read_plan, run_eval
from intraskill.evaluate.task_records import run_task_values
from intraskill.gate.contributions import (
    GateContributions,
    GateRecord,
    PairingError,
    bare_baseline_block,
    build_contributions,
    load_contributions,
    pair_records,
    save_contributions,
    selected_skill_markdown,
    selected_skillbank,
    selection_metadata,
)
from intraskill.gate.design import (
    DEFAULT_MASK_SEED,
    MAX_MASK_REDRAWS,
    MaskAssignment,
    MaskAssignmentError,
    assign_gate_a_masks,
    assign_online_masks,
    load_mask_assignment,
    save_mask_assignment,
)
from intraskill.gate.manifest import (
    COMPLETE,
    RUNNING,
    AdditivityVerdict,
    GateInputs,
    GateManifest,
    GateObserved,
    GateOutcomes,
    GateProtocol,
    MeanOutcome,
)
from intraskill.gate.ranking import RankingCheck, ranking_arms, ranking_check
from intraskill.gate.selection import ContributionStatus
from intraskill.hashing import sha256_file, sha256_json
from intraskill.jsonl import write_json
from intraskill.layout import GATE_A, ONLINE, GateDir
from intraskill.params import (
    ACTIVE_SKILL_BUDGET,
    RANKING_K,
    RANKING_RANDOM_SEED,
    SAMPLES_PER_TASK,
    EvaluationParams,
    Params,
    section_plan,
)
from intraskill.pipeline.round import trained_policy
from intraskill.policy.factory import build_policy, weights_digest
from intraskill.shop.build import ensure_store
from intraskill.skills.bank import Skill, SkillBank, load_skillbank, save_skillbank
from intraskill.skills.curriculum import (
    DEFAULT_CURRICULUM_SEED,
    DEFAULT_RHO_MAX,
    DEFAULT_RHO_MIN,
    DEFAULT_SKILL_FREE_PROBABILITY,
    CurriculumState,
    build_curriculum,
    load_curriculum,
    save_curriculum,
)
from intraskill.skills.pool import CANDIDATE_VERSION, CandidatePool, load_pool
from intraskill.trace2skill.ledger import LedgerEntry, apply_gate_results, read_ledger, write_ledger

GATE_A_BANK_VERSION = "cold-start-gate-a-selected-v2"
ACTIVE_VERSION = "active-1"
"""The version of a chunk Gate A selected (method §1.3; the draft's is ``draft-1``)."""


class GateInputError(ValueError):
    """A gate input (pool, draft, checkpoint id, bare run) is unusable; the message names it."""


@dataclass(frozen=True)
class GateConfig:
    """Settings of one gate run (defaults from the release's ``gate.yaml``).

    What it adds to the ``gate`` section (:meth:`from_params` reads K, m and the mask seed from it, and q, ρ and
    the curriculum seed from ``round``): the run's identity and scope (``checkpoint_id``, ``task_limit``,
    ``split``, ``next_round_id``), one flat record the manifest stores and a resumed gate is rebuilt from
    (:meth:`to_dict`), and per-run overrides (a validation seed's mask seed) that leave the params unchanged.

    Parameters
    ----------
    checkpoint_id : required name of the frozen checkpoint (e.g. ``round-003-checkpoint``); it enters
        provenance, the ledger and the manifest, never the policy.
    mask_seed : seed of every mask draw (``RELEASE_SEED``).
    samples_per_task : m ≥ 1 masked rollouts per task (the release: 1); the bare run gets m too.
    task_limit : first val tasks used (``None`` = ``evaluation.task_limit``, then the whole split).
    active_skill_budget : K, the strictly positive top-K kept (10).
    split : the validation split (``val``).
    next_round_id : round ID of the next curriculum (default: the pool's round + 1; Gate A ``round-000``).
    q, rho_min, rho_max, curriculum_seed : the next curriculum (defaults those of ``params.round``).
    batch_size : episodes per lockstep batch (not part of any plan).
    """

    checkpoint_id: str
    mask_seed: int = DEFAULT_MASK_SEED
    samples_per_task: int = SAMPLES_PER_TASK
    task_limit: int | None = None
    active_skill_budget: int = ACTIVE_SKILL_BUDGET
    split: str = "val"
    next_round_id: str | None = None
    q: float = DEFAULT_SKILL_FREE_PROBABILITY
    rho_min: float = DEFAULT_RHO_MIN
    rho_max: float = DEFAULT_RHO_MAX
    curriculum_seed: int = DEFAULT_CURRICULUM_SEED
    batch_size: int = 32

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint_id, str) or not self.checkpoint_id.strip():
            raise GateInputError("checkpoint_id: required for the gate (e.g. round-000-checkpoint)")
        if self.samples_per_task < 1:
            raise GateInputError(f"samples_per_task: must be >= 1, got {self.samples_per_task}")
        if self.task_limit is not None and self.task_limit < 1:
            raise GateInputError(f"task_limit: must be >= 1 or None, got {self.task_limit}")
        if self.active_skill_budget < 1:
            raise GateInputError(f"active_skill_budget: must be >= 1, got {self.active_skill_budget}")
        if self.batch_size < 1:
            raise GateInputError(f"batch_size: must be >= 1, got {self.batch_size}")

    @classmethod
    def from_params(cls, params: Params, checkpoint_id: str, **settings: Any) -> GateConfig:
        """The gate of ``params.gate`` (K, m, mask seed) whose next curriculum follows ``params.round`` (q, ρ,
        seed); ``settings`` override or add the rest."""
        gate, round_params = params.gate, params.round
        fields = {"mask_seed": gate.mask_seed, "samples_per_task": gate.samples_per_task,
                  "active_skill_budget": gate.active_skill_budget, **settings}
        return cls(checkpoint_id=checkpoint_id, q=round_params.q, rho_min=round_params.rho_min,
                   rho_max=round_params.rho_max, curriculum_seed=round_params.curriculum_seed, **fields)

    def to_dict(self) -> dict[str, Any]:
        """The semantic settings (``batch_size`` left out)."""
        record = asdict(self)
        record.pop("batch_size")
        return record


@dataclass(frozen=True)
class GateResult:
    """A finished gate: its directory, ``contributions.json``, the selected bank, the next curriculum
    (``None`` when nothing was selected) and the manifest."""

    gate_dir: Path
    contributions: GateContributions
    selected_bank: SkillBank
    curriculum: CurriculumState | None
    manifest: GateManifest


@dataclass(frozen=True)
class AssignmentSkills:
    """Per-episode skills of a mask assignment: the included versions in slot order.

    ``versions`` maps every design column (intervention ID) to the skill injected for it; the
    injected ``skill_id`` is the version's intervention ID, as the pairing contract checks.
    """

    assignment: MaskAssignment
    versions: Mapping[str, Skill]
    _included: dict[tuple[int, int], tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        missing = [c for c in self.assignment.columns if c not in self.versions]
        if missing:
            raise GateInputError(f"versions: no skill for design column(s) {missing}")
        jobs = {(job.task_id, job.sample_id): job.included_chunk_ids for job in self.assignment.jobs}
        object.__setattr__(self, "_included", jobs)

    @property
    def identity(self) -> dict[str, Any]:
        """The masked run's plan ``skills`` field."""
        columns = self.assignment.columns
        return {"provider": "mask_assignment", "design": self.assignment.design,
                "assignment_sha256": self.assignment.assignment_sha256,
                "pool_sha256": self.assignment.pool_sha256,
                "versions_sha256": sha256_json([self.versions[c].to_dict() for c in columns])}

    def __call__(self, task_id: int, sample_id: int) -> list[Skill]:
        included = self._included.get((task_id, sample_id))
        if included is None:
            raise KeyError(f"(task {task_id}, sample {sample_id}) is not a job of the mask assignment")
        return [self.versions[i] for i in included]


@dataclass(frozen=True)
class _GateSpec:
    """What differs between the online gate and Gate A."""

    design: str
    source_sha256: str
    assign: Callable[[Sequence[int]], MaskAssignment]
    versions: Mapping[str, Skill]
    select: Callable[[GateContributions], SkillBank]
    next_round_id: str
    ledger: Sequence[LedgerEntry] | None
    candidates: int


def next_round_id(round_id: str) -> str:
    """``round-000`` → ``round-001``; any other ID gains a ``-next`` suffix."""
    match = re.fullmatch(r"round-(\d+)", round_id)
    return f"round-{int(match.group(1)) + 1:03d}" if match else f"{round_id}-next"


def pool_versions(pool: CandidatePool) -> dict[str, Skill]:
    """Intervention ID → the skill injected for it (current chunks as they are, candidates by ID)."""
    versions = {s.skill_id: s for s in pool.current_skills}
    for c in pool.candidates:
        origin = {"operation": c.operation, "target_chunk_id": c.target_chunk_id}
        versions[c.candidate_id] = Skill(skill_id=c.candidate_id, content=c.content,
                                         version=CANDIDATE_VERSION, metadata={**c.metadata, **origin})
    return versions


def gate_a_selected_bank(contributions: GateContributions, draft: SkillBank) -> SkillBank:
    """Gate A's selected bank (``cold-start-gate-a-selected-v2``): selected chunks in draft order, version
    ``active-1``, each with ``validation_result``, ``estimated_effect`` (β) and ``contribution_rank``."""
    if contributions.pool_sha256 != draft.sha256:
        raise GateInputError(f"pool_sha256: contributions were fitted on "
                             f"{contributions.pool_sha256!r}, not on draft {draft.sha256!r}")
    skills = []
    for skill in draft.enabled_skills():
        record = contributions.record(skill.skill_id)
        if record.status is not ContributionStatus.SELECTED:
            continue
        metadata = {k: v for k, v in skill.metadata.items() if k != "draft_only"}
        metadata.update(validation_result="selected", estimated_effect=record.coefficient,
                        contribution_rank=record.rank, selected_intervention_id=skill.skill_id)
        skills.append(replace(skill, version=ACTIVE_VERSION, metadata=metadata))
    metadata = {"draft_sha256": draft.sha256, **selection_metadata(contributions)}
    return SkillBank(bank_version=GATE_A_BANK_VERSION, skills=tuple(skills), metadata=metadata)


def as_draft(bank: SkillBank) -> SkillBank:
    """``bank`` marked ``draft_only: true`` (Gate A refuses other banks), e.g. to re-validate S₀."""
    return replace(bank, metadata={**bank.metadata, "draft_only": True})


def write_contributions_csv(contributions: GateContributions, path: str | Path) -> Path:
    """Gate A's ``contributions.csv``: one row per chunk with β, rank, status, SE and 95 % CI (reward)."""
    estimate = contributions.primary
    path = Path(path)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["intervention_id", "order", "coefficient", "rank", "status", "std_err", "ci_lo",
                         "ci_hi"])
        for record in contributions.contributions:
            ident = record.intervention_id
            low, high = estimate.conf_int_95[ident]
            writer.writerow([ident, record.order, record.coefficient, record.rank, record.status.value,
                             estimate.standard_errors[ident], low, high])
    return path


def check_bare_plan(bare: Mapping[str, Any], masked: Mapping[str, Any]) -> None:
    """The §5.3 bare-manifest check: skills none, and model (without ``transport``), prompt, runtime,
    environment, split, seed and the job set equal the masked run's. Raises :class:`PairingError`."""
    if bare.get("skills") != {"provider": "none"}:
        raise PairingError(f"bare plan: skills must be {{'provider': 'none'}}, got {bare.get('skills')!r}")

    def model(plan: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in plan["model"].items() if k != "transport"}

    if model(bare) != model(masked):
        raise PairingError("bare plan: model identity differs from the masked run's")
    for key in ("prompt", "runtime", "environment", "split", "seed", "pipeline_version"):
        if bare.get(key) != masked.get(key):
            raise PairingError(f"bare plan: {key} differs from the masked run's")
    if sorted(map(tuple, bare["jobs"])) != sorted(map(tuple, masked["jobs"])):
        raise PairingError("bare plan: the job set (task_id, sample_id) differs from the masked run's")


def _eval_params(params: Params, config: GateConfig) -> Params:
    evaluation = params.evaluation.model_copy(update={"repeats": config.samples_per_task})
    return params.model_copy(update={"evaluation": evaluation})


def _task_limit(evaluation: EvaluationParams, config: GateConfig) -> int | None:
    return config.task_limit if config.task_limit is not None else evaluation.task_limit


def gate_task_ids(params: Params, config: GateConfig, store_root: str | Path | None = None) -> list[int]:
    """The gate's val tasks: the evaluator's first ``task_limit`` tasks of the split, in split order."""
    catalog = ensure_store(params.store, store_root or None, params.experiment.run_root).catalog
    return [task for task, _ in eval_jobs(catalog.task_ids(config.split), 1, _task_limit(params.evaluation, config))]


def _checkpoint_sha256(checkpoint: str | Path | None) -> str | None:
    if checkpoint is None:
        return None
    try:
        return weights_digest(Path(checkpoint))
    except FileNotFoundError as error:
        raise GateInputError(f"checkpoint: {error}") from None


def _inputs(params: Params, spec: _GateSpec, checkpoint: str | Path | None, bare_dir: Path,
            policy: Policy | None) -> GateInputs:
    sections = {k: params.model_dump(mode="json")[k] for k in ("store", "model", "sampling")}
    sections["evaluation"] = section_plan(params.evaluation)
    return GateInputs(
        design=spec.design,
        pool_sha256=spec.source_sha256,
        checkpoint=str(checkpoint) if checkpoint is not None else None,
        checkpoint_sha256=_checkpoint_sha256(checkpoint),
        policy_identity_sha256=sha256_json(policy.identity) if policy is not None else None,
        params_sha256=sha256_json({"seed": params.experiment.seed, **sections}),
        ledger_sha256=sha256_json([e.to_dict() for e in spec.ledger]) if spec.ledger is not None else None,
        bare_run_dir=str(bare_dir),
    )


def _write_manifest(gate_dir: Path, manifest: GateManifest) -> GateManifest:
    """Write the manifest of its design, stamped now (atomically)."""
    manifest = manifest.model_copy(update={"updated_at": datetime.now(timezone.utc).isoformat()})
    manifest.write(GateDir(gate_dir).manifest(manifest.design), indent=1)
    return manifest


def _load_result(gate_dir: Path, manifest: GateManifest) -> GateResult:
    files = GateDir(gate_dir)
    contributions = load_contributions(files.contributions)
    curriculum = None
    if files.curriculum.name in (manifest.outputs or {}):
        curriculum = load_curriculum(files.curriculum)
    bank = load_skillbank(files.selected_skillbank)
    return GateResult(gate_dir, contributions, bank, curriculum, manifest)


def _complete(gate_dir: Path, design: str, inputs: GateInputs, config: GateConfig) -> GateResult | None:
    """The stored result when the manifest is complete for these inputs and every output still hashes
    as recorded; otherwise ``None``."""
    path = GateDir(gate_dir).manifest(design)
    if not path.is_file():
        return None
    manifest = GateManifest.read(path)
    if not manifest.complete or manifest.inputs != inputs or manifest.config != config.to_dict():
        return None
    for name, digest in (manifest.outputs or {}).items():
        if not (gate_dir / name).is_file() or sha256_file(gate_dir / name) != digest:
            return None
    return _load_result(gate_dir, manifest)


def _prepared_assignment(gate_dir: Path, assignment: MaskAssignment) -> None:
    """Write ``mask_assignments.json``, or check that the stored one is the same draw."""
    path = GateDir(gate_dir).mask_assignments
    if path.exists():
        stored = load_mask_assignment(path)
        if stored.assignment_sha256 != assignment.assignment_sha256:
            raise MaskAssignmentError(
                f"{path}: holds assignment {stored.assignment_sha256[:12]}… but the inputs draw "
                f"{assignment.assignment_sha256[:12]}…; use a new gate directory")
        return
    save_mask_assignment(assignment, path)


def _policy(params: Params, checkpoint: str | Path | None) -> Policy:
    if checkpoint is None or params.model.spec == "expert" or params.model.spec.startswith("expert:"):
        return build_policy(params.model, None if checkpoint is None else str(checkpoint), store=params.store,
                            experiment=params.experiment)[0]

    return trained_policy(params, Path(checkpoint))


def _records(path: Path, split: str) -> list[GateRecord]:
    return [GateRecord.from_trace(trace, split) for trace in read_traces(path)]


def _outcomes(contributions: GateContributions, summary: EvalSummary, candidates: int) -> GateOutcomes:
    estimates = contributions.estimates
    pick = {m: MeanOutcome(bare_mean=estimates[m].bare_mean, masked_mean=estimates[m].masked_mean,
                           delta_mean=estimates[m].delta_mean) for m in ("reward", "r_success") if m in estimates}
    additivity = contributions.additivity
    verdict = None if additivity is None else AdditivityVerdict.model_validate(
        {k: additivity.to_dict()[k] for k in AdditivityVerdict.model_fields})
    return GateOutcomes(**pick, masked_run_success_rate=summary.primary.success_rate,
                        columns=len(contributions.columns), selected_count=contributions.selected_count,
                        additivity=verdict, candidates=candidates)


def _run(params: Params, spec: _GateSpec, checkpoint: str | Path | None, gate_dir: str | Path,
         config: GateConfig, bare_run_dir: str | Path | None, policy: Policy | None,
         store_root: str | Path | None, progress: bool) -> GateResult:
    gate_dir = Path(gate_dir)
    bare_dir = Path(bare_run_dir) if bare_run_dir is not None else GateDir(gate_dir).bare_val.root
    inputs = _inputs(params, spec, checkpoint, bare_dir, policy)
    done = _complete(gate_dir, spec.design, inputs, config)
    if done is not None:
        return done
    assignment = spec.assign(gate_task_ids(params, config, store_root))  # rank-checked, redrawn: may abort here
    gate_dir.mkdir(parents=True, exist_ok=True)
    _prepared_assignment(gate_dir, assignment)
    record = GateManifest(status=RUNNING, design=spec.design, config=config.to_dict(), inputs=inputs)
    _write_manifest(gate_dir, record)
    policy = policy if policy is not None else _policy(params, checkpoint)
    eval_params, limit = _eval_params(params, config), _task_limit(params.evaluation, config)
    common = {"policy": policy, "progress": progress, "batch_size": config.batch_size, "limit": limit,
              "store_root": store_root}
    bare = run_eval(eval_params, config.split, None, None, bare_dir, **common)
    masked = run_eval(eval_params, config.split, None, None, gate_dir,
                      episode_skills=AssignmentSkills(assignment, spec.versions), **common)
    check_bare_plan(bare.plan.to_dict(), masked.plan.to_dict())
    if sorted(masked.plan.jobs) != sorted((j.task_id, j.sample_id) for j in assignment.jobs):
        raise PairingError("masked plan: jobs differ from the mask assignment's")
    pairing = pair_records(assignment, _records(bare.traces_path, config.split),
                           _records(masked.traces_path, config.split))
    baseline = bare_baseline_block(pairing, assignment, run_dir=os.path.relpath(bare_dir, gate_dir),
                                   plan_fingerprint=bare.plan.fingerprint, checkpoint_id=config.checkpoint_id)
    contributions = build_contributions(assignment, pairing.observations, bare_baseline=baseline,
                                        dropped_episode_ids=pairing.dropped_episode_ids,
                                        requested_observations=pairing.requested_observations,
                                        active_skill_budget=config.active_skill_budget)
    outputs = _write_outputs(gate_dir, spec, config, contributions)
    record = record.model_copy(update={
        "status": COMPLETE,
        "protocol": GateProtocol(estimator=contributions.estimator, mask_design=assignment.design,
                                 mask_seed=assignment.mask_seed, mask_redraw=assignment.redraw,
                                 max_mask_redraws=MAX_MASK_REDRAWS, samples_per_task=config.samples_per_task,
                                 cov_type=contributions.primary.cov_type),
        "observed": GateObserved(model=masked.plan.model, masked_plan_fingerprint=masked.plan.fingerprint,
                                 bare_plan_fingerprint=bare.plan.fingerprint,
                                 assignment_sha256=assignment.assignment_sha256,
                                 observations=contributions.observations,
                                 dropped_episode_ids=list(contributions.dropped_episode_ids)),
        "outcomes": _outcomes(contributions, masked.summary, spec.candidates),
        "outputs": {name: sha256_file(gate_dir / name) for name in outputs}})
    return _load_result(gate_dir, _write_manifest(gate_dir, record))


def _write_outputs(gate_dir: Path, spec: _GateSpec, config: GateConfig,
                   contributions: GateContributions) -> list[str]:
    """Write the fitted gate's files; returns their names (the manifest hashes them)."""
    files = GateDir(gate_dir)
    save_contributions(contributions, files.contributions)
    written = [files.mask_assignments, files.plan, files.traces, files.summary, files.contributions]
    if spec.design == GATE_A:
        write_contributions_csv(contributions, files.contributions_csv)
        written.append(files.contributions_csv)
    bank = spec.select(contributions)
    save_skillbank(bank, files.selected_skillbank)
    files.selected_skill.write_text(selected_skill_markdown(bank), encoding="utf-8")
    written += [files.selected_skillbank, files.selected_skill]
    if spec.ledger is not None:
        updated = apply_gate_results(spec.ledger, contributions, evaluation_checkpoint=config.checkpoint_id)
        write_ledger(files.ledger, updated)
        written.append(files.ledger)
    files.curriculum.unlink(missing_ok=True)
    if bank.skills:
        curriculum = build_curriculum(bank, round_id=config.next_round_id or spec.next_round_id,
                                      skill_free_probability=config.q, rho_min=config.rho_min,
                                      rho_max=config.rho_max, seed=config.curriculum_seed,
                                      skillbank_path=files.selected_skillbank.name)  # beside curriculum.json
        save_curriculum(curriculum, files.curriculum)
        written.append(files.curriculum)
    return [path.name for path in written]


def _ledger(ledger: Sequence[LedgerEntry] | str | Path | None) -> list[LedgerEntry] | None:
    if ledger is None:
        return None
    if isinstance(ledger, (str, Path)):
        if not Path(ledger).is_file():
            raise GateInputError(f"ledger: no proposal ledger at {ledger}")
        return read_ledger(ledger)
    return list(ledger)


def run_online_gate(
    params: Params,
    pool: CandidatePool | str | Path,
    gate_dir: str | Path,
    config: GateConfig,
    *,
    checkpoint: str | Path | None = None,
    bare_run_dir: str | Path | None = None,
    ledger: Sequence[LedgerEntry] | str | Path | None = None,
    policy: Policy | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
) -> GateResult:
    """Run (or resume, or skip when complete) the online gate of one round.

    Parameters
    ----------
    params : the parameter set (store, model, sampling, evaluation sections).
    pool : the round's ``candidate_pool.json`` (or the loaded pool): current chunks plus candidates.
    gate_dir : the gate directory (``<round_dir>/gate`` by convention).
    config : :class:`GateConfig` (``checkpoint_id`` required).
    checkpoint : the frozen round checkpoint (a policy directory); ``None`` with ``policy`` or a
        checkpoint-free ``model.spec`` (e.g. ``expert``).
    bare_run_dir : the bare val run to reuse (run there when missing; default ``<gate_dir>/bare-val``).
    ledger : the proposal ledger including this round's candidates (``analysis/proposal_ledger.jsonl``);
        the gate writes the updated copy to ``<gate_dir>/proposal_ledger.jsonl``.
    policy : an already built policy (default: built from ``params`` and ``checkpoint``).
    store_root : the store directory (default the cached store of ``params.store``).

    Raises
    ------
    RankDeficientDesignError
        When the design has no more jobs than columns, or stays singular through
        :data:`~intraskill.gate.design.MAX_MASK_REDRAWS` redraws — before any rollout and before any file is
        written.
    """
    if not isinstance(pool, CandidatePool):
        pool = load_pool(pool)
    if not pool.current_skills and not pool.candidates:
        raise GateInputError("pool: no current chunk and no candidate; there is nothing to gate")

    def assign(task_ids: Sequence[int]) -> MaskAssignment:
        return assign_online_masks(pool, task_ids, mask_seed=config.mask_seed, split=config.split,
                                   samples_per_task=config.samples_per_task)

    spec = _GateSpec(ONLINE, pool.pool_sha256, assign, pool_versions(pool),
                     lambda contributions: selected_skillbank(contributions, pool, round_id=pool.round_id),
                     next_round_id(pool.round_id), _ledger(ledger), len(pool.candidates))
    return _run(params, spec, checkpoint, gate_dir, config, bare_run_dir, policy, store_root, progress)


def run_gate_a(
    params: Params,
    draft: SkillBank | str | Path,
    gate_dir: str | Path,
    config: GateConfig,
    *,
    checkpoint: str | Path | None = None,
    bare_run_dir: str | Path | None = None,
    ledger: Sequence[LedgerEntry] | str | Path | None = None,
    policy: Policy | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
) -> GateResult:
    """Run (or resume, or skip) Gate A: independent Bernoulli(0.5) masks over the draft's 1–16 chunks.

    The draft must be marked ``draft_only`` (see :func:`as_draft`). Outputs are the online gate's plus
    ``contributions.csv``; the selected bank is ``cold-start-gate-a-selected-v2`` in draft order and the
    next curriculum is ``round-000``'s. Other parameters as in :func:`run_online_gate`.
    """
    bank = draft if isinstance(draft, SkillBank) else load_skillbank(draft)

    def assign(task_ids: Sequence[int]) -> MaskAssignment:
        return assign_gate_a_masks(bank, task_ids, mask_seed=config.mask_seed, split=config.split,
                                   samples_per_task=config.samples_per_task)

    spec = _GateSpec(GATE_A, bank.sha256, assign, {s.skill_id: s for s in bank.enabled_skills()},
                     lambda contributions: gate_a_selected_bank(contributions, bank), "round-000",
                     _ledger(ledger), len(bank.enabled_skills()))
    return _run(params, spec, checkpoint, gate_dir, config, bare_run_dir, policy, store_root, progress)


RANKING_METRICS = ("reward", "r_success")


def run_ranking_check(
    params: Params,
    gate_dir: str | Path,
    versions: Mapping[str, Skill],
    *,
    k: int = RANKING_K,
    random_seeds: Sequence[int] = (RANKING_RANDOM_SEED,),
    checkpoint: str | Path | None = None,
    policy: Policy | None = None,
    store_root: str | Path | None = None,
    progress: bool = True,
) -> RankingCheck:
    """The optional ranking check of a finished gate: fixed-bank val runs of its top-K, bottom-K and random-K.

    Each arm runs the gate's own val jobs (its task limit and m samples per task) on the same checkpoint into
    ``<gate_dir>/ranking/<arm>`` (resumable) and is paired by task with the gate's bare run; the result goes to
    ``<gate_dir>/ranking_check.json``. Cost: ``(2 + len(random_seeds)) × tasks × m`` val episodes.

    Parameters
    ----------
    versions : intervention ID → the skill injected for it (:func:`pool_versions` of the online gate's pool,
        or the Gate A draft's chunks by ID).
    k, random_seeds : arm size and the random arms' seeds (the release: 4 and 20260907).
    checkpoint, policy, store_root : as in :func:`run_online_gate`; use the gate's checkpoint.
    """
    gate_dir = Path(gate_dir)
    manifests = GateDir(gate_dir).manifests()
    manifest = GateManifest.read(manifests[0]) if manifests else None
    if manifest is None or not manifest.complete:
        raise GateInputError(f"gate_dir: {gate_dir} holds no complete gate manifest; run the gate first")
    config = GateConfig(**manifest.config)
    contributions = load_contributions(GateDir(gate_dir).contributions)
    arms = ranking_arms(contributions, k, random_seeds)
    missing = sorted({c for ids in arms.values() for c in ids} - set(versions))
    if missing:
        raise GateInputError(f"versions: no skill for ranked intervention(s) {missing}")
    bare_dir = Path(manifest.inputs.bare_run_dir)
    policy = policy if policy is not None else _policy(params, checkpoint)
    eval_params, limit = _eval_params(params, config), _task_limit(params.evaluation, config)
    values = {m: {"bare": v} for m, v in run_task_values(bare_dir, RANKING_METRICS).items()}
    for arm, ids in arms.items():
        bank = SkillBank(bank_version=f"gate-ranking-{arm}", skills=tuple(versions[c] for c in ids),
                         metadata={"gate_dir": str(gate_dir), "arm": arm})
        run = run_eval(eval_params, config.split, None, bank, GateDir(gate_dir).ranking(arm).root, policy=policy,
                       progress=progress, batch_size=config.batch_size, limit=limit, store_root=store_root)
        check_plans(read_plan(bare_dir), run.plan, "same-checkpoint")
        for metric, per_task in run_task_values(run.run_dir, RANKING_METRICS).items():
            values[metric][arm] = per_task
    check = ranking_check(arms, values, samples=params.evaluation.bootstrap_samples,
                          seed_base=params.evaluation.bootstrap_seed)
    write_json(GateDir(gate_dir).ranking_check, {"gate_dir": str(gate_dir), "random_seeds": list(random_seeds),
                                                 "episodes": (2 + len(random_seeds)) * len(run.plan.jobs),
                                                 **check.to_dict()})
    return check
