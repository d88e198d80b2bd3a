"""Group-disjoint persona splits: sizes, disjointness on every linking key, SHA-256s, determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from intraskill.hashing import sha256_json
from intraskill.shop.splits import (
    MAX_HELDOUT_GROUP_SIZE,
    Splits,
    _exact_fill,
    build_splits,
    link_groups,
    link_keys,
    normalize_key,
)
from intraskill.shop.types import Goal


def _goal(task_id: int, asin: str, simple: str, user: str, text: str = "") -> Goal:
    return Goal(task_id=task_id, task_uid=f"u{task_id}", asin=asin, category="a›b›c", name="n",
                instruction_text=text or f"full {task_id}", instruction_simple=simple, attributes=("x",),
                goal_options=(), price_upper=None, user_persona={"user_id": user, "n": task_id})


def test_union_find_links_transitively() -> None:
    goals = [
        _goal(1, "A1", "red kettle", "u1"),
        _goal(2, "A2", "Red  Kettle", "u2"),  # same simple instruction after normalisation -> 1
        _goal(3, "A3", "blue mug", "U2,"),  # same user id as 2 (case, trailing comma) -> 1
        _goal(4, "A4", "green pan", "u4"),
        _goal(5, "A4", "grey pan", "u5"),  # same asin as 4
        _goal(6, "A6", "white cup", "u6"),
    ]
    assert link_groups(goals) == [(1, 2, 3), (4, 5), (6,)]
    assert normalize_key("  Ｒed\tKettle ") == "red kettle"


def test_exact_fill_hits_the_target() -> None:
    groups = [(1, 2, 3, 4, 5), (6, 7, 8), (9, 10, 11, 12), (13, 14)]
    chosen = _exact_fill(groups, 9)
    assert sum(len(g) for g in chosen) == 9
    with pytest.raises(ValueError, match="exactly"):
        _exact_fill([(1, 2), (3, 4)], 3)


def test_small_store_split(small_store) -> None:
    catalog, _, splits = small_store
    counts = {name: len(splits.ids(name)) for name in splits.names}
    assert counts == {"train": 120, "val": 40, "test": 40}
    ids = {name: set(splits.ids(name)) for name in splits.names}
    assert not (ids["train"] & ids["val"] or ids["train"] & ids["test"] or ids["val"] & ids["test"])
    assert set().union(*ids.values()) == set(catalog.goals)
    owner: dict[tuple[str, str], str] = {}
    for name, task_ids in ids.items():
        for task_id in task_ids:
            for key in link_keys(catalog.goal(task_id)).items():
                assert owner.setdefault(key, name) == name, (key, name)
    assert splits.meta["groups"]["max_size"] > MAX_HELDOUT_GROUP_SIZE  # the power user's group ...
    assert splits.meta["groups"]["max_size_heldout"] <= MAX_HELDOUT_GROUP_SIZE  # ... stays in train
    for name in splits.names:
        assert splits.sha256(name) == sha256_json(sorted(ids[name]))


def test_split_is_deterministic_and_seeded(small_store) -> None:
    catalog, _, splits = small_store
    again = build_splits(catalog.goals.values(), val_size=40, test_size=40, seed=splits.seed)
    assert again.lists == splits.lists
    other = build_splits(catalog.goals.values(), val_size=40, test_size=40, seed=splits.seed + 1)
    assert other.lists["test"] != splits.lists["test"]


def test_split_file_round_trip_and_tamper(tmp_path: Path, small_store) -> None:
    _, _, splits = small_store
    path = splits.save(tmp_path / "splits.json")
    loaded = Splits.load(path)
    assert loaded.lists == splits.lists and loaded.seed == splits.seed
    text = path.read_text(encoding="utf-8").replace(splits.sha256("test"), "0" * 64)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="sha256.test"):
        Splits.load(path)
