"""Stage 3's BM25, as an FTS5 auxiliary function with idf supplied by the caller.

FTS5's built-in `bm25()` computes each phrase's idf by running the phrase over
the whole index on every query: a cost that grows with the tenant (every
posting of every common word) even when the MATCH is scoped to one
conversation of a few hundred rows. Here idf comes from document frequencies
cached per tenant, so a scoped pass costs only its own matches. Owning the
formula also lets the length normalization (`b`) be tuned.

Every statistic is the caller's own: each visibility scope has its own index
(store/fts.py), whose row count and token totals FTS5 keeps, and whose
vocabulary gives document frequencies; a caller's figures are the sums over
the scopes they see whole. Nothing anyone else keeps to themselves moves them.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import apsw

from arbiter.store import engine, fts

FUNCTION = "arbiter_rank"
K1 = 1.2
#: Full length normalization: long answers mention many words without being
#: about them (measured +2 points R@1 over FTS5's 0.75).
B = 1.0
#: Cached document frequencies are dropped once the index has grown this much.
_STALE_GROWTH = 1.1

#: Per connection: the query its rank function is scoring (one at a time: apsw serializes a connection).
_queries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class Spec:
    """What one ranked FTS query needs: per FTS5 phrase, its idf; column weights; k1, b."""

    idf: Sequence[float]
    weights: Sequence[float]
    k1: float = K1
    b: float = B
    avgdl: float | None = field(default=None, repr=False)


def _count(api: apsw.FTS5ExtensionApi, phrase: int, where: tuple[int, ...], w: tuple[float, ...]) -> float:
    """A phrase's weighted count in the current row, given the columns it is in (`where`, ascending).

    Most hits are in one column: that column's offsets are one list, where
    all the columns' offsets are one list each. Either way the sum is the
    same float: a column the phrase is not in adds 0.0, which changes no sum.
    """
    if len(where) == 1:
        c = where[0]
        return w[c] * len(api.phrase_column_offsets(phrase, c))
    cols = api.phrase_locations(phrase)
    return w[0] * len(cols[0]) + w[1] * len(cols[1]) + w[2] * len(cols[2]) + w[3] * len(cols[3])


def _scorer(query: list) -> Callable[[apsw.FTS5ExtensionApi], float]:
    """The rank function of one connection: BM25 of the current row for the query `ranked` put in `query[0]`.

    It runs once per match, so it asks FTS5 for as little as it can: each
    phrase's columns, then the offsets of those present (`_count`), and the
    document's length (FTS5 reads it from its docsize table, the dearest
    call) only once a phrase counts. The arithmetic is the same expressions
    in the same order as ever, so the scores are the same floats.
    """

    def rank(api: apsw.FTS5ExtensionApi) -> float:
        w, k1, one_minus_b, b, k1p1, avgdl, phrases = query[0]
        if avgdl is None:  # once per query unless given: FTS5 keeps these totals, no scan
            avgdl = api.column_total_size(-1) / max(api.row_count, 1) or 1.0
            query[0] = (w, k1, one_minus_b, b, k1p1, avgdl, phrases)
        total = 0.0
        if len(phrases) == 1:
            f = _count(api, 0, api.phrase_columns(0), w)
            if f:
                total += phrases[0][1] * f * k1p1 / (f + k1 * (one_minus_b + b * api.column_size(-1) / avgdl))
            return total
        columns = api.phrase_columns
        norm = None
        for i, idf in phrases:
            where = columns(i)
            if where:  # cheap test first: most OR branches miss most rows
                f = _count(api, i, where, w)
                if f:
                    if norm is None:
                        norm = k1 * (one_minus_b + b * api.column_size(-1) / avgdl)
                    total += idf * f * k1p1 / (f + norm)
        return total

    return rank


def ranked(
    conn: apsw.Connection, table: str, match: str, spec: Spec, depth: int, *, min_rowid: int = 0,
    tenant_id: int | None = None,
) -> list[tuple[int, float]]:
    """(rowid, score) of the `depth` best matches of `match` in FTS5 `table` from `min_rowid` up, best first.

    The text phrases must come first in `match` (the scope filter after), in
    the order of `spec.idf`. `table` is a tenant's index (store/fts.py) or
    an FTS5 table with the same columns (recall.past ranks past states in
    entry_revisions_fts). On PostgreSQL the same ranking is store/pg/fulltext.py's, in the index `table` stands
    for (`tenant_id` names the tenant of a tenant-wide one: past texts, facts).
    """
    if engine.is_postgresql(conn):
        from arbiter.store.pg import fulltext, indexing

        index = indexing.table_index(conn, table, tenant_id)
        return fulltext.ranked(conn, index, match, spec, depth, min_rowid=min_rowid)
    query = _queries.get(conn)
    if query is None:
        query = _queries[conn] = [None]
        conn.register_fts5_function(FUNCTION, _scorer(query))
    # Columns past the fourth weigh nothing (the scope column; these FTS5 tables have five at most).
    query[0] = ((*spec.weights[:4], 0.0, 0.0, 0.0, 0.0), spec.k1, 1.0 - spec.b, spec.b, spec.k1 + 1.0, spec.avgdl,
                tuple(enumerate(spec.idf)))
    try:
        rows = conn.execute(
            f"SELECT rowid, {FUNCTION}({table}) AS s FROM {table} "
            f"WHERE {table} MATCH ? AND rowid >= ? ORDER BY s DESC, rowid LIMIT ?",
            (match, min_rowid, depth),
        ).fetchall()
        if spec.avgdl is None:  # read from the first table ranked: later passes with this spec compare with it
            spec.avgdl = query[0][5]
        return rows
    finally:
        query[0] = None


def idf(df: int, n: int) -> float:
    """BM25's idf, as FTS5 computes it (never negative).

    `df` is capped at `n`: read inside a transaction holding uncommitted
    writes, a term's document count includes the new rows before the index's
    row total does, and an idf below zero would rank the best match last.
    """
    df = min(df, n)
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


class Frequencies:
    """Document frequencies per stem in scope indexes, cached per (database, scope), on either engine.

    A stem's frequency is read once (fts5vocab walks its whole doclist) and
    kept until the scope's index grows by a tenth or shrinks; a ranking needs
    idf to be about right, not exact. The row count is read exactly on every
    call (FTS5 keeps it). A viewer's figures are the sums over the scopes
    they see whole, so they depend on nothing else's writes. Shared by the
    daemon's reader threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_scope: dict[tuple[str, int], tuple[int, dict[str, int]]] = {}

    def get(self, conn: apsw.Connection, scopes: Sequence[int],
            stems: Sequence[str]) -> tuple[int, int, dict[str, int]]:
        """(documents in the scopes' indexes, their tokens, {stem: documents holding it}), summed over `scopes`:
        the totals are read exactly, once a call, for the idf and the average length alike."""
        rows = tokens = 0
        df = dict.fromkeys(stems, 0)
        for scope in scopes:
            (r, t), found = self._one(conn, scope, stems)
            rows, tokens = rows + r, tokens + t
            for s in stems:
                df[s] += found[s]
        return rows, tokens, df

    def _one(self, conn: apsw.Connection, scope: int, stems: Sequence[str]) -> tuple[tuple[int, int], dict[str, int]]:
        if engine.is_postgresql(conn):
            from arbiter.store.pg import fulltext, indexing

            index = indexing.scope_index(conn, scope)
            sums, read = fulltext.totals(conn, index), partial(fulltext.frequencies, conn, index)
        else:
            sums, read = fts.totals(conn, scope), partial(_vocab_frequencies, conn, scope)
        n = sums[0]
        key = (conn.filename or f"memory:{id(conn)}", scope)
        with self._lock:
            base, cache = self._by_scope.get(key, (0, {}))
            if n > base * _STALE_GROWTH or n < base:
                base, cache = n, {}
                self._by_scope[key] = (base, cache)
            missing = [s for s in dict.fromkeys(stems) if s not in cache]
        if missing:
            found = read(missing)
            with self._lock:
                for s in missing:
                    cache[s] = found.get(s, 0)
        return sums, {s: cache.get(s, 0) for s in stems}


def _vocab_frequencies(conn: apsw.Connection, scope: int, stems: Sequence[str]) -> dict[str, int]:
    """{stem: documents holding it} in a scope's FTS5 index; a stem ending in `*` is a prefix: its words' documents,
    summed (an upper bound), at most the index's documents."""
    vocab = f"{fts.table(scope)}_vocab"
    words = [s for s in stems if not s.endswith("*")]
    found = dict(conn.execute(f"SELECT term, doc FROM {vocab} WHERE term IN ({','.join('?' * len(words))})", words))
    n = fts.totals(conn, scope)[0]
    for s in stems:
        if s.endswith("*"):
            low = s[:-1]
            high = low[:-1] + chr(ord(low[-1]) + 1)
            found[s] = conn.execute(
                f"SELECT min(coalesce(sum(doc), 0), ?) FROM {vocab} WHERE term >= ? AND term < ?", (n, low, high),
            ).fetchone()[0]
    return found


FREQUENCIES = Frequencies()
