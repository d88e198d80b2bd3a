"""Skill1's skill library: records, EMA utility, admission, capacity eviction and crash-safe persistence.

Reference: docs/method.md §10.1 (a skill is a ``desc`` matched by retrieval and a ``strat`` put in the
prompt), §10.2 (U ← (1−α)U + α·r over every retrieved skill, α = 0.05; admission only when r = 1; at
N_max = 5000 evict argmin U·log n; the initial U and the n ≤ 1 case are the project's).

Conventions this module fixes where the reference is silent:

- **Use count n** counts EMA updates, i.e. how often the skill was *retrieved* (RetroAgent's
  ``_update_score_internal`` increments ``count`` together with the EMA, method §10.2), so U is an average
  over the n outcomes that log n weighs.
- **Initial U = 0.5** (RetroAgent's ``initial_score``): the uninformative Bernoulli mean. U = 1 (the
  source rollout's r) would make Û = 1 as soon as a fresh skill is retrieved, so R_distill = r − Û ≤ 0 for
  every rollout that sees it and the U ordering would rank untested skills first.
- **Eviction score U·log(max(n, 2))**: exactly the paper's U·log n for n ≥ 2; for n ≤ 1 the skill is
  scored as if used twice. The literal formula gives 0 at n = 1 (−∞ at n = 0), and log(1 + n) still gives
  0 at n = 0, so a just-admitted skill would be evicted before a skill retrieved many times that keeps
  failing. With the floor, U decides among rarely used skills. Ties go to fewer uses, then the oldest.

Persistence (:class:`LibraryStore`): an append-only JSONL history (one fsynced line per ``admit``,
``update`` and ``evict`` event, then a ``commit`` line closing the step) and an atomic snapshot written
after each commit. Opening a directory loads the snapshot and replays committed steps the history holds
beyond it (a kill between the commit line and the snapshot); the events of a step killed before its
commit are discarded, and an ``abort`` line records that. An inconsistent history is refused with an
error naming ``file:line``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from intraskill.jsonl import JsonlError, JsonlWriter, iter_jsonl, write_json
from intraskill.layout import LibraryDir
from intraskill.params import Skill1Params

LIBRARY_SCHEMA_VERSION = "intraskill-skill1-library-v1"
_DEFAULTS = Skill1Params()
DEFAULT_CAPACITY = _DEFAULTS.capacity
"""N_max (method §10.2: 5,000 in the paper)."""
DEFAULT_EMA_RATE = _DEFAULTS.ema_rate
"""α of the utility EMA (method §10.2)."""
DEFAULT_INITIAL_UTILITY = _DEFAULTS.initial_utility
"""U of a newly admitted skill (see the module docstring)."""

Origin = Literal["seed", "distilled"]


class SkillLibraryError(ValueError):
    """Bad library input, or a history/snapshot that cannot be loaded; the message names the field or file."""


@dataclass(frozen=True)
class SkillProvenance:
    """Where a skill came from: a seed file, or the distillation reply of rollout (task, round, step)."""

    origin: Origin
    task_id: int | None = None
    round: int | None = None
    step: int | None = None

    def __post_init__(self) -> None:
        if self.origin not in ("seed", "distilled"):
            raise SkillLibraryError(f"provenance.origin must be 'seed' or 'distilled', got {self.origin!r}")
        if self.origin == "distilled" and None in (self.task_id, self.round, self.step):
            raise SkillLibraryError("provenance of a distilled skill needs task_id, round and step")


@dataclass(frozen=True)
class LibrarySkill:
    """One skill: ``desc`` (when it applies; retrieval key), ``strat`` (the strategy text), U and n.

    ``skill_id`` is the creation order (0, 1, …), never reused after an eviction.
    """

    skill_id: int
    desc: str
    strat: str
    utility: float
    uses: int
    provenance: SkillProvenance

    def __post_init__(self) -> None:
        if not self.desc.strip():
            raise SkillLibraryError(f"skill {self.skill_id}: desc must be non-empty")
        if not self.strat.strip():
            raise SkillLibraryError(f"skill {self.skill_id}: strat must be non-empty")
        if not (math.isfinite(self.utility) and 0.0 <= self.utility <= 1.0):
            raise SkillLibraryError(f"skill {self.skill_id}: utility must be in [0, 1], got {self.utility}")
        if self.uses < 0:
            raise SkillLibraryError(f"skill {self.skill_id}: uses must be >= 0, got {self.uses}")

    @property
    def eviction_score(self) -> float:
        """U·log(max(n, 2)); the lowest score is evicted first (module docstring)."""
        return self.utility * math.log(max(self.uses, 2))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LibrarySkill:
        try:
            return cls(
                int(data["skill_id"]),
                str(data["desc"]),
                str(data["strat"]),
                float(data["utility"]),
                int(data["uses"]),
                SkillProvenance(**data["provenance"]),
            )
        except (KeyError, TypeError) as error:
            raise SkillLibraryError(f"skill record is malformed: {error}") from None


@dataclass(frozen=True)
class Admission:
    """The result of :meth:`SkillLibrary.admit`: the new skill and the one evicted to make room, if any."""

    skill: LibrarySkill
    evicted: LibrarySkill | None


def ema(utility: float, reward: float, rate: float = DEFAULT_EMA_RATE) -> float:
    """U ← (1 − α)·U + α·r (method §10.2).

    >>> ema(0.5, 1.0)
    0.525
    """
    return (1.0 - rate) * utility + rate * reward


def _check_reward(reward: float) -> float:
    if reward not in (0.0, 1.0):
        raise SkillLibraryError(f"reward r must be 0 or 1 (method §10.1 step 6), got {reward!r}")
    return float(reward)


class SkillLibrary:
    """The in-memory library; every mutation is reported to an optional :class:`LibraryStore`.

    Parameters
    ----------
    capacity
        N_max; admitting into a full library first evicts the lowest :attr:`LibrarySkill.eviction_score`.
    ema_rate
        α in (0, 1].
    initial_utility
        U of an admitted skill, in [0, 1].
    """

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        ema_rate: float = DEFAULT_EMA_RATE,
        initial_utility: float = DEFAULT_INITIAL_UTILITY,
    ) -> None:
        if capacity < 1:
            raise SkillLibraryError(f"capacity must be >= 1, got {capacity}")
        if not 0.0 < ema_rate <= 1.0:
            raise SkillLibraryError(f"ema_rate must be in (0, 1], got {ema_rate}")
        if not 0.0 <= initial_utility <= 1.0:
            raise SkillLibraryError(f"initial_utility must be in [0, 1], got {initial_utility}")
        self.capacity = capacity
        self.ema_rate = ema_rate
        self.initial_utility = initial_utility
        self._skills: dict[int, LibrarySkill] = {}
        self._next_id = 0
        self._store: LibraryStore | None = None

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, skill_id: object) -> bool:
        return skill_id in self._skills

    @property
    def skills(self) -> tuple[LibrarySkill, ...]:
        """All skills in creation order."""
        return tuple(self._skills.values())

    @property
    def next_id(self) -> int:
        return self._next_id

    def get(self, skill_id: int) -> LibrarySkill:
        try:
            return self._skills[skill_id]
        except KeyError:
            raise SkillLibraryError(f"skill_id {skill_id} is not in the library") from None

    def _emit(self, event: str, **fields: Any) -> None:
        if self._store is not None:
            self._store.record(event, fields)

    def update(self, skill_id: int, reward: float) -> LibrarySkill:
        """Apply the EMA to one retrieved skill and count the use; returns the updated record."""
        old = self.get(skill_id)
        new = replace(old, utility=ema(old.utility, _check_reward(reward), self.ema_rate), uses=old.uses + 1)
        self._skills[skill_id] = new
        self._emit("update", skill_id=skill_id, reward=reward, utility=new.utility, uses=new.uses)
        return new

    def eviction_candidate(self) -> LibrarySkill:
        """The skill evicted next: lowest score, then fewest uses, then oldest."""
        if not self._skills:
            raise SkillLibraryError("an empty library has no eviction candidate")
        return min(self._skills.values(), key=lambda s: (s.eviction_score, s.uses, s.skill_id))

    def evict(self, skill_id: int) -> LibrarySkill:
        removed = self.get(skill_id)
        del self._skills[skill_id]
        self._emit("evict", skill_id=skill_id)
        return removed

    def _insert(
        self, desc: str, strat: str, provenance: SkillProvenance, utility: float, uses: int
    ) -> Admission:
        skill = LibrarySkill(self._next_id, desc, strat, utility, uses, provenance)
        evicted = self.evict(self.eviction_candidate().skill_id) if len(self) >= self.capacity else None
        self._skills[skill.skill_id] = skill
        self._next_id += 1
        self._emit("admit", skill=skill.to_dict())
        return Admission(skill, evicted)

    def admit(self, desc: str, strat: str, reward: float, provenance: SkillProvenance) -> Admission | None:
        """Admit a distilled skill when its rollout succeeded (r = 1); ``None`` (nothing added) when r = 0."""
        if _check_reward(reward) != 1.0:
            return None
        return self._insert(desc, strat, provenance, self.initial_utility, 0)

    def seed(self, desc: str, strat: str, utility: float | None = None, uses: int = 0) -> Admission:
        """Add a seed skill (no reward gate); U defaults to the initial utility."""
        utility = self.initial_utility if utility is None else utility
        return self._insert(desc, strat, SkillProvenance("seed"), utility, uses)

    def state_dict(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "ema_rate": self.ema_rate,
            "initial_utility": self.initial_utility,
            "next_id": self._next_id,
            "skills": [s.to_dict() for s in self._skills.values()],
        }

    def _restore(self, next_id: int, skills: Iterable[LibrarySkill]) -> None:
        self._skills = {s.skill_id: s for s in skills}
        self._next_id = next_id


def load_seed_skills(path: str | Path) -> list[tuple[str, str, float | None, int]]:
    """Read a seed library: a JSON list of ``{"desc", "strat"[, "utility"][, "uses"]}`` objects.

    Returns ``(desc, strat, utility, uses)`` tuples; errors name the file and the entry.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise SkillLibraryError(f"{path}: cannot read the seed library ({error})") from None
    if not isinstance(data, list):
        raise SkillLibraryError(f"{path}: a seed library is a JSON list of skills, got {type(data).__name__}")
    seeds = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not {"desc", "strat"} <= set(entry):
            raise SkillLibraryError(f"{path}: entry {index} needs the keys 'desc' and 'strat'")
        unknown = set(entry) - {"desc", "strat", "utility", "uses"}
        if unknown:
            raise SkillLibraryError(f"{path}: entry {index} has unknown keys {sorted(unknown)}")
        utility = entry.get("utility")
        seeds.append(
            (
                str(entry["desc"]),
                str(entry["strat"]),
                None if utility is None else float(utility),
                int(entry.get("uses", 0)),
            )
        )
    return seeds


class LibraryStore:
    """The directory of one library: ``history.jsonl`` (append-only events) and ``snapshot.json``.

    Use :meth:`open`; call :meth:`commit` once per rollout step after the step's updates and admissions.
    """

    def __init__(self, directory: Path, library: SkillLibrary, seq: int, step: int | None) -> None:
        self.directory = directory
        self.library = library
        self._seq = seq
        self.step = step
        self._writer = JsonlWriter(LibraryDir(directory).history)
        library._store = self

    @property
    def history_path(self) -> Path:
        return LibraryDir(self.directory).history

    @property
    def snapshot_path(self) -> Path:
        return LibraryDir(self.directory).snapshot

    def record(self, event: str, fields: dict[str, Any]) -> None:
        self._seq += 1
        self._writer.append({"event": event, "seq": self._seq, **fields})

    def commit(self, step: int) -> None:
        """Close rollout step ``step`` (increasing, >= 0): a commit line, then the atomic snapshot."""
        if step < 0 or (self.step is not None and step <= self.step):
            raise SkillLibraryError(
                f"commit step must be >= 0 and > the last committed step {self.step}, got {step}"
            )
        self.record("commit", {"step": step})
        self.step = step
        self._write_snapshot()

    def _write_snapshot(self) -> None:
        write_json(
            self.snapshot_path,
            {
                "schema_version": LIBRARY_SCHEMA_VERSION,
                "seq": self._seq,
                "step": self.step,
                **self.library.state_dict(),
            },
        )

    def close(self) -> None:
        self._writer.close()
        self.library._store = None

    def __enter__(self) -> LibraryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def open(
        cls,
        directory: str | Path,
        capacity: int = DEFAULT_CAPACITY,
        ema_rate: float = DEFAULT_EMA_RATE,
        initial_utility: float = DEFAULT_INITIAL_UTILITY,
        seed_path: str | Path | None = None,
        start: str | Path | None = None,
    ) -> LibraryStore:
        """Resume the library in ``directory``, or create it (seeded from ``seed_path``, or starting from the
        snapshot ``start``) when it is empty.

        A fresh library with seeds writes their admit events and a snapshot with ``step = None``. A fresh
        library from ``start`` (e.g. the previous round's committed library) keeps its skills as they are
        (ids, U, n, provenance) and writes them as its snapshot with ``step = None`` and an empty history; its
        settings must match. On resume the snapshot's settings must match ``capacity``, ``ema_rate`` and
        ``initial_utility``, and ``seed_path`` and ``start`` are ignored (the state is already there).
        """
        if seed_path is not None and start is not None:
            raise SkillLibraryError("give a seed library or a start snapshot, not both")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        library = SkillLibrary(capacity, ema_rate, initial_utility)
        history, snapshot = LibraryDir(directory).history, LibraryDir(directory).snapshot
        if not snapshot.exists():
            if history.exists() and history.stat().st_size > 0:
                raise SkillLibraryError(
                    f"{history}: a history without {snapshot.name}; refusing to guess the state"
                )
            seeds = load_seed_skills(seed_path) if seed_path is not None else []
            if start is not None:
                _load_snapshot(Path(start), library)
            store = cls(directory, library, 0, None)
            for desc, strat, utility, uses in seeds:
                library.seed(desc, strat, utility, uses)
            store._write_snapshot()
            return store
        seq, step = _load_snapshot(snapshot, library)
        seq, step, aborted = _replay(history, library, seq, step)
        store = cls(directory, library, seq, step)
        if aborted:
            store.record("abort", {"discarded_seq": list(aborted)})
        store._write_snapshot()
        return store


def library_from_snapshot(
    path: str | Path,
    capacity: int = DEFAULT_CAPACITY,
    ema_rate: float = DEFAULT_EMA_RATE,
    initial_utility: float = DEFAULT_INITIAL_UTILITY,
) -> SkillLibrary:
    """The library a ``snapshot.json`` (or a copy of one) holds, read only (no store attached)."""
    library = SkillLibrary(capacity, ema_rate, initial_utility)
    _load_snapshot(Path(path), library)
    return library


def _load_snapshot(path: Path, library: SkillLibrary) -> tuple[int, int | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema_version") != LIBRARY_SCHEMA_VERSION:
            raise SkillLibraryError(f"{path}: schema_version must be {LIBRARY_SCHEMA_VERSION!r}")
        for name in ("capacity", "ema_rate", "initial_utility"):
            if data[name] != getattr(library, name):
                raise SkillLibraryError(
                    f"{path}: {name} is {data[name]!r} but the library was opened with "
                    f"{getattr(library, name)!r}"
                )
        skills = [LibrarySkill.from_dict(s) for s in data["skills"]]
        library._restore(int(data["next_id"]), skills)
        return int(data["seq"]), data["step"]
    except SkillLibraryError as error:
        message = str(error)
        raise SkillLibraryError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise SkillLibraryError(f"{path}: cannot load the snapshot ({error!r})") from None


def _replay(
    path: Path, library: SkillLibrary, seq: int, step: int | None
) -> tuple[int, int | None, tuple[int, ...]]:
    """Apply the committed steps after ``seq``; return the new seq and step and the discarded seqs."""
    pending: list[tuple[int, dict[str, Any]]] = []
    last = 0
    try:
        records = list(iter_jsonl(path))
    except JsonlError as error:
        raise SkillLibraryError(str(error)) from None
    for line, record in enumerate(records, start=1):
        number = record.get("seq")
        if number != last + 1:
            raise SkillLibraryError(f"{path}:{line}: expected event seq {last + 1}, got {number!r}")
        last = number
        if number <= seq:
            continue
        event = record.get("event")
        if event in ("admit", "update", "evict"):
            pending.append((line, record))
        elif event == "abort":
            pending.clear()
        elif event == "commit":
            for pending_line, pending_record in pending:
                _apply(path, pending_line, pending_record, library)
            pending.clear()
            seq, step = number, record["step"]
        else:
            raise SkillLibraryError(f"{path}:{line}: unknown event {event!r}")
    if last < seq:
        raise SkillLibraryError(f"{path}: the history ends at seq {last}, before the snapshot's seq {seq}")
    # Uncommitted events of a killed step are dropped; the store continues numbering after them.
    return last, step, tuple(r["seq"] for _, r in pending)


def _apply(path: Path, line: int, record: dict[str, Any], library: SkillLibrary) -> None:
    event = record["event"]
    skills = library._skills
    try:
        if event == "admit":
            skill = LibrarySkill.from_dict(record["skill"])
            if skill.skill_id != library.next_id:
                raise SkillLibraryError(f"admit of skill {skill.skill_id}, expected id {library.next_id}")
            skills[skill.skill_id] = skill
            library._next_id += 1
        elif event == "update":
            old = library.get(record["skill_id"])
            skills[old.skill_id] = replace(old, utility=float(record["utility"]), uses=int(record["uses"]))
        else:
            del skills[library.get(record["skill_id"]).skill_id]
    except (SkillLibraryError, KeyError, TypeError, ValueError) as error:
        raise SkillLibraryError(f"{path}:{line}: cannot replay {event!r} ({error})") from None
