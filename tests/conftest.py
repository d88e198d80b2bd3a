"""Shared fixtures: a small synthetic catalogue, its index and a store, built once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from intraskill.paths import release_data_dir

if TYPE_CHECKING:
    from intraskill.shop.data import Catalog
    from intraskill.shop.search import SearchIndex
    from intraskill.shop.splits import Splits

SMALL_STORE_SEED = 11
"""The seed of the small test store (the ``ci`` parameter set's store seed)."""


@pytest.fixture(scope="session")
def small_store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory of a small-scale store (1,000 products, 120 / 40 / 40 tasks), built once."""
    from intraskill.shop.build import build_store

    root = tmp_path_factory.mktemp("small-store")
    build_store(root, scale="small", seed=SMALL_STORE_SEED)
    return root


@pytest.fixture(scope="session")
def small_store(small_store_root: Path) -> Iterator[tuple[Catalog, SearchIndex, Splits]]:
    """``open_store(small_store_root)``: the catalogue (splits attached), its search index and splits."""
    from intraskill.shop.build import open_store

    catalog, index, splits = open_store(small_store_root)
    yield catalog, index, splits
    index.close()


@pytest.fixture(scope="session")
def organism_engine(small_store_root: Path) -> Iterator[Any]:
    """The ``ci`` parameter set's store (the small store) as the organism plays it (5 results per page);
    ``train_ids`` lists its train tasks."""
    from intraskill.params import load_params
    from intraskill.shop.build import open_store
    from intraskill.shop.engine import ShopEngine, StoreConfig

    ci = load_params(Path(__file__).resolve().parents[1] / "params" / "ci.yaml")
    assert (ci.store.scale, ci.store.seed) == ("small", SMALL_STORE_SEED), "ci.yaml's store is the small store"
    catalog, index, _ = open_store(small_store_root)
    engine = ShopEngine(catalog.products, catalog.goals, index, StoreConfig(page_size=5))
    engine.train_ids = list(catalog.task_ids("train"))
    yield engine
    index.close()


@pytest.fixture(scope="session")
def release_dir() -> Path:
    """The release excerpt the project ships; a clear failure naming the path when it is missing."""
    path = release_data_dir()
    assert (path / "analysis").is_dir(), f"release data missing at {path} (the project ships it under data/)"
    return path


@pytest.fixture(scope="session")
def browser_runs(small_store_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs folder of real tiny runs, as the report reads them: evaluations with the ``ci`` parameter set on
    its store's val split, ``runs/eval-expert/{val-s0,val-none}`` (the scripted expert with the ci S0 bank and
    bare; it mostly succeeds) and ``runs/eval-organism/val-s0`` (the random-init ci organism: protocol errors,
    tokens), and ``runs/planted/co-evolve``, a one-round co-evolution run whose gate is real and planted
    (:mod:`skill_history`). Returns the folder holding ``runs/``."""
    from skill_history import write_planted_coevolve

    from intraskill.evaluate.runner import run_eval
    from intraskill.params import load_params
    from intraskill.policy.expert_policy import ExpertPolicy

    root = tmp_path_factory.mktemp("browser-runs")
    repo = Path(__file__).resolve().parents[1]
    params = load_params(repo / "params" / "ci.yaml")
    bank = repo / "params" / "ci_s0.json"
    for name, skills, policy in (("eval-expert/val-s0", bank, ExpertPolicy()),
                                 ("eval-expert/val-none", None, ExpertPolicy()),
                                 ("eval-organism/val-s0", bank, None)):
        run_eval(params, "val", None, skills, root / "runs" / name, policy=policy, progress=False, limit=4,
                 store_root=small_store_root)
    write_planted_coevolve(root / "runs" / "planted" / "co-evolve", small_store_root)
    return root
