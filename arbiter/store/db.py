"""The one connection factory, and `migrate`, which applies the steps of `arbiter.store.migrations`.

Every connection (daemon writer, daemon readers, tests, bench) comes from
`connect`, so pragmas cannot drift between production and tests.
"""

from __future__ import annotations

import contextlib

import os
import re
from pathlib import Path
from typing import Callable, Literal

import apsw

from arbiter._time import now_us
from arbiter.errors import InvalidParams, SchemaTooNew
from arbiter.store import engine, text
from arbiter.store.migrations import MIGRATIONS

Synchronous = Literal["FULL", "NORMAL"]

BUSY_TIMEOUT_MS = 5000
# The WAL is cut back to this size whenever it restarts. Without a limit it
# keeps its largest size for good (a bulk load leaves tens of MB), which is
# space a full disk never gets back.
JOURNAL_SIZE_LIMIT = 8 * 1024 * 1024

#: Cardinal number words that count as a figure in `recall_entries.numerals`
#: (bit 2). Measured on the LongMemEval dev split: +2 R@1 with the quantity
#: cue; with "one" added, -2 (docs/retrieval.md).
NUMBER_WORDS = (
    "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million dozen"
).split()

_DIGIT = re.compile(r"[0-9]")
_NUMBER_WORDS = frozenset(NUMBER_WORDS)
# Punctuation that can touch a word ("two-thirds", "(five)", "ten,") becomes a space.
_BREAKS = str.maketrans({c: " " for c in ",.-!?;:()\"/'"})


def numerals(text: str | None) -> int:
    """`recall_entries.numerals` of a text: 1 if it holds a digit, else 2 if a number word, else 0.

    A Python function registered on every connection (`connect`): one pass
    of string operations instead of a dozen nested replace() and thirty
    instr() scans in SQL.
    """
    if not text:
        return 0
    if _DIGIT.search(text):
        return 1
    return 0 if _NUMBER_WORDS.isdisjoint(text.lower().translate(_BREAKS).split()) else 2


# Migrations after which an existing file is rebuilt with VACUUM (a new one has nothing to compact).
# m023 rewrites every entries row: the rows shrink in place, leaving their
# pages part empty (none free, so idle upkeep's incremental vacuum cannot
# give them back): on bench.load's 250K file the migration alone took it from
# 2.23x to 2.83x of its text, the VACUUM after it to 1.74x (the two 17.2 s;
# docs/benchmarks.md, "Size"). While it runs it needs free disk for a
# temporary copy of the compacted file (in SQLite's temporary directory:
# SQLITE_TMPDIR, else /var/tmp or /tmp) and as much again for the WAL it
# copies back through, next to the file. The migration leaves a mark in `settings` in its
# own transaction, so a VACUUM the disk cannot hold (or a crash before it) is
# tried again at the next start instead of being forgotten or stopping one.
_VACUUM_AFTER = {"m023_compressed_text"}
_VACUUM_PENDING = "vacuum_pending"


#: Page size of a new database file (bytes).
PAGE_SIZE = 8192


def connect(
    path: str | os.PathLike,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    synchronous: Synchronous = "FULL",
    readonly: bool = False,
) -> apsw.Connection:
    """Open a connection with Arbiter's settings.

    A URL connects to PostgreSQL instead (store/pg/db.py; the SQLite settings mean nothing there).
    `synchronous=FULL` (the default) makes every acknowledged write survive a
    power cut; NORMAL is faster per commit but the last transactions before an
    OS crash may roll back (never corrupt). A daemon `kill -9` is safe either way.
    """
    if engine.is_url(path):
        from arbiter.store.pg import db as pg

        return pg.connect(str(path))
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if readonly:
        flags = apsw.SQLITE_OPEN_READONLY
    conn = apsw.Connection(str(path), flags=flags)
    conn.set_busy_timeout(busy_timeout_ms)
    if not readonly and conn.pragma("page_count") == 0:
        # A new file: both settings are fixed once the first table exists.
        # 8 KiB pages leave less unused space in each page; incremental
        # auto-vacuum lets idle upkeep give back the pages that index merging
        # frees (recall.maintain.compact). docs/benchmarks.md has the sizes.
        conn.pragma("page_size", PAGE_SIZE)
        conn.pragma("auto_vacuum", "INCREMENTAL")
    # apsw.bestpractice's connection settings, spelled out: importing that
    # module pulls in apsw.ext, 4.4 MB of daemon RSS for four pragmas.
    if not readonly:
        conn.pragma("journal_mode", "wal")
        conn.pragma("journal_size_limit", JOURNAL_SIZE_LIMIT)
    conn.pragma("foreign_keys", "ON")
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)  # double quotes are identifiers, never strings
    conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    conn.pragma("recursive_triggers", "ON")
    conn.pragma("synchronous", synchronous)
    # Used by the recall_entries triggers (m004), so every connection that may write needs it.
    conn.create_scalar_function("arbiter_numerals", numerals, 1, deterministic=True)
    # What the generated `content` columns read (m023): every connection that reads an entry's text needs it.
    text.register(conn)
    from arbiter.salience import sql_salience  # salience imports the model, which needs no store

    conn.create_scalar_function("arbiter_salience", sql_salience, 8, deterministic=True)
    from arbiter import duplicates  # what the entries triggers call (m027); it needs only the store's Viewer

    duplicates.register(conn)
    return conn


def schema_version(conn: apsw.Connection) -> int:
    """The number of migrations applied (0 for a new file), or of PostgreSQL's schema steps."""
    if engine.is_postgresql(conn):
        from arbiter.store.pg import db as pg

        return pg.schema_version(conn)
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE name='schema_version'").fetchone()
    if not has:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(conn: apsw.Connection, *, say: Callable[[str], None] = lambda _: None) -> int:
    """Apply pending migrations, each in its own transaction, then any compaction they asked for; return the version.

    `say` hears about the long step (compaction), to pass on to whoever waits.
    """
    current = schema_version(conn)
    if current > len(MIGRATIONS):
        raise SchemaTooNew(
            f"database schema version {current} is newer than this Arbiter knows "
            f"({len(MIGRATIONS)}); upgrade Arbiter to open it"
        )
    # A new file takes every step in one transaction (a step's own is then a savepoint): one sync rather than one
    # a step, half the time of a first start, and never a half-made file. An upgrade commits step by step, so a
    # long one interrupted keeps the steps it finished.
    with conn if current == 0 else contextlib.nullcontext():
        with conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
            )
        for version, (name, sql) in enumerate(MIGRATIONS[current:], start=current + 1):
            with conn:
                if callable(sql):
                    sql(conn)
                else:
                    conn.execute(sql)
                conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, now_us()),
                )
                if current and name in _VACUUM_AFTER:
                    conn.execute("INSERT OR REPLACE INTO settings(key, value) VALUES (?, 1)", (_VACUUM_PENDING,))
    _compact_if_pending(conn, say)
    return len(MIGRATIONS)


def _compact_if_pending(conn: apsw.Connection, say: Callable[[str], None]) -> None:
    if not conn.execute("SELECT 1 FROM settings WHERE key = ?", (_VACUUM_PENDING,)).fetchone():
        return
    say("arbiter: compacting the database after its upgrade (once; it needs free disk up to twice the size of "
        "the file, half of it in the temporary directory)")
    # A file made before incremental auto-vacuum (connect) gets it in the same rebuild: a VACUUM is the only way
    # to switch it on, and idle upkeep's incremental_vacuum gives back nothing without it. (The page size cannot
    # change in WAL mode.)
    try:
        conn.pragma("auto_vacuum", "INCREMENTAL")
        conn.execute("VACUUM")  # outside any transaction, as VACUUM must be
    except apsw.FullError:
        # The file works as it is, only larger: a full disk must not keep the daemon from starting.
        say("arbiter: too little free disk to compact the database; it works as it is, and the next start tries again")
        return
    with conn:
        conn.execute("DELETE FROM settings WHERE key = ?", (_VACUUM_PENDING,))


def open_database(
    path: str | os.PathLike, *, say: Callable[[str], None] = lambda _: None, **settings
) -> apsw.Connection:
    """Connect and migrate: the writer's way in (`say`: as `migrate`); a URL opens PostgreSQL (store/pg/db.py)."""
    if engine.is_url(path):
        from arbiter.store.pg import db as pg  # only a PostgreSQL store loads psycopg

        return pg.open_database(str(path), say=say)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        _refuse_foreign(path)
        conn = connect(path, **settings)
    except (apsw.NotADBError, apsw.CantOpenError) as e:  # `serve --db` given a folder or another kind of file
        raise InvalidParams(f"cannot open {path} as a database: {str(e).partition(': ')[2] or e}") \
            from None
    migrate(conn, say=say)
    return conn


def _refuse_foreign(path: str | os.PathLike) -> None:
    """Refuse another program's SQLite file before touching it: connecting turns on WAL, migrating adds our tables."""
    if not Path(path).is_file() or Path(path).stat().st_size == 0:
        return
    probe = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = [r[0] for r in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    finally:
        probe.close()
    if tables and "schema_version" not in tables:
        raise InvalidParams(
            f"{path} is another program's SQLite database (tables: {', '.join(tables[:3])}"
            f"{', ...' if len(tables) > 3 else ''}): Arbiter adds its schema only to a new file or one of its own"
        )
