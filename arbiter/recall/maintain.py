"""Index upkeep: merge the FTS5 index's segments, a bounded step at a time.

FTS5 writes each transaction's terms as a new segment and merges segments
lazily, so a bulk-loaded index holds tens of them, and every term lookup pays
once per segment: on a 250K-entry tenant a conversation pass costs ~2.5 ms on
23 segments and ~0.25 ms on one (bench/recall_speed.py). A writer that calls
`compact` while idle keeps recall at the fast end; each call does a bounded
amount of work (~2000 pages is ~0.15 s on a laptop) and says whether more remains.
"""

from __future__ import annotations

import apsw


def compact(conn: apsw.Connection, *, pages: int = 2000) -> bool:
    """Merge up to `pages` pages of index segments; True if more merging remains.

    Runs in the caller's transaction (or its own, outside one). Needs a
    writable connection.
    """
    before = conn.total_changes()
    conn.execute("INSERT INTO entries_fts(entries_fts, rank) VALUES ('merge', ?)", (-abs(pages),))
    # The command itself counts as one change; more means pages were written.
    return conn.total_changes() - before > 1


def segments(conn: apsw.Connection) -> int:
    """How many segments the FTS index holds (1 when fully merged, 0 when empty)."""
    # FTS5 data rowids carry the segment id above bit 37; segment 0 is the structure record.
    return conn.execute("SELECT count(DISTINCT id >> 37) FROM entries_fts_data WHERE id >> 37 > 0").fetchone()[0]
