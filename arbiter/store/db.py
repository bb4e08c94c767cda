"""The one connection factory and the versioned migrations.

Every connection (daemon writer, daemon readers, tests, bench) comes from
`connect`, so pragmas cannot drift between production and tests.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import apsw
import apsw.bestpractice

from arbiter._time import now_us
from arbiter.errors import SchemaTooNew

Synchronous = Literal["FULL", "NORMAL"]

ENTRY_TYPES_SQL = "('user','feedback','project','reference','learning','context')"
RELATION_TYPES_SQL = "('relates_to','refines','contradicts','supersedes','supports')"

# Ordered, named, append-only. Each runs in its own transaction and is recorded
# in schema_version; never edit a step that has shipped, add a new one.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_initial",
        f"""
        CREATE TABLE tenants(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            token_hash BLOB NOT NULL UNIQUE,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE conversations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            title TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX conversations_tenant ON conversations(tenant_id, id);
        CREATE TABLE entries(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            type TEXT NOT NULL CHECK (type IN {ENTRY_TYPES_SQL}),
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            conversation_id INTEGER REFERENCES conversations(id),
            parent_id INTEGER REFERENCES entries(id) ON DELETE SET NULL,
            content_hash BLOB NOT NULL,
            recorded_at INTEGER NOT NULL,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER
        );
        CREATE INDEX entries_tenant ON entries(tenant_id, id);
        CREATE INDEX entries_conversation ON entries(conversation_id) WHERE conversation_id IS NOT NULL;
        CREATE INDEX entries_parent ON entries(parent_id) WHERE parent_id IS NOT NULL;
        CREATE TABLE relations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            source_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN {RELATION_TYPES_SQL}),
            created_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        CREATE INDEX relations_target ON relations(target_id, relation);
        CREATE TABLE settings(key TEXT PRIMARY KEY, value BLOB NOT NULL);
        """,
    ),
    (
        "m002_fts_entries",
        """
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, content, tags, source,
            content='entries', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
        END;
        CREATE TRIGGER entries_fts_update AFTER UPDATE OF title, content, tags, source ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        """,
    ),
]


def connect(
    path: str | os.PathLike,
    *,
    busy_timeout_ms: int = 5000,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
) -> apsw.Connection:
    """Open a connection with Arbiter's settings.

    `synchronous=FULL` (the default) makes every acknowledged write survive a
    power cut; NORMAL is faster per commit but the last transactions before an
    OS crash may roll back (never corrupt). A daemon `kill -9` is safe either way.
    """
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if readonly:
        flags = apsw.SQLITE_OPEN_READONLY
    conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(busy_timeout_ms)
    if not readonly:
        apsw.bestpractice.connection_wal(conn)
    apsw.bestpractice.connection_enable_foreign_keys(conn)
    apsw.bestpractice.connection_dqs(conn)
    apsw.bestpractice.connection_recursive_triggers(conn)
    conn.pragma("synchronous", synchronous)
    return conn


def schema_version(conn: apsw.Connection) -> int:
    """The number of migrations applied (0 for a new file)."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name='schema_version'").fetchone()
    if not has:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(conn: apsw.Connection) -> int:
    """Apply pending migrations, each in its own transaction; return the version."""
    current = schema_version(conn)
    if current > len(MIGRATIONS):
        raise SchemaTooNew(
            f"database schema version {current} is newer than this Arbiter knows "
            f"({len(MIGRATIONS)}); upgrade Arbiter to open it"
        )
    with conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
    for version, (name, sql) in enumerate(MIGRATIONS[current:], start=current + 1):
        with conn:
            conn.execute(sql)
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, now_us()),
            )
    return len(MIGRATIONS)


def open_database(path: str | os.PathLike, **settings) -> apsw.Connection:
    """Connect and migrate: the writer's way in."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = connect(path, **settings)
    migrate(conn)
    return conn
