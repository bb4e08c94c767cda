"""Extraction after acknowledging, for bulk writes: `remember_many` queues its entries here.

Extracting and resolving the names in a long text costs 0.3-1 ms in
Python, several times what the rest of a bulk write costs an entry (FTS5
included), so `remember_many` links only the names its caller gave and
queues each entry in `entity_backlog`. The daemon's writer drains the
queue a bounded step at a time when idle (before merging the FTS index),
and maintenance drains it whole: a bulk load's extracted entities (and
its duplicate keys) appear within seconds of its last batch. `remember`
extracts at once, since its result names what it found.
"""

from __future__ import annotations

import apsw

from arbiter import duplicates
from arbiter.entities.core import Linker
from arbiter.entities.link import extracted_in
from arbiter.store import users

#: Entries a step drains: ~0.1-0.3 s of work, so a write queued behind it waits little.
STEP = 200


def queue(conn: apsw.Connection, tenant_id: int, entry_ids: list[int]) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO entity_backlog(entry_id, tenant_id) VALUES (?, ?)", [(i, tenant_id) for i in entry_ids]
    )


def step(conn: apsw.Connection, *, limit: int = STEP, now: int) -> bool:
    """Extract, link and sketch up to `limit` queued entries; True if more remain. In the caller's transaction."""
    rows = conn.execute(
        "SELECT b.entry_id, b.tenant_id, e.author_id, e.title, e.content FROM entity_backlog b "
        "LEFT JOIN entries e ON e.id = b.entry_id ORDER BY b.entry_id LIMIT ?",
        (limit + 1,),
    ).fetchall()
    # One linker per writer: resolution sees what the entry's author sees, as `remember` does.
    linkers: dict[tuple[int, int], Linker] = {}
    for entry_id, tenant_id, author, title, content in rows[:limit]:
        if content is not None:  # else purged while queued
            linker = linkers.get((tenant_id, author))
            if linker is None:
                linker = linkers[tenant_id, author] = Linker(conn, tenant_id, now, users.viewer(conn, tenant_id, author, ""))
            linker.link(entry_id, extracted_in(title, content))
            duplicates.add(conn, tenant_id, entry_id, content)
        conn.execute("DELETE FROM entity_backlog WHERE entry_id = ?", (entry_id,))
    return len(rows) > limit


def drain(conn: apsw.Connection, *, now: int) -> int:
    """Empty the queue (maintenance, tests); how many entries it held."""
    n = conn.execute("SELECT count(*) FROM entity_backlog").fetchone()[0]
    while step(conn, limit=1000, now=now):
        pass
    return n


def pending(conn: apsw.Connection, tenant_id: int) -> int:
    return conn.execute("SELECT count(*) FROM entity_backlog WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]
