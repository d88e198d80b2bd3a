"""Group-disjoint train / val / test splits of persona tasks (``persona_splits.v1.json`` style).

Reference ``docs/store.md`` §1 (project split):

* **Linking.** Tasks are joined with union-find whenever they share a normalised key: gold ASIN,
  ``instruction_simple``, full instruction, persona fingerprint (SHA-256 of the persona without
  ``__reasoning__``) or user id. Normalisation: NFKC, casefold, whitespace collapsed.
* **Selection.** Whole groups are ranked by a seeded hash (``u64("{seed}:{min task id}")``) and
  chosen by an exact subset sum, test first, then val; held-out groups hold at most 20 tasks, so
  big reused-persona groups stay in train. Train is everything else.
* **File.** Explicit task-id lists (ascending) with a SHA-256 per list: ``sha256_json(list)``.

A ``dev`` list (:func:`carve_dev`) is carved from train for probes and tuning, so that test serves only declared
claims and val stays the gate's: whole link groups of train, ranked by ``u64("{seed}:dev:{min task id}")`` and
chosen by the same exact subset sum. Train keeps them, so the train list — and every warm start, round plan and
figure made from it — means what it did; a round leaves dev out only when asked (``round.exclude_dev``).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from intraskill.hashing import sha256_json, u64
from intraskill.jsonl import write_json
from intraskill.params import STORE_SEED
from intraskill.shop.types import Goal

SPLIT_SCHEMA_VERSION = "intraskill-persona-splits-v1"
SPLIT_NAMES = ("train", "val", "test")
"""The partition: every persona task is in exactly one of them."""
DEV_SPLIT = "dev"
"""The probe and tuning split: a subset of train (:func:`carve_dev`)."""
TRAIN_WITHOUT_DEV = "train-dev"
"""The identity's split name of a round that leaves dev out (:func:`train_without_dev`)."""
DEV_SIZE = 200
DEV_SHARE = 5
"""dev holds ``min(DEV_SIZE, len(train) // DEV_SHARE)`` train tasks (200 of the default store's 3726, 24 of the
small one's 120)."""
DEFAULT_SPLIT_SEED = STORE_SEED
MAX_HELDOUT_GROUP_SIZE = 20
LINK_KEYS = ("asin", "instruction_simple", "instruction", "persona_fingerprint", "user_id")
USER_ID_FIELDS = ("user_id", "用户ID")


def normalize_key(text: Any) -> str:
    """NFKC, casefold, collapse whitespace (and strip a trailing comma, a known user-id defect)."""
    out = " ".join(unicodedata.normalize("NFKC", str(text)).casefold().split())
    return out.rstrip(",").strip()


def persona_fingerprint(persona: dict[str, Any]) -> str:
    """SHA-256 of the persona without ``__reasoning__`` ('' for an empty persona)."""
    public = {k: v for k, v in persona.items() if k != "__reasoning__"}
    return sha256_json(public) if public else ""


def link_keys(goal: Goal) -> dict[str, str]:
    """The normalised linking keys of one task (empty values are not keys)."""
    persona = goal.user_persona or {}
    user_id = next((persona[f] for f in USER_ID_FIELDS if persona.get(f)), "")
    keys = {
        "asin": normalize_key(goal.asin),
        "instruction_simple": normalize_key(goal.instruction_simple),
        "instruction": normalize_key(goal.instruction_text),
        "persona_fingerprint": persona_fingerprint(persona),
        "user_id": normalize_key(user_id),
    }
    return {k: v for k, v in keys.items() if v}


def link_groups(goals: Iterable[Goal]) -> list[tuple[int, ...]]:
    """Union-find groups of task ids sharing any :data:`LINK_KEYS` value; sorted by min task id."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[tuple[str, str], int] = {}
    for goal in goals:
        parent.setdefault(goal.task_id, goal.task_id)
        for name, value in link_keys(goal).items():
            first = owner.setdefault((name, value), goal.task_id)
            a, b = find(first), find(goal.task_id)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for task_id in parent:
        groups.setdefault(find(task_id), []).append(task_id)
    return sorted((tuple(sorted(g)) for g in groups.values()), key=lambda g: g[0])


def _exact_fill(candidates: Sequence[tuple[int, ...]], target: int) -> list[tuple[int, ...]]:
    """Groups whose sizes sum exactly to ``target``, preferring earlier-ranked groups.

    A suffix subset-sum table (bitsets of reachable sums) lets a forward pass take each group in
    ranking order whenever the rest can still complete the sum exactly.
    """
    mask = (1 << (target + 1)) - 1
    reachable = [1] * (len(candidates) + 1)  # reachable[i]: sums reachable with candidates[i:]
    for i in range(len(candidates) - 1, -1, -1):
        reachable[i] = (reachable[i + 1] | (reachable[i + 1] << len(candidates[i]))) & mask
    if not (reachable[0] >> target) & 1:
        raise ValueError(f"no subset of the eligible groups sums exactly to {target} tasks")
    chosen, need = [], target
    for i, group in enumerate(candidates):
        if need >= len(group) and (reachable[i + 1] >> (need - len(group))) & 1:
            chosen.append(group)
            need -= len(group)
        if need == 0:
            break
    return chosen


@dataclass(frozen=True)
class Splits:
    """Explicit task-id lists per split, their SHA-256s and provenance metadata."""

    lists: dict[str, tuple[int, ...]]
    seed: int = DEFAULT_SPLIT_SEED
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.lists)

    def ids(self, name: str) -> tuple[int, ...]:
        """Task ids of split ``name``; a clear error for unknown names."""
        if name not in self.lists:
            raise KeyError(f"split must be one of {list(self.lists)}, got {name!r}")
        return self.lists[name]

    def sha256(self, name: str) -> str:
        """SHA-256 of the canonical JSON of the id list."""
        return sha256_json(list(self.ids(name)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SPLIT_SCHEMA_VERSION,
            "seed": self.seed,
            **self.meta,
            "counts": {n: len(v) for n, v in self.lists.items()},
            "sha256": {n: self.sha256(n) for n in self.lists},
            "splits": {n: list(v) for n, v in self.lists.items()},
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        write_json(path, self.to_dict(), indent=1)
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Splits":
        """Read a split document; lists may be plain id lists or ``{task_ids: [...]}`` objects.

        Stored SHA-256s (``sha256: {name: hex}`` or a per-list ``sha256``) are verified.
        """
        raw = data.get("splits", data)
        lists: dict[str, tuple[int, ...]] = {}
        hashes: dict[str, str] = dict(data.get("sha256") or {})
        for name, value in raw.items():
            if isinstance(value, dict) and "task_ids" in value:
                if value.get("sha256"):
                    hashes[name] = value["sha256"]
                value = value["task_ids"]
            if name in SPLIT_NAMES or isinstance(value, list):
                if not isinstance(value, list):
                    raise ValueError(f"splits.{name} must be a list of task ids")
                lists[name] = tuple(int(t) for t in value)
        if not lists:
            raise ValueError("split document has no split lists (expected splits.train / val / test)")
        splits = cls(lists=lists, seed=int(data.get("seed", DEFAULT_SPLIT_SEED)),
                     meta={k: v for k, v in data.items()
                           if k not in ("splits", "sha256", "counts", "seed", "schema_version", *lists)})
        for name, digest in hashes.items():
            if name in lists and digest not in (splits.sha256(name), sha256_json(sorted(lists[name]))):
                raise ValueError(f"sha256.{name} does not match its task-id list (stored {digest[:12]}…)")
        return splits

    @classmethod
    def load(cls, path: str | Path) -> "Splits":
        with open(path, encoding="utf-8") as handle:
            return cls.from_dict(json.load(handle))


def build_splits(
    goals: Iterable[Goal],
    val_size: int = 400,
    test_size: int = 400,
    seed: int = DEFAULT_SPLIT_SEED,
    max_heldout_group: int = MAX_HELDOUT_GROUP_SIZE,
) -> Splits:
    """Group-disjoint split of persona tasks: test first, then val, by seeded ranking + exact sum.

    Only tasks with a persona take part (the project split covers persona tasks only).
    """
    persona_goals = [g for g in goals if g.user_persona]
    groups = link_groups(persona_goals)
    ranked = sorted(groups, key=lambda g: (u64(f"{seed}:{g[0]}"), g[0]))
    eligible = [g for g in ranked if len(g) <= max_heldout_group]
    test = _exact_fill(eligible, test_size)
    taken = set(test)
    val = _exact_fill([g for g in eligible if g not in taken], val_size)
    taken.update(val)
    train = [g for g in groups if g not in taken]
    lists = {name: tuple(sorted(t for g in chosen for t in g))
             for name, chosen in (("train", train), ("val", val), ("test", test))}
    sizes = [len(g) for g in groups]
    meta = {
        "linking_keys": list(LINK_KEYS),
        "normalization": "nfkc-casefold-collapse-whitespace",
        "max_heldout_group_size": max_heldout_group,
        "groups": {"count": len(groups), "max_size": max(sizes, default=0),
                   "multi_task": sum(1 for s in sizes if s > 1),
                   "max_size_heldout": max((len(g) for g in test + val), default=0)},
    }
    return Splits(lists=lists, seed=seed, meta=meta)


def carve_dev(splits: Splits, goals: Mapping[int, Goal], max_heldout_group: int = MAX_HELDOUT_GROUP_SIZE) -> Splits:
    """``splits`` with a ``dev`` list of train tasks (:data:`DEV_SHARE`): whole link groups of train (each at most
    ``max_heldout_group`` tasks), ranked by the split seed's hash and chosen by exact subset sum (see the module
    docstring); the other lists are unchanged. ``goals``: task id → goal, for the linking keys."""
    size = min(DEV_SIZE, len(splits.ids("train")) // DEV_SHARE)
    groups = link_groups(goals[t] for t in splits.ids("train"))
    ranked = sorted((g for g in groups if len(g) <= max_heldout_group),
                    key=lambda g: (u64(f"{splits.seed}:{DEV_SPLIT}:{g[0]}"), g[0]))
    try:
        chosen = _exact_fill(ranked, size)
    except ValueError as error:
        raise ValueError(f"dev split: {error} of train") from None
    dev = tuple(sorted(t for g in chosen for t in g))
    meta = {**splits.meta, "dev_carve": {"from": "train", "size": size, "max_group_size": max_heldout_group,
                                         "rank": f"u64('{{seed}}:{DEV_SPLIT}:{{min task id}}')"}}
    return Splits({**{n: v for n, v in splits.lists.items() if n != DEV_SPLIT}, DEV_SPLIT: dev}, splits.seed, meta)


def train_without_dev(splits: Splits) -> tuple[int, ...]:
    """The train tasks outside ``dev`` (in split-file order): what a round trains on with ``round.exclude_dev``."""
    dev = set(splits.ids(DEV_SPLIT))
    return tuple(t for t in splits.ids("train") if t not in dev)
