"""tests/tenancy.py, the check that a statement stays on one tenant's node, on statements of known shape."""

from __future__ import annotations

import pytest

from tests.tenancy import fan_outs

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
