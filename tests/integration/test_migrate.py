"""`arbiter migrate` as a user runs it: a home to PostgreSQL and back, served again by a real daemon."""

from __future__ import annotations

import json
import re
import shlex


from arbiter import paths
from arbiter.store import open_database
from tests.conftest import DaemonProcess
from tests.integration.test_cli import arbiter, js, ok
from tests.unit.test_migrate import build

#: Records the daemon's idle derivers may add to either copy as it starts (entities named in the entries).
_DERIVED = ("entity", "entity_merge", "mention", "entity_relation", "entity_event")


def _error(proc) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stderr)["error"]["data"]["name"]


def _records(path) -> list[str]:
    """An export's lines, less its header (the time it was made) and what derivers add on their own time."""
    lines = path.read_text().splitlines()[1:]
    return [line for line in lines if json.loads(line).get("kind") not in _DERIVED]


def test_a_home_moved_to_postgresql_and_back_serves_the_same_memory(home, pg_url):
    conn = open_database(paths.db_path(home))
    tokens = build(conn)
    conn.close()
    paths.write_secret(paths.token_path(home, "alice"), tokens["alice"])
    paths.write_secret(paths.user_token_path(home, "alice", "bob"), tokens["bob"])
    paths.write_secret(paths.token_path(home, "zed"), tokens["zed"])

    secret = pg_url + "&password=hunter2"  # the cluster trusts its socket, so any password opens it
    proc = arbiter(home, "migrate", "--to", secret)
    assert proc.returncode == 0 and "hunter2" not in proc.stdout + proc.stderr, proc.stderr
    assert "moved 7 entries (3 earlier states), 2 relations, 3 users, 1 team of 2 tenants" in proc.stdout
    assert f"arbiter serve --db {shlex.quote(pg_url)}" in proc.stderr  # the URL to serve the copy, less its password
    assert re.search(r"^migrate  ([\d,]+)/\1 rows", proc.stderr, re.M), proc.stderr  # progress, to the last row
    back = home / "back.db"
    again = js(home, "migrate", "--from", pg_url, "--to", str(back), "--no-progress")
    assert again["rows"]["entries"] == 7 and again["rows"]["relations"] == 2 and again["rows"]["tenants"] == 2
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("back")) == ["back.db"]

    # Neither end is written twice, and a served home is not moved from under its daemon.
    assert _error(arbiter(home, "migrate", "--to", pg_url, "--json")) == "conflict"
    assert _error(arbiter(home, "migrate", "--from", pg_url, "--to", str(back), "--json")) == "conflict"
    original = DaemonProcess(home).start()
    try:
        assert _error(arbiter(home, "migrate", "--to", str(home / "other.db"), "--json")) == "unavailable"
        assert not (home / "other.db").exists()
        ok(home, "export", "--all", "--no-progress", str(home / "before.jsonl"))
        found = [ok(home, "--tenant", "alice", "--user", who, "recall", q) for who in ("alice", "bob")
                 for q in ("target monday", "engines", "names domain")]
    finally:
        original.stop()

    moved = DaemonProcess(home, args=("--db", str(back))).start()
    try:
        ok(home, "export", "--all", "--no-progress", str(home / "after.jsonl"))
        # The home's token files open the copy, as the same users, and the ids are the ones they knew.
        shared = ok(home, "--tenant", "alice", "--user", "bob", "get", "3")
        assert "Design doc" in shared
        assert "Zed's own" in ok(home, "--tenant", "zed", "get", "7")
        # Each scope's index was made and filled: every user finds what they found before, ranked the same.
        assert [ok(home, "--tenant", "alice", "--user", who, "recall", q) for who in ("alice", "bob")
                for q in ("target monday", "engines", "names domain")] == found
        assert found[0].startswith("#2  [project]  Ship v1 slips") and "Design doc" in found[4]
    finally:
        moved.stop()
    assert _records(home / "after.jsonl") == _records(home / "before.jsonl")
    assert len(_records(home / "before.jsonl")) > 20


def test_a_bad_target_is_named_before_anything_is_read(home):
    proc = arbiter(home, "migrate", "--to", "mysql://localhost/arbiter")
    assert proc.returncode == 2 and "postgresql://" in proc.stderr
    assert _error(arbiter(home, "migrate", "--to", str(home / "copy.db"), "--json")) == "invalid_params"
    assert not (home / "copy.db").exists()


def test_a_daemon_serving_the_postgresql_copy_exports_what_the_original_did(home, pg_url):
    conn = open_database(paths.db_path(home))
    tokens = build(conn)
    conn.close()
    paths.write_secret(paths.token_path(home, "alice"), tokens["alice"])
    paths.write_secret(paths.user_token_path(home, "alice", "bob"), tokens["bob"])
    js(home, "migrate", "--to", pg_url, "--no-progress")
    reads = [("--tenant", "alice", "--user", who, "get", "3") for who in ("alice", "bob")]
    original = DaemonProcess(home).start()
    try:
        ok(home, "export", "--all", "--no-progress", str(home / "before.jsonl"))
        before = [ok(home, *argv) for argv in reads]
    finally:
        original.stop()
    moved = DaemonProcess(home, args=("--db", pg_url))
    try:
        moved.start()  # inside: a daemon that exits at once still has its pipes closed by stop()
        ok(home, "export", "--all", "--no-progress", str(home / "after.jsonl"))
        assert [ok(home, *argv) for argv in reads] == before  # the home's tokens, the same users, the same ids
    finally:
        moved.stop()
    assert _records(home / "after.jsonl") == _records(home / "before.jsonl")
