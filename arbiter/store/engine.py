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


def is_url(target: object) -> bool:
    """Whether a `--db` names a PostgreSQL database (a URL) rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))
