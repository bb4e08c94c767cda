"""The stored text (store/text.py, m023): compressed in the file, the same text to every reader."""

from __future__ import annotations

import random
import re
import zlib
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings, strategies as st

from arbiter._time import US, format_time
from arbiter.model import CONTENT_CONTROL, CONTENT_MAX_BYTES, ListParams, RememberParams, UpdateParams
from arbiter.store import MIGRATIONS, entries, fts, open_database, tenants, text, users
from arbiter.store import db as db_module
from tests.conftest import fill

T0 = 1795168800 * US  # 2026-11-20T10:00:00Z
WORDS = "zebra crossing narwhal deploy canary rollback über naïve 東京 🚀".split()


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


# ---- the codec -------------------------------------------------------------------


# Generating 20 KB texts is most of this test's time: 100 examples are a third of the 12 s 300 took.
@settings(max_examples=100, deadline=None)
@given(st.text() | st.text(min_size=2000, max_size=20_000))
def test_any_text_packs_and_unpacks_to_itself(s):
    blob = text.pack(s)
    assert text.unpack(blob) == s
    assert blob[0] in (text.PLAIN, text.DEFLATE)
    assert len(blob) <= len(s.encode()) + 1  # never more than the codec byte over the text


def test_a_huge_text_round_trips():
    rng = random.Random(3)
    s = _prose(rng, 400_000)  # ~3 MB, far past an entry's limit
    blob = text.pack(s)
    assert blob[0] == text.DEFLATE and len(blob) < len(s.encode()) // 2
    assert text.unpack(blob) == s


def test_tiny_and_incompressible_texts_are_stored_as_they_are():
    assert text.pack("") == b"\x00"
    assert text.pack("ok") == b"\x00ok"
    short = "Prefers tabs over spaces."  # deflate's own framing would make it longer
    assert text.pack(short) == b"\x00" + short.encode()


def test_a_text_packed_inside_packing_reads_back_as_itself_and_the_block_lets_it_go():
    rng = random.Random(5)
    first, second = _prose(rng, 200), _prose(rng, 200)
    with text.packing():
        a, b = text.pack(first), text.pack(second)
        assert text.unpack(a) is first and text.unpack(b) is second  # handed back, not inflated again
        with text.packing():  # a nested block shares the outer one's texts and leaves them to it
            assert text.unpack(a) is first
        assert text.unpack(b) is second
        other = zlib.compress(_prose(rng, 50).encode())  # packed elsewhere: inflated as always
        assert text.unpack(b"\x01" + other) == zlib.decompress(other).decode()
    read = text.unpack(a)  # outside: inflated, the block's texts let go
    assert read == first and read is not first


def test_a_blob_that_is_not_a_stored_text_is_refused():
    with pytest.raises(ValueError, match="codec 7"):
        text.unpack(b"\x07abc")
    with pytest.raises(ValueError):
        text.unpack(b"")
    # A blob whose bytes are not UTF-8 is damaged, in either codec: refused, never read with replacement marks.
    for damaged in (bytes([text.DEFLATE]) + zlib.compress(b"caf\xe9 " * 20), bytes([text.PLAIN]) + b"caf\xe9"):
        with pytest.raises(ValueError):
            text.unpack(damaged)


# ---- in the database ------------------------------------------------------------


def _remember(db, v, content: str, *, now: int = T0, **kw) -> int:
    with db:
        return entries.remember(db, v, RememberParams(type="project", title=kw.pop("title", "t"), content=content, **kw),
                                now=now)


def test_the_file_holds_compressed_bytes_and_every_read_gives_the_text(db, tenant):
    v = users.first_viewer(db, tenant)
    before = "Target: Friday. " + _prose(random.Random(1), 80)
    after = "Target: Monday. " + _prose(random.Random(2), 80)
    eid = _remember(db, v, before)
    stored = db.execute("SELECT content_z FROM entries WHERE id = ?", (eid,)).fetchone()[0]
    assert stored != before.encode() and stored[0] == text.DEFLATE and len(stored) < len(before.encode()) * 0.7
    assert before.encode() not in stored

    with db:
        fixed = entries.update(db, v, UpdateParams(id=eid, content=after), now=T0 + US)
    assert fixed.content == after == entries.get(db, v, eid).content
    # The past state keeps the blob as it was stored, byte for byte.
    assert db.execute("SELECT content_z FROM entry_revisions WHERE entry_id = ?", (eid,)).fetchone()[0] == stored
    assert entries.get(db, v, eid, known_at=T0).content == before
    assert [e.content for e in entries.list_entries(db, v, ListParams(known_at=format_time(T0)))] == [before]
    assert [e.content for e in entries.list_entries(db, v, ListParams())] == [after]
    chain, _, states = entries.history(db, v, eid)
    assert [e.content for e in chain] == [after]
    assert [(r.change, r.fields, r.entry.content) for r in states] == \
        [("remembered", [], before), ("updated", ["content"], after)]
    t = fts.table(tenant)
    assert [r[0] for r in db.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH 'monday'")] == [eid]
    assert [r[0] for r in db.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH 'friday'")] == []
    assert [r[0] for r in db.execute("SELECT entry_id FROM entry_revisions_fts f JOIN entry_revisions r ON r.id = f.rowid "
                                      "WHERE entry_revisions_fts MATCH 'friday'")] == [eid]
    for index in (t, "entry_revisions_fts"):
        db.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")


def test_a_write_that_leaves_the_stored_text_out_fails(db, tenant):
    with pytest.raises(ValueError, match="not a stored text"), db:
        db.execute(
            "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, recorded_at, valid_from) "
            "VALUES (?, ?, ?, 'project', 't', 0, 0)", (tenant, tenant, tenant),
        )


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    conn = open_database(tmp_path_factory.mktemp("text") / "arbiter.db")
    with conn:
        tid, _ = tenants.create_tenant(conn, "alice", now=T0)
    yield conn, users.first_viewer(conn, tid)
    conn.close()


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=3000).map(lambda s: CONTENT_CONTROL.sub("", s))  # the daemon refuses those
       .filter(lambda s: s.strip() and len(s.encode()) <= CONTENT_MAX_BYTES))
def test_any_entry_text_reads_back_identically(shared, s):
    conn, v = shared
    eid = _remember(conn, v, s)
    assert entries.get(conn, v, eid).content == s
    assert entries.get_any(conn, v, [eid])[0].content == s


# ---- the migration -----------------------------------------------------------------


def test_migrating_a_file_with_entries_and_revisions_compresses_them_in_place(tmp_path, monkeypatch):
    """A file at the schema before m023, written as that schema wrote (the text in `content`), is converted."""
    path = tmp_path / "old.db"
    m023 = [name for name, _ in MIGRATIONS].index("m023_compressed_text")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:m023])
    conn = open_database(path)
    rng = random.Random(9)
    texts = ["Target: Friday " + _prose(rng, 60), "ok", "naïve 東京 🚀 " * 40, _prose(rng, 3000)]
    with conn:
        tid, _ = tenants.create_tenant(conn, "alice", now=T0)
        team = users.create_team(conn, tid, "ops", now=T0)
        users.join(conn, team, users.first_user(conn, tid), now=T0)
        team_scope = users.team_scope(conn, team)
        for i, s in enumerate(texts):
            conn.execute(
                "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content, recorded_at, valid_from) "
                "VALUES (?, ?, ?, 'project', ?, ?, ?, ?)",
                (tid, tid, team_scope if i == 2 else tid, f"title {i}", s, T0, T0),
            )
        conn.execute("UPDATE entries SET content = 'Target: Monday', revised_at = ? WHERE id = 1", (T0 + US,))
        conn.execute("UPDATE entries SET content = 'shared and corrected', revised_at = ? WHERE id = 3", (T0 + US,))
    recall_rows = conn.execute("SELECT * FROM recall_entries ORDER BY entry_id").fetchall()
    conn.close()
    monkeypatch.undo()

    conn = open_database(path)
    columns = {r[1]: r[6] for r in conn.execute("PRAGMA table_xinfo(entries)")}  # name -> hidden (2: virtual generated)
    assert columns["content"] == 2 and columns["content_z"] == 0
    assert [r[0] for r in conn.execute("SELECT content FROM entries ORDER BY id")] == \
        ["Target: Monday", "ok", "shared and corrected", texts[3]]
    assert [text.unpack(r[0]) for r in conn.execute("SELECT content_z FROM entries ORDER BY id")] == \
        ["Target: Monday", "ok", "shared and corrected", texts[3]]
    assert conn.execute("SELECT content_z FROM entries WHERE id = 4").fetchone()[0][0] == text.DEFLATE
    assert [r[0] for r in conn.execute("SELECT content FROM entry_revisions ORDER BY id")] == [texts[0], texts[2]]
    assert conn.execute("SELECT * FROM recall_entries ORDER BY entry_id").fetchall() == recall_rows
    indexes = [fts.table(s) for s in fts.scopes(conn)] + ["entry_revisions_fts"]
    for t in indexes:
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    # Writes after it: an update reaches every index (the triggers fire on content_z) and files the old blob.
    alice = users.first_viewer(conn, tid)
    with conn:
        entries.update(conn, alice, UpdateParams(id=3, content="shared walrus"), now=T0 + 2 * US)
        entries.update(conn, alice, UpdateParams(id=1, content="Target: Sunday"), now=T0 + 2 * US)
    shared, private = fts.table(team_scope), fts.table(tid)
    assert [r[0] for r in conn.execute(f"SELECT rowid FROM {shared} WHERE {shared} MATCH 'walrus'")] == [3]
    assert [r[0] for r in conn.execute(f"SELECT rowid FROM {private} WHERE {private} MATCH 'sunday'")] == [1]
    assert [r[0] for r in conn.execute(f"SELECT rowid FROM {private} WHERE {private} MATCH 'monday'")] == []
    assert entries.get(conn, alice, 1, known_at=T0 + US).content == "Target: Monday"
    assert entries.get(conn, alice, 1, known_at=T0).content == texts[0]
    assert conn.execute("SELECT bytes FROM recall_entries WHERE entry_id = 1").fetchone()[0] == len("Target: Sunday")
    for t in indexes:
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)")
    conn.close()


def _sqlar_uncompress(data: bytes, size: int) -> bytes:
    """The `sqlite3` shell's sqlar_uncompress (shell.c): the blob itself if `size` is its length, else zlib's uncompress."""
    if size <= 0 or size == len(data):
        return data
    out = zlib.decompress(data)
    assert len(out) <= size
    return out


def test_the_readme_query_reads_the_text_without_arbiter(db, tenant, tmp_path):
    """A plain SQLite connection (no arbiter_text) gets every text out with the query the README gives."""
    v = users.first_viewer(db, tenant)
    texts = ["ok", "Target: Friday " + _prose(random.Random(4), 300)]
    ids = [_remember(db, v, s) for s in texts]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    query = re.search(r"\n    (SELECT id, CAST\(CASE .*?FROM entries;)\n", readme, re.DOTALL).group(1)
    plain = apsw.Connection(db.filename, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        with pytest.raises(apsw.SQLError, match="arbiter_text"):
            plain.execute("SELECT content FROM entries").fetchall()
        plain.create_scalar_function("sqlar_uncompress", _sqlar_uncompress, 2)
        assert plain.execute(query).fetchall() == list(zip(ids, texts))
    finally:
        plain.close()


def _file_before_m023(path, monkeypatch, texts: list[str]) -> int:
    """A file at the schema before m023 holding `texts` as that schema stored them; its page count."""
    m023 = [name for name, _ in MIGRATIONS].index("m023_compressed_text")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:m023])
    conn = open_database(path)
    with conn:
        tid, _ = tenants.create_tenant(conn, "alice", now=T0)
        conn.executemany(
            "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content, recorded_at, valid_from) "
            "VALUES (?, ?, ?, 'project', 't', ?, ?, ?)",
            [(tid, tid, tid, s, T0, T0) for s in texts],
        )
    pages = conn.pragma("page_count")
    conn.close()
    monkeypatch.undo()
    return pages


def test_migrating_gives_back_the_space_the_text_took(tmp_path, monkeypatch):
    """The rows shrink in place, which frees no page: the migration rebuilds the file (VACUUM) after it.

    A file made before incremental auto-vacuum (made here by hand) gets it in the same rebuild, so idle
    upkeep can give back what index merging frees from then on.
    """
    path = tmp_path / "old.db"
    made = apsw.Connection(str(path))
    made.execute("CREATE TABLE t(x); DROP TABLE t")  # the file exists, with auto_vacuum = NONE
    made.close()
    rng = random.Random(12)
    texts = [_prose(rng, 400) for _ in range(300)]
    before = _file_before_m023(path, monkeypatch, texts)
    conn = open_database(path)
    assert conn.pragma("page_count") < before * 0.8 and conn.pragma("freelist_count") == 0
    assert conn.pragma("auto_vacuum") == 2  # incremental
    assert [r[0] for r in conn.execute("SELECT content FROM entries ORDER BY id")] == texts
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_a_compaction_the_disk_cannot_hold_waits_for_the_next_start(small_disk, monkeypatch):
    """A full disk during the VACUUM after m023 leaves a working (larger) file and no one kept from starting."""
    path = small_disk / "old.db"
    rng = random.Random(13)
    texts = [_prose(rng, 400) for _ in range(300)]
    before = _file_before_m023(path, monkeypatch, texts)

    heard = []

    def say(message):  # the moment the compaction starts, the disk fills up
        heard.append(message)
        if "compacting" in message:
            fill(small_disk / "filler")

    conn = open_database(path, say=say)
    assert len(heard) == 2 and "too little free disk" in heard[1]
    assert [r[0] for r in conn.execute("SELECT content FROM entries ORDER BY id")] == texts
    assert conn.pragma("page_count") >= before  # not compacted
    conn.close()

    (small_disk / "filler").unlink()
    heard.clear()
    conn = open_database(path, say=heard.append)
    assert len(heard) == 1 and "compacting" in heard[0]
    assert conn.pragma("page_count") < before * 0.8
    assert [r[0] for r in conn.execute("SELECT content FROM entries ORDER BY id")] == texts
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    heard.clear()
    open_database(path, say=heard.append).close()
    assert heard == []  # once


def test_every_trigger_on_a_change_of_text_fires_on_what_writers_set(db, tenant):
    """Triggers fire on the columns an UPDATE sets, and writers set content_z: no UPDATE OF list may name content,
    in the migrated schema or in an index made after it (a team's)."""
    with db:
        team = users.create_team(db, tenant, "ops", now=T0)
        users.join(db, team, users.first_user(db, tenant), now=T0)
    v = users.first_viewer(db, tenant)
    lists = [m.group(1) for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'")
             if (m := re.search(r"UPDATE OF ([^)]*?) ON", sql))]
    assert len(lists) >= 5 and not [x for x in lists if re.search(r"\bcontent\b", x)]
    eid = _remember(db, v, "zebra on the team", team="ops")
    with db:
        entries.update(db, v, UpdateParams(id=eid, content="walrus on the team"), now=T0 + US)
    t = fts.table(users.team_scope(db, team))
    assert [r[0] for r in db.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH 'walrus'")] == [eid]
    db.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)")
