"""Fixtures for tests that drive the store directly: a real, migrated SQLite file."""

from __future__ import annotations

import msgspec
import pytest

from arbiter import verbs
from arbiter._time import US
from arbiter.server.runner import Caller, Runner
from arbiter.store import open_database, tenants
from tests.conftest import new_sqlite

TENANT_CREATED = 1795168800 * US  # 2026-11-20T10:00:00Z


def pytest_generate_tests(metafunc):
    """`db` is a SQLite file, and also a PostgreSQL database for a test marked `both_engines` (a module says so
    for all its tests with `pytestmark`, once they pass on PostgreSQL). A test in such a module marked
    `sqlite_only("why")` shows its PostgreSQL run as skipped, with the reason (what it waits for). A test that
    parametrizes `db` itself (indirect) says which engine runs which of its cases."""
    def names(argnames) -> list[str]:
        return [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)

    own = any("db" in names(m.args[0]) for m in metafunc.definition.iter_markers("parametrize"))
    if "db" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_engines") and not own:
        waits = metafunc.definition.get_closest_marker("sqlite_only")
        postgresql = pytest.param("postgresql", marks=pytest.mark.skip(reason=waits.args[0])) if waits else "postgresql"
        metafunc.parametrize("db", ["sqlite", postgresql], indirect=True)


@pytest.fixture
def db(request, tmp_path):
    """A new, migrated store: a SQLite file, or a PostgreSQL database (function scope; some modules override it
    with a shared one). `sqlite_db` is for tests of what only the SQLite engine has."""
    engine = getattr(request, "param", "sqlite")
    conn = new_sqlite(tmp_path / "arbiter.db") if engine == "sqlite" else open_database(request.getfixturevalue("pg_url"))
    yield conn
    conn.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def shared_db(request, tmp_path_factory):
    """One store that a module's tests share (property tests that write new tenants each example), on each
    engine in turn."""
    if request.param == "sqlite":
        conn = new_sqlite(tmp_path_factory.mktemp("shared") / "arbiter.db", synchronous="NORMAL")
        yield conn
        conn.close()
        return
    databases = request.getfixturevalue("pg_databases")
    url = databases.create()
    conn = open_database(url)
    yield conn
    conn.close()
    databases.drop(url)


@pytest.fixture
def sqlite_db(tmp_path):
    """A new, migrated SQLite file: for tests of what only the SQLite engine has (FTS5 tables, the file)."""
    conn = new_sqlite(tmp_path / "arbiter.db")
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
