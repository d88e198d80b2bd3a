"""The gate's design: the paired validation gate's mask assignment, drawn and written before any rollout.

Reference: docs/method.md §1.6 (slot order of online gate banks), §1.4 (rewrite families),
§5.2 (online and Gate A draws, ``mask_assignments.json``).

**Online gate.** Slots are the current chunks in bank order, each followed by its REWRITE versions
sorted by candidate ID, then ADD slots sorted by candidate ID. For every job and slot,
``choice = u64("mask_seed:split:task_id:sample_id:slot_id") mod (versions + 1)``; 0 means absent
and k means version k. A plain slot is present with probability ½; a family with L rewrites is
uniform over L + 2 states. The design has one 0/1 dummy column per version.

**Gate A.** Each draft chunk is its own slot, included iff
``u64("mask_seed:split:task:sample:chunk_id") < p·2⁶⁴`` with p exactly 0.5.

Jobs are (task, sample) pairs with sample ids 0..m−1 (m ≥ 1 masked rollouts per task). The design's
rank is checked with :func:`check_design_rank` when the assignment is built, before any rollout. A draw
whose design is singular is redrawn: redraw r ≥ 1 keys every draw ``mask_seed:redraw-r:split:…`` (redraw 0
is the reference's key), up to :data:`MAX_MASK_REDRAWS` times, and the assignment records ``redraw``; a
design with no more jobs than columns, or one still singular after the last redraw, aborts naming the
remedy. ``assignment_sha256`` fingerprints every other field; a reload verifies it and re-draws every mask.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intraskill.agent.runtime import episode_id
from intraskill.gate.ols import RankDeficientDesignError, check_design_rank
from intraskill.gate.selection import Intervention
from intraskill.hashing import sha256_json, u64
from intraskill.jsonl import write_json
from intraskill.params import RELEASE_SEED, SAMPLES_PER_TASK, VALIDATION_DIMENSION_CAP
from intraskill.skills.bank import SkillBank
from intraskill.skills.pool import CandidatePool

LOGGER = logging.getLogger(__name__)

MASK_ASSIGNMENT_SCHEMA_VERSION = "intraskill-mask-assignment-v1"
DEFAULT_MASK_SEED = RELEASE_SEED
GATE_A_MASK_PROBABILITY = 0.5
GATE_A_MAX_CHUNKS = VALIDATION_DIMENSION_CAP
DESIGN_ONLINE = "online_slot_states"
DESIGN_GATE_A = "gate_a_bernoulli"
DESIGNS = (DESIGN_ONLINE, DESIGN_GATE_A)
MAX_MASK_REDRAWS = 10
"""Redraws after a singular design. With more jobs than columns a fresh draw is singular with small
probability (an all-absent column needs every job to miss it), so ten failures in a row mean the design is
too small for its columns, and the gate says so instead of drawing on."""


class MaskAssignmentError(ValueError):
    """A mask assignment is malformed, tampered with or does not match its inputs."""


@dataclass(frozen=True)
class SlotVersion:
    """One version (design column) of a slot."""

    intervention_id: str
    kind: str
    operation: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"intervention_id": self.intervention_id, "kind": self.kind, "operation": self.operation}


@dataclass(frozen=True)
class Slot:
    """A logical chunk slot: its versions are mutually exclusive (old first, then rewrites)."""

    slot_id: str
    order: int
    versions: tuple[SlotVersion, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", tuple(self.versions))
        if not self.versions:
            raise MaskAssignmentError(f"slot {self.slot_id}: needs at least one version")

    def interventions(self) -> list[Intervention]:
        """The slot's design columns as selection interventions."""
        return [Intervention(v.intervention_id, v.kind, self.slot_id, v.operation, self.order)
                for v in self.versions]

    def to_dict(self) -> dict[str, Any]:
        versions = [v.to_dict() for v in self.versions]
        return {"slot_id": self.slot_id, "order": self.order, "versions": versions}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Slot":
        versions = tuple(SlotVersion(str(v["intervention_id"]), str(v["kind"]), v.get("operation"))
                         for v in data["versions"])
        return cls(slot_id=str(data["slot_id"]), order=int(data["order"]), versions=versions)


def slots_from_pool(pool: CandidatePool) -> tuple[Slot, ...]:
    """Online slot order (§1.6): current slots in bank order, each old version followed by its rewrites
    sorted by candidate ID; then ADD slots sorted by candidate ID. ``order`` runs 1..S."""
    rewrites: dict[str, list[str]] = {}
    adds = []
    for candidate in pool.candidates:
        if candidate.operation == "REWRITE":
            rewrites.setdefault(str(candidate.target_chunk_id), []).append(candidate.candidate_id)
        else:
            adds.append(candidate.candidate_id)
    slots = []
    for skill in pool.current_skills:
        versions = [SlotVersion(skill.skill_id, "current", None)]
        versions += [SlotVersion(c, "candidate", "REWRITE") for c in sorted(rewrites.get(skill.skill_id, []))]
        slots.append(Slot(skill.skill_id, len(slots) + 1, tuple(versions)))
    for candidate_id in sorted(adds):
        slots.append(Slot(candidate_id, len(slots) + 1, (SlotVersion(candidate_id, "candidate", "ADD"),)))
    return tuple(slots)


def slots_from_interventions(interventions: Sequence[Intervention]) -> tuple[Slot, ...]:
    """Rebuild slots from design columns (e.g. a stored ``contributions`` list), keeping column order."""
    grouped: dict[str, list[Intervention]] = {}
    for item in interventions:
        grouped.setdefault(item.logical_chunk_id, []).append(item)
    return tuple(
        Slot(slot_id, items[0].order,
             tuple(SlotVersion(i.intervention_id, i.kind, i.operation) for i in items))
        for slot_id, items in grouped.items()
    )


@dataclass(frozen=True)
class MaskJob:
    """One masked rollout: which versions it injects.

    ``mask`` has one 0/1 entry per design column; ``included_chunk_ids`` lists the injected version
    IDs in slot order; ``slot_states`` maps each slot to its injected version ID or ``None`` (absent).
    """

    episode_id: str
    split: str
    task_id: int
    sample_id: int
    mask: tuple[int, ...]
    included_chunk_ids: tuple[str, ...]
    slot_states: dict[str, str | None]

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "split": self.split, "task_id": self.task_id,
                "sample_id": self.sample_id, "mask": list(self.mask),
                "included_chunk_ids": list(self.included_chunk_ids), "slot_states": dict(self.slot_states)}


def mask_draw(mask_seed: int, redraw: int, split: str, task_id: int, sample_id: int, slot_id: str) -> int:
    """The draw of one (job, slot): ``u64("mask_seed:split:task:sample:slot")``, with ``redraw-r:`` after the
    seed for redraw r ≥ 1."""
    seed = f"{mask_seed}:redraw-{redraw}" if redraw else str(mask_seed)
    return u64(f"{seed}:{split}:{task_id}:{sample_id}:{slot_id}")


def _draw_job(design: str, mask_seed: int, redraw: int, split: str, task_id: int, sample_id: int,
              slots: Sequence[Slot], probability: float | None) -> MaskJob:
    mask: list[int] = []
    included: list[str] = []
    states: dict[str, str | None] = {}
    for slot in slots:
        draw = mask_draw(mask_seed, redraw, split, task_id, sample_id, slot.slot_id)
        if design == DESIGN_ONLINE:
            choice = draw % (len(slot.versions) + 1)
        else:
            choice = int(draw < int(float(probability) * 2**64))
        mask += [int(choice == k) for k in range(1, len(slot.versions) + 1)]
        chosen = slot.versions[choice - 1].intervention_id if choice else None
        states[slot.slot_id] = chosen
        if chosen is not None:
            included.append(chosen)
    return MaskJob(episode_id(task_id, sample_id), split, task_id, sample_id, tuple(mask), tuple(included),
                   states)


@dataclass(frozen=True)
class MaskAssignment:
    """The gate's mask design (``mask_assignments.json``); verified on construction.

    Attributes
    ----------
    design : str
        ``"online_slot_states"`` or ``"gate_a_bernoulli"``.
    mask_seed : int
        Seed of every draw (:data:`~intraskill.params.RELEASE_SEED` in the release).
    split : str
        Validation split name, part of every draw key.
    pool_sha256 : str
        Candidate pool hash (online) or draft bank hash (Gate A).
    slots : tuple of Slot
        Slots in design order; ``columns`` lists their versions in that order.
    jobs : tuple of MaskJob
        Sorted by (task_id, sample_id).
    mask_probability : float or None
        0.5 for Gate A, ``None`` online.
    redraw : int
        Which draw of ``mask_seed`` this is (0 the first; r ≥ 1 after r singular designs). Hashed only when
        non-zero, so assignments written before redraws existed keep their hash.
    """

    design: str
    mask_seed: int
    split: str
    pool_sha256: str
    slots: tuple[Slot, ...]
    jobs: tuple[MaskJob, ...]
    mask_probability: float | None = None
    redraw: int = 0
    assignment_sha256: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "slots", tuple(self.slots))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        self._validate()
        expected = sha256_json(self._hashed_fields())
        if not self.assignment_sha256:
            object.__setattr__(self, "assignment_sha256", expected)
        elif self.assignment_sha256 != expected:
            raise MaskAssignmentError(
                f"assignment_sha256: recorded {self.assignment_sha256} "
                f"but the assignment hashes to {expected}")

    def _validate(self) -> None:
        if self.design not in DESIGNS:
            raise MaskAssignmentError(f"design: expected one of {DESIGNS}, got {self.design!r}")
        if self.design == DESIGN_GATE_A and self.mask_probability != GATE_A_MASK_PROBABILITY:
            raise MaskAssignmentError(
                f"mask_probability: Gate A requires exactly 0.5, got {self.mask_probability!r}")
        if isinstance(self.redraw, bool) or not isinstance(self.redraw, int) or self.redraw < 0:
            raise MaskAssignmentError(f"redraw: must be an integer >= 0, got {self.redraw!r}")
        if self.design == DESIGN_ONLINE and self.mask_probability is not None:
            raise MaskAssignmentError(
                "mask_probability: the online design draws uniform slot states; leave it null")
        columns = self.columns
        if len(set(columns)) != len(columns):
            raise MaskAssignmentError("slots: a version id appears twice")
        keys = [(job.task_id, job.sample_id) for job in self.jobs]
        if len(set(keys)) != len(keys):
            raise MaskAssignmentError("jobs: duplicate (task_id, sample_id)")
        for job in self.jobs:
            drawn = _draw_job(self.design, self.mask_seed, self.redraw, self.split, job.task_id, job.sample_id,
                              self.slots, self.mask_probability)
            if job != drawn:
                raise MaskAssignmentError(
                    f"jobs[{job.episode_id}]: stored mask differs from the draw of "
                    f"mask_seed {self.mask_seed} (redraw {self.redraw})")
        check_design_rank([list(job.mask) for job in self.jobs], columns)

    @property
    def columns(self) -> list[str]:
        """Design columns: every slot's versions, in slot order."""
        return [v.intervention_id for slot in self.slots for v in slot.versions]

    def interventions(self) -> list[Intervention]:
        """The design columns as selection interventions (column order)."""
        return [item for slot in self.slots for item in slot.interventions()]

    def job(self, episode: str) -> MaskJob:
        """The job with episode ID ``episode`` (``KeyError`` naming it otherwise)."""
        for job in self.jobs:
            if job.episode_id == episode:
                return job
        raise KeyError(f"episode {episode!r} is not in the mask assignment")

    def _hashed_fields(self) -> dict[str, Any]:
        redraw = {"redraw": self.redraw} if self.redraw else {}
        return {**redraw,
            "schema_version": MASK_ASSIGNMENT_SCHEMA_VERSION,
            "design": self.design,
            "mask_seed": self.mask_seed,
            "split": self.split,
            "mask_probability": self.mask_probability,
            "pool_sha256": self.pool_sha256,
            "slots": [slot.to_dict() for slot in self.slots],
            "columns": self.columns,
            "jobs": [job.to_dict() for job in self.jobs],
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self._hashed_fields(), "assignment_sha256": self.assignment_sha256}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MaskAssignment":
        """Parse a stored assignment; verifies the hash, every draw and the design rank."""
        if data.get("schema_version") != MASK_ASSIGNMENT_SCHEMA_VERSION:
            raise MaskAssignmentError(
                f"schema_version: expected {MASK_ASSIGNMENT_SCHEMA_VERSION!r}, "
                f"got {data.get('schema_version')!r}")
        for key in ("design", "mask_seed", "split", "pool_sha256", "slots", "columns", "jobs",
                    "assignment_sha256"):
            if key not in data:
                raise MaskAssignmentError(f"{key}: missing")
        jobs = tuple(
            MaskJob(j["episode_id"], j["split"], int(j["task_id"]), int(j["sample_id"]), tuple(j["mask"]),
                    tuple(j["included_chunk_ids"]), dict(j["slot_states"]))
            for j in data["jobs"]
        )
        assignment = cls(design=data["design"], mask_seed=int(data["mask_seed"]), split=data["split"],
                         pool_sha256=data["pool_sha256"],
                         slots=tuple(Slot.from_dict(s) for s in data["slots"]),
                         jobs=jobs, mask_probability=data.get("mask_probability"),
                         redraw=data.get("redraw", 0), assignment_sha256=data["assignment_sha256"])
        if list(data["columns"]) != assignment.columns:
            raise MaskAssignmentError("columns: differ from the versions of `slots` in slot order")
        return assignment


def _job_keys(task_ids: Sequence[int], samples_per_task: int) -> list[tuple[int, int]]:
    if isinstance(samples_per_task, bool) or not isinstance(samples_per_task, int) or samples_per_task < 1:
        raise MaskAssignmentError(f"samples_per_task: must be an integer >= 1, got {samples_per_task!r}")
    tasks = [int(t) for t in task_ids]
    if len(set(tasks)) != len(tasks):
        raise MaskAssignmentError("task_ids: duplicate task id")
    return [(task, sample) for task in sorted(tasks) for sample in range(samples_per_task)]


def _assign(design: str, slots: Sequence[Slot], task_ids: Sequence[int], *, mask_seed: int, split: str,
            pool_sha256: str, samples_per_task: int, probability: float | None) -> MaskAssignment:
    """The first draw of ``mask_seed`` (redraw 0, 1, …, :data:`MAX_MASK_REDRAWS`) whose design has full rank."""
    keys = _job_keys(task_ids, samples_per_task)
    columns = sum(len(slot.versions) for slot in slots)
    if len(keys) <= columns:
        raise RankDeficientDesignError(
            f"design has n={len(keys)} rows for k={columns} columns (n must exceed k): rank deficient, and no redraw can help; "
            "gate more val tasks or more samples per task, or propose fewer candidates")
    failures = []
    for redraw in range(MAX_MASK_REDRAWS + 1):
        jobs = tuple(_draw_job(design, mask_seed, redraw, split, task, sample, slots, probability)
                     for task, sample in keys)
        try:
            return MaskAssignment(design=design, mask_seed=mask_seed, split=split, pool_sha256=pool_sha256,
                                  slots=tuple(slots), jobs=jobs, mask_probability=probability, redraw=redraw)
        except RankDeficientDesignError as error:
            LOGGER.warning("mask seed %s, redraw %d: %s; drawing again", mask_seed, redraw, error)
            failures.append(str(error))
    raise RankDeficientDesignError(
        f"mask seed {mask_seed}: all {len(failures)} draws (redraw 0–{MAX_MASK_REDRAWS}) gave a singular design "
        f"(last: {failures[-1]}); gate more val tasks or more samples per task, or propose fewer candidates")


def assign_online_masks(
    slots: Sequence[Slot] | CandidatePool,
    task_ids: Sequence[int],
    *,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = "val",
    pool_sha256: str | None = None,
    samples_per_task: int = SAMPLES_PER_TASK,
) -> MaskAssignment:
    """Draw the online gate's slot states for every (task, sample) job and check the design rank.

    Parameters
    ----------
    slots : CandidatePool or sequence of Slot
        A pool (slots via :func:`slots_from_pool`, hash from the pool) or explicit slots (then
        ``pool_sha256`` is required).
    task_ids : sequence of int
        Validation task ids; jobs are sorted by (task_id, sample_id).
    samples_per_task : int
        m ≥ 1 masked rollouts per task (sample ids 0..m−1).

    Raises
    ------
    RankDeficientDesignError
        If the design has no more jobs than columns, or every redraw up to :data:`MAX_MASK_REDRAWS` is
        singular.
    """
    if isinstance(slots, CandidatePool):
        pool_sha256, slots = slots.pool_sha256, slots_from_pool(slots)
    if not pool_sha256:
        raise MaskAssignmentError("pool_sha256: required when explicit slots are given")
    return _assign(DESIGN_ONLINE, slots, task_ids, mask_seed=mask_seed, split=split, pool_sha256=pool_sha256,
                   samples_per_task=samples_per_task, probability=None)


def assign_gate_a_masks(
    draft: SkillBank,
    task_ids: Sequence[int],
    *,
    mask_seed: int = DEFAULT_MASK_SEED,
    split: str = "val",
    mask_probability: float = GATE_A_MASK_PROBABILITY,
    samples_per_task: int = SAMPLES_PER_TASK,
) -> MaskAssignment:
    """Gate A's independent Bernoulli(0.5) masks over the draft bank's chunks (1–16, draft only).

    The draft must be marked ``draft_only`` (bank metadata, or every chunk's metadata).
    """
    if mask_probability != GATE_A_MASK_PROBABILITY:
        raise MaskAssignmentError(f"mask_probability: Gate A requires exactly 0.5, got {mask_probability!r}")
    chunks = draft.enabled_skills()
    flagged = draft.metadata.get("draft_only") is True or (
        bool(chunks) and all(s.metadata.get("draft_only") is True for s in chunks))
    if not flagged:
        raise MaskAssignmentError("draft_path: Gate A refuses a bank that is not marked draft_only: true")
    if not 1 <= len(chunks) <= GATE_A_MAX_CHUNKS:
        raise MaskAssignmentError(f"draft: Gate A accepts 1–{GATE_A_MAX_CHUNKS} chunks, got {len(chunks)}")
    slots = tuple(Slot(s.skill_id, i, (SlotVersion(s.skill_id, "current", None),))
                  for i, s in enumerate(chunks, 1))
    return _assign(DESIGN_GATE_A, slots, task_ids, mask_seed=mask_seed, split=split, pool_sha256=draft.sha256,
                   samples_per_task=samples_per_task, probability=mask_probability)


def save_mask_assignment(assignment: MaskAssignment, path: str | Path) -> Path:
    """Write ``mask_assignments.json`` (indented UTF-8). Call before any rollout."""
    path = Path(path)
    write_json(path, assignment.to_dict())
    return path


def load_mask_assignment(path: str | Path) -> MaskAssignment:
    """Read ``mask_assignments.json``, verifying its hash, its draws and its rank."""
    try:
        return MaskAssignment.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except MaskAssignmentError as error:
        raise MaskAssignmentError(f"{path}: {error}") from None
