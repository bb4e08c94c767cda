"""Fixtures for tests that drive the store directly: a real, migrated SQLite file."""

from __future__ import annotations

import pytest

from arbiter._time import US
from arbiter.store import open_database, tenants

TENANT_CREATED = 1795168800 * US  # 2026-11-20T10:00:00Z


@pytest.fixture
def db(tmp_path):
    """A new, migrated database file (function scope; some modules override with a shared one)."""
    conn = open_database(tmp_path / "arbiter.db")
    yield conn
    conn.close()


@pytest.fixture
def tenant(db):
    """The id of a tenant `alice` in `db`."""
    with db:
        return tenants.create_tenant(db, "alice", now=TENANT_CREATED)[0]
