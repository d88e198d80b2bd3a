"""SQLite FTS5 multi-field BM25 search (docs/store.md §3) on the hand-built catalogue."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from shop_fixtures import GOLD, GOLD_ASIN, GOLD_GOAL, TWO_PRICE_AXES, catalogue

from intraskill.hashing import sha256_text
from intraskill.shop.search import (
    COLUMNS,
    FIELD_WEIGHTS,
    SEARCH_VERSION,
    SearchIndex,
    StaleIndexError,
    field_documents,
    fts_query,
)
from intraskill.shop.types import Product

SHA = sha256_text("mini-catalogue-v1")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.build(catalogue(), tmp_path_factory.mktemp("idx") / "products.sqlite3", SHA)


def test_columns_and_weights_are_aligned() -> None:
    assert COLUMNS == ("asin", "title", "brand", "category", "model", "attributes", "options", "bullets")
    assert [FIELD_WEIGHTS[c] for c in COLUMNS] == [0.0, 3.0, 2.0, 2.0, 2.5, 1.5, 1.2, 0.8]


def test_index_schema_and_manifest(index: SearchIndex) -> None:
    connection = sqlite3.connect(index.path)
    sql = connection.execute("SELECT sql FROM sqlite_master WHERE name='products'").fetchone()[0]
    assert "asin UNINDEXED, title, brand, category, model, attributes, options, bullets" in sql
    assert "unicode61 remove_diacritics 2" in sql
    assert index.manifest["version"] == SEARCH_VERSION
    assert index.manifest["bm25_weights"] == [0.0, 3.0, 2.0, 2.0, 2.5, 1.5, 1.2, 0.8]
    assert index.manifest["column_order"] == list(COLUMNS)
    assert index.product_count == len(catalogue())


def test_no_goal_fields_in_the_index(index: SearchIndex) -> None:
    connection = sqlite3.connect(index.path)
    dump = "\n".join(connection.iterdump())
    for secret in (GOLD_GOAL.instruction_text, GOLD_GOAL.instruction_simple, GOLD_GOAL.task_uid, "price_upper"):
        assert secret not in dump
    columns = [row[1] for row in connection.execute("PRAGMA table_info(products)")]
    assert columns == list(COLUMNS)


def test_options_document_has_only_axis_names_and_values() -> None:
    docs = field_documents(TWO_PRICE_AXES)
    assert docs["options"] == "颜色 色分 分类 白色 黑色 套餐 标准 准版 豪华 华版"
    for price in ("1000", "1100", "1500"):
        assert price not in docs["options"]


def test_model_field_holds_letter_digit_title_tokens() -> None:
    product = Product(asin="9", title="Dyson V12 洗地机 2024 usb-c3", brand="b", category="c")
    assert field_documents(product)["model"] == "v12 usb-c3"


def test_fts_query_is_or_of_quoted_tokens() -> None:
    assert fts_query("智能热洗，洗地机!") == '"智能" OR "能热" OR "热洗" OR "洗地" OR "地机"'
    assert fts_query("!!!") == ""


def test_ranking_is_deterministic_with_asin_tie_break(index: SearchIndex) -> None:
    results = index.search("智能 热洗 洗地机")
    assert GOLD_ASIN in results[:2]
    assert results == index.search("智能 热洗 洗地机")
    assert index.search("智能热洗白色洗地机")[0] == GOLD_ASIN
    # the 45 filler accessories have identical text apart from their number: ties broken by ascending ASIN
    fillers = [a for a in index.search("滚刷") if a.startswith("2000")]
    assert len(fillers) == 45 and fillers == sorted(fillers)
    assert index.search("滚刷", k=5) == sorted(fillers)[:5]
    assert index.search("...") == []


def test_title_weight_beats_bullets(tmp_path: Path) -> None:
    in_title = Product(asin="2", title="热风 吹风机", brand="x", category="a›b")
    in_bullets = Product(asin="1", title="吹风机", brand="x", category="a›b", bullets="热风")
    index = SearchIndex.build([in_bullets, in_title], tmp_path / "i.sqlite3", SHA)
    assert index.search("热风") == ["2", "1"]


def test_sha_mismatch_fails_closed(index: SearchIndex) -> None:
    with pytest.raises(StaleIndexError, match="products_sha256"):
        SearchIndex.open(index.path, sha256_text("other"))
    with pytest.raises(StaleIndexError, match="products_sha256"):
        SearchIndex.build(catalogue(), index.path, sha256_text("other"))


def test_changed_weights_fail_closed_and_force_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    SearchIndex.build([GOLD], path, SHA).close()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE manifest SET value='[0.0, 3.0]' WHERE key='bm25_weights'")
    connection.commit()
    connection.close()
    with pytest.raises(StaleIndexError, match="bm25_weights"):
        SearchIndex.open(path, SHA)
    rebuilt = SearchIndex.build(catalogue(), path, SHA, force=True)
    assert rebuilt.product_count == len(catalogue())


def test_index_is_read_only_and_thread_safe(index: SearchIndex) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        index._connection.execute("DELETE FROM manifest")
    expected = index.search("洗地机 白色")
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(index.search("洗地机 白色"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8


def test_missing_index_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build"):
        SearchIndex.open(tmp_path / "absent.sqlite3", SHA)
