"""Spreading an Arbiter database over a Citus cluster by tenant (docs/architecture.md, "Scale out by tenant").

The directory every request reads (tenants, users, teams, memberships,
scopes, settings, the schema's version) becomes reference tables, copied to
every node; every other table holds one tenant's rows under `tenant_id` and
is distributed by it, colocated with `entries`, so a verb's statements, each
naming its tenant, run on the one node holding that tenant. Which table is
which is read from the catalog, so a table a later schema step adds is
placed without a list to edit here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from arbiter.errors import InvalidParams
from arbiter.store import engine
from arbiter.store.pg import db

#: The directory: small, read at every request and written rarely, so copied to every node.
DIRECTORY = frozenset({"tenants", "users", "teams", "team_members", "scopes", "settings", "schema_version"})

#: The table the tenants' tables are colocated with (every tenant's table refers to it or joins it).
ANCHOR = "entries"


@dataclass
class Placed:
    """What `distribute` did: the tables it made reference and distributed tables now (those already placed are
    left as they are), the Citus version and the worker nodes the cluster has."""

    citus: str
    reference: list[str] = field(default_factory=list)
    distributed: list[str] = field(default_factory=list)
    workers: int = 0


def citus_version(conn) -> str | None:
    """The Citus extension's version in this database (None: not installed)."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
    return row[0] if row else None


def _tables(conn) -> dict[str, bool]:
    """Arbiter's tables in the current schema -> whether it has a tenant_id column."""
    return dict(conn.execute(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' "
        "AND NOT a.attisdropped) FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname").fetchall())


def _placed(conn) -> set[str]:
    return {name for (name,) in conn.execute(
        "SELECT c.relname FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace")}


def _foreign_keys(conn) -> list[tuple[str, str, str, str]]:
    """Every foreign key of Arbiter's tables: (table, name, definition, the table it refers to)."""
    return conn.execute(
        "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid), p.relname FROM pg_constraint k "
        "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid WHERE k.contype = 'f' "
        "AND c.relnamespace = current_schema()::regnamespace ORDER BY c.relname, k.conname").fetchall()


def layout(conn) -> tuple[list[str], list[str]]:
    """The reference tables and the distributed tables (the anchor first)."""
    tables = _tables(conn)
    # A table without tenant_id holds no one tenant's rows: it is the whole database's, so copied like the directory.
    reference = [t for t in tables if t in DIRECTORY or not tables[t]]
    distributed = sorted((t for t in tables if t not in reference), key=lambda t: (t != ANCHOR, t))
    return reference, distributed


def require_citus(conn) -> str:
    """The Citus version of the database `conn` is on; InvalidParams if it has none (nothing is written)."""
    version = citus_version(conn) if engine.is_postgresql(conn) else None
    if version is None:
        raise InvalidParams(
            "this database has no Citus extension: create it on the coordinator and every worker (CREATE "
            "EXTENSION citus) and add the workers (SELECT citus_add_node(...)) first; a plain PostgreSQL database "
            "needs no distributing", path="db")
    return version


def distribute(url: str, *, say: Callable[[str], None] = lambda _: None) -> Placed:
    """Set up (or upgrade) the Arbiter database at `url` on a Citus coordinator and place its tables as the
    layout says; a database without Citus is refused before anything is written."""
    conn = db.connect(url)
    try:
        require_citus(conn)
    finally:
        conn.close()
    conn = db.open_database(url, say=say)
    try:
        return place(conn, say=say)
    finally:
        conn.close()


def place(conn, *, say: Callable[[str], None] = lambda _: None) -> Placed:
    """Make a migrated Arbiter database on a Citus coordinator hold its tables as the layout places them; tables
    already placed are left alone, so running it again after a schema step places only the new ones."""
    require_citus(conn)
    workers = conn.execute("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND isactive "
                           "AND groupid <> 0").fetchone()[0]
    reference, distributed = layout(conn)
    placed = _placed(conn)
    done = Placed(citus=citus_version(conn), workers=workers)
    # Citus places a table only after those it refers to, and makes a plain table that refers to a new reference
    # table a "Citus local" one, which it then cannot distribute while it has an identity column (every id here).
    # So the foreign keys that touch a table still to place are set aside and made again once all are placed
    # (each is one Citus enforces: p005_tenant_keys), and the order of placing stops mattering.
    waiting = {t for t in reference + distributed if t not in placed}
    keys = [k for k in _foreign_keys(conn) if k[0] in waiting or k[3] in waiting]
    # Citus copies the rows a table already holds (an `arbiter migrate` into this database) into its shards, and the
    # shards' triggers would fire as for new writes (and fail on a table not placed yet): the copy is no write, so
    # the enabled triggers of the tables to place are disabled for it (Citus gives the shards the same state) and
    # enabled again after.
    triggers = [(table, name) for table, name in conn.execute(
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE NOT t.tgisinternal AND t.tgenabled = 'O' AND c.relnamespace = current_schema()::regnamespace "
        "ORDER BY c.relname, t.tgname") if table in waiting]
    with conn:
        # The tables' triggers keep a tenant's derived rows (revisions, the tag graph, the full-text queue) in the
        # same tenant's other tables: on a colocated shard, the same node, which is what Citus calls unsafe triggers
        # (it cannot prove the colocation). Citus refuses to distribute a table with triggers, and a later schema step
        # to create one on it, without this setting; set for the database, it holds for `arbiter serve`'s migrations.
        database = conn.execute("SELECT current_database()").fetchone()[0].replace('"', '""')
        conn.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        conn.execute(f'ALTER DATABASE "{database}" SET citus.enable_unsafe_triggers = on')
        # A foreign key to a reference table makes Citus use one connection per node for the rest of the
        # transaction; saying so first spares it refusing the keys made again after parallel work.
        conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        for table, name, _, _ in keys:
            conn.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
        for table, name in triggers:
            conn.execute(f'ALTER TABLE "{table}" DISABLE TRIGGER "{name}"')
        for table in reference:
            if table not in placed:
                say(f"arbiter: {table}: reference table")
                conn.execute("SELECT create_reference_table(?::regclass)", (table,))
                done.reference.append(table)
        for table in distributed:
            if table not in placed:
                say(f"arbiter: {table}: distributed by tenant_id")
                conn.execute("SELECT create_distributed_table(?::regclass, 'tenant_id', colocate_with => ?)",
                             (table, "default" if table == ANCHOR else ANCHOR))
                done.distributed.append(table)
        for table, name in triggers:
            conn.execute(f'ALTER TABLE "{table}" ENABLE TRIGGER "{name}"')
        # The copied rows stay behind in the coordinator's own table, unread: they go.
        for table in done.reference + done.distributed:
            conn.execute("SELECT truncate_local_data_after_distributing_table(?::regclass)", (table,))
        for table, name, definition, _ in keys:
            conn.execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
    return done
