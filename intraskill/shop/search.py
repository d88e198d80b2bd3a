"""Multi-field BM25 product search over SQLite FTS5 (``shopsimulator-multifield-bm25-v3``, §3).

One FTS5 table with columns, in order, ``asin`` (UNINDEXED), title, brand, category, model,
attributes, options, bullets. Every field is tokenised in Python with :func:`text.tokenize`
(overlapping Han bigrams), so the ``unicode61`` tokenizer only splits on the spaces we insert.
A query is the OR of its quoted tokens, scored by ``bm25()`` with one weight per column (asin's
0.0 placeholder keeps the weights aligned), best first, ties by ascending ASIN, at most ``k`` rows.

Two engines rank identically: ``"fts5"`` asks SQLite's ``bm25()``; ``"fast"`` (the default) adds
rows of a precomputed phrase × product matrix built from the index's own columns
(:class:`intraskill.shop.bm25.Bm25Matrix`, bit-identical scores). Results are cached per query
tokens (an LRU per engine).

A manifest table records everything the ranking depends on; :meth:`SearchIndex.open` refuses an
index whose manifest differs (:class:`StaleIndexError`). Rebuild with ``force=True``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from intraskill.params import StoreParams
from intraskill.shop.bm25 import Bm25Matrix
from intraskill.shop.text import normalize_query, tokenize
from intraskill.shop.types import Product

SEARCH_VERSION = "shopsimulator-multifield-bm25-v3"
SCHEMA_VERSION = 1
OPTION_DOCUMENT_VERSION = "public-axis-value-v1"
TOKENIZER = "unicode61 remove_diacritics 2"
TIE_BREAKER = "asin_ascending"
DEFAULT_TOP_K = StoreParams().top_k
"""Results kept per query (``store.top_k``'s default, the reference's 150)."""
SEARCH_ENGINES = ("fast", "fts5")
RESULT_CACHE_SIZE = 4096
"""Result lists kept per engine (keyed by the query's tokens and ``k``)."""
FIELD_WEIGHTS: dict[str, float] = {
    "asin": 0.0, "title": 3.0, "brand": 2.0, "category": 2.0, "model": 2.5,
    "attributes": 1.5, "options": 1.2, "bullets": 0.8,
}
COLUMNS = tuple(FIELD_WEIGHTS)
_TABLE = "products"


@functools.lru_cache(maxsize=RESULT_CACHE_SIZE)
def query_tokens(query: str) -> tuple[str, ...]:
    """The search tokens of a query (:func:`text.tokenize`), cached: the service's token cap and the
    index read the same query once."""
    return tuple(tokenize(query))


class StaleIndexError(RuntimeError):
    """The index on disk was built for other products or another ranking contract."""


def _model_tokens(title: str) -> list[str]:
    return [tok for tok in tokenize(title) if any(c.isalpha() for c in tok) and any(c.isdigit() for c in tok)]


def field_documents(product: Product) -> dict[str, str]:
    """The pre-tokenised text of each indexed column for one product (space-joined tokens).

    The options document holds only axis names and option values (never prices, images or
    variant ids); bullets come from bullet points, falling back to the sub-title.
    """
    option_text = " ".join(f"{axis} {' '.join(values)}" for axis, values in product.options.items())
    sources = {
        "title": product.title,
        "brand": product.brand,
        "category": product.category or product.product_category,
        "attributes": " ".join(product.attributes),
        "options": option_text,
        "bullets": product.bullets or product.sub_title,
    }
    docs = {name: " ".join(tokenize(text)) for name, text in sources.items()}
    docs["model"] = " ".join(_model_tokens(product.title))
    return {"asin": product.asin, **{column: docs[column] for column in COLUMNS[1:]}}


def fts_query(query: str) -> str:
    """The FTS5 MATCH expression: the query's quoted tokens joined with OR ('' when no tokens)."""
    return _match_expression(tokenize(query))


def _match_expression(tokens: Iterable[str]) -> str:
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def expected_manifest(product_count: int | None, products_sha256: str) -> dict[str, Any]:
    """The manifest an index must carry to serve these products under this contract."""
    manifest: dict[str, Any] = {
        "version": SEARCH_VERSION,
        "schema_version": SCHEMA_VERSION,
        "option_document_version": OPTION_DOCUMENT_VERSION,
        "products_sha256": products_sha256,
        "field_weights": FIELD_WEIGHTS,
        "column_order": list(COLUMNS),
        "bm25_weights": [FIELD_WEIGHTS[c] for c in COLUMNS],
        "tokenizer": TOKENIZER,
        "tie_breaker": TIE_BREAKER,
    }
    if product_count is not None:
        manifest["product_count"] = product_count
    return manifest


def _products_list(products: Iterable[Product] | Mapping[str, Product]) -> list[Product]:
    items = list(products.values()) if isinstance(products, Mapping) else list(products)
    seen: set[str] = set()
    unique = []
    for product in items:
        if product.asin not in seen:
            seen.add(product.asin)
            unique.append(product)
    return unique


def rankings_agree(reference: list[tuple[str, float]], candidate: list[tuple[str, float]],
                   rel_tol: float = 1e-9) -> bool:
    """True when two scored top-k lists agree: equal length and, rank by rank, scores equal within
    ``rel_tol``; so the ASINs may differ only where scores tie within float rounding."""
    return len(reference) == len(candidate) and all(
        math.isclose(r, c, rel_tol=rel_tol) for (_, r), (_, c) in zip(reference, candidate, strict=True))


class SearchIndex:
    """A read-only multi-field BM25 searcher; one instance can serve many threads."""

    def __init__(self, connection: sqlite3.Connection, path: Path, manifest: dict[str, Any]) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._bm25: Bm25Matrix | None = None
        self._fts5_ranked = functools.lru_cache(maxsize=RESULT_CACHE_SIZE)(self._fts5_rank)
        self.path = path
        self.manifest = manifest
        weights = ", ".join(str(FIELD_WEIGHTS[c]) for c in COLUMNS)
        self._sql = (
            f"SELECT asin, bm25({_TABLE}, {weights}) AS score FROM {_TABLE} "
            f"WHERE {_TABLE} MATCH ? ORDER BY score ASC, asin ASC LIMIT ?"
        )

    @classmethod
    def build(
        cls,
        products: Iterable[Product] | Mapping[str, Product],
        path: str | Path,
        products_sha256: str,
        force: bool = False,
    ) -> SearchIndex:
        """Build the index at ``path`` (atomically) and open it.

        An existing index is reused when its manifest matches; a stale one raises
        :class:`StaleIndexError` unless ``force`` rebuilds it.
        """
        path = Path(path)
        if path.exists() and not force:
            return cls.open(path, products_sha256)
        rows = _products_list(products)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        connection = sqlite3.connect(tmp)
        try:
            columns = ", ".join(f"{c} UNINDEXED" if c == "asin" else c for c in COLUMNS)
            connection.execute(f"CREATE VIRTUAL TABLE {_TABLE} USING fts5({columns}, tokenize='{TOKENIZER}')")
            placeholders = ", ".join("?" for _ in COLUMNS)
            connection.executemany(
                f"INSERT INTO {_TABLE} ({', '.join(COLUMNS)}) VALUES ({placeholders})",
                ([docs[c] for c in COLUMNS] for docs in map(field_documents, rows)),
            )
            connection.execute("CREATE TABLE manifest (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            connection.executemany(
                "INSERT INTO manifest (key, value) VALUES (?, ?)",
                [(k, json.dumps(v, ensure_ascii=False)) for k, v in expected_manifest(len(rows), products_sha256).items()],
            )
            connection.commit()
        finally:
            connection.close()
        os.replace(tmp, path)
        return cls.open(path, products_sha256)

    @classmethod
    def open(cls, path: str | Path, products_sha256: str) -> SearchIndex:
        """Open an index read-only, refusing it when its manifest differs from the contract."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"search index not found: {path} (build it with SearchIndex.build)")
        connection = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
        try:
            stored = {k: json.loads(v) for k, v in connection.execute("SELECT key, value FROM manifest")}
            rows = connection.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            connection.close()
            raise StaleIndexError(f"{path} is not a search index of this contract: {exc}") from exc
        expected = expected_manifest(rows, products_sha256)
        differing = sorted(k for k in set(expected) | set(stored) if stored.get(k) != expected.get(k))
        if differing:
            connection.close()
            details = "; ".join(f"{k}: index has {stored.get(k)!r}, expected {expected.get(k)!r}" for k in differing)
            raise StaleIndexError(f"stale search index {path} ({details}); rebuild with force=True")
        return cls(connection, path, stored)

    @property
    def product_count(self) -> int:
        return int(self.manifest["product_count"])

    def bm25(self) -> Bm25Matrix:
        """The fast engine over this index's columns, built on first use (about 2 s at default scale)."""
        if self._bm25 is None:
            with self._lock:
                if self._bm25 is None:
                    indexed = COLUMNS[1:]
                    rows = self._connection.execute(
                        f"SELECT asin, {', '.join(indexed)} FROM {_TABLE} ORDER BY rowid").fetchall()
                    self._bm25 = Bm25Matrix([r[0] for r in rows], [[r[i] for r in rows] for i in range(1, len(COLUMNS))],
                                            [FIELD_WEIGHTS[c] for c in indexed], TOKENIZER, RESULT_CACHE_SIZE)
        return self._bm25

    def search(self, query: str, k: int = DEFAULT_TOP_K, engine: str = "fast") -> list[str]:
        """ASINs matching any query token, best BM25 first, ties by ascending ASIN, at most ``k``.

        ``engine`` is ``"fast"`` (the precomputed matrix) or ``"fts5"`` (SQLite's ``bm25()``); both
        give the same list.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if engine not in SEARCH_ENGINES:
            raise ValueError(f"engine must be one of {SEARCH_ENGINES}, got {engine!r}")
        tokens = query_tokens(query)
        if not tokens:
            return []
        if engine == "fast":
            return self.bm25().search(tokens, k)
        return list(self._fts5_ranked(tokens, k))

    def scored(self, query: str, k: int = DEFAULT_TOP_K, engine: str = "fast") -> list[tuple[str, float]]:
        """The top ``k`` as (asin, ``bm25()`` value: negative, lower is better), uncached; for checks."""
        tokens = tokenize(query)
        if not tokens:
            return []
        if engine == "fts5":
            with self._lock:
                return [(a, float(s)) for a, s in self._connection.execute(self._sql, (_match_expression(tokens), k))]
        matrix = self.bm25()
        scores = matrix.scores(tokens)
        return [(a, -float(scores[matrix.row(a)])) for a in self.search(query, k, engine)]

    def _fts5_rank(self, tokens: tuple[str, ...], k: int) -> tuple[str, ...]:
        with self._lock:
            return tuple(asin for asin, _ in self._connection.execute(self._sql, (_match_expression(tokens), k)))

    @staticmethod
    def normalize(query: str) -> str:
        """The normalised query text (the cache key of a session's results)."""
        return normalize_query(query)

    def close(self) -> None:
        with self._lock:
            self._connection.close()
