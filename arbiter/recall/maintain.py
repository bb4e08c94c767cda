"""Index upkeep: merge the FTS5 index's segments, a bounded step at a time.

FTS5 writes each transaction's terms as a new segment and merges segments
lazily, so a bulk-loaded index holds tens of them, and every term lookup pays
once per segment: on a 250K-entry tenant a conversation pass costs ~2.5 ms on
23 segments and ~0.25 ms on one (bench/recall_speed.py). A writer that calls
`compact` while idle keeps recall at the fast end; each call does a bounded
amount of work (~2000 pages is ~0.15 s on a laptop) and says whether more remains.
A few small segments left by single writes are merged among themselves, not
into the large one (`WHOLE_MERGE_SHARE`).
"""

from __future__ import annotations

import apsw

from arbiter.store import engine, fts


#: A scope's index is merged into one segment only once the segments besides its largest hold this
#: share of the largest's pages; until then they are merged among themselves. Merging everything
#: rewrites the largest segment: one `remember` into a merged 250K-entry index made the idle writer
#: rewrite all of it (~24K pages, 0.74 s of CPU in 13 steps, a write arriving meanwhile waiting up to
#: 0.4 s for the step). A few small segments cost recall nothing measurable (tenant-wide recall on
#: 250K entries: the same CPU time on 1 segment or 16; docs/benchmarks.md, remember round 5).
WHOLE_MERGE_SHARE = 1 / 8


def compact(conn: apsw.Connection, *, pages: int = 2000, start: int = 1) -> int:
    """One bounded step of idle upkeep; where the next step goes on from (its `start`), 0 once nothing is left.

    Merges up to `pages` pages of one scope index's segments (scopes one
    after another, in id order from `start`): all of them into one once the
    rest add up to `WHOLE_MERGE_SHARE` of the largest (a bulk load), else
    only the smaller ones, a level's four or more at a time (FTS5's
    `usermerge`). Once none is left to merge, gives up to `pages` free pages
    back to the file system: merging frees the old segments' pages, a tenth
    of the file or more after a bulk load. Runs in the caller's transaction
    (or its own, outside one). Needs a writable connection.

    A caller that passes each answer on as the next `start` reads every
    scope's segment sizes once a pass: started from the first scope each
    time, a pass over scopes that all need merging read them once a step, a
    cost that grew with the square of the scopes (2,000 tenants written in
    a burst: ~10 ms a step, one step per scope).
    """
    if engine.is_postgresql(conn):
        return _merge_postgresql(conn, start)
    ids = fts.scopes(conn, start)
    for scope in ids:
        t = fts.table(scope)
        # A segment's size in leaf pages: its %_idx rows name its leaves, page number shifted left by one.
        sizes = [n for (n,) in conn.execute(f"SELECT max(pgno) >> 1 FROM {t}_idx GROUP BY segid")]
        if len(sizes) < 2:
            continue
        largest = max(sizes)
        whole = sum(sizes) - largest >= largest * WHOLE_MERGE_SHARE
        before = conn.total_changes()
        # A positive count merges only levels holding `usermerge` segments, or carries on a merge begun earlier.
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('merge', ?)", (-abs(pages) if whole else abs(pages),))
        # The command itself counts as one change; more means pages were written, and more may remain here.
        if conn.total_changes() - before > 1:
            return scope
    past = ids[-1] + 1 if ids else start  # every scope is done: the next step only gives pages back
    # Only a file created with auto_vacuum=INCREMENTAL (store.db.connect) can shrink this way.
    if conn.pragma("auto_vacuum") != 2 or not conn.pragma("freelist_count"):
        return 0
    conn.execute(f"PRAGMA incremental_vacuum({abs(int(pages))})").fetchall()
    return past if conn.pragma("freelist_count") > 0 else 0


def _merge_postgresql(conn, start: int) -> int:
    """`compact` on PostgreSQL: one scope's small segments (one-entry writes leave one each) folded into one, with
    those of its tenant's past texts and facts (store/pg/fulltext.py `merge`); the scope to go on from, 0 when
    none was left. There are no pages to give back: autovacuum reclaims the rows."""
    from arbiter.store.pg import fulltext, indexing

    for scope in fts.scopes(conn, start):
        index = indexing.scope_index(conn, scope)
        merged = fulltext.merge(conn, index)
        for kind in (fulltext.REVISIONS, fulltext.FACTS):
            merged += fulltext.merge(conn, fulltext.Index(index.tenant_id, kind))
        if merged:
            return scope
    return 0


def segments(conn: apsw.Connection, scope: int | None = None) -> int:
    """How many segments a scope's index holds (every scope's if None; 1 when merged, 0 when empty)."""
    if engine.is_postgresql(conn):
        scopes = fts.scopes(conn) if scope is None else [scope]
        return conn.execute("SELECT count(DISTINCT (scope_id, seg)) FROM fulltext_docs WHERE kind = 1 "
                            "AND scope_id = ANY(?::bigint[])", (scopes,)).fetchone()[0]
    # FTS5 data rowids carry the segment id above bit 37; segment 0 is the structure record.
    ids = fts.scopes(conn) if scope is None else [scope]
    return sum(
        conn.execute(f"SELECT count(DISTINCT id >> 37) FROM {fts.table(t)}_data WHERE id >> 37 > 0").fetchone()[0]
        for t in ids
    )
