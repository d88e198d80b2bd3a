"""The fast BM25 engine ranks as SQLite FTS5's ``bm25()`` (the contract's reference)."""

from __future__ import annotations

import json
import math
import random
import threading
from pathlib import Path

import pytest
from shop_fixtures import catalogue
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.hashing import sha256_text
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.search import COLUMNS, FIELD_WEIGHTS, SearchIndex, fts_query
from intraskill.shop.text import tokenize
from intraskill.shop.types import Product

REL_TOL = 1e-9
K = 150


def reference(index: SearchIndex, query: str, k: int) -> list[tuple[str, float]]:
    """FTS5's top ``k`` (asin, bm25) for ``query``, straight from SQLite."""
    expression = fts_query(query)
    if not expression:
        return []
    weights = ", ".join(str(FIELD_WEIGHTS[c]) for c in COLUMNS)
    sql = (f"SELECT asin, bm25(products, {weights}) AS s FROM products WHERE products MATCH ? "
           "ORDER BY s, asin LIMIT ?")
    return [(a, float(s)) for a, s in index._connection.execute(sql, (expression, k))]


def assert_same_ranking(index: SearchIndex, query: str, k: int = K) -> None:
    """Both engines' top ``k`` agree; positions may differ only where the scores tie within rounding."""
    ref = reference(index, query, k)
    fast = index.search(query, k=k, engine="fast")
    matrix = index.bm25()
    row = {asin: i for i, asin in enumerate(matrix.asins)}
    scores = -matrix.scores(tokenize(query))
    assert len(fast) == len(ref), query
    for position, (asin, ref_score) in enumerate(ref):
        fast_score = float(scores[row[asin]])
        assert math.isclose(fast_score, ref_score, rel_tol=REL_TOL), (query, asin, fast_score, ref_score)
        if fast[position] != asin:
            assert math.isclose(float(scores[row[fast[position]]]), ref_score, rel_tol=REL_TOL), (query, position)


def generated_queries(index: SearchIndex, count: int, seed: int = 0) -> list[str]:
    """English words and Chinese bigrams of the indexed documents, repeated and unknown tokens, empties."""
    rng = random.Random(seed)
    docs = index._connection.execute("SELECT title, attributes, options, brand FROM products").fetchall()
    words = sorted({w for row in docs for text in row for w in text.split()})
    latin = [w for w in words if w.isascii()] or words
    han = [w for w in words if not w.isascii()] or words
    unknown = ["zzqx", "不存在词", "ünknöwn", "x9-y8"]
    queries = ["", "   ", "!!!", "，。"]
    for _ in range(count - len(queries)):
        pool = rng.choice([latin, han, words])
        tokens = [rng.choice(pool) for _ in range(rng.randint(1, 12))]
        if rng.random() < 0.3:
            tokens += tokens[: rng.randint(1, len(tokens))]  # repeated tokens
        if rng.random() < 0.2:
            tokens.append(rng.choice(unknown))
        if rng.random() < 0.2:
            tokens = ["".join(tokens[:3])] + tokens[3:]  # a Han run split into overlapping bigrams
        queries.append(" ".join(tokens).upper() if rng.random() < 0.1 else " ".join(tokens))
    return queries


def test_engines_agree_on_thousands_of_generated_queries(small_store) -> None:
    _, index, _ = small_store
    for query in generated_queries(index, 3000):
        assert_same_ranking(index, query)
    for query in generated_queries(index, 200, seed=1):
        assert_same_ranking(index, query, k=5)


def test_engines_agree_on_chinese_queries(tmp_path: Path) -> None:
    index = SearchIndex.build(catalogue(), tmp_path / "zh.sqlite3", sha256_text("zh"))
    queries = generated_queries(index, 1000, seed=3)
    assert sum(any(not t.isascii() for t in tokenize(q)) for q in queries) > 600
    for query in queries:
        assert_same_ranking(index, query)
        assert_same_ranking(index, query, k=3)


@pytest.fixture(scope="module")
def punctuated(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    """Tokens the unicode61 tokenizer splits into phrases, repeated terms, diacritics, shared lengths."""
    titles = ["Router v2.0 usb-c3 1.1.1", "Router v2 0 usb c3", "café crème v2-0", "cafe creme 2.0 v2",
              "1.1 1 1 mug", "mug 1.1", "usb-c3 usb-c3 cable", "plain mug"]
    products = [Product(asin=f"A{i:03d}", title=t, brand="acme" if i % 2 else "café co", category="x›y",
                        attributes=(t.split()[0],), bullets=t) for i, t in enumerate(titles)]
    return SearchIndex.build(products, tmp_path_factory.mktemp("punct") / "i.sqlite3", sha256_text("punct"))


@pytest.mark.parametrize("query", ["v2.0", "v2.0 v2-0", "2.0", "1.1", "1.1.1 1.1", "café cafe", "creme",
                                   "usb-c3", "c3 usb", "mug", "router 1.1 v2", "ROUTER", "0", "v2/0 z-z"])
def test_engines_agree_on_phrases_and_diacritics(punctuated: SearchIndex, query: str) -> None:
    assert_same_ranking(punctuated, query)


def test_phrase_tokens_are_phrases_and_equal_phrases_count_twice(punctuated: SearchIndex) -> None:
    assert punctuated.search("v2.0", engine="fast") == [a for a, _ in reference(punctuated, "v2.0", K)]
    once = dict(reference(punctuated, "cafe", K))
    twice = dict(reference(punctuated, "café cafe", K))  # two quoted tokens, one unicode61 phrase
    assert once.keys() == twice.keys() and all(math.isclose(twice[a], 2 * once[a]) for a in once)
    matrix = punctuated.bm25()
    scores = matrix.scores(["café", "cafe"])
    assert all(math.isclose(-scores[matrix.asins.index(a)], twice[a], rel_tol=REL_TOL) for a in twice)


def test_store_config_chooses_the_engine(small_store) -> None:
    catalog, index, _ = small_store
    with pytest.raises(ValueError, match="search_engine"):
        StoreConfig(search_engine="lucene")
    with pytest.raises(ValueError, match="engine"):
        index.search("mug", engine="lucene")
    fast = ShopEngine(catalog.products, catalog.goals, index)
    fts5 = ShopEngine(catalog.products, catalog.goals, index, StoreConfig(search_engine="fts5"))
    assert fast.config.search_engine == "fast"
    query = next(q for q in generated_queries(index, 50) if fast.search(q))
    assert fast.search(query) == fts5.search(query)


def test_concurrent_readers_get_the_serial_results(small_store) -> None:
    _, index, _ = small_store
    queries = generated_queries(index, 400, seed=2)
    expected = [index.search(q, engine="fts5") for q in queries]
    results: dict[int, list[list[str]]] = {}

    def run(worker: int) -> None:
        results[worker] = [index.search(q, k=K - worker, engine="fast") for q in queries]

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker, lists in results.items():
        assert lists == [e[: K - worker] for e in expected]


def test_cli_search_prints_the_ranked_asins(small_store, small_store_root: Path) -> None:
    _, index, _ = small_store
    query = next(q for q in generated_queries(index, 50) if len(index.search(q, k=5)) == 5)
    runner = CliRunner()
    lists = []
    for engine in ("fast", "fts5"):
        result = runner.invoke(app, ["env", "search", query, "--k", "5", "--root", str(small_store_root),
                                     "--engine", engine, "--json"])
        assert result.exit_code == 0, result.output
        record = json.loads(result.stdout)
        assert record == {"asins": record["asins"], "engine": engine, "query": query}
        lists.append(record["asins"])
    assert lists[0] == lists[1] == index.search(query, k=5, engine="fts5")
    plain = runner.invoke(app, ["env", "search", query, "--k", "5", "--root", str(small_store_root)])
    assert plain.stdout.split() == lists[0]
    bad = runner.invoke(app, ["env", "search", query, "--root", str(small_store_root), "--engine", "lucene"])
    assert bad.exit_code == 1 and "--engine" in bad.stderr
