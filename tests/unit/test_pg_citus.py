"""Arbiter's Citus layout, on the plain PostgreSQL the suite has (bench/citus.py runs it on a real Citus cluster):
`arbiter distribute` refuses a database without Citus and writes nothing; the schema holds no key action Citus
refuses; and the statements Arbiter sends under Citus give the same answers as its usual ones."""

from __future__ import annotations

import json

import psycopg

from arbiter._time import US
from arbiter.store import open_database, tenants
from arbiter.store.pg import citus
from tests.conftest import arbiter_cli
from tests.unit import test_verbs
from tests.unit.conftest import execute

T0 = 1_800_000_000 * US


def test_distribute_refuses_a_database_without_citus_and_leaves_it_empty(pg_databases, tmp_path):
    url = pg_databases.create(empty=True)
    try:
        proc = arbiter_cli(tmp_path, "distribute", "--db", url, "--json")
        assert proc.returncode == 1
        error = json.loads(proc.stderr)["error"]
        assert (error["data"]["name"], error["data"]["path"]) == ("invalid_params", "db")
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
    finally:
        pg_databases.drop(url)


def test_distribute_takes_no_sqlite_file(tmp_path):
    proc = arbiter_cli(tmp_path, "distribute", "--db", str(tmp_path / "arbiter.db"))
    assert proc.returncode == 2
    assert not (tmp_path / "arbiter.db").exists()


def test_the_layout_copies_the_directory_and_spreads_every_other_table_by_tenant(pg_url):
    conn = open_database(pg_url)
    try:
        reference, distributed = citus.layout(conn)
    finally:
        conn.close()
    assert set(reference) == citus.DIRECTORY
    assert distributed[0] == citus.ANCHOR
    assert {"entries", "fulltext_postings", "derive_queue", "facts", "import_ids"} <= set(distributed)


def test_no_key_between_a_tenants_tables_sets_null_or_a_default_on_delete(pg_url):
    """Citus refuses ON DELETE SET NULL / SET DEFAULT on a foreign key holding the distribution column (it would
    change tenant_id): the replies' key to their parent had one until p009."""
    with psycopg.connect(pg_url) as conn:
        refused = conn.execute(
            "SELECT c.relname, k.conname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
            "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey) "
            "WHERE k.contype = 'f' AND a.attname = 'tenant_id' AND k.confdeltype IN ('n', 'd') "
            "AND c.relnamespace = current_schema()::regnamespace").fetchall()
    assert refused == []


def test_a_reply_outlives_its_deleted_parent_and_a_thread_goes_in_one_statement(pg_url):
    """What the key's SET NULL did, p009's trigger does: a deleted entry's replies stay, without a parent; and a
    statement deleting a parent with its reply (a purge takes its author's replies) is not refused."""
    conn = open_database(pg_url)
    try:
        with conn:
            tenant, _ = tenants.create_tenant(conn, "alice", now=T0)

        def run(step, verb, params):
            return execute(conn, tenant, verb, params, now=T0 + step * US)

        root = run(1, "remember", {"type": "project", "title": "Root", "content": "The root."}).id
        reply = run(2, "reply", {"parent_id": root, "content": "A reply."}).id
        run(3, "reply", {"parent_id": reply, "content": "A reply to the reply."})
        run(4, "purge", {"id": root})  # its author's replies go with it, both in one DELETE
        assert conn.execute("SELECT count(*) FROM entries WHERE tenant_id = ?", (tenant,)).fetchone()[0] == 0
        root = run(5, "remember", {"type": "project", "title": "Root", "content": "Another root."}).id
        reply = run(6, "reply", {"parent_id": root, "content": "Another reply."}).id
        with conn:
            conn.execute("DELETE FROM entries WHERE tenant_id = ? AND id = ?", (tenant, root))
        assert run(7, "get", {"id": reply}).parent_id is None
    finally:
        conn.close()


def test_the_statements_sent_under_citus_answer_as_the_usual_ones(tmp_path, pg_url):
    """Under Citus a write that PostgreSQL takes in one statement with writes in its WITH goes statement by
    statement (`engine.writes_in_with`), and the insert triggers read their rows from arrays (p009, where Citus's
    `citus.version` is set): the core verbs' script gives SQLite's answers that way too."""
    sqlite = open_database(tmp_path / "arbiter.db")
    postgresql = open_database(pg_url)
    postgresql.citus = True
    postgresql.execute("SET citus.version = 'none: plain PostgreSQL standing in'")
    try:
        expected, got = test_verbs._answers(sqlite), test_verbs._answers(postgresql)
    finally:
        sqlite.close()
        postgresql.close()
    assert got == expected


def test_a_users_export_of_a_shared_tenant_is_the_same_on_both_engines(tmp_path, pg_url):
    """Found moving a home into Citus (`arbiter migrate`, then `arbiter distribute`): the export of a tenant of
    several users, as one of them, failed on PostgreSQL at the entity relations' times (an alias of theirs hid the
    entity's row: "column s.created_at does not exist")."""
    sqlite = open_database(tmp_path / "arbiter.db")
    postgresql = open_database(pg_url)
    try:
        test_verbs._answers(sqlite)
        test_verbs._answers(postgresql)
        assert test_verbs._export(postgresql, 1) == test_verbs._export(sqlite, 1)
    finally:
        sqlite.close()
        postgresql.close()


def test_the_tenancy_check_takes_a_correlation_as_a_pin_only_in_a_where():
    """As Citus does (bench/citus.py): a subquery of a WHERE may take its tenant from the row around it; one of a
    SELECT list or an ORDER BY goes to every shard unless it names the tenant itself."""
    from tests.tenancy import fan_outs

    count = "(SELECT count(*) FROM entry_entities l WHERE l.tenant_id = {} AND l.entity_id = x.id)"
    assert fan_outs(f"SELECT x.id, {count.format('x.tenant_id')} FROM entities x WHERE x.tenant_id = 1") == [
        "entry_entities l without a tenant filter"]
    assert fan_outs(f"SELECT x.id FROM entities x WHERE x.tenant_id = 1 ORDER BY {count.format('x.tenant_id')}") == [
        "entry_entities l without a tenant filter"]
    assert fan_outs(f"SELECT x.id, {count.format('1')} FROM entities x WHERE x.tenant_id = 1") == []
    assert fan_outs("SELECT x.id FROM entities x WHERE x.tenant_id = 1 AND EXISTS (SELECT 1 FROM entry_entities l "
                    "WHERE l.tenant_id = x.tenant_id UNION ALL SELECT 1 FROM facts f WHERE f.tenant_id = x.tenant_id)"
                    ) == []
