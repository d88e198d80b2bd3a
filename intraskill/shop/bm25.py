"""FTS5's ``bm25()`` as a precomputed sparse phrase × product matrix (the store's fast search engine).

SQLite's ``fts5_aux.c`` scores a row against the phrases ``p`` of a query as

``-Σ_p idf(p) · f·(k1 + 1) / (f + k1·(1 − b + b·D / avgdl))``, ``k1 = 1.2``, ``b = 0.75``,

where ``f`` adds one column weight per instance of ``p`` in the row (instances in column, offset
order), ``D`` counts every token of the row, ``avgdl`` is all tokens over all rows divided by
the row count and ``idf(p) = ln((N − n + 0.5)/(n + 0.5))`` with ``n`` the rows holding ``p``
(floored at 1e-6 when not positive). Each query token is one quoted phrase; a token the unicode61
tokenizer splits (``v2.0`` → ``v2 0``) is a multi-term phrase, matched at adjacent offsets.

A row's contribution to one phrase does not depend on the rest of the query, so it is computed
once with the same float operations in the same order as SQLite, and a query adds its phrases'
rows in query order: the scores equal ``bm25()`` bit for bit. Tokens are split by FTS5 itself (an
in-memory table with the index's tokenizer), so tokenisation cannot drift from the index.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6
SINGLE_TERM = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]+")
"""Tokens unicode61 keeps whole and unchanged (lowercase ASCII letters and digits, or CJK unified
ideographs): no need to ask FTS5 how to split them."""
PHRASE_CACHE_SIZE = 4096
"""Multi-term phrases not seen in any document, and unseen query tokens, kept per engine."""


def _idf(n_rows: int, n_hit: int) -> float:
    """SQLite's idf, with libm's ``log`` as SQLite calls it (numpy's vectorised log may differ by an ulp)."""
    idf = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else IDF_FLOOR


class Fts5Tokenizer:
    """Splits texts exactly as an FTS5 table with ``tokenize`` does (one in-memory table per thread)."""

    def __init__(self, tokenize: str) -> None:
        self.tokenize = tokenize
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(":memory:")
            connection.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{self.tokenize}')")
            connection.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
            self._local.connection = connection
        return connection

    def split(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """The FTS5 terms of each text, in offset order (an empty tuple when it has none)."""
        connection = self._connection()
        with connection:
            connection.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(texts))
            terms: list[list[str]] = [[] for _ in texts]
            for doc, term in connection.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
                terms[doc].append(term)
            connection.execute("DELETE FROM t")
        return [tuple(t) for t in terms]


class Bm25Matrix:
    """Per-(phrase, product) bm25 contributions; ``search`` ranks as FTS5's ``bm25()`` with weights.

    Read-only after construction and safe to share between threads (the caches are thread-safe
    LRUs; no lock is held across a search).
    """

    def __init__(self, asins: Sequence[str], columns: Sequence[Sequence[str]], weights: Sequence[float],
                 tokenize: str, cache_size: int = 4096) -> None:
        """``columns[c][r]``: the text of indexed column ``c`` of row ``r`` (space-joined tokens, as
        stored in the FTS5 table); ``weights[c]`` its bm25 weight. Unindexed columns count no tokens
        in FTS5: leave them out."""
        self.asins = list(asins)
        self._rows = {asin: i for i, asin in enumerate(self.asins)}
        self.tokenizer = Fts5Tokenizer(tokenize)
        self.weights = np.asarray(weights, dtype=np.float64)
        n_rows = len(self.asins)
        pieces = sorted({p for column in columns for text in column for p in text.split()})
        self._piece_terms = dict(zip(pieces, self.tokenizer.split(pieces), strict=True))
        vocabulary = sorted({t for terms in self._piece_terms.values() for t in terms})
        self._term_ids = {t: i for i, t in enumerate(vocabulary)}
        # one stream of term ids per (row, column), row-major, each closed by -1
        stream: list[int] = []
        stream_row: list[int] = []
        stream_col: list[int] = []
        lengths = np.zeros(n_rows, dtype=np.int64)
        ids = {p: [self._term_ids[t] for t in terms] for p, terms in self._piece_terms.items()}
        for r in range(n_rows):
            for c, column in enumerate(columns):
                tokens = [i for p in column[r].split() for i in ids[p]]
                stream.extend(tokens)
                stream.append(-1)
                stream_row.extend([r] * (len(tokens) + 1))
                stream_col.extend([c] * (len(tokens) + 1))
                lengths[r] += len(tokens)
        self._stream = np.asarray(stream + [-1], dtype=np.int32)
        self._stream_row = np.asarray(stream_row + [0], dtype=np.int32)
        self._stream_col = np.asarray(stream_col + [0], dtype=np.int32)
        positions = np.flatnonzero(self._stream >= 0)
        order = np.argsort(self._stream[positions], kind="stable")
        self._term_pos = positions[order]
        self._term_ptr = np.searchsorted(self._stream[self._term_pos], np.arange(len(vocabulary) + 1))
        self.n_rows = n_rows
        avgdl = float(lengths.sum()) / float(n_rows) if n_rows else 1.0
        self._length_norm = K1 * (1 - B + B * lengths.astype(np.float64) / avgdl)
        self._asin_array = np.asarray(self.asins, dtype=object)
        asin_order = np.argsort(self._asin_array, kind="stable")
        self._asin_rank = np.empty(n_rows, dtype=np.int64)
        self._asin_rank[asin_order] = np.arange(n_rows)
        # the matrix: one row per single term, then one per multi-term document token
        multi = sorted({tuple(self._term_ids[t] for t in terms) for terms in self._piece_terms.values()
                        if len(terms) > 1})
        self._phrase_ids = {(i,): i for i in range(len(vocabulary))}
        self._phrase_ids.update({m: len(vocabulary) + i for i, m in enumerate(multi)})
        starts = [self._term_pos] + [self._phrase_starts(m) for m in multi]
        labels = [self._stream[self._term_pos]] + [np.full(len(s), len(vocabulary) + i) for i, s in enumerate(starts[1:])]
        self.matrix = self._contributions(np.concatenate(starts), np.concatenate(labels), len(self._phrase_ids))
        self._unseen_piece = functools.lru_cache(maxsize=PHRASE_CACHE_SIZE)(self._split_piece)
        self._unseen_phrase = functools.lru_cache(maxsize=PHRASE_CACHE_SIZE)(self._phrase_row)
        self._ranked = functools.lru_cache(maxsize=cache_size)(self._rank)
        self._postings = {piece: self._terms_postings(terms) for piece, terms in self._piece_terms.items()}

    # ---- precomputation ---------------------------------------------------------------------------

    def _phrase_starts(self, phrase: tuple[int, ...]) -> np.ndarray:
        """Stream positions where ``phrase`` starts (ascending)."""
        start = self._term_pos[self._term_ptr[phrase[0]]:self._term_ptr[phrase[0] + 1]]
        for offset, term in enumerate(phrase[1:], start=1):
            start = start[self._stream[start + offset] == term]
        return start

    def _contributions(self, starts: np.ndarray, labels: np.ndarray, n_phrases: int) -> sp.csr_matrix:
        """The phrase × row matrix of bm25 contributions from phrase instances (``labels`` their phrase,
        ``starts`` their stream positions, ascending within each phrase)."""
        order = np.argsort(labels, kind="stable")
        starts, labels = starts[order], labels[order]
        rows = self._stream_row[starts]
        weights = self.weights[self._stream_col[starts]]
        new = np.ones(len(starts), dtype=bool)
        new[1:] = (labels[1:] != labels[:-1]) | (rows[1:] != rows[:-1])
        first = np.flatnonzero(new)
        sizes = np.diff(np.append(first, len(starts)))
        freq = np.zeros(len(first), dtype=np.float64)
        for j in range(int(sizes.max()) if len(sizes) else 0):  # f += w per instance, as SQLite adds them
            more = sizes > j
            freq[more] += weights[first[more] + j]
        phrase, row = labels[first], rows[first]
        n_hit = np.bincount(phrase, minlength=n_phrases)
        idf = np.array([_idf(self.n_rows, int(n)) for n in n_hit], dtype=np.float64)
        data = idf[phrase] * ((freq * (K1 + 1.0)) / (freq + self._length_norm[row]))
        indptr = np.zeros(n_phrases + 1, dtype=np.int64)
        np.cumsum(np.bincount(phrase, minlength=n_phrases), out=indptr[1:])
        return sp.csr_matrix((data, row.astype(np.int32), indptr), shape=(n_phrases, self.n_rows))

    def _phrase_row(self, phrase: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, contributions) of a phrase that no document token spells (computed on demand)."""
        starts = self._phrase_starts(phrase)
        row = self._contributions(starts, np.zeros(len(starts), dtype=np.int64), 1)
        return row.indices, row.data

    def _split_piece(self, piece: str) -> tuple[str, ...]:
        return self.tokenizer.split([piece])[0]

    # ---- queries ------------------------------------------------------------------------------------

    def phrase_postings(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, contributions) of one quoted query token (empty when it matches no row)."""
        postings = self._postings.get(token)
        if postings is None:
            terms = (token,) if SINGLE_TERM.fullmatch(token) else self._unseen_piece(token)
            postings = self._terms_postings(terms)
        return postings

    def _terms_postings(self, terms: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        ids = tuple(self._term_ids.get(t, -1) for t in terms)
        if not ids or -1 in ids:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
        row = self._phrase_ids.get(ids)
        if row is None:
            return self._unseen_phrase(ids)
        lo, hi = self.matrix.indptr[row], self.matrix.indptr[row + 1]
        return self.matrix.indices[lo:hi], self.matrix.data[lo:hi]

    def scores(self, tokens: Iterable[str]) -> np.ndarray:
        """The positive bm25 score (``-bm25()``) of every row for the OR of ``tokens``; 0.0 where none match."""
        postings = [self.phrase_postings(t) for t in tokens]
        if not postings:
            return np.zeros(self.n_rows, dtype=np.float64)
        rows = np.concatenate([r for r, _ in postings])
        values = np.concatenate([v for _, v in postings])
        return np.bincount(rows, weights=values, minlength=self.n_rows)  # sums in query order

    def _rank(self, tokens: tuple[str, ...], k: int) -> tuple[str, ...]:
        scores = self.scores(tokens)
        candidates = np.flatnonzero(scores > 0.0)  # every contribution is positive
        if len(candidates) > k:
            values = scores[candidates]
            kth = np.partition(values, len(values) - k)[len(values) - k]
            candidates = candidates[values >= kth]
        order = np.lexsort((self._asin_rank[candidates], -scores[candidates]))[:k]
        return tuple(self._asin_array[candidates[order]].tolist())

    def row(self, asin: str) -> int:
        """The matrix column of a product."""
        return self._rows[asin]

    def search(self, tokens: Sequence[str], k: int) -> list[str]:
        """ASINs of the rows matching any token, best first, ties by ascending ASIN, at most ``k``."""
        return list(self._ranked(tuple(tokens), k))
