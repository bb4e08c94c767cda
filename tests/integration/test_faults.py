"""Faults a real daemon meets: a full disk, no file descriptors left, greedy or idle connections, a full listen queue."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import StorageFull, Unavailable
from arbiter.store import connect
from tests.conftest import DaemonProcess, fill, isolated_env, wait_for


def integrity(db_path) -> str:
    conn = connect(db_path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


# ---- a full disk ------------------------------------------------------------------------


def filler_batch(n: int) -> list[dict]:
    return [{"type": "reference", "title": f"batch {n} #{i}", "content": f"filler {n} {i} " + "lorem ipsum " * 60}
            for i in range(50)]


def fill_until_full(client, start: int) -> StorageFull:
    """remember_many until the disk is full; the error it ends with."""
    for n in range(start, start + 400):
        try:
            client.remember_many(filler_batch(n))
        except StorageFull as e:
            return e
    raise AssertionError("the disk never filled")


def test_a_full_disk_refuses_writes_serves_reads_and_recovers(small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (9 << 20))  # what the user frees later
    d = DaemonProcess(small_disk / "home").start()
    try:
        with d.client() as c:
            first = c.remember(type="project", title="Before the disk filled", content="kept and readable")
            full = fill_until_full(c, 0)
            assert full.code == StorageFull.code and "\n" not in full.message
            # A write of the same size is refused the same way (a tiny one may still fit in the pages left).
            with pytest.raises(StorageFull):
                c.remember_many(filler_batch(999))
            assert c.get(first.id).title == "Before the disk filled"
            assert [h.id for h in c.recall("before the disk filled").hits][:1] == [first.id]
            assert c.list(limit=3) and c.status().entries_active > 50

            filler.unlink()
            wal = Path(f"{d.db}-wal")
            # Idle after a write found the disk full, the daemon checkpoints with TRUNCATE: the WAL gives its space back.
            wait_for(lambda: not wal.exists() or wal.stat().st_size == 0, timeout=20, what="the WAL to be truncated")
            ids = c.remember_many([{"type": "user", "title": f"after {i}", "content": "room again " * 30}
                                   for i in range(50)])
            assert len(ids) == 50 and c.get(ids[-1]).title == "after 49"

            fill_until_full(c, 1000)  # full again, then stopped
        assert d.stop(signal.SIGTERM) == 0
        assert not d.socket.exists()
    finally:
        d.stop()
    assert "Traceback" not in d.log and "rollback" not in d.log
    # One line per episode (filled, freed and written, filled again), not one per refused request.
    assert d.log.count("disk full: writes refused until space is freed") == 2
    assert integrity(d.db) == "ok"


def test_a_write_whose_follow_up_hits_a_full_disk_is_answered_as_saved(small_disk, fake_messages):
    """auto_link's links are a second transaction: if it fails, the answer is still the committed entry."""
    d = DaemonProcess(small_disk / "home", extra_env={"ANTHROPIC_API_KEY": "test",
                                                      "ANTHROPIC_BASE_URL": fake_messages.base_url}).start()
    try:
        with d.client() as c:
            cause = c.remember(type="context", title="Team skills",
                               content="The team lacks Redis experience in production").id

            def fill_then_confirm(body):  # while the advisor "thinks", the disk fills up
                new = int(body["messages"][0]["content"].split("NEW:\n[id ")[1].split("]")[0])
                fill(small_disk / "filler")
                return json.dumps({"links": [{"source": cause, "relation": "causes", "target": new}]})

            fake_messages.set_script(fill_then_confirm)
            r = c.remember(type="project", title="Storage choice", auto_link=True,
                           content="We chose SQLite for the cache because the team lacks Redis experience")
            assert r.linked == [] and "follow-up failed (storage_full); the write is saved" in r.note
            (small_disk / "filler").unlink()
            assert c.get(r.id).title == "Storage choice" and c.expand(r.id).edges == []
            assert [e.id for e in c.list(limit=5)] == [r.id, cause]  # written once: nothing invites a retry
    finally:
        d.stop()
    assert integrity(d.db) == "ok"


# ---- file descriptors and the connection cap ----------------------------------------------


def open_raw(path, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        for _ in range(1000):  # a unix socket's full listen queue refuses at once: wait as a client does
            try:
                s.connect(str(path))
                break
            except BlockingIOError:
                select.select([], [], [], 0.01)
        else:
            raise AssertionError("the listen queue stayed full for 10 s")
        out.append(s)
    return out


def answer(s: socket.socket) -> dict | None:
    """The line the daemon sends on `s` after a ping, or None if it closed without one."""
    try:
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    except BrokenPipeError:
        pass  # refused: the daemon said why and closed; the line is still there to read
    try:
        with s.makefile("rb") as f:
            data = f.readline()
    except ConnectionResetError:  # closed with the ping unread
        return None
    return json.loads(data) if data else None


def test_idle_connections_past_the_limit_make_room_for_new_ones(home):
    """A few hundred idle connections (open MCP sessions, hung clients) must not lock newcomers out."""
    d = DaemonProcess(home, args=("--max-connections", "16")).start()
    held: list[socket.socket] = []
    try:
        held = open_raw(d.socket, 300)
        with d.client() as c:  # accepted after all of them
            assert c.ping().version
        # The most recent connections are the ones kept: they answer; the oldest were closed.
        assert answer(held[-1])["result"]["version"]
        assert answer(held[0]) is None
        for _ in range(20):
            with d.client() as c:
                assert c.ping().version
        with d.client() as c:  # a client whose connection was closed while idle reconnects
            assert c.status().entries_active == 0
            for s in held:
                s.close()
            held = []
            assert c.status().entries_active == 0
    finally:
        for s in held:
            s.close()
        d.stop()
    assert d.log.count("closing the longest-idle") == 1  # once for the episode, not per connection
    assert "Traceback" not in d.log


def test_at_the_limit_with_every_connection_busy_the_newcomer_is_told_so(home, fake_messages):
    """Only a connection with nothing in flight is closed to make room: one mid-request is never cut."""
    d = DaemonProcess(home, args=("--max-connections", "1"), extra_env={
        "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url}).start()
    release = threading.Event()

    def thinking(body):  # the advisor judges the write while the newcomer knocks
        assert release.wait(30)
        return json.dumps({"links": []})

    written = {}
    try:
        with d.client() as c:
            c.remember(type="context", title="Team skills", content="The team lacks Redis experience")
        fake_messages.set_script(thinking)
        asked = len(fake_messages.requests)

        def busy():
            with d.client() as c:
                written["entry"] = c.remember(type="project", title="Storage choice", auto_link=True,
                                              content="We chose SQLite because the team lacks Redis experience")

        t = threading.Thread(target=busy)
        t.start()
        wait_for(lambda: len(fake_messages.requests) > asked, what="the advisor to be asked")
        with pytest.raises(Unavailable) as refused:
            with d.client() as c:
                c.status()
        assert "too many connections" in refused.value.message and "--max-connections" in refused.value.message
        release.set()
        t.join(30)
        assert written["entry"].title == "Storage choice"
        wait_for(lambda: _served(d), what="the freed slot to be served")
    finally:
        release.set()
        d.stop()
    assert d.log.count("refused a connection") <= 6


def test_a_line_left_unfinished_frees_its_slot(home):
    """A client trickling a line it never ends is closed after --line-timeout, though it keeps sending."""
    d = DaemonProcess(home, args=("--line-timeout", "0.5")).start()
    try:
        trickler = open_raw(d.socket, 1)[0]
        trickler.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"')
        closed = False
        for _ in range(200):  # a byte each 50 ms: never idle, never a whole line (bounded at 10 s)
            try:
                trickler.sendall(b"x")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if told([trickler]) and trickler.recv(100) == b"":
                closed = True
                break
            select.select([], [], [], 0.05)
        trickler.close()
        assert closed
        assert _served(d)
    finally:
        d.stop()


def _served(d) -> bool:
    try:
        with d.client() as c:
            return bool(c.status())
    except Unavailable:
        return False


def test_the_fd_limit_is_raised_and_never_exhausted(home):
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (80, 128))

    env = isolated_env(home)
    proc = subprocess.Popen([sys.executable, "-m", "arbiter", "serve", "--max-connections", "1000"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=low_limit)
    sock = paths.socket_path(home)
    try:
        wait_for(lambda: _pings(sock, proc), what="the daemon to serve")
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        soft, hard = re.search(r"Max open files\s+(\d+)\s+(\d+)", limits).groups()
        assert soft == hard == "128"  # soft raised to hard at start
        held = open_raw(sock, 100)  # more than the limit less the daemon's own files
        assert _pings(sock, proc)  # accepted after all of them: each has met the limit by now
        answers = [answer(s) for s in held]
        # The limit is the fd limit less the reserve; each connection past it closed the one idle longest
        # (the ping's too).
        assert [a is not None and "result" in a for a in answers] == [False] * 37 + [True] * (128 - 64 - 1)
        for s in held:
            s.close()
        wait_for(lambda: _pings(sock, proc), what="the daemon to serve again")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        log = proc.stderr.read().decode()
        proc.stderr.close()
    assert "Traceback" not in log and len(log.splitlines()) < 20


def _pings(sock, proc) -> bool:
    assert proc.poll() is None, proc.stderr.read().decode()
    try:
        with Client(sock, None, timeout=2) as c:
            return bool(c.ping())
    except Unavailable:
        return False


def open_files(pid: int) -> list[str]:
    """What each of the process's file descriptors names (sockets as socket:[inode])."""
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed while listed
            out.append(os.readlink(fd))
    return sorted(out)


def test_file_descriptors_left_after_clients_close_are_a_bounded_pool(home):
    """After a burst of clients the daemon holds more files than at start: each read lane's connection,
    opened at its first read, holds the database and its WAL. A second burst adds none."""
    d = DaemonProcess(home).start()

    def burst():
        def one(i):
            with d.client() as c:
                c.remember(type="user", title=f"t{i}", content=f"hello {i} world")
                c.recall("hello world"), c.list(limit=5), c.get(1), c.status()

        clients = [threading.Thread(target=one, args=(i,)) for i in range(32)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        wait_for(lambda: sum(f.startswith("socket:") for f in open_files(d.proc.pid)) <= sockets,
                 what="the clients' sockets to be closed")

    try:
        with d.client() as c:
            c.ping()  # the first read connection (the loop's), as the start-up check's ping may not have closed
        start = [f for f in open_files(d.proc.pid) if not f.startswith("socket:")]
        sockets = 3  # the listening socket, and the pair that wakes the event loop
        burst()
        after = open_files(d.proc.pid)
        burst()
        assert open_files(d.proc.pid) == after
        after = [f for f in after if not f.startswith("socket:")]
        added = list((collections.Counter(after) - collections.Counter(start)).elements())
        # At most one read connection per reader thread (4 at most), the quick lane's and the loop's.
        assert set(added) <= {str(d.db), f"{d.db}-wal"} and len(added) <= 2 * (4 + 1 + 1)
    finally:
        d.stop()


# ---- memory per connection -----------------------------------------------------------------


def rss_kb(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())[1])


def test_unfinished_frames_share_one_bounded_budget(home):
    d = DaemonProcess(home, args=("--max-buffered", str(8 << 20))).start()
    try:
        before = rss_kb(d.proc.pid)
        held = open_raw(d.socket, 16)
        almost = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"pad":"' + b"x" * ((4 << 20) - 100)
        for s in held:
            s.sendall(almost)  # each just under the 4 MiB frame limit, and no newline
        # Two fit in 8 MiB; each of the others is refused (its bytes dropped) once it would go over.
        wait_for(lambda: len(told(held)) == 14, what="14 connections to be refused")
        refused = told(held)
        assert all(answer_pending(s) for s in refused)
        assert rss_kb(d.proc.pid) - before < 24 * 1024  # 16 x 4 MiB held would be 64 MB and more
        kept = [s for s in held if s not in refused]
        for s in kept:
            s.sendall(b'"}\n')
            with s.makefile("rb") as f:
                assert json.loads(f.readline())["result"]["version"]
        for s in held:
            s.close()
        assert _served(d)
    finally:
        d.stop()


def told(sockets: list[socket.socket]) -> list[socket.socket]:
    """The sockets with something to read."""
    return select.select(sockets, [], [], 0)[0]


def answer_pending(s: socket.socket) -> dict | None:
    """The error line the daemon sent on `s` unasked (its frame was refused)."""
    with s.makefile("rb") as f:
        reply = json.loads(f.readline())
    assert reply["error"]["code"] == Unavailable.code and "--max-buffered" in reply["error"]["message"]
    return reply


def test_idle_connections_are_closed_and_the_client_reconnects(home):
    d = DaemonProcess(home, args=("--idle-timeout", "0.5")).start()
    try:
        with d.client() as c:
            c.ping()
            raw = open_raw(d.socket, 1)[0]
            raw.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"')  # unfinished, then silence
            assert raw.recv(100) == b""  # closed by the daemon (recv waits up to the 10 s socket timeout)
            raw.close()
            wait_for(lambda: client_dropped(c), what="the client's idle connection to be closed")
            assert c.ping().version  # the client notices and reconnects
            assert c.status().entries_active == 0
    finally:
        d.stop()


def test_a_connection_that_never_reads_its_answers_is_closed_when_idle(home):
    """A client that sends and stops reading: its answers fill the socket, and the daemon's slot must not stay taken."""
    d = DaemonProcess(home, args=("--idle-timeout", "0.5", "--max-connections", "1")).start()
    try:
        with d.client() as c:
            c.remember_many([{"type": "reference", "title": f"t{i}", "content": f"{i} " + "x" * 2000}
                             for i in range(100)])
        stuck = open_raw(d.socket, 1)[0]
        stuck.setblocking(False)
        request = b'{"jsonrpc":"2.0","id":1,"method":"list","params":{"limit":100},"token":"%s"}\n' % d.token.encode()
        try:
            while True:  # until the daemon, blocked on answers nobody reads, reads no more
                stuck.send(request)
        except BlockingIOError:
            pass
        wait_for(lambda: _served(d), what="the stuck connection's slot to be freed")
        stuck.close()
    finally:
        d.stop()


def test_a_client_past_1024_file_descriptors_talks_and_reconnects(home):
    """select() takes no descriptor from FD_SETSIZE (1024) on: a process with many files open must still be served."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1100:
        if hard != resource.RLIM_INFINITY and hard < 1100:
            pytest.skip(f"the hard file descriptor limit ({hard}) is below 1100")
        resource.setrlimit(resource.RLIMIT_NOFILE, (1100 if hard == resource.RLIM_INFINITY else min(hard, 2048), hard))
    d = DaemonProcess(home, args=("--idle-timeout", "0.5")).start()
    held = []
    try:
        while not held or held[-1] < 1030:  # every lower descriptor taken: the client's socket gets a high one
            held.append(os.open(os.devnull, os.O_RDONLY))
        with d.client() as c:
            assert c._sock.fileno() > 1024
            c.remember(type="user", title="many files open", content="c")
            assert c.status().entries_active == 1
            wait_for(lambda: client_dropped(c), what="the client's idle connection to be closed")
            assert c.status().entries_active == 1  # noticed, reconnected
    finally:
        for fd in held:
            os.close(fd)
        d.stop()


def test_an_answer_cut_short_is_a_lost_daemon(tmp_path):
    """A daemon that dies mid-answer (the OOM killer, kill -9) leaves half a line: that is `unavailable`, as a
    connection closed before any answer is, never a decoding error the MCP server would not revive the daemon for."""
    path = tmp_path / "s"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()

    def dies_mid_answer():
        conn, _ = listener.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"entries":[{"id":1,"ty')

    t = threading.Thread(target=dies_mid_answer)
    t.start()
    try:
        c = Client(path, "arb_x", check_code=False, timeout=10)
        with pytest.raises(Unavailable):
            c.list()
        assert c._sock is None  # closed: the next call connects again
    finally:
        t.join(10)
        listener.close()


def client_dropped(c: Client) -> bool:
    from arbiter.client import _dropped

    return _dropped(c._sock)


# ---- a full listen queue -------------------------------------------------------------------


def test_a_full_listen_queue_is_waited_out_then_reported_as_unavailable(daemon):
    daemon.proc.send_signal(signal.SIGSTOP)  # alive, but accepting nothing
    queued = []
    try:
        while True:  # fill the listen queue
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(str(daemon.socket))
            except BlockingIOError:
                s.close()
                break
            queued.append(s)
            assert len(queued) < 10_000
        with pytest.raises(Unavailable) as info:
            Client(daemon.socket, daemon.token, timeout=0.3).connect()
        assert "listen queue is full" in info.value.message
        result = {}
        def ping():
            with daemon.client() as c:
                result["pong"] = c.ping()

        waiting = threading.Thread(target=ping)
        waiting.start()  # retries while the queue is full ...
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
    for s in queued:  # ... and gets in once the daemon drains it
        s.close()
    waiting.join(30)
    assert result["pong"].version
