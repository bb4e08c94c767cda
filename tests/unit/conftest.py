"""Fixtures for tests that drive the store directly: a real, migrated SQLite file."""

from __future__ import annotations

import msgspec
import pytest

from arbiter import verbs
from arbiter._time import US
from arbiter.server.runner import Caller, Runner
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


def execute(db, tenant: int, verb: str, params, *, now: int, user_id: int | None = None, tenant_name: str = "alice"):
    """Run `verb` with `params` (a dict or its Struct) as the daemon does, every phase (prepare, its transaction,
    after, committed, finish) through `Runner.execute`, at the instant `now`, as `user_id` (None: the first user)."""
    spec = verbs.VERBS[verb]
    if isinstance(params, dict):
        params = msgspec.convert(params, spec.params)
    return Runner(db, lambda lane: db, clock=lambda: now).execute(spec, params, Caller(tenant, tenant_name, user_id))
