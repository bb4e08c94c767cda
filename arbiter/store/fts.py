"""One full-text index per visibility scope: the FTS5 table, its vocabulary and its triggers.

Ranking reads statistics from the indexes it searches: document count,
average length (FTS5 keeps both per table) and document frequency
(`fts5vocab`). With one index over everyone those were everyone's, so one
caller's scores moved when another wrote, and a score told them which words
the other used. A table per scope (a user's private entries, or a team's:
store/users.py) makes every statistic the scope's own by construction, with
nothing to keep in step; a user's search reads the indexes of the scopes they
see and adds their statistics, which is BM25 over exactly what they may see.
docs/architecture.md says why this won over counters.

Per scope N (an integer we generate, never user text, so it can be part of
a name):
    entries_fts_N         FTS5 over title, content, tags, source, scope;
                          external content from the view below
    entries_fts_N_rows    the scope's entries as the index reads them
    entries_fts_N_vocab   fts5vocab (document frequencies)
    entries_fts_N_insert / _delete / _update   triggers on `entries` (the insert
                          one stands aside while an import indexes its rows
                          itself: store/deferred.py)

`scope` holds one token: `c<conversation>`, or `u<tenant>` for an entry in
no conversation, so a conversation pass ANDs its scope into the MATCH and
FTS5 seeks to that conversation's rows (the tokens are those of the past-text
index, `entry_revisions_fts`, which also holds `t<tenant>`). A team's index
adds `a<author>`, so a user who left the team can still search what they
wrote there. An entry moves between indexes when it is shared or unshared.
"""

from __future__ import annotations

import apsw

from arbiter.store import engine
from arbiter.store.tokens import TOKENIZER

#: Per-table FTS5 settings. A 16 MiB hash (FTS5's default is 1 MiB) flushes
#: bulk writes in fewer, larger segments: half the ingest time, and fewer
#: segments to search. `automerge=16` merges less while writing (+20%
#: entries/s at 60K); the daemon's idle compaction merges the rest.
_CONFIG = (("hashsize", 16 * 1024 * 1024), ("automerge", 16))
_COLS = "title, content, tags, source, scope"



def table(scope_id: int) -> str:
    """The FTS5 table of a scope."""
    return f"entries_fts_{int(scope_id)}"


def _scope(row: str, shared: bool) -> str:
    where = f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
    return f"{where} || ' a' || {row}.author_id" if shared else where


def _columns(row: str, shared: bool) -> str:
    return f"{row}.title, {row}.content, {row}.tags, {row}.source, {_scope(row, shared)}"


def _insert_trigger(scope_id: int, *, shared: bool, deferrable: bool = True) -> str:
    """SQL creating scope N's insert trigger; `deferrable`: it stands aside while the scope is in `deferred_scopes`
    (store/deferred.py; a file before m020 has no such table)."""
    t, n = table(scope_id), int(scope_id)
    defer = f" AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = {n})" if deferrable else ""
    return f"""
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.scope_id = {n}{defer} BEGIN
            INSERT INTO {t}(rowid, {_COLS}) VALUES (new.id, {_columns("new", shared)});
        END;
    """


def index_range(conn: apsw.Connection, scope_id: int, first: int, last: int, *, shared: bool) -> None:
    """Index scope N's entries with ids `first`..`last` in one statement (what its insert trigger would have done)."""
    t, n = table(scope_id), int(scope_id)
    conn.execute(
        f"INSERT INTO {t}(rowid, {_COLS}) SELECT id, {_columns('entries', shared)} FROM entries "
        f"WHERE id BETWEEN ? AND ? AND scope_id = {n}", (first, last),
    )


def _attach(conn: apsw.Connection, scope_id: int, *, shared: bool, deferrable: bool = True) -> None:
    """The view, vocabulary and triggers that keep scope N's index (an existing FTS5 table) in step with `entries`."""
    t, n = table(scope_id), int(scope_id)
    # Writers set `content_z` once m023 made `content` generated from it (an UPDATE OF list names what is set).
    stored = "content_z" if _has_column(conn, "entries", "content_z") else "content"
    conn.execute(
        f"""
        CREATE VIEW {t}_rows AS SELECT id, {_columns("entries", shared)} AS scope FROM entries WHERE scope_id = {n};
        CREATE VIRTUAL TABLE {t}_vocab USING fts5vocab({t}, row);
        {_insert_trigger(scope_id, shared=shared, deferrable=deferrable)}
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {_COLS}) VALUES ('delete', old.id, {_columns("old", shared)});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, {stored}, tags, source, conversation_id, scope_id ON entries
        WHEN old.scope_id = {n} OR new.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {_COLS}) SELECT 'delete', old.id, {_columns("old", shared)}
                WHERE old.scope_id = {n};
            INSERT INTO {t}(rowid, {_COLS}) SELECT new.id, {_columns("new", shared)} WHERE new.scope_id = {n};
        END;
        """
    )


def _has_column(conn: apsw.Connection, table_name: str, column: str) -> bool:
    return any(r[1] == column for r in conn.execute(f"PRAGMA table_xinfo({table_name})"))


def create(conn: apsw.Connection, scope_id: int, *, shared: bool) -> None:
    """Create a scope's index (empty, or filled from its entries if it has any).

    Nothing to create on PostgreSQL: every scope's documents are rows of one table (store/pg/fulltext.py).
    """
    if engine.is_postgresql(conn):
        return
    t = table(scope_id)
    conn.execute(
        f"""
        CREATE VIRTUAL TABLE {t} USING fts5(
            {_COLS}, content='{t}_rows', content_rowid='id',
            tokenize='{' '.join([TOKENIZER[0], *TOKENIZER[1]])}'
        );
        """
    )
    # Deferrable once m020 made the table. Migrations never call this (they keep their own frozen copies); a
    # scope made in a file at an earlier step (tests build such files) is made as the code of that step made it.
    deferrable = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'deferred_scopes'").fetchone() is not None
    _attach(conn, scope_id, shared=shared, deferrable=deferrable)
    for key, value in _CONFIG:
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES (?, ?)", (key, value))
    conn.execute(f"INSERT INTO {t}({t}) VALUES ('rebuild')")


def newest_matches(conn: apsw.Connection, scope_id: int, match: str, limit: int, *, below: int | None = None,
                   other_than: int | None = None) -> list[int]:
    """The newest `limit` entries of a scope's index that `match` finds (ids below `below`, other than
    `other_than`), newest first: unranked probes (an entry's near neighbours, a name's other uses)."""
    if engine.is_postgresql(conn):
        from arbiter.store.pg import fulltext, indexing

        found = fulltext.matching(conn, indexing.scope_index(conn, scope_id), match,
                                  limit + (other_than is not None), below=below)
        return [i for i in found if i != other_than][:limit]
    t = table(scope_id)
    cond, binds = "", []
    if below is not None:
        cond, binds = " AND rowid < ?", [below]
    if other_than is not None:
        cond, binds = cond + " AND rowid != ?", [*binds, other_than]
    return [r[0] for r in conn.execute(
        f"SELECT rowid FROM {t} WHERE {t} MATCH ?{cond} ORDER BY rowid DESC LIMIT ?", (match, *binds, limit)
    )]


def scopes(conn: apsw.Connection, start: int = 1) -> list[int]:
    """Every scope from `start` on, which is every index, in id order."""
    return [r[0] for r in conn.execute("SELECT id FROM scopes WHERE id >= ? ORDER BY id", (start,))]


def totals(conn: apsw.Connection, scope_id: int) -> tuple[int, int]:
    """(rows, tokens) in a scope's index, read from FTS5's own totals record (no scan).

    The record (rowid 1 of the `_data` table, the format FTS5 documents in
    fts5_index.c) is a varint row count then one varint token total per
    column. A scope with no index yet has (0, 0). On PostgreSQL, the scope index's kept totals
    (store/pg/fulltext.py).
    """
    if engine.is_postgresql(conn):
        from arbiter.store.pg import fulltext, indexing

        return fulltext.totals(conn, indexing.scope_index(conn, scope_id))
    try:
        row = conn.execute(f"SELECT block FROM {table(scope_id)}_data WHERE id = 1").fetchone()
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
