"""arbiter.server's writer transaction on a real SQLite file (the daemon itself: tests/integration/test_daemon.py)."""

from __future__ import annotations

import apsw
import pytest

from arbiter.server import _transaction


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
    with _transaction(table, write=True, small=small):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'kept')")
        with pytest.raises(apsw.ConstraintError):
            table.execute("UPDATE t SET v = CASE WHEN k = 400 THEN NULL ELSE upper(v) END WHERE k > 0")
    assert table.execute("SELECT v FROM t WHERE k = 0").fetchone() == ("kept",)
    assert table.execute("SELECT count(*) FROM t WHERE v <> lower(v)").fetchone() == (0,)
    assert table.execute("SELECT count(*) FROM t_log").fetchone() == (0,)


def test_a_small_write_leaves_the_writer_journaling_to_a_file(table):
    # Bulk writes and idle upkeep after it must spill their statement journals again, not hold them in memory.
    with _transaction(table, write=True, small=True):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'kept')")
    assert table.pragma("temp_store") == 0
    with pytest.raises(apsw.ConstraintError), _transaction(table, write=True, small=True):
        table.execute("INSERT INTO t(k, v) VALUES (0, 'twice')")
    assert table.pragma("temp_store") == 0
    assert table.execute("SELECT v FROM t WHERE k = 0").fetchone() == ("kept",)
