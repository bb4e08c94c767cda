"""Which engine holds a store: SQLite (the default, an apsw connection) or PostgreSQL (store/pg/).

Code that must say something differently on the two asks `engine(conn)`;
everything else is written once in the SQL both run. This module imports
neither driver, so the SQLite path never loads psycopg.
"""

from __future__ import annotations

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


def engine(conn: object) -> str:
    """The engine of a connection: PostgreSQL's wrapper says so; an apsw connection is SQLite."""
    return getattr(conn, "engine", SQLITE)


def is_postgresql(conn: object) -> bool:
    return engine(conn) == POSTGRESQL


def writes_in_with(conn: object) -> bool:
    """Whether one statement may write several tables through its WITH (one round trip where SQLite takes several):
    PostgreSQL, but not a database Citus spreads over nodes (store/pg/citus.py), which cannot send such a statement
    to one node as a whole: it ran the parts one by one and copied each part's rows to every node first (a remember
    took 0.3-1 s and a two-phase commit on every worker), where the statements one by one go to the tenant's node."""
    return is_postgresql(conn) and not getattr(conn, "citus", False)


def is_url(target: object) -> bool:
    """Whether a `--db` names a PostgreSQL database (a URL) rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def shown(target: object) -> str:
    """A `--db` fit to print, and to give `arbiter serve --db`: a URL without its password (in the user part or
    the query), which a reader asks its owner for or finds in PGPASSFILE."""
    if not is_url(target):
        return str(target)
    import urllib.parse

    url = urllib.parse.urlsplit(str(target))
    netloc = url.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = user.partition(":")[0] + "@" + host
    query = urllib.parse.urlencode([(k, v) for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True)
                                    if k != "password"], safe="/")
    return f"{url.scheme}://{netloc}{url.path}" + (f"?{query}" if query else "")


# Advisory locks Arbiter's own statements take on PostgreSQL: the first key is "AR" in its high half (as the
# daemon's jobs, server/upkeep.py) and what is serialized in its low half; the second key is the tenant.
_LOCK_SPACE = 0x41520000
#: Creating an entity (a name not yet the tenant's): entities/core.py `resolve`.
ENTITY_NAMES = 0x100
#: Judging and applying a batch of facts: facts/gate.py.
FACT_GATE = 0x101


def serialize(conn, what: int, tenant_id: int) -> None:
    """On PostgreSQL, wait for and hold `what`'s lock for `tenant_id` until the caller's transaction ends, where
    several daemons may write one tenant at once; SQLite's one writer needs none."""
    if is_postgresql(conn):
        conn.execute("SELECT pg_advisory_xact_lock(CAST(? AS integer), CAST(? AS integer))",
                     (_LOCK_SPACE + what, tenant_id))


def writing_for(conn, tenant_id: int) -> None:
    """Say that what the connection writes next is `tenant_id`'s (a verb's caller, an idle step's tenant). On
    PostgreSQL, `settle` (store/pg/indexing.py) takes that tenant's full-text queue first, in one statement with the
    queue triggers' note of any other tenant the transaction wrote. On one server the note alone finds them all;
    under Citus the triggers run on the worker holding the tenant's shard, whose session keeps the note, so the
    writer's word is what finds its queue there. SQLite indexes in its triggers: nothing to say."""
    if is_postgresql(conn):
        conn.settled_tenant = tenant_id


def conflict_key(conn: object, columns: str) -> str:
    """The ON CONFLICT target of a table SQLite keys by `columns`: PostgreSQL's key of it leads with tenant_id
    (p005_tenant_keys: Citus needs the distribution column in every key), and a target names its key exactly."""
    return f"tenant_id, {columns}" if is_postgresql(conn) else columns
