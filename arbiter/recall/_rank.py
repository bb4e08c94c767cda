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
from collections.abc import Sequence
from dataclasses import dataclass, field

import apsw

from arbiter.store import engine, fts

FUNCTION = "arbiter_rank"
K1 = 1.2
#: Full length normalization: long answers mention many words without being
#: about them (measured +2 points R@1 over FTS5's 0.75).
B = 1.0
#: Cached document frequencies are dropped once the index has grown this much.
_STALE_GROWTH = 1.1

_registered: weakref.WeakSet = weakref.WeakSet()
_local = threading.local()


@dataclass
class Spec:
    """What one ranked FTS query needs: per FTS5 phrase, its idf; column weights; k1, b."""

    idf: Sequence[float]
    weights: Sequence[float]
    k1: float = K1
    b: float = B
    avgdl: float | None = field(default=None, repr=False)


def _rank(api: apsw.FTS5ExtensionApi, *_args) -> float:
    spec: Spec = _local.spec
    if spec.avgdl is None:  # once per query unless given: FTS5 keeps these totals, no scan
        spec.avgdl = api.column_total_size(-1) / max(api.row_count, 1) or 1.0
    # Called for every match: the spec's constants are bound once a query (`_local.terms`), and
    # the arithmetic is the same expressions in the same order, so the scores are the same floats.
    w0, w1, w2, w3, k1, one_minus_b, b, k1p1, phrases = _local.terms
    norm = k1 * (one_minus_b + b * api.column_size(-1) / spec.avgdl)
    total = 0.0
    columns = api.phrase_columns
    locations = api.phrase_locations
    for i, idf in phrases:
        if not columns(i):  # cheap test first: most OR branches miss most rows
            continue
        cols = locations(i)
        f = w0 * len(cols[0]) + w1 * len(cols[1]) + w2 * len(cols[2]) + w3 * len(cols[3])
        if f:
            total += idf * f * k1p1 / (f + norm)
    return total


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
    if conn not in _registered:
        conn.register_fts5_function(FUNCTION, _rank)
        _registered.add(conn)
    _local.spec = spec
    w0, w1, w2, w3 = spec.weights[:4]
    _local.terms = (w0, w1, w2, w3, spec.k1, 1.0 - spec.b, spec.b, spec.k1 + 1.0, tuple(enumerate(spec.idf)))
    try:
        return conn.execute(
            f"SELECT rowid, {FUNCTION}({table}) AS s FROM {table} "
            f"WHERE {table} MATCH ? AND rowid >= ? ORDER BY s DESC, rowid LIMIT ?",
            (match, min_rowid, depth),
        ).fetchall()
    finally:
        _local.spec = _local.terms = None


def idf(df: int, n: int) -> float:
    """BM25's idf, as FTS5 computes it (never negative).

    `df` is capped at `n`: read inside a transaction holding uncommitted
    writes, a term's document count includes the new rows before the index's
    row total does, and an idf below zero would rank the best match last.
    """
    df = min(df, n)
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


class Frequencies:
    """Document frequencies per stem in scope indexes, cached per (database, scope).

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

    def get(self, conn: apsw.Connection, scopes: Sequence[int], stems: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(documents in the scopes' indexes, {stem: documents holding it}), summed over `scopes`."""
        if engine.is_postgresql(conn):
            from arbiter.store.pg import indexing

            return indexing.FREQUENCIES.get(conn, [indexing.scope_index(conn, s) for s in scopes], stems)
        total, df = 0, dict.fromkeys(stems, 0)
        for scope in scopes:
            n, found = self._one(conn, scope, stems)
            total += n
            for s in stems:
                df[s] += found[s]
        return max(total, 1), df

    def _one(self, conn: apsw.Connection, scope: int, stems: Sequence[str]) -> tuple[int, dict[str, int]]:
        n, _ = fts.totals(conn, scope)
        key = (conn.filename or f"memory:{id(conn)}", scope)
        with self._lock:
            base, cache = self._by_scope.get(key, (0, {}))
            if n > base * _STALE_GROWTH or n < base:
                base, cache = n, {}
                self._by_scope[key] = (base, cache)
            missing = [s for s in dict.fromkeys(stems) if s not in cache]
        if missing:
            vocab = f"{fts.table(scope)}_vocab"
            words = [s for s in missing if not s.endswith("*")]
            found = dict(
                conn.execute(f"SELECT term, doc FROM {vocab} WHERE term IN ({','.join('?' * len(words))})", words)
            )
            for s in missing:
                if s.endswith("*"):  # a prefix: its words' documents, summed (an upper bound), at most n
                    low = s[:-1]
                    high = low[:-1] + chr(ord(low[-1]) + 1)
                    found[s] = conn.execute(
                        f"SELECT min(coalesce(sum(doc), 0), ?) FROM {vocab} WHERE term >= ? AND term < ?",
                        (n, low, high),
                    ).fetchone()[0]
            with self._lock:
                for s in missing:
                    cache[s] = found.get(s, 0)
        return n, {s: cache.get(s, 0) for s in stems}


def totals(conn: apsw.Connection, scopes: Sequence[int]) -> tuple[int, int]:
    """(rows, tokens) over the scopes' indexes: the average length a viewer's ranking uses."""
    rows = tokens = 0
    for scope in scopes:
        r, t = _scope_totals(conn, scope)
        rows, tokens = rows + r, tokens + t
    return rows, tokens


def _scope_totals(conn: apsw.Connection, scope: int) -> tuple[int, int]:
    if engine.is_postgresql(conn):
        from arbiter.store.pg import fulltext, indexing

        return fulltext.totals(conn, indexing.scope_index(conn, scope))
    return fts.totals(conn, scope)


FREQUENCIES = Frequencies()
