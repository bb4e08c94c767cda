"""The stored text through the daemon: compressed in the file; recall, export and a restored backup give it back."""

from __future__ import annotations

import json

from arbiter import paths
from arbiter.store import connect, text
from tests.conftest import DaemonProcess
from tests.integration.test_cli import arbiter, js, ok

TEXTS = [
    "We ship on Friday after the canary holds for an hour; the rollback runbook is in the ops wiki. " * 3,
    "ok",
    "Überprüfung: naïve café, 東京の会議は月曜日 🚀 — «quoted» and \"double\" and 'single'\ttab\nnew line " * 4,
    "x" * 60_000,
]


def _stored(home) -> dict[int, bytes]:
    conn = connect(paths.db_path(home), readonly=True)
    try:
        return dict(conn.execute("SELECT id, content_z FROM entries"))
    finally:
        conn.close()


def test_the_file_holds_compressed_text_and_every_way_out_gives_it_back(daemon, tmp_path):
    with daemon.client() as c:
        ids = [c.remember(type="project", title=f"note {i}", content=s).id for i, s in enumerate(TEXTS)]
        first = c.get(ids[0])
        c.update(ids[0], content=TEXTS[0].replace("Friday", "Monday"))
        stored = _stored(daemon.home)
        assert stored[ids[3]][0] == text.DEFLATE and len(stored[ids[3]]) < 1000
        assert stored[ids[2]] != TEXTS[2].encode() and TEXTS[2].encode() not in stored[ids[2]]
        assert [c.get(i).content for i in ids[1:]] == TEXTS[1:]
        assert c.get(ids[0], known_at=first.recorded_at).content == TEXTS[0]
        hit = next(h for h in c.recall("canary monday").hits if h.id == ids[0])
        assert "**Monday**" in hit.excerpt and "**canary**" in hit.excerpt
        past = next(h for h in c.recall("friday", known_at=first.recorded_at).hits if h.id == ids[0])
        assert "**Friday**" in past.excerpt
        assert [h.id for h in c.recall("東京の会議は月曜日").hits] == [ids[2]]
        now = {e.id: e.content for e in c.list(limit=10)}
        assert now == {ids[0]: TEXTS[0].replace("Friday", "Monday"), **dict(zip(ids[1:], TEXTS[1:]))}

    out = tmp_path / "memory.jsonl"
    js(daemon.home, "export", str(out))
    exported = {r["id"]: r["content"] for r in map(json.loads, out.read_text().splitlines()[1:])
                if r["kind"] == "entry"}
    assert exported == now
    revisions = [r["content"] for r in map(json.loads, out.read_text().splitlines()[1:]) if r["kind"] == "revision"]
    assert revisions == [TEXTS[0]]

    ok(daemon.home, "backup", "create", str(tmp_path / "b.db"))
    fresh = tmp_path / "h"
    assert arbiter(fresh, "backup", "restore", str(tmp_path / "b.db")).returncode == 0
    assert _stored(fresh) == _stored(daemon.home)  # the blobs themselves, byte for byte
    restored = DaemonProcess(fresh).start()
    try:
        with restored.client() as c:
            assert {e.id: e.content for e in c.list(limit=10)} == now
            assert c.get(ids[0], known_at=first.recorded_at).content == TEXTS[0]
    finally:
        restored.stop()

    imported_home = tmp_path / "i"
    target = DaemonProcess(imported_home).start()
    try:
        js(imported_home, "import", str(out))
        with target.client() as c:
            assert sorted(e.content for e in c.list(limit=10)) == sorted(now.values())
            [e] = [e for e in c.list(limit=10) if e.title == "note 0"]
            assert [r.entry.content for r in c.history(e.id).revisions] == [TEXTS[0], now[ids[0]]]
    finally:
        target.stop()
