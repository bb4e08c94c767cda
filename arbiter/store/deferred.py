"""Index many new entries after they are written, in one pass, instead of a trigger per row.

Each scope's FTS5 index and the tag graph are kept in step with `entries`
by insert triggers: right for one `remember`, most of the cost of an import
batch of thousands (bench/transfer.py: per 100K entries in-process, the FTS
trigger cost 2.6 s and the tag graph's 2.3 s; the same rows written by one
INSERT ... SELECT per scope after the rows, 1.1 s and 0.7 s).

Inside `deferred(conn, scopes)` those insert triggers stand aside for the
listed scopes (their WHEN reads `deferred_scopes`, a table that is empty
outside such a block); on leaving it, in the same transaction, the entries
inserted meanwhile are indexed set-based and the scopes leave the table. So
what a reader can see, the committed state, is the same as with the
triggers: the block never outlives the caller's transaction. The rows'
`recall_entries` copies still come from their trigger (set-based they were
no faster: the cost is the text signals, not the trigger).

Only inserts are deferred: nothing may update or delete an entry inserted in
the block before the block ends (its update trigger would remove index rows
not yet written). The import and `remember_many` insert in such blocks and
nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from arbiter.store import fts

# The tag graph's insert upkeep (the entries_tags_insert trigger, db.py) for every deferred entry with an id in
# ?1..?2 at once, read from the entries' own `tags` (entry_tags is keyed by scope and tag, m022). The version
# is a change marker (graph/tags.py): one step per scope and block says "changed". The unary + keeps SQLite
# on the entries' id range rather than an index by scope.
def _range(*tag_aliases: str) -> str:
    """FROM/WHERE over the deferred entries with ids in ?1..?2, joined to their tags once per alias."""
    tags = ", ".join(f"json_each(e.tags) {a}" for a in tag_aliases)
    return (
        f"FROM entries e, {tags} WHERE e.id BETWEEN ?1 AND ?2 AND e.valid_to IS NULL AND e.tags != '[]' "
        "AND +e.scope_id IN (SELECT scope_id FROM deferred_scopes)"
    )


_TAGS_RANGE = (
    f"INSERT OR IGNORE INTO entry_tags(scope_id, tag, entry_id) SELECT e.scope_id, j.value, e.id {_range('j')}",
    "INSERT INTO tag_counts(scope_id, tag, n) SELECT scope_id, tag, count(*) "
    f"FROM (SELECT DISTINCT e.id, e.scope_id, j.value AS tag {_range('j')}) GROUP BY 1, 2 "
    "ON CONFLICT DO UPDATE SET n = n + excluded.n",
    "INSERT INTO tag_pairs(scope_id, a, b, n) SELECT scope_id, a, b, count(*) "
    f"FROM (SELECT DISTINCT e.id, e.scope_id, j.value AS a, k.value AS b {_range('j', 'k')} "
    "AND j.value < k.value) GROUP BY 1, 2, 3 "
    "ON CONFLICT DO UPDATE SET n = n + excluded.n",
    f"INSERT INTO tag_graph_version(scope_id, version) SELECT DISTINCT e.scope_id, 1 {_range('j')} "
    "ON CONFLICT DO UPDATE SET version = version + 1",
)


def _next_id(conn: apsw.Connection) -> int:
    # AUTOINCREMENT: every new entry's id is above the sequence, whatever was deleted.
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()
    return (row[0] if row else 0) + 1


@contextmanager
def deferred(conn: apsw.Connection, scopes: set[int]) -> Iterator[None]:
    """Entries inserted into `scopes` inside the block are indexed when it ends; call it inside a transaction."""
    if not conn.in_transaction:
        raise RuntimeError("deferred indexing outside a transaction would let a reader see unindexed rows")
    conn.executemany("INSERT INTO deferred_scopes(scope_id) VALUES (?)", [(s,) for s in sorted(scopes)])
    first = _next_id(conn)
    try:
        yield
        last = _next_id(conn) - 1
        if last >= first:
            for scope_id, team_id in conn.execute(
                "SELECT s.id, s.team_id FROM scopes s JOIN deferred_scopes d ON d.scope_id = s.id"
            ).fetchall():
                fts.index_range(conn, scope_id, first, last, shared=team_id is not None)
            for sql in _TAGS_RANGE:
                conn.execute(sql, (first, last))
    finally:
        conn.execute("DELETE FROM deferred_scopes")
