"""arbiter.server's writer transaction on a real SQLite file (the daemon itself: tests/integration/test_daemon.py)."""

from __future__ import annotations

import apsw
import msgspec
import pytest

from arbiter.server import IDLE_CHECKPOINT_PAGES, Daemon, writer_settings
from arbiter.server.runner import Caller, Runner, disk_full, transaction, upkeep
from arbiter.verb import Verb
from tests.conftest import fill
from arbiter.store import open_database


@pytest.fixture
def table(db):
    """A table of 400 rows of ~1 KB (50 pages) whose updates fire a trigger, as an entry's insert does."""
    db.execute(
        "CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT NOT NULL); CREATE TABLE t_log(k INTEGER);"
        "CREATE TRIGGER t_logged AFTER UPDATE ON t BEGIN INSERT INTO t_log VALUES (new.k); END;"
    )
    with db:
        db.executemany("INSERT INTO t(k, v) VALUES (?, ?)", [(k, f"row {k} " + "x" * 1000) for k in range(1, 401)])
    return db


@pytest.mark.parametrize("small", [False, True])
def test_a_failed_statement_is_undone_alone_whichever_journal(table, small):
    # The statement changes every row (far more than SQLite's 64 KiB of in-memory journal) and fails at
    # the last: its statement journal, in memory for a small write, must undo it all and only it.
    with transaction(table, write=True, small=small):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'kept')")
        with pytest.raises(apsw.ConstraintError):
            table.execute("UPDATE t SET v = CASE WHEN k = 400 THEN NULL ELSE upper(v) END WHERE k > 0")
    assert table.execute("SELECT v FROM t WHERE k = 0").fetchone() == ("kept",)
    assert table.execute("SELECT count(*) FROM t WHERE v <> lower(v)").fetchone() == (0,)
    assert table.execute("SELECT count(*) FROM t_log").fetchone() == (0,)


def test_a_small_write_leaves_the_writer_journaling_to_a_file(table):
    # Bulk writes and idle upkeep after it must spill their statement journals again, not hold them in memory.
    with transaction(table, write=True, small=True):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'kept')")
    assert table.pragma("temp_store") == 0
    with pytest.raises(apsw.ConstraintError), transaction(table, write=True, small=True):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'twice')")
    assert table.pragma("temp_store") == 0
    assert table.execute("SELECT v FROM t WHERE k = 0").fetchone() == ("kept",)


def test_the_idle_checkpoint_leaves_a_small_wal_until_it_grows_or_the_disk_fills(tmp_path):
    # Each checkpoint resets the WAL, and the next commit pays a second fsync for a new header: a few
    # single writes' pages stay in the WAL until there are IDLE_CHECKPOINT_PAGES of them.
    d = Daemon(home=tmp_path, db_path=tmp_path / "arbiter.db", socket_path=tmp_path / "arbiter.sock")
    d._writer = open_database(d.db_path)
    writer_settings(d._writer)
    d._idle_checkpoint_bytes = IDLE_CHECKPOINT_PAGES * (d._writer.pragma("page_size") + 24)
    wal = tmp_path / "arbiter.db-wal"
    try:
        with transaction(d._writer, write=True):
            d._writer.execute("CREATE TABLE t(v)")
            d._writer.execute("INSERT INTO t VALUES ('small')")
        size = wal.stat().st_size
        assert d._checkpoint() and wal.stat().st_size == size > 0
        d.disk.since_checkpoint = True  # a write failed for a full disk: the space goes back at once
        assert d._checkpoint() and wal.stat().st_size == 0 and not d.disk.since_checkpoint
        for n in range(IDLE_CHECKPOINT_PAGES // 100 + 1):  # ~100 pages a transaction
            with transaction(d._writer, write=True):
                d._writer.executemany("INSERT INTO t VALUES (randomblob(800))", [()] * 1000)
        assert wal.stat().st_size >= d._idle_checkpoint_bytes
        assert d._checkpoint() and wal.stat().st_size == 0
        assert d._writer.execute("SELECT count(*) FROM t").fetchone() == (1 + 1000 * (n + 1),)
    finally:
        d._writer.close()


def test_a_full_disk_under_a_savepoint_is_a_full_disk_and_leaves_no_transaction(small_disk):
    # SQLite answers SQLITE_FULL in a page spill by rolling the whole transaction back: the verb's own
    # savepoint (`with conn`) then fails on its way out, and apsw raises that failure, not the FullError.
    conn = open_database(small_disk / "arbiter.db")
    writer_settings(conn)
    runner = Runner(conn, lambda lane: conn)
    conn.execute("CREATE TABLE t(v)")

    def bulk(ctx, params):
        with ctx.conn:
            ctx.conn.executemany("INSERT INTO t VALUES (randomblob(1000))", [()] * params.rows)

    class Rows(msgspec.Struct):
        rows: int

    verb = Verb(Rows, bulk, writes=True)
    try:
        fill(small_disk / "filler")
        for rows in (1, 3000):  # one row fails at the commit; thousands fail in a spill, under the savepoint
            with pytest.raises(apsw.Error) as failed:
                runner.execute(verb, Rows(rows), Caller(1, "t", None))
            assert disk_full(failed.value) and not conn.in_transaction
        (small_disk / "filler").unlink()
        runner.execute(verb, Rows(10), Caller(1, "t", None))
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (10,)
    finally:
        conn.close()


def test_upkeep_raises_a_full_disk_as_one(small_disk):
    conn = open_database(small_disk / "arbiter.db")
    writer_settings(conn)
    conn.execute("CREATE TABLE t(v)")
    try:
        fill(small_disk / "filler")
        with pytest.raises(apsw.FullError), upkeep(conn):  # `with conn` raised the savepoint's SQLError
            conn.executemany("INSERT INTO t VALUES (randomblob(1000))", [()] * 3000)
        assert not conn.in_transaction
    finally:
        conn.close()
