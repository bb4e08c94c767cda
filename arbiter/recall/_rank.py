"""Stage 3's BM25, as an FTS5 auxiliary function with idf supplied by the caller.

FTS5's built-in `bm25()` computes each phrase's idf by running the phrase over
the whole index on every query: a cost that grows with the tenant (every
posting of every common word) even when the MATCH is scoped to one
conversation of a few hundred rows. Here idf comes from document frequencies
cached per database, so a scoped pass costs only its own matches. Owning the
formula also lets the length normalization (`b`) be tuned.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import apsw

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
    if spec.avgdl is None:  # once per query: FTS5 keeps these totals, no scan
        spec.avgdl = api.column_total_size(-1) / max(api.row_count, 1) or 1.0
    w0, w1, w2, w3 = spec.weights[:4]
    norm = spec.k1 * (1.0 - spec.b + spec.b * api.column_size(-1) / spec.avgdl)
    k1p1 = spec.k1 + 1.0
    total = 0.0
    columns = api.phrase_columns
    for i, idf in enumerate(spec.idf):
        if not columns(i):  # cheap test first: most OR branches miss most rows
            continue
        cols = api.phrase_locations(i)
        f = w0 * len(cols[0]) + w1 * len(cols[1]) + w2 * len(cols[2]) + w3 * len(cols[3])
        if f:
            total += idf * f * k1p1 / (f + norm)
    return total


def ranked(
    conn: apsw.Connection, match: str, spec: Spec, depth: int, *, table: str = "entries_fts"
) -> list[tuple[int, float]]:
    """(rowid, score) of the `depth` best matches of `match` in `table`, best first.

    The text phrases must come first in `match` (the scope filter after), in
    the order of `spec.idf`. `table` is an FTS5 table with entries_fts's
    columns (recall.past ranks past states in entry_revisions_fts).
    """
    if conn not in _registered:
        conn.register_fts5_function(FUNCTION, _rank)
        _registered.add(conn)
    _local.spec = spec
    try:
        return conn.execute(
            f"SELECT rowid, {FUNCTION}({table}) AS s FROM {table} "
            f"WHERE {table} MATCH ? ORDER BY s DESC, rowid LIMIT ?",
            (match, depth),
        ).fetchall()
    finally:
        _local.spec = None


def idf(df: int, n: int) -> float:
    """BM25's idf, as FTS5 computes it (never negative)."""
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


class Frequencies:
    """Document frequencies per stem, read from `entries_fts_vocab` and cached per database.

    A stem's frequency is read once (fts5vocab walks its whole doclist) and
    kept until the index grows by a tenth; a ranking needs idf to be about
    right, not exact. Shared by the daemon's reader threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_db: dict[str, tuple[int, dict[str, int]]] = {}

    def get(self, conn: apsw.Connection, stems: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(documents in the index, {stem: documents holding it})."""
        n = conn.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
        key = conn.filename or f"memory:{id(conn)}"
        with self._lock:
            base, cache = self._by_db.get(key, (0, {}))
            if n > base * _STALE_GROWTH or n < base:
                base, cache = n, {}
                self._by_db[key] = (base, cache)
            missing = [s for s in dict.fromkeys(stems) if s not in cache]
        if missing:
            found = dict(
                conn.execute(
                    f"SELECT term, doc FROM entries_fts_vocab WHERE term IN ({','.join('?' * len(missing))})",
                    missing,
                )
            )
            with self._lock:
                for s in missing:
                    cache[s] = found.get(s, 0)
        return max(n, 1), {s: cache.get(s, 0) for s in stems}


FREQUENCIES = Frequencies()
