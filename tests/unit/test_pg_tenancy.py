"""Every tenant's table can be distributed by tenant under Citus, and every statement the PostgreSQL engine sends
stays on one tenant's node (issue #31, "Scale out by tenant"). The suite checks each test's statements
(tests/conftest.py `routed_to_one_tenant`, on the core verbs' script in test_verbs among the rest); here, that
the check finds a statement that fans out, and the keys Citus needs, read from the migrated schema."""

from __future__ import annotations

import psycopg
import pytest

from arbiter.facts import store as facts_store
from arbiter.store import open_database
from arbiter.store.pg.connection import Connection
from tests.tenancy import REFERENCE, Checker


def test_the_check_names_where_arbiter_sent_a_statement_that_fans_out_and_passes_over_a_tests_own(
        pg_url, monkeypatch):
    checker = Checker()
    monkeypatch.setattr(Connection, "trace", staticmethod(checker))
    conn = open_database(pg_url)
    try:
        facts_store._counts(conn, "batch_id = ?", (1,))  # the shape a batch's counts had before they named the tenant
        conn.execute("SELECT count(*) FROM facts").fetchone()  # a test's own look: not the engine's statement
    finally:
        conn.close()
    assert [(why, where.split(":")[0]) for _, why, where in checker.problems] == [
        (["facts without a tenant filter"], "facts/store.py")]


@pytest.fixture
def catalog(pg_url):
    with psycopg.connect(pg_url) as conn:
        yield conn


def _distributed(catalog) -> set[str]:
    return {t for (t,) in catalog.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
    )} - REFERENCE


def test_every_table_outside_the_directory_carries_tenant_id(catalog):
    lacking = [t for (t,) in catalog.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
        "AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id')"
    ) if t not in REFERENCE]
    assert lacking == []


def test_every_key_of_a_distributed_table_leads_with_tenant_id(catalog):
    """What create_distributed_table(t, 'tenant_id') refuses: a primary or unique key (constraint or index)
    without the distribution column."""
    distributed = _distributed(catalog)
    keys = catalog.execute(
        "SELECT t.relname, i.relname, (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = t.oid "
        "AND a.attnum = x.indkey[0]) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "JOIN pg_class t ON t.oid = x.indrelid WHERE t.relnamespace = current_schema()::regnamespace "
        "AND x.indisunique"
    ).fetchall()
    assert len([k for k in keys if k[0] in distributed]) > 30  # the keys were read
    assert [(t, index, first) for t, index, first in keys if t in distributed and first != "tenant_id"] == []


def test_every_foreign_key_between_distributed_tables_carries_tenant_id(catalog):
    """Citus accepts a foreign key between two distributed tables only if both sides hold the distribution
    column, in the same place."""
    distributed = _distributed(catalog)
    rows = catalog.execute(
        "SELECT c.conname, s.relname, t.relname, "
        "(SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(c.conkey) WITH ORDINALITY k(num, n) "
        " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.num), "
        "(SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(c.confkey) WITH ORDINALITY k(num, n) "
        " JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.num) "
        "FROM pg_constraint c JOIN pg_class s ON s.oid = c.conrelid JOIN pg_class t ON t.oid = c.confrelid "
        "WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace"
    ).fetchall()
    between = [r for r in rows if r[1] in distributed and r[2] in distributed]
    assert len(between) > 20  # entries' children, entities', facts'
    assert [(name, child, mine, theirs) for name, child, _, mine, theirs in between
            if mine[0] != "tenant_id" or theirs[0] != "tenant_id"] == []
    # A reference table never points into a distributed one (Citus refuses it).
    assert [name for name, child, parent, _, _ in rows if child in REFERENCE and parent in distributed] == []
