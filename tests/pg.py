"""Throwaway PostgreSQL databases for tests, on the cluster named by ARBITER_TEST_PG.

`.ci/run` starts a cluster (initdb in a temporary folder, unix socket only)
and sets ARBITER_TEST_PG to a URL of it; locally, point it at any cluster
where the user may CREATE DATABASE. Each test gets a fresh database copied
from a migrated template, so no test sees another's rows.
"""

from __future__ import annotations

import itertools
import os
import urllib.parse

import psycopg
from psycopg.conninfo import conninfo_to_dict

ENV = "ARBITER_TEST_PG"
_counter = itertools.count()


def admin_url() -> str | None:
    return os.environ.get(ENV) or None


def url_of(admin: str, dbname: str) -> str:
    """A `postgresql://` URL for `dbname` on the admin URL's cluster."""
    parts = conninfo_to_dict(admin)
    query = {k: v for k, v in parts.items() if k not in ("dbname", "host", "port", "user", "password")}
    if parts.get("host", "").startswith("/"):
        query["host"] = parts["host"]
        netloc = ""
    else:
        netloc = parts.get("host", "") + (f":{parts['port']}" if parts.get("port") else "")
    if parts.get("user"):
        netloc = urllib.parse.quote(parts["user"]) + (
            ":" + urllib.parse.quote(parts["password"]) if parts.get("password") else "") + "@" + netloc
    if parts.get("port") and "host" in query:
        query["port"] = parts["port"]
    return f"postgresql://{netloc}/{dbname}" + ("?" + urllib.parse.urlencode(query, safe="/") if query else "")


class Databases:
    """Fresh databases for one test process: a template migrated once, copied per test."""

    def __init__(self, admin: str):
        self.admin = admin
        self.prefix = f"arbiter_t{os.getpid()}"
        self.template: str | None = None

    def _run(self, sql: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql)

    def _make_template(self) -> str:
        from arbiter.store import open_database

        name = f"{self.prefix}_template"
        self._run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._run(f'CREATE DATABASE "{name}"')
        open_database(url_of(self.admin, name)).close()
        return name

    def create(self, *, empty: bool = False) -> str:
        """A new database (migrated unless `empty`); its URL."""
        name = f"{self.prefix}_{next(_counter)}"
        if empty:
            self._run(f'CREATE DATABASE "{name}"')
        else:
            self.template = self.template or self._make_template()
            self._run(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return url_of(self.admin, name)

    def drop(self, url: str) -> None:
        name = urllib.parse.urlparse(url).path.lstrip("/")
        self._run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        if self.template:
            self._run(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')


def wait_until_blocked(conn, waiting: int = 1) -> None:
    """Wait until `waiting` sessions of `conn`'s database wait on a lock (another writer's, held by `conn`)."""
    from tests.conftest import wait_for

    wait_for(lambda: conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()[0] == waiting, what=f"{waiting} writer(s) waiting on a lock")
