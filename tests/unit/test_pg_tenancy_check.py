"""tests/tenancy.py, the check that a statement stays on one tenant's node, on statements of known shape."""

from __future__ import annotations

import json

import pytest

from tests.tenancy import Checker, excused, fan_outs

ROUTED = [
    "SELECT e.id FROM entries e JOIN relations r ON r.source_id = e.id AND r.tenant_id = e.tenant_id "
    "WHERE e.tenant_id = %s",
    "SELECT e.id FROM entries e WHERE e.tenant_id = %s AND EXISTS "
    "(SELECT 1 FROM relations r WHERE r.source_id = e.id AND r.tenant_id = e.tenant_id)",
    "INSERT INTO entries(tenant_id, title) VALUES (%s, %s)",
    "UPDATE entries SET title = %s WHERE id = %s AND tenant_id = %s",
    "DELETE FROM entries WHERE tenant_id = %s AND id = %s",
    "SELECT id, tenant_id FROM users WHERE token_hash = %s",  # the directory is a reference table
    "WITH RECURSIVE down(id) AS (SELECT %s UNION SELECT r.target_id FROM relations r JOIN down "
    "ON r.source_id = down.id WHERE r.tenant_id = %s) SELECT id FROM down",
    # A set-returning function in FROM is computed where the statement runs; the catalog is every node's own.
    "SELECT value FROM json_each(%s)",
    "SELECT j.value FROM entries x, json_each(x.tags) j WHERE x.tenant_id = %s",
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
    # A CTE whose body is a DELETE ... RETURNING is no table.
    "WITH old AS (DELETE FROM fulltext_postings WHERE tenant_id = %s RETURNING term) "
    "INSERT INTO fulltext_postings (tenant_id, term) SELECT %s, o.term FROM old o",
]

FANNED = [
    ("SELECT scope_id FROM entries WHERE id = %s", "entries without a tenant filter"),
    ("SELECT e.id FROM entries e WHERE e.tenant_id = %s AND EXISTS "
     "(SELECT 1 FROM relations r WHERE r.source_id = e.id)", "relations r without a tenant filter"),
    ("INSERT INTO entries(id, title) VALUES (%s, %s)", "INSERT INTO entries names no tenant_id"),
    ("UPDATE entries SET title = %s WHERE id = %s", "UPDATE entries without a tenant filter"),
    ("SELECT count(*) FROM entries WHERE tenant_id = 3 OR id = 4", "entries without a tenant filter"),
    ("SELECT a.id FROM entries a JOIN entries b ON a.id = b.parent_id WHERE a.tenant_id = %s",
     "entries b without a tenant filter"),
]


@pytest.mark.parametrize("sql", ROUTED)
def test_a_statement_pinned_to_one_tenant_is_routed(sql):
    assert fan_outs(sql) == []


@pytest.mark.parametrize("sql, reason", FANNED)
def test_a_statement_that_would_reach_every_node_is_named(sql, reason):
    assert fan_outs(sql) == [reason]


def test_only_the_named_exceptions_may_reach_every_tenant():
    assert excused("SELECT tenant_id FROM derive_queue WHERE deriver = %s ORDER BY entry_id LIMIT 1")
    assert excused("SELECT t.name, count(e.id) FROM tenants t LEFT JOIN entries e ON e.tenant_id = t.id GROUP BY 1")
    assert excused("SELECT tenant_id FROM derive_queue WHERE entry_id = %s") is None


def test_what_a_daemon_wrote_is_judged_where_it_was_sent_and_a_line_being_written_waits(tmp_path):
    report = tmp_path / "statements.jsonl"
    whole = (json.dumps(["SELECT scope_id FROM entries WHERE id = %s", "store/entries.py:12"]) + "\n"
             + json.dumps(["SELECT 1 FROM entries WHERE id = %s", None]) + "\n")  # a test's own: not judged
    report.write_text(whole + '["UPDATE entries SET title')
    checker = Checker()
    assert checker.read(report, 0) == len(whole.encode())
    assert checker.problems == [("SELECT scope_id FROM entries WHERE id = %s", ["entries without a tenant filter"],
                                 "store/entries.py:12")]
