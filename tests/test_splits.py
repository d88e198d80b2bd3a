"""Group-disjoint persona splits: sizes, disjointness on every linking key, SHA-256s, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intraskill.hashing import sha256_json
from intraskill.params import load_params, plan_dump, with_overrides
from intraskill.paths import project_root
from intraskill.pipeline.round import open_train_store
from intraskill.shop.build import StoreIntegrityError, build_store, open_store
from intraskill.shop.splits import (
    MAX_HELDOUT_GROUP_SIZE,
    SPLIT_NAMES,
    Splits,
    _exact_fill,
    build_splits,
    carve_dev,
    link_groups,
    link_keys,
    normalize_key,
)
from intraskill.shop.types import Goal
from conftest import SMALL_STORE_SEED


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
    assert counts == {"train": 120, "val": 40, "test": 40, "dev": 24}
    ids = {name: set(splits.ids(name)) for name in SPLIT_NAMES}
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
        assert splits.sha256(name) == sha256_json(sorted(splits.ids(name)))


def test_split_is_deterministic_and_seeded(small_store) -> None:
    catalog, _, splits = small_store
    again = build_splits(catalog.goals.values(), val_size=40, test_size=40, seed=splits.seed)
    assert {name: again.lists[name] for name in SPLIT_NAMES} == {name: splits.lists[name] for name in SPLIT_NAMES}
    assert carve_dev(again, catalog.goals).lists == splits.lists  # the dev carve too, from the recorded seed
    other = build_splits(catalog.goals.values(), val_size=40, test_size=40, seed=splits.seed + 1)
    assert other.lists["test"] != splits.lists["test"]


def test_split_file_round_trip_and_tamper(tmp_path: Path, small_store) -> None:
    _, _, splits = small_store
    path = splits.save(tmp_path / "splits.json")
    loaded = Splits.load(path)
    assert loaded.lists == splits.lists and loaded.seed == splits.seed and loaded.meta == splits.meta
    text = path.read_text(encoding="utf-8").replace(splits.sha256("test"), "0" * 64)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="sha256.test"):
        Splits.load(path)


def test_dev_is_whole_train_groups_carved_by_the_seed_and_training_leaves_it_out_only_when_asked(
        small_store_root: Path, small_store) -> None:
    catalog, _, splits = small_store
    train, dev = set(splits.ids("train")), splits.ids("dev")
    assert set(dev) <= train and len(dev) == 24 and list(dev) == sorted(dev)
    rest = train - set(dev)
    dev_keys = {key for t in dev for key in link_keys(catalog.goal(t)).items()}
    assert not any(key in dev_keys for t in rest for key in link_keys(catalog.goal(t)).items())
    other = carve_dev(Splits({n: splits.ids(n) for n in SPLIT_NAMES}, splits.seed + 1), catalog.goals)
    assert other.ids("dev") != dev and other.ids("train") == splits.ids("train")
    manifest = json.loads((small_store_root / "manifest.json").read_text())
    assert manifest["counts"]["dev_tasks"] == 24 and manifest["split_sha256"]["dev"] == splits.sha256("dev")
    assert manifest["dev_carve"]["from"] == "train"

    params = load_params(project_root() / "params" / "ci.yaml")
    whole = open_train_store(params, small_store_root)
    held = open_train_store(with_overrides(params, ["round.exclude_dev=true"]), small_store_root)
    try:
        assert whole.task_ids == splits.ids("train") and whole.identity["split"] == "train"
        assert held.task_ids == tuple(t for t in splits.ids("train") if t not in set(dev))
        assert held.identity["split"] == "train-dev" and held.identity["split_sha256"] == sha256_json(
            list(held.task_ids))
    finally:
        whole.close(), held.close()
    assert "exclude_dev" not in plan_dump(params)["round"]  # plans written before dev existed stay valid


def test_a_store_without_dev_is_refused_then_rebuilt_with_the_same_lists(tmp_path: Path, small_store) -> None:
    _, _, splits = small_store
    root = tmp_path / "store"
    build_store(root, scale="small", seed=SMALL_STORE_SEED)
    manifest_path = root / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "schema_version": "intraskill-store-v2"}))
    with pytest.raises(StoreIntegrityError, match="intraskill-store-v2.*no dev split.*--force"):
        open_store(root)
    rebuilt = build_store(root, scale="small", seed=SMALL_STORE_SEED)
    assert not rebuilt.reused and rebuilt.splits.lists == splits.lists
    assert rebuilt.manifest["split_sha256"] == manifest["split_sha256"]


def test_two_builders_of_one_store_build_it_once(tmp_path: Path) -> None:
    """Two processes (here threads, each opening the lock on its own) that need the same store at once: the
    build lock lets one build it and the other reuse it (without it both built into the same files)."""
    import threading

    start, results = threading.Barrier(2), []

    def builder() -> None:
        start.wait()
        results.append(build_store(tmp_path / "store", "small", SMALL_STORE_SEED).reused)

    threads = [threading.Thread(target=builder) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert build_store(tmp_path / "store", "small", SMALL_STORE_SEED).reused
