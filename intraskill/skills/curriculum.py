"""The training curriculum: inclusion probabilities, the hashed state file and group-shared mask draws.

Reference: docs/method.md §1.7 (curriculum file ``shopsimrl-skill-curriculum-v1`` and its
``state_id``), §2.1 (two-level draw per GRPO group), §2.2 (ρ_j = clip(ρ_min + (ρ_max − ρ_min)·α_j/s,
ρ_min, ρ_max), s = max α unless given) and §2.3 (one treatment per group, checked per sibling).

**Draws come from content, not from ``state_id``.** The reference keys §2.1's draws with ``state_id``, which
hashes the whole file, the source bank's SHA-256 included; that bank records its gate's provenance (the bare
run's plan fingerprint and so the trained weights' digest) and its path. A 3·10⁻⁶ weight difference (one torch
thread instead of two) then redrew 184 of 200 round-1 treatments. Here every draw keys on the seed, the group
key and :func:`draw_key`: the round and each chunk's id, text and α with :data:`ALPHA_DECIMALS` decimals —
nothing a path, a digest or float noise can move. ``state_id`` stays the file's integrity check.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_json, unit_draw
from intraskill.jsonl import write_json
from intraskill.params import RoundParams
from intraskill.skills.bank import Skill, SkillBank

CURRICULUM_SCHEMA_VERSION = "shopsimrl-skill-curriculum-v1"
_ROUND = RoundParams()
DEFAULT_CURRICULUM_SEED = _ROUND.curriculum_seed
DEFAULT_SKILL_FREE_PROBABILITY = _ROUND.q
DEFAULT_RHO_MIN = _ROUND.rho_min
DEFAULT_RHO_MAX = _ROUND.rho_max
"""The defaults of ``params.round`` (:class:`~intraskill.params.RoundParams`), where they are written."""
PROBABILITY_MAPPING_NAME = "clipped_linear_positive_contribution"
ALPHA_DECIMALS = 4
"""α's decimals in :func:`draw_key`. A gate's α is a paired-difference OLS coefficient whose standard error is a
few hundredths at 200–400 val tasks, so 10⁻⁴ is far finer than any real change of α, and far coarser than the
round-off of refitting the same observations (~10⁻¹⁵); a real change of α redraws the round."""

MODE_SKILL_FREE = "skill_free"
MODE_ASSISTED = "assisted"
MODE_ASSISTED_EMPTY = "assisted_empty"
MODE_DIAGNOSTIC_FULL_SKILL = "diagnostic_full_skill"
ASSIGNMENT_MODES = (MODE_SKILL_FREE, MODE_ASSISTED, MODE_ASSISTED_EMPTY, MODE_DIAGNOSTIC_FULL_SKILL)


class CurriculumError(ValueError):
    """A curriculum is invalid, tampered with, or used inconsistently; the message names the field."""


def inclusion_probability(contribution: float, scale: float, rho_min: float, rho_max: float) -> float:
    """ρ = clip(ρ_min + (ρ_max − ρ_min)·α/s, ρ_min, ρ_max) (§2.2).

    Examples
    --------
    >>> round(inclusion_probability(0.02928, 0.074971, 0.2, 0.9), 4)
    0.4734
    """
    return min(rho_max, max(rho_min, rho_min + (rho_max - rho_min) * contribution / scale))


def _positive_effect(skill: Skill) -> float:
    effect = skill.estimated_effect
    if effect is None or not math.isfinite(effect) or effect <= 0:
        raise CurriculumError(
            f"skills[{skill.skill_id!r}].metadata.estimated_effect: must be a finite number > 0, "
            f"got {effect!r}"
        )
    return effect


@dataclass(frozen=True)
class CurriculumChunk:
    """One curriculum entry: the chunk's identity and text, α_j (``contribution``) and ρ_j."""

    skill_id: str
    version: str
    content: str
    metadata: dict[str, Any]
    contribution: float
    inclusion_probability: float

    def to_skill(self) -> Skill:
        """The chunk as a :class:`Skill` record (what enters the prompt)."""
        return Skill(self.skill_id, self.content, version=self.version, metadata=self.metadata)

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill_id": self.skill_id,
            "version": self.version,
            "content": self.content,
            "metadata": self.metadata,
            "contribution": self.contribution,
            "inclusion_probability": self.inclusion_probability,
        }


def draw_key(round_id: str, chunks: Sequence[CurriculumChunk]) -> str:
    """The content key of a round's treatment draws: SHA-256 (canonical JSON) of the round and each chunk's
    ``[skill_id, content, α]`` in order, α as a string with :data:`ALPHA_DECIMALS` decimals.

    Metadata, versions, the source bank's digest and path are left out: they record provenance (a gate's
    checkpoint digest, a run directory) that must not move a draw.
    """
    return sha256_json({"round_id": round_id,
                        "chunks": [[c.skill_id, c.content, f"{c.contribution:.{ALPHA_DECIMALS}f}"] for c in chunks]})


@dataclass(frozen=True)
class CurriculumState:
    """The hashed curriculum state of one round. ``state_id`` covers every field except ``created_at``;
    ``draw_id`` (derived, :func:`draw_key`) keys the treatment draws."""

    round_id: str
    seed: int
    skill_free_probability: float
    chunks: tuple[CurriculumChunk, ...]
    source: dict[str, Any]
    created_at: str
    state_id: str = ""
    draw_id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.skill_free_probability <= 1.0:
            raise CurriculumError(
                f"skill_free_probability: must lie in [0, 1], got {self.skill_free_probability}"
            )
        expected = compute_state_id(self)
        if not self.state_id:
            object.__setattr__(self, "state_id", expected)
        elif self.state_id != expected:
            raise CurriculumError(
                f"state_id: recorded {self.state_id} but the content hashes to {expected} "
                "(the curriculum was edited without re-hashing)"
            )
        object.__setattr__(self, "draw_id", draw_key(self.round_id, self.chunks))

    @property
    def skill_ids(self) -> tuple[str, ...]:
        return tuple(chunk.skill_id for chunk in self.chunks)

    def skills(self, skill_ids: Sequence[str] | None = None) -> list[Skill]:
        """The chunks as skills in curriculum order, optionally filtered to ``skill_ids``."""
        wanted = None if skill_ids is None else set(skill_ids)
        unknown = set() if wanted is None else wanted - set(self.skill_ids)
        if unknown:
            raise CurriculumError(f"skill_ids: {sorted(unknown)} are not in curriculum {self.state_id[:12]}")
        return [chunk.to_skill() for chunk in self.chunks if wanted is None or chunk.skill_id in wanted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": CURRICULUM_SCHEMA_VERSION,
            "round_id": self.round_id,
            "seed": self.seed,
            "skill_free_probability": self.skill_free_probability,
            "chunks": [chunk.to_dict() for chunk in self.chunks],
            "source": self.source,
            "created_at": self.created_at,
            "state_id": self.state_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CurriculumState":
        """Parse a curriculum object, recomputing and verifying ``state_id``."""
        if data.get("schema_version") != CURRICULUM_SCHEMA_VERSION:
            raise CurriculumError(
                f"schema_version: expected {CURRICULUM_SCHEMA_VERSION!r}, got {data.get('schema_version')!r}"
            )
        for key in ("round_id", "seed", "skill_free_probability", "chunks", "source", "state_id"):
            if key not in data:
                raise CurriculumError(f"{key}: missing")
        chunk_keys = ("skill_id", "version", "content", "metadata", "contribution", "inclusion_probability")
        chunks = []
        for index, item in enumerate(data["chunks"]):
            missing = [key for key in chunk_keys if key not in item]
            if missing:
                raise CurriculumError(f"chunks[{index}]: missing {missing}")
            chunks.append(CurriculumChunk(**{key: item[key] for key in chunk_keys}))
        return cls(
            round_id=data["round_id"],
            seed=data["seed"],
            skill_free_probability=data["skill_free_probability"],
            chunks=tuple(chunks),
            source=dict(data["source"]),
            created_at=data.get("created_at", ""),
            state_id=data["state_id"],
        )


def compute_state_id(state: CurriculumState) -> str:
    """SHA-256 (canonical JSON) of {round_id, seed, skill_free_probability, chunks, source} (§1.7)."""
    return sha256_json(
        {
            "round_id": state.round_id,
            "seed": state.seed,
            "skill_free_probability": state.skill_free_probability,
            "chunks": [chunk.to_dict() for chunk in state.chunks],
            "source": state.source,
        }
    )


def build_curriculum(
    bank: SkillBank,
    *,
    round_id: str,
    skill_free_probability: float = DEFAULT_SKILL_FREE_PROBABILITY,
    rho_min: float = DEFAULT_RHO_MIN,
    rho_max: float = DEFAULT_RHO_MAX,
    seed: int = DEFAULT_CURRICULUM_SEED,
    contribution_scale: float | None = None,
    skillbank_path: str | None = None,
    created_at: str | None = None,
) -> CurriculumState:
    """Build a round's curriculum from a selected bank (its enabled skills, in bank order).

    Parameters
    ----------
    bank : the selected SkillBank; every enabled skill needs ``metadata.estimated_effect`` > 0.
    round_id : e.g. ``"round-001"``.
    skill_free_probability : q, the per-group probability of a skill-free context (0.20).
    rho_min, rho_max : the floor and ceiling of ρ (0.20, 0.90).
    seed : the draw seed (``round.curriculum_seed``).
    contribution_scale : s; defaults to the largest active contribution.
    skillbank_path : recorded in ``source`` for provenance (it enters ``state_id``, never a draw); the callers
        here record the bank's file name, as the bank sits beside ``curriculum.json``.
    created_at : ISO timestamp (not part of ``state_id``); now (UTC) by default.
    """
    if not 0.0 <= rho_min <= rho_max <= 1.0:
        raise CurriculumError(f"rho_min/rho_max: need 0 <= rho_min <= rho_max <= 1, got {rho_min}, {rho_max}")
    skills = bank.enabled_skills()
    if not skills:
        raise CurriculumError("skills: the bank has no enabled skill")
    effects = [_positive_effect(skill) for skill in skills]
    if contribution_scale is None:
        scale, scale_source = max(effects), "largest_active_contribution"
    elif not math.isfinite(contribution_scale) or contribution_scale <= 0:
        raise CurriculumError(f"contribution_scale: must be a finite number > 0, got {contribution_scale}")
    else:
        scale, scale_source = float(contribution_scale), "explicit"
    chunks = tuple(
        CurriculumChunk(
            skill_id=skill.skill_id,
            version=skill.version,
            content=skill.content,
            metadata=skill.metadata,
            contribution=effect,
            inclusion_probability=inclusion_probability(effect, scale, rho_min, rho_max),
        )
        for skill, effect in zip(skills, effects)
    )
    source = {
        "skillbank_path": skillbank_path,
        "skillbank_sha256": bank.sha256,
        "probability_mapping": {
            "name": PROBABILITY_MAPPING_NAME,
            "rho_min": rho_min,
            "rho_max": rho_max,
            "contribution_scale": scale,
            "scale_source": scale_source,
        },
    }
    return CurriculumState(
        round_id=round_id,
        seed=seed,
        skill_free_probability=skill_free_probability,
        chunks=chunks,
        source=source,
        created_at=created_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def save_curriculum(state: CurriculumState, path: str | Path) -> Path:
    """Write the curriculum as indented UTF-8 JSON; returns the path."""
    path = Path(path)
    write_json(path, state.to_dict())
    return path


def load_curriculum(path: str | Path) -> CurriculumState:
    """Read a curriculum file; a ``state_id`` not matching its content raises :class:`CurriculumError`."""
    path = Path(path)
    try:
        return CurriculumState.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except CurriculumError as error:
        raise CurriculumError(f"{path}: {error}") from None


def treatment_draw(seed: int, key: str, group_key: str | int, treatment: str) -> float:
    """u(g, treatment): SHA-256 of ``"seed:key:group_key:treatment"``, first 8 bytes / 2**64 (§2.1, keyed with
    the curriculum's :func:`draw_key` where the reference has ``state_id``)."""
    return unit_draw(f"{seed}:{key}:{group_key}:{treatment}")


@dataclass(frozen=True)
class GroupAssignment:
    """The treatment shared by every sibling of one GRPO group (or of one gate rollout)."""

    state_id: str
    group_key: str
    mode: str
    skill_ids: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.mode not in ASSIGNMENT_MODES:
            raise CurriculumError(f"mode: expected one of {ASSIGNMENT_MODES}, got {self.mode!r}")
        if (self.mode in (MODE_SKILL_FREE, MODE_ASSISTED_EMPTY)) != (not self.skill_ids):
            raise CurriculumError(
                f"skill_ids: mode {self.mode!r} is inconsistent with {list(self.skill_ids)}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_id": self.state_id,
            "group_key": self.group_key,
            "mode": self.mode,
            "skill_ids": list(self.skill_ids),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GroupAssignment":
        return cls(
            state_id=data["state_id"],
            group_key=str(data["group_key"]),
            mode=data["mode"],
            skill_ids=tuple(data.get("skill_ids", ())),
        )


def assign_group(state: CurriculumState, group_key: str | int) -> GroupAssignment:
    """The group's treatment: skill-free with probability q, else each chunk j with probability ρ_j.

    A pure function of the curriculum's content (seed, :func:`draw_key`, q, ρ) and ``group_key``: scheduling order,
    resume, paths and provenance cannot change it.
    """
    key = str(group_key)
    if treatment_draw(state.seed, state.draw_id, key, "skill-free") < state.skill_free_probability:
        return GroupAssignment(state.state_id, key, MODE_SKILL_FREE)
    chosen = tuple(
        chunk.skill_id
        for chunk in state.chunks
        if treatment_draw(state.seed, state.draw_id, key, f"chunk:{chunk.skill_id}")
        < chunk.inclusion_probability
    )
    return GroupAssignment(state.state_id, key, MODE_ASSISTED if chosen else MODE_ASSISTED_EMPTY, chosen)


def full_skill_assignment(state: CurriculumState, group_key: str | int) -> GroupAssignment:
    """The diagnostic retry's context: every curriculum chunk, unmasked, in order (§3.2)."""
    return GroupAssignment(state.state_id, str(group_key), MODE_DIAGNOSTIC_FULL_SKILL, state.skill_ids)


@dataclass
class _GroupRecord:
    state_id: str
    mode: str
    skill_ids: tuple[str, ...]
    started: set[int] = field(default_factory=set)
    completed: set[int] = field(default_factory=set)


class GroupAssignmentRegistry:
    """Checks that all siblings of a group share one treatment and that each sample completes once (§2.3).

    Thread-safe. ``n_samples_per_prompt`` (when given) bounds the number of siblings per group and
    lets :meth:`complete` report the last sibling to finish (the group's leader).
    """

    def __init__(self, n_samples_per_prompt: int | None = None) -> None:
        if n_samples_per_prompt is not None and n_samples_per_prompt < 1:
            raise CurriculumError(f"n_samples_per_prompt: must be >= 1, got {n_samples_per_prompt}")
        self.n_samples_per_prompt = n_samples_per_prompt
        self._groups: dict[str, _GroupRecord] = {}
        self._lock = threading.Lock()

    def register(self, assignment: GroupAssignment, sample_index: int) -> None:
        """Record that ``sample_index`` of the group starts under ``assignment``; raise on any mismatch."""
        with self._lock:
            record = self._groups.setdefault(
                assignment.group_key, _GroupRecord(assignment.state_id, assignment.mode, assignment.skill_ids)
            )
            where = f"group {assignment.group_key!r}"
            if record.state_id != assignment.state_id:
                raise CurriculumError(f"{where}: curriculum changed inside the group "
                                      f"({record.state_id[:12]} → {assignment.state_id[:12]})")
            if (record.mode, record.skill_ids) != (assignment.mode, assignment.skill_ids):
                raise CurriculumError(
                    f"{where}: sample {sample_index} has treatment "
                    f"({assignment.mode}, {list(assignment.skill_ids)}) "
                    f"but its siblings have ({record.mode}, {list(record.skill_ids)})"
                )
            if sample_index in record.started:
                raise CurriculumError(f"{where}: sample {sample_index} was registered twice")
            if self.n_samples_per_prompt is not None and len(record.started) >= self.n_samples_per_prompt:
                raise CurriculumError(
                    f"{where}: more than n_samples_per_prompt={self.n_samples_per_prompt} siblings"
                )
            record.started.add(sample_index)

    def complete(self, group_key: str | int, sample_index: int) -> bool:
        """Mark a sample finished; returns True for the last sibling (the leader). Raises on a repeat."""
        with self._lock:
            where = f"group {str(group_key)!r}"
            record = self._groups.get(str(group_key))
            if record is None or sample_index not in record.started:
                raise CurriculumError(f"{where}: sample {sample_index} completed without being registered")
            if sample_index in record.completed:
                raise CurriculumError(f"{where}: sample {sample_index} completed twice")
            record.completed.add(sample_index)
            expected = self.n_samples_per_prompt or len(record.started)
            return len(record.completed) == expected

    def forget(self, group_key: str | int) -> None:
        """Drop a group's record (finished or abandoned), so a long run keeps only its open groups."""
        with self._lock:
            self._groups.pop(str(group_key), None)

    def __len__(self) -> int:
        """The number of groups on record."""
        with self._lock:
            return len(self._groups)
