"""Backups on files, without a daemon: what the daemon's writer thread runs, one step at a time."""

from __future__ import annotations

import apsw
import pytest

from arbiter.backup import core
from arbiter.errors import Conflict, InvalidParams


def _run(steps):
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return done.value


def test_a_second_backup_to_the_same_file_while_the_first_runs_is_refused(tmp_path):
    """It deleted the first's .partial under it: both ended in internal errors (ReadOnlyError, IOError), no file."""
    source = apsw.Connection(str(tmp_path / "source.db"))
    source.execute("CREATE TABLE t(x)")
    with source:
        source.executemany("INSERT INTO t VALUES (randomblob(2000))", [()] * 200)
    dest = tmp_path / "b.db"
    first = core.create(source, dest, step_pages=1)
    next(first)  # one page copied, the rest to come
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    for same in (dest, tmp_path / "sub" / ".." / "b.db", tmp_path / "link" / "b.db"):  # one file, however named
        with pytest.raises(Conflict):
            next(core.create(source, same, step_pages=1))
    done = _run(first)
    assert done.path == str(dest) and done.steps > 1
    copy = apsw.Connection(str(dest))
    assert copy.execute("SELECT count(*) FROM t").fetchone()[0] == 200
    copy.close()
    (tmp_path / "b.db").unlink()
    _run(core.create(source, dest, step_pages=64))  # the name is free again once the first is done
    source.close()


def test_a_backup_into_a_missing_folder_says_it_does_not_exist_and_how_to_make_it(tmp_path):
    source = apsw.Connection(str(tmp_path / "source.db"))
    missing, a_file = tmp_path / "no such folder", tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(InvalidParams) as err:
        next(core.create(source, missing / "b.db"))
    assert f"{missing} does not exist" in str(err.value) and f"mkdir -p '{missing}'" in str(err.value)
    with pytest.raises(InvalidParams) as err:
        next(core.create(source, a_file / "b.db"))
    assert f"{a_file} is not a folder" in str(err.value) and err.value.path == "path"
    assert not missing.exists() and a_file.read_text() == ""
    source.close()


def test_verify_of_a_missing_file_says_there_is_no_such_file(tmp_path):
    with pytest.raises(InvalidParams) as err:
        core.verify(tmp_path / "gone.db")
    assert str(err.value) == f"no such file: {tmp_path / 'gone.db'}" and err.value.path == "path"
    with pytest.raises(InvalidParams) as err:
        core.verify(tmp_path)
    assert str(err.value) == f"{tmp_path} is not a file"


def test_a_backup_is_synced_then_named_then_its_folder_synced(tmp_path, syncs):
    """Once create returns, a power cut must find the whole copy under its name (the folder holds the rename)."""
    source = apsw.Connection(str(tmp_path / "source.db"))
    source.execute("CREATE TABLE t(x)")
    dest = tmp_path / "b.db"
    _run(core.create(source, dest, step_pages=64))
    source.close()
    assert syncs[-3:] == [("file", f"{dest}.partial"), ("rename", str(dest)), ("folder", str(tmp_path))]
