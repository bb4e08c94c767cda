"""Fixtures for tests that drive the store directly: a real, migrated SQLite file."""

from __future__ import annotations

import pytest

from arbiter._time import US
from arbiter.store import open_database, tenants

TENANT_CREATED = 1795168800 * US  # 2026-11-20T10:00:00Z


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def db(request, tmp_path):
    """A new, migrated store on each engine: a SQLite file, and a PostgreSQL database (function scope; some
    modules override with a shared one, or with `sqlite_db` where the test is about the SQLite file itself)."""
    target = tmp_path / "arbiter.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    conn = open_database(target)
    yield conn
    conn.close()


@pytest.fixture
def sqlite_db(tmp_path):
    """A new, migrated SQLite file: for tests of what only the SQLite engine has (FTS5 tables, the file)."""
    conn = open_database(tmp_path / "arbiter.db")
    yield conn
    conn.close()


@pytest.fixture
def tenant(db):
    """The id of a tenant `alice` in `db`."""
    with db:
        return tenants.create_tenant(db, "alice", now=TENANT_CREATED)[0]
