"""Backups: create through a serving daemon, verify, restore only into a stopped home."""

from __future__ import annotations

import threading

import pytest

from arbiter import paths
from arbiter.backup.core import verify
from arbiter.client import Client
from arbiter.errors import InvalidParams, Unauthorized
from tests.conftest import DaemonProcess
from tests.integration.test_cli import arbiter, fails, js, ok


def _fill(client: Client, n: int, *, prefix: str = "note") -> list[int]:
    entries = [
        {"type": "learning", "title": f"{prefix} {i}", "content": f"{prefix} body {i} " + "x" * 400, "tags": ["t"]}
        for i in range(n)
    ]
    return client.remember_many(entries)


def test_backup_while_writers_write_is_a_consistent_snapshot(daemon, tmp_path):
    with daemon.client() as c:
        _fill(c, 2000)
    stop = threading.Event()
    written: list[int] = []

    def writer():
        with daemon.client() as w:
            while not stop.is_set():
                written.append(w.remember(type="context", title="live", content="during the backup").id)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        with daemon.client(daemon.admin_token) as admin:
            done = admin.backup_create(tmp_path / "b.db", pages_per_step=8)  # many steps, writes between
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert done.steps > 10
    check = verify(tmp_path / "b.db")
    assert check.ok, check.problems
    # Every entry the backup holds is whole, and it holds all 2000 written before it began.
    assert 2000 <= check.entries <= 2000 + len(written)
    assert not (tmp_path / "b.db.partial").exists()


def test_backup_needs_the_admin_token_and_a_new_file(client, daemon, tmp_path):
    with pytest.raises(Unauthorized):
        client.backup_create(tmp_path / "b.db")
    (tmp_path / "taken.db").write_text("mine")
    with daemon.client(daemon.admin_token) as admin:
        with pytest.raises(InvalidParams) as err:
            admin.backup_create(tmp_path / "taken.db")
    assert err.value.path == "path"
    assert (tmp_path / "taken.db").read_text() == "mine"


def test_restore_refuses_a_serving_home_then_puts_the_backup_back(daemon, tmp_path):
    with daemon.client() as c:
        kept = _fill(c, 5, prefix="before")
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    with daemon.client() as c:
        _fill(c, 3, prefix="after")
    err = fails(daemon.home, "backup", "restore", str(tmp_path / "b.db"))
    assert "stop it" in err
    daemon.stop()
    out = ok(daemon.home, "backup", "restore", str(tmp_path / "b.db"))
    assert "before-restore-" in out
    assert list(daemon.home.glob("arbiter.db.before-restore-*"))  # the old one is kept aside
    again = DaemonProcess(daemon.home).start()
    try:
        with again.client() as c:  # the same token still works: it matches the backup
            listed = c.list(limit=100)
        assert {e.title for e in listed} == {f"before {i}" for i in range(5)}
        assert sorted(e.id for e in listed) == sorted(kept)
    finally:
        again.stop()


def test_restore_refuses_a_home_whose_database_is_served_on_another_socket(home, tmp_path):
    """The database's own lock refuses: the home's socket is free, the file is not."""
    elsewhere = home / "alt.sock"
    served = DaemonProcess(home, extra_env={"ARBITER_SOCKET": str(elsewhere)})
    served.socket = elsewhere
    served.start()
    try:
        with served.client() as c:
            _fill(c, 2, prefix="before")
        ok(home, "--socket", str(elsewhere), "backup", "create", str(tmp_path / "b.db"))
        err = fails(home, "backup", "restore", str(tmp_path / "b.db"))
        assert "stop it" in err and str(elsewhere) in err
        assert not list(home.glob("arbiter.db.before-restore-*"))  # nothing was moved aside
        with served.client() as c:  # the daemon still writes into the file it serves, and reads it back
            late = _fill(c, 1, prefix="after")
            assert [e.id for e in c.list(limit=10) if e.title == "after 0"] == late
    finally:
        served.stop()


def test_restore_into_a_new_home_issues_new_tokens(daemon, tmp_path):
    with daemon.client() as c:
        _fill(c, 3)
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    fresh = tmp_path / "h"
    proc = arbiter(fresh, "backup", "restore", str(tmp_path / "b.db"))
    assert proc.returncode == 0, proc.stderr
    assert "new token for tenant 'default'" in proc.stderr
    assert paths.token_path(fresh, "default").read_text().strip() != daemon.token
    d = DaemonProcess(fresh).start()
    try:
        with d.client() as c:
            assert len(c.list(limit=10)) == 3
    finally:
        d.stop()


def test_a_restored_database_is_its_owners_alone(daemon, tmp_path):
    """The daemon makes its database 0600 (umask 077); a restore run under a common umask (022) must too."""
    import os
    import stat

    with daemon.client() as c:
        _fill(c, 2)
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    assert stat.S_IMODE(daemon.db.stat().st_mode) == 0o600
    fresh = tmp_path / "h"
    old = os.umask(0o022)  # the restore's process inherits it
    try:
        proc = arbiter(fresh, "backup", "restore", str(tmp_path / "b.db"))
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(paths.db_path(fresh).stat().st_mode) == 0o600


def test_a_backup_onto_a_full_disk_says_so_and_leaves_nothing(daemon, small_disk):
    """The backup's disk fills, not the database's: the error points at the backup and writes go on."""
    from arbiter.errors import StorageFull
    from tests.conftest import fill

    with daemon.client() as c:
        _fill(c, 50)
    fill(small_disk / "ballast")
    with Client(daemon.socket, daemon.admin_token) as admin, pytest.raises(StorageFull) as e:
        admin.backup_create(small_disk / "b.db")
    assert e.value.path == "path"  # the request's target, not the daemon's own storage
    assert [p.name for p in small_disk.iterdir()] == ["ballast"]  # no .partial left behind
    with daemon.client() as c:
        assert len(_fill(c, 1, prefix="after")) == 1
    daemon.stop()
    assert "database is full" not in daemon.log


def test_a_restore_onto_a_full_disk_says_so_and_changes_nothing(daemon, small_disk, tmp_path):
    """SQLite's FullError escaped as a traceback and left a half-copied arbiter.db.restoring behind."""
    from tests.conftest import fill

    with daemon.client() as c:
        _fill(c, 2000)  # a backup larger than what is left on the disk below
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    fresh = small_disk / "h"
    ok(fresh, "backup", "restore", str(tmp_path / "b.db"))
    tokens = {p: p.read_text() for p in fresh.rglob("*.token")}
    before = paths.db_path(fresh).read_bytes()
    for p in tokens:  # the backup no longer matches these: a restore would issue new ones
        p.write_text("arb_someone-elses\n")
    tokens = {p: p.read_text() for p in tokens}
    fill(small_disk / "ballast")
    proc = arbiter(fresh, "backup", "restore", str(tmp_path / "b.db"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "no space left" in proc.stderr, proc.stderr
    assert sorted(p.name for p in fresh.iterdir() if not p.name.endswith(".lock")) == ["admin.token", "arbiter.db", "tenants"]
    assert paths.db_path(fresh).read_bytes() == before
    assert {p: p.read_text() for p in tokens} == tokens  # not replaced by tokens of a database that never landed


def test_verify_finds_damage_and_names_it(daemon, tmp_path):
    with daemon.client() as c:
        _fill(c, 500)
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    good = js(daemon.home, "backup", "verify", str(tmp_path / "b.db"))
    assert good["ok"] and good["entries"] == 500
    data = bytearray((tmp_path / "b.db").read_bytes())
    page = 4096
    for at in range(page * 3, len(data) - page, page * 7):  # scribble over pages in the middle
        data[at + 100:at + 400] = b"\xa5" * 300
    (tmp_path / "bad.db").write_bytes(bytes(data))
    proc = arbiter(daemon.home, "backup", "verify", str(tmp_path / "bad.db"), "--json")
    assert proc.returncode == 1
    assert '"ok":false' in proc.stdout
    (tmp_path / "text.db").write_text("not a database at all, just some words " * 200)
    assert "not an SQLite database" in fails(daemon.home, "backup", "verify", str(tmp_path / "text.db"), "--json") + \
        arbiter(daemon.home, "backup", "verify", str(tmp_path / "text.db")).stdout


def test_verify_refuses_the_database_a_daemon_serves(daemon, tmp_path):
    """Its index check takes SQLite's write lock: on the live file, the daemon's writes waited, then failed."""
    with daemon.client() as c:
        _fill(c, 3)
    err = fails(daemon.home, "backup", "verify", str(daemon.db))
    assert "is serving" in err and "backup create" in err
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    assert js(daemon.home, "backup", "verify", str(tmp_path / "b.db"))["ok"]


def test_verify_checks_the_full_text_index(daemon, tmp_path):
    from arbiter.store import connect

    with daemon.client() as c:
        _fill(c, 20)
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    conn = connect(tmp_path / "b.db")  # the entries triggers call Arbiter's SQL functions
    conn.execute("DROP TRIGGER entries_fts_1_delete; DELETE FROM entries WHERE id = 1")  # its index keeps the row
    conn.close()
    check = verify(tmp_path / "b.db")
    assert check.problems == ["the full-text index does not match the entries"]


def test_a_backup_whose_name_holds_a_hash_or_a_question_mark_is_the_file_verified_and_restored(daemon, tmp_path):
    """The file was opened as an SQLite URI: 'b.db#2' read 'b.db' (an older backup) and '?' cut the name too, so
    verify counted another file and restore put it back, losing the writes only the named backup held."""
    with daemon.client() as c:
        _fill(c, 2, prefix="before")
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    with daemon.client() as c:
        _fill(c, 3, prefix="after")
    for name in ("b.db#2", "b.db?2"):
        ok(daemon.home, "backup", "create", str(tmp_path / name))
        assert verify(tmp_path / name).entries == 5
    daemon.stop()
    ok(daemon.home, "backup", "restore", str(tmp_path / "b.db#2"))
    again = DaemonProcess(daemon.home).start()
    try:
        with again.client() as c:
            assert len(c.list(limit=100)) == 5
    finally:
        again.stop()


def test_a_restore_never_overwrites_a_database_an_earlier_restore_moved_aside(daemon, tmp_path):
    """The aside was named by the second: a second restore within it replaced the first's aside, the database
    from before both, which the first restore had said was kept."""
    import time

    with daemon.client() as c:
        _fill(c, 2)
    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    daemon.stop()
    # What earlier restores moved aside, named for each second this restore may run in.
    start = time.time()
    earlier = [daemon.home / f"arbiter.db.before-restore-{time.strftime('%Y%m%dT%H%M%S', time.localtime(start + s))}"
               for s in range(-1, 120)]
    for path in earlier:
        path.write_text(path.name)
    out = ok(daemon.home, "backup", "restore", str(tmp_path / "b.db"))
    assert all(path.read_text() == path.name for path in earlier)
    (aside,) = set(daemon.home.glob("arbiter.db.before-restore-*")) - set(earlier)
    assert aside.name in out and verify(aside).entries == 2


def test_the_database_a_restore_keeps_aside_is_one_whole_file(daemon, tmp_path):
    """A daemon killed (or a reader left open) leaves a -wal and -shm: folded into the kept copy, not beside it."""
    import signal

    import apsw

    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    with daemon.client() as c:
        c.remember(type="project", title="Written after the backup", content="only in the WAL")
    daemon.stop(signal.SIGKILL)
    assert (daemon.home / "arbiter.db-wal").exists()
    out = ok(daemon.home, "backup", "restore", str(tmp_path / "b.db"))
    (aside,) = daemon.home.glob("arbiter.db.before-restore-*")
    assert aside.name in out
    assert sorted(p.name for p in daemon.home.glob("arbiter.db.before-restore-*")) == [aside.name]  # no -wal, -shm
    kept = apsw.Connection(str(aside), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert ("Written after the backup",) in kept.execute("SELECT title FROM entries").fetchall()
    finally:
        kept.close()
