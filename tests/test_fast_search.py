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
from intraskill.shop.bm25 import SINGLE_TERM, Fts5Tokenizer
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.search import TOKENIZER, SearchIndex, rankings_agree
from intraskill.shop.text import tokenize
from intraskill.shop.types import Product

REL_TOL = 1e-9
K = 150


def assert_same_ranking(index: SearchIndex, query: str, k: int = K) -> None:
    """Both engines' top ``k`` agree; positions may differ only where the scores tie within rounding."""
    reference, fast = index.scored(query, k, engine="fts5"), index.scored(query, k, engine="fast")
    assert [a for a, _ in fast] == index.search(query, k, engine="fast")
    assert rankings_agree(reference, fast, REL_TOL), (query, reference[:5], fast[:5])
    matrix = index.bm25()
    scores = matrix.scores(tokenize(query))
    for asin, value in reference:  # every reference row carries the fast engine's score
        assert math.isclose(-scores[matrix.row(asin)], value, rel_tol=REL_TOL), (query, asin)


def test_rankings_agree_tolerates_only_rounding_ties() -> None:
    ranked = [("a", -2.0), ("b", -1.0), ("c", -1.0)]
    assert rankings_agree(ranked, [("a", -2.0), ("c", -1.0 + 1e-15), ("b", -1.0)])
    assert not rankings_agree(ranked, [("b", -1.0), ("a", -2.0), ("c", -1.0)])
    assert not rankings_agree(ranked, ranked[:2])


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
    phrase = punctuated.search("v2.0", engine="fast")
    assert phrase == punctuated.search("v2.0", engine="fts5")
    assert "A001" in phrase and "A003" not in phrase  # "v2 0" adjacent in A001; apart in "2.0 v2"
    once = dict(punctuated.scored("cafe", K, engine="fts5"))
    twice = dict(punctuated.scored("café cafe", K, engine="fts5"))  # two quoted tokens, one unicode61 phrase
    assert once.keys() == twice.keys() and all(math.isclose(twice[a], 2 * once[a]) for a in once)
    matrix = punctuated.bm25()
    scores = matrix.scores(["café", "cafe"])
    assert all(math.isclose(-scores[matrix.row(a)], twice[a], rel_tol=REL_TOL) for a in twice)


def test_tokens_kept_whole_need_no_fts5_split(small_store) -> None:
    _, index, _ = small_store
    pieces = sorted({t for q in generated_queries(index, 300, seed=4) for t in tokenize(q)}
                    | {"不存在词", "智能", "x9", "0", "z" * 40, "洗地机"})
    whole = [p for p in pieces if SINGLE_TERM.fullmatch(p)]
    assert len(whole) > 100 and not SINGLE_TERM.fullmatch("ünknöwn") and not SINGLE_TERM.fullmatch("x9-y8")
    assert Fts5Tokenizer(TOKENIZER).split(whole) == [(p,) for p in whole]


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
