"""Salience, the access log, duplicates and maintenance through the daemon, the client and the CLI."""

from __future__ import annotations

import json
import socket

from arbiter.store import connect
from tests.conftest import DaemonProcess, wait_for
from tests.integration.test_cli import arbiter, js, ok


def test_reads_are_logged_by_the_writer_after_answering(daemon, client):
    e = client.remember(type="project", title="Roadmap", content="The quarterly roadmap for Apollo")
    client.get(e.id)
    hits = client.recall("roadmap").hits
    assert [h.id for h in hits] == [e.id]
    db = connect(daemon.db, readonly=True)  # watch the file: the log is written within a second, off the reads' path
    try:
        wait_for(lambda: db.execute("SELECT count(*) FROM access_log").fetchone()[0] == 2, what="two accesses logged")
        assert db.execute("SELECT verb FROM access_log ORDER BY id").fetchall() == [("get",), ("recall",)]
    finally:
        db.close()
    info = client.reinforce(e.id)
    assert (info.access_count, info.reinforcements) == (2, 1) and info.last_access is not None


def test_maintain_and_status(client):
    client.remember(type="project", title="A", content="Redis in Apollo", entities=["Apollo"])
    report = client.maintain(min_salience=0)
    assert report.trigger == "verb" and report.retired == [] and report.entity_clusters == 1
    assert report.wal_checkpointed
    status = client.status()
    assert status.entities == 2 and status.entity_clusters == 1
    assert status.last_maintenance.at == report.at


def test_the_daemon_maintains_on_its_own(home):
    d = DaemonProcess(home, args=("--maintenance-interval", "1")).start()
    try:
        with d.client() as c:
            c.remember(type="project", title="A", content="Kafka feeds Redis")
            # Watch the file, not the daemon: polling it would keep it from ever being idle.
            db = connect(d.db, readonly=True)
            try:
                wait_for(lambda: db.execute("SELECT count(*) FROM maintenance_runs").fetchone()[0],
                         what="idle maintenance")
            finally:
                db.close()
            assert c.status().last_maintenance.trigger == "idle"
    finally:
        d.stop()


def test_remember_right_after_a_bulk_write_finds_its_copies(daemon):
    # One JSON-RPC batch: the daemon runs its requests back to back, and its idle writer (which indexes what
    # remember_many left) starts only after a quiet spell with nothing in flight, so both remembers meet the
    # bulk entry unindexed, whatever the machine's speed. Sent one at a time, the idle writer got there first.
    text = ("The canary pipeline runs the schema migrations before the web servers restart on release night, "
            "then the smoke tests check the login page, the billing export and the search box, and the on-call "
            "engineer signs the release off in the channel before anyone goes home for the weekend")
    calls = [("remember_many", {"entries": [{"type": "project", "title": "Bulk", "content": text}]}),
             ("remember", {"type": "project", "title": "Again", "content": text + " again"}),
             ("remember", {"type": "project", "title": "bulk", "content": text.lower()})]
    batch = [{"jsonrpc": "2.0", "id": n, "method": m, "params": p, "token": daemon.token}
             for n, (m, p) in enumerate(calls)]
    with socket.socket(socket.AF_UNIX) as s, s.makefile("rb") as replies:
        s.connect(str(daemon.socket))
        s.sendall(json.dumps(batch).encode() + b"\n")
        bulk, again, same = (r["result"] for r in sorted(json.loads(replies.readline()), key=lambda r: r["id"]))
    first, = bulk["ids"]
    assert again["similar"] == [first]
    assert same["duplicate_of"] == first


def test_cli_duplicate_reinforce_maintain(daemon, home):
    ok(home, "remember", "--type", "project", "--title", "Ship", "--content", "Ship on Friday", "--permanent")
    proc = arbiter(home, "remember", "--type", "project", "--title", "Ship", "--content", "ship on  friday")
    assert proc.returncode == 0 and proc.stdout == "already remembered as #1\n"
    forced = js(home, "remember", "--type", "project", "--title", "Ship", "--content", "ship on friday",
                "--allow-duplicate", "--salience", "0.2")
    assert forced["similar"] == [1] and forced["duplicate_of"] is None
    assert "salience 0.800  (reinforced 1 time)" in ok(home, "reinforce", "1")  # permanent: max(initial, 0.8)
    maintained = ok(home, "maintain")
    assert "retired 0" in maintained and "access log row" in maintained and "-0" not in maintained
    assert "last_maintenance: " in ok(home, "status")
