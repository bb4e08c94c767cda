"""The daemon process: its socket, its lifetime, and what survives `kill -9`."""

from __future__ import annotations

import functools
import signal
import stat
import subprocess
import sys
import threading

import pytest

from arbiter.errors import NotFound, Unavailable
from arbiter.store import connect
from tests.conftest import arbiter_cli, DaemonProcess, isolated_env, wait_for


def integrity(db_path) -> str:
    conn = connect(db_path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def serve_once(home, timeout=30) -> subprocess.CompletedProcess:
    """Run `arbiter serve` expecting it to refuse and exit by itself."""
    return arbiter_cli(home, "serve", timeout=timeout)


def test_socket_is_0600_in_a_0700_folder(home):
    folder = home / "private"
    d = DaemonProcess(folder).start()
    try:
        assert stat.S_ISSOCK(d.socket.stat().st_mode)
        assert stat.S_IMODE(d.socket.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        for f in (d.db, d.home / "admin.token", d.home / "tenants" / "default.token"):
            assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    finally:
        d.stop()


def test_a_second_daemon_refuses_and_the_first_keeps_serving(daemon, client):
    e = client.remember(type="user", title="before", content="c")
    second = serve_once(daemon.home)
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "already" in lines[0] and str(daemon.socket) in lines[0]
    assert "Traceback" not in second.stderr
    assert client.get(e.id).title == "before"  # same connection still served
    with daemon.client() as fresh:  # and new connections too
        assert fresh.ping().version


def test_a_stale_socket_is_replaced(home):
    first = DaemonProcess(home).start()
    with first.client() as c:
        eid = c.remember(type="user", title="kept", content="c").id
    first.stop(signal.SIGKILL)
    assert first.socket.exists()  # left behind by the dead daemon
    with pytest.raises(Unavailable):
        with first.client() as c:
            c.ping()
    second = DaemonProcess(home).start()
    try:
        with second.client() as c:
            assert c.get(eid).title == "kept"
    finally:
        assert second.stop() == 0


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_socket_path_that_is_no_socket_is_refused_and_kept(home, kind):
    """Only a socket a dead daemon left is replaced: `--socket notes.txt` must not delete the notes."""
    target = home / "notes.txt"
    if kind == "file":
        target.write_text("precious")
    else:
        target.mkdir()
        (target / "inside").write_text("precious")
    proc = arbiter(home, "serve", "--socket", str(target), timeout=20)  # on failure: it serves there
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(target) in lines[0] and "not a socket" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    if kind == "file":
        assert target.read_text() == "precious"
    else:
        assert (target / "inside").read_text() == "precious"
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]  # nothing left beside it


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly(home, sig):
    d = DaemonProcess(home).start()
    with d.client() as c:
        c.remember_many([{"type": "user", "title": f"t{i}", "content": "c" * 500} for i in range(500)])
    assert d.stop(sig) == 0
    assert not d.socket.exists()
    assert integrity(d.db) == "ok"


def test_a_signal_mid_batch_answers_what_ran_and_runs_nothing_unanswered(home):
    """SIGTERM while a batch runs: the batch finishes and is answered; a line after it is neither run nor answered.

    The daemon had stopped waiting at the first moment nothing was in flight (between two of the batch's
    requests), so it closed the connection with the batch half written and unanswered.
    """
    import json
    import socket

    d = DaemonProcess(home).start()
    try:
        def request(i):
            return {"jsonrpc": "2.0", "id": i, "method": "remember", "token": d.token,
                    "params": {"type": "context", "title": f"t{i}", "content": f"entry number {i}"}}

        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(60)
        raw.connect(str(d.socket))
        batch = json.dumps([request(i) for i in range(1, 1001)]).encode()
        raw.sendall(batch + b"\n" + json.dumps(request(1001)).encode() + b"\n")
        with d.client() as watcher:
            wait_for(lambda: watcher.list(limit=1), what="the batch to start writing")
        d.proc.send_signal(signal.SIGTERM)
        answers = [json.loads(line) for line in raw.makefile("rb")]  # every line, until the daemon closes
        raw.close()
        assert d.proc.wait(10) == 0
    finally:
        d.stop()
    answered = {r["result"]["title"] for a in answers for r in (a if isinstance(a, list) else [a])}
    assert len(answers) == 1 and len(answered) == 1000  # the batch, whole; the line after it was never started
    conn = connect(d.db)
    try:
        written = {row[0] for row in conn.execute("SELECT title FROM entries")}
    finally:
        conn.close()
    assert written == answered


def test_a_new_database_takes_the_tokens_its_home_holds(home, tmp_path):
    """`serve --db scratch.db` on a home in use: the home's token files are the only copies of its database's tokens.

    A new database wrote new ones over them, and the home's own database answered `token matches no user` for good.
    """
    first = DaemonProcess(home).start()
    with first.client() as c:
        eid = c.remember(type="user", title="mine", content="c").id
    first.stop()
    tenant, admin = first.token, first.admin_token
    scratch = DaemonProcess(home, args=("--db", str(tmp_path / "scratch.db"))).start()
    try:
        with scratch.client() as c:
            assert c.status().entries_active == 0  # the scratch database, reached with the home's token
    finally:
        scratch.stop()
    assert (first.token, first.admin_token) == (tenant, admin)
    again = DaemonProcess(home).start()
    try:
        with again.client() as c:
            assert c.get(eid).title == "mine"
        with again.client(again.admin_token) as a:
            assert [t.name for t in a.tenant_list().tenants] == ["default"]
    finally:
        again.stop()


def test_a_newer_database_is_refused_with_one_line(home):
    d = DaemonProcess(home).start()
    d.stop()
    conn = connect(d.db)
    with conn:
        conn.execute("INSERT INTO schema_version VALUES (999, 'm999_future', 0)")
    conn.close()
    proc = serve_once(home)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("arbiter: error:")]
    assert len(errors) == 1 and "schema" in errors[0] and "Traceback" not in proc.stderr
    assert not d.socket.exists()


def test_acknowledged_writes_survive_kill_9(home):
    d = DaemonProcess(home).start()
    acked: dict[int, str] = {}
    batches: list[str] = []  # batch tags, acknowledged or not: each must be all there or all gone
    stopped = threading.Event()
    failure: list[BaseException] = []

    def writer():
        n = 0
        try:
            with d.client() as c:
                while not stopped.is_set():
                    n += 1
                    if n % 5 == 0:
                        tag = f"batch{n}"
                        batches.append(tag)
                        items = [{"type": "context", "title": f"{tag}-{i}", "content": "x" * 300, "tags": [tag]}
                                 for i in range(20)]
                        acked.update(zip(c.remember_many(items), (it["title"] for it in items)))
                    else:
                        title = f"single{n}"
                        # distinct content: identical content would be answered as a duplicate
                        acked[c.remember(type="learning", title=title, content=f"{n} " + "y" * 300).id] = title
        except Unavailable:
            pass  # the daemon died under us: expected
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_for(lambda: len(acked) >= 300, timeout=30, what="300 acknowledged writes")
        d.proc.send_signal(signal.SIGKILL)  # mid-stream: the writer is still sending
        d.proc.wait(10)
    finally:
        stopped.set()
        t.join(30)
    d.stop()
    assert not failure, failure[0]
    assert integrity(d.db) == "ok"

    again = DaemonProcess(home).start()
    try:
        with again.client() as c:
            missing = []
            for eid, title in acked.items():
                try:
                    if c.get(eid).title != title:
                        missing.append(eid)
                except NotFound:
                    missing.append(eid)
            assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:10]}"
            for tag in batches:
                assert len(c.list(tag=tag, limit=100)) in (0, 20), tag
            c.remember(type="user", title="after", content="the restarted daemon takes writes")
    finally:
        assert again.stop() == 0
    assert integrity(again.db) == "ok"


def test_an_idle_daemon_merges_the_index_and_keeps_serving_writes(daemon, client):
    from arbiter.recall.maintain import segments

    ids = []
    for n in range(6):  # one FTS segment per transaction; automerge waits for 16
        ids += client.remember_many(
            [{"type": "context", "title": f"batch {n} item {i}", "content": f"word{n} word{i} shared"}
             for i in range(20)]
        )
    conn = connect(daemon.db, readonly=True)
    try:
        wait_for(lambda: segments(conn) == 1, timeout=20, what="idle compaction to merge the index")
    finally:
        conn.close()
    later = client.remember(type="user", title="after compaction", content="word0 shared")
    assert client.get(later.id).title == "after compaction"
    assert {h.id for h in client.recall("word3", limit=50).hits} >= set(ids[60:80])


def arbiter(home, *args, env_extra=None, cwd=None, timeout=30) -> subprocess.CompletedProcess:
    return arbiter_cli(home, *args, env=env_extra, cwd=cwd, timeout=timeout)


def test_a_second_daemon_on_the_same_database_refuses_whatever_its_socket(daemon, client):
    e = client.remember(type="user", title="only one writer", content="c")
    second = arbiter(daemon.home, "serve", "--socket", str(daemon.home / "other.sock"))
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "already serving" in lines[0] and str(daemon.db) in lines[0]
    assert str(daemon.proc.pid) in lines[0] and str(daemon.socket) in lines[0]  # who holds it, and where
    assert not (daemon.home / "other.sock").exists()
    assert client.get(e.id).title == "only one writer"


def test_stop_ends_the_daemon_and_waits_for_it(daemon, client):
    client.remember(type="user", title="kept", content="c")
    stopped = arbiter(daemon.home, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert str(daemon.proc.pid) in stopped.stdout
    assert not daemon.socket.exists()  # stop returned once the daemon had let go of socket and database
    assert daemon.proc.wait(10) == 0
    again = arbiter(daemon.home, "stop")
    assert again.returncode == 0 and "no arbiter daemon" in again.stdout
    assert integrity(daemon.db) == "ok"


def test_a_daemon_running_old_code_is_named_and_restarted(home, tmp_path):
    """`pip install -e .` over a running daemon: the client says to restart it, and stop + serve does."""
    import shutil
    from pathlib import Path

    import arbiter as package

    install = tmp_path / "site"
    shutil.copytree(Path(package.__file__).parent, install / "arbiter", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(install)}
    old = functools.partial(arbiter, env_extra=env, cwd=tmp_path)  # the installed copy's code, not ours
    d = DaemonProcess(home, extra_env=env, cwd=tmp_path).start()
    try:
        assert old(home, "status").returncode == 0
        with open(install / "arbiter" / "_time.py", "a") as f:  # the upgrade lands on disk
            f.write("\n# a newer release\n")
        stale = old(home, "status")
        assert stale.returncode == 1
        assert "restart the daemon (arbiter stop; arbiter serve)" in stale.stderr
        assert "Traceback" not in stale.stderr and len(stale.stderr.strip().splitlines()) == 1
        assert old(home, "stop").returncode == 0
        assert d.proc.wait(10) == 0
    finally:
        d.stop()
    restarted = DaemonProcess(home, extra_env=env, cwd=tmp_path).start()
    try:
        assert old(home, "status").returncode == 0
    finally:
        restarted.stop()


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_database_url_of_another_engine_is_refused_and_nothing_is_made(home, tmp_path, how):
    """`serve --db mysql://...` (or ARBITER_DB) names an engine Arbiter lacks: said so, no file or folder made."""
    url = "mysql://arbiter:secret@db.example/memory"
    args, env = (["--db", url], {}) if how == "option" else ([], {"ARBITER_DB": url})
    done = subprocess.run([sys.executable, "-m", "arbiter", "serve", *args], env=isolated_env(home, **env),
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "database URL" in done.stderr and "postgresql://" in done.stderr and "secret" not in done.stderr
    assert list(tmp_path.iterdir()) == []
    assert not home.exists() or list(home.iterdir()) == []
