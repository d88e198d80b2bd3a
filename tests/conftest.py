"""Shared fixtures: a small synthetic catalogue, its index and a store, built once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

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
