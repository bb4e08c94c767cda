"""Opening a PostgreSQL store: the URL, the checks before anything is written, and the schema steps."""

from __future__ import annotations

from typing import Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict

from arbiter._time import now_us
from arbiter.errors import InvalidParams, SchemaTooNew, Unavailable
from arbiter.store import engine
from arbiter.store.pg import indexing, migrations
from arbiter.store.pg.connection import Connection

# One number for "this database's schema is being changed": daemons starting at once take turns.
_MIGRATE_LOCK = 0x41524249  # "ARBI"
CONNECT_TIMEOUT_S = 10


def connect(url: str, *, application: str = "arbiter") -> Connection:
    """A connection to the database at `url`, with Arbiter's session settings."""
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as e:
        raise InvalidParams(f"not a PostgreSQL URL Arbiter can use: {str(e).strip()}", path="db") from None
    try:
        pg = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=application)
    except psycopg.OperationalError as e:
        reason = " ".join(line.strip() for line in str(e).splitlines() if line.strip()) or type(e).__name__
        raise Unavailable(f"cannot reach PostgreSQL at {engine.shown(url)}: {reason}") from None
    # Arbiter's instants are integers and its text is compared byte for byte, as on SQLite. In the same round trip:
    # whether Citus runs this database (its catalog is there: `Connection.citus`).
    citus = pg.execute("SELECT set_config('TimeZone', 'UTC', false), "
                       "to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL").fetchone()[1]
    conn = Connection(pg, dsn=url)
    conn.citus = citus
    # Whoever writes through this session, its full text is indexed before each commit (store/pg/indexing.py).
    conn.before_commit.append(indexing.settle)
    return conn


def schema_version(conn: Connection) -> int:
    """The number of steps applied (0 for a database Arbiter has not set up)."""
    if conn.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None:
        return 0
    return conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def _refuse_foreign(conn: Connection, url: str) -> None:
    """Refuse a database that holds another program's tables: Arbiter sets up only an empty one or its own."""
    tables = [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    )]
    if tables and "schema_version" not in tables:
        raise InvalidParams(
            f"{engine.shown(url)} holds another program's tables ({', '.join(tables[:3])}"
            f"{', ...' if len(tables) > 3 else ''}): give Arbiter an empty database or one of its own",
            path="db",
        )


def migrate(conn: Connection, *, say: Callable[[str], None] = lambda _: None) -> int:
    """Apply the pending steps in one transaction under an advisory lock; return the version."""
    steps = migrations.steps()
    with conn:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (_MIGRATE_LOCK,))
        current = schema_version(conn)
        if current > len(steps):
            raise SchemaTooNew(
                f"database schema version {current} is newer than this Arbiter knows ({len(steps)}); "
                "upgrade Arbiter to open it"
            )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)"
        )
        for version, (name, sql) in enumerate(steps[current:], start=current + 1):
            say(f"arbiter: applying schema step {name}")
            conn.execute(sql)
            conn.execute("INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                         (version, name, now_us()))
    return len(steps)


def open_database(url: str, *, say: Callable[[str], None] = lambda _: None, **_settings) -> Connection:
    """Connect, check and migrate: the writer's way in (settings that only mean something to SQLite are ignored)."""
    conn = connect(url)
    try:
        _refuse_foreign(conn, url)
        migrate(conn, say=say)
    except BaseException:
        conn.close()
        raise
    return conn


def refresh_statistics(conn: Connection) -> list[str]:
    """ANALYZE the tables that have more than doubled since the planner last read their size; the names analyzed.

    Autovacuum analyzes a table once a tenth of it changed, but only at its next turn (a minute apart by default),
    and a bulk load into a new database is planned on empty tables' statistics until then: derivation after it
    ran 2-5x slower or faster by that turn alone, and recall's first statements hundreds of milliseconds
    (docs/benchmarks.md). A table's pages now against those its statistics counted is a read of the catalog, not
    of counters that lag; the tables of a few hundred kilobytes that do not matter are left to autovacuum.
    """
    if conn.citus:
        return _refresh_shards(conn)
    analyzed: list[str] = []
    # A table's size and its ANALYZE wait on another session's ACCESS EXCLUSIVE lock (a VACUUM FULL, a schema
    # change), and so would the writer behind them: a locked table is left to the next pass.
    conn.execute("SET lock_timeout = '100ms'")
    try:
        for (name,) in conn.execute(_GROWN, (_STATISTICS_PAGES,)).fetchall():
            conn.execute(f'ANALYZE "{name}"')
            analyzed.append(name)
    except psycopg.errors.LockNotAvailable:
        pass
    finally:
        conn.execute("RESET lock_timeout")
    return analyzed


_STATISTICS_PAGES = 64
_GROWN = ("SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
          "AND pg_relation_size(c.oid) / current_setting('block_size')::bigint > greatest(2 * c.relpages, ?) "
          "ORDER BY c.relname")


def _refresh_shards(conn: Connection) -> list[str]:
    """`refresh_statistics` under Citus: the coordinator holds empty shells of the tenants' tables, their rows are
    in shards on the workers (`name_<shard id>`), so each worker is asked which of its shards grew, and those tables
    are analyzed through the coordinator (every shard of each: Citus sends ANALYZE on). Until then a tenant's
    remember with a derivation backlog took 175-215 ms, 18-41 ms after (docs/benchmarks.md "Citus")."""
    grown: set[str] = set()
    for (names,) in conn.execute(
            "SELECT result FROM run_command_on_workers(?) WHERE success",
            (f"SELECT coalesce(string_agg(DISTINCT regexp_replace(relname, '_[0-9]+$', ''), ','), '') "
             f"FROM ({_GROWN.replace('?', str(_STATISTICS_PAGES))}) g",)):
        grown |= {name for name in names.split(",") if name}
    known = {name for (name,) in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'")}
    if grown & known and conn.in_transaction:
        # An ANALYZE Citus sends to the shards in parallel counts as DDL, after which it refuses the transaction's
        # read of a reference table (the commit's `settle` reads `scopes`): one connection a node keeps both.
        conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
    for name in sorted(grown & known):
        conn.execute(f'ANALYZE "{name}"')
    return sorted(grown & known)
