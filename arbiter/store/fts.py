"""One full-text index per tenant: the FTS5 table, its vocabulary and its triggers.

Ranking reads statistics from the index it searches: document count, average
length (FTS5 keeps both per table) and document frequency (`fts5vocab`). With
one index over every tenant those were everyone's, so tenant B's scores moved
when tenant A wrote, and a score told B which words A used. A table per
tenant makes every statistic the tenant's own by construction, with nothing
to keep in step; docs/architecture.md says why this won over per-tenant
counters.

Per tenant N (an integer we generate, never user text, so it can be part of
a name):
    entries_fts_N         FTS5 over title, content, tags, source, scope;
                          external content from the view below
    entries_fts_N_rows    the tenant's entries as the index reads them
    entries_fts_N_vocab   fts5vocab (document frequencies)
    entries_fts_N_insert / _delete / _update   triggers on `entries`

`scope` holds one token: `c<conversation>`, or `u<tenant>` for an entry in
no conversation, so a conversation pass ANDs its scope into the MATCH and
FTS5 seeks to that conversation's rows (the tokens are those of the past-text
index, `entry_revisions_fts`, which also holds `t<tenant>`). An entry never
changes tenant.
"""

from __future__ import annotations

import apsw

#: Per-table FTS5 settings. A 16 MiB hash (FTS5's default is 1 MiB) flushes
#: bulk writes in fewer, larger segments: half the ingest time, and fewer
#: segments to search. `automerge=16` merges less while writing (+20%
#: entries/s at 60K); the daemon's idle compaction merges the rest.
_CONFIG = (("hashsize", 16 * 1024 * 1024), ("automerge", 16))


def table(tenant_id: int) -> str:
    """The FTS5 table of a tenant."""
    return f"entries_fts_{int(tenant_id)}"


def _scope(row: str) -> str:
    return f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"


def _columns(row: str) -> str:
    return f"{row}.title, {row}.content, {row}.tags, {row}.source, {_scope(row)}"


def create(conn: apsw.Connection, tenant_id: int) -> None:
    """Create a tenant's index (empty, or filled from its entries if it has any); idempotent."""
    t, n = table(tenant_id), int(tenant_id)
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone():
        return
    cols = "title, content, tags, source, scope"
    conn.execute(
        f"""
        CREATE VIEW {t}_rows AS SELECT id, {_columns("entries")} AS scope FROM entries WHERE tenant_id = {n};
        CREATE VIRTUAL TABLE {t} USING fts5(
            {cols}, content='{t}_rows', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE {t}_vocab USING fts5vocab({t}, row);
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {_columns("new")});
        END;
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {_columns("old")});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, content, tags, source, conversation_id ON entries
        WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {_columns("old")});
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {_columns("new")});
        END;
        """
    )
    for key, value in _CONFIG:
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES (?, ?)", (key, value))
    conn.execute(f"INSERT INTO {t}({t}) VALUES ('rebuild')")


def tenants(conn: apsw.Connection) -> list[int]:
    """The tenants that have an index."""
    return [r[0] for r in conn.execute("SELECT id FROM tenants ORDER BY id")]


def totals(conn: apsw.Connection, tenant_id: int) -> tuple[int, int]:
    """(rows, tokens) in a tenant's index, read from FTS5's own totals record (no scan).

    The record (rowid 1 of the `_data` table, the format FTS5 documents in
    fts5_index.c) is a varint row count then one varint token total per
    column. A tenant with no index yet has (0, 0).
    """
    try:
        row = conn.execute(f"SELECT block FROM {table(tenant_id)}_data WHERE id = 1").fetchone()
    except apsw.SQLError:
        return 0, 0
    if not row or not row[0]:
        return 0, 0
    values = _varints(row[0])
    return values[0], sum(values[1:])


def _varints(data: bytes) -> list[int]:
    """SQLite's big-endian varints (7 bits a byte, the ninth byte whole), as FTS5 writes them."""
    out, value, length = [], 0, 0
    for byte in data:
        length += 1
        if length == 9:
            out.append((value << 8) | byte)
            value = length = 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value = length = 0
    return out
