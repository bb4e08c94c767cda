"""arbiter.store on a real SQLite file and a real PostgreSQL database: migrations, entries, relations, validity
windows, FTS sync (SQLite's; full text on PostgreSQL is tested where it lands)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw
import pytest

from arbiter._time import US, format_time
from arbiter.errors import Conflict, InvalidParams, NotFound, SchemaTooNew
from arbiter.model import ListParams, RememberParams, UpdateParams
from arbiter.recall import past
from arbiter.store import db as db_module
from arbiter.store import migrations
from arbiter.store import MIGRATIONS, connect, engine, entries, fts, open_database, relations, tenants, users
from arbiter.store import text as stored_text
from arbiter.store.migrations.m010_tenant_fts import index as m010_index

pytestmark = pytest.mark.both_engines

T0 = 1795168800 * US  # 2026-11-20T10:00:00Z

# What creating a tenant adds (store/fts.py), by name pattern.
TENANT_OBJECTS = {
    ("view", "entries_fts_{n}_rows"),
    ("table", "entries_fts_{n}"),
    ("table", "entries_fts_{n}_data"),
    ("table", "entries_fts_{n}_idx"),
    ("table", "entries_fts_{n}_docsize"),
    ("table", "entries_fts_{n}_config"),
    ("table", "entries_fts_{n}_vocab"),
    ("trigger", "entries_fts_{n}_insert"),
    ("trigger", "entries_fts_{n}_delete"),
    ("trigger", "entries_fts_{n}_update"),
}
#: The `tenant` fixture's index (it is the database's first tenant).
FTS = fts.table(1)


@pytest.fixture
def other(db):
    with db:
        tid, _ = tenants.create_tenant(db, "mallory", now=T0)
    return tid


def remember(db, tenant_id, *, now=T0, title="A fact", content="Some content.", **kw) -> int:
    with db:
        return entries.remember(db, users.first_viewer(db, tenant_id), RememberParams(type=kw.pop("type", "project"), title=title, content=content, **kw), now=now
        )


def listed(db, tenant_id, **kw) -> list[int]:
    with db:
        return [e.id for e in entries.list_entries(db, users.first_viewer(db, tenant_id), ListParams(**kw))]


def counts(db) -> dict[str, int]:
    tables = ("entries", "relations") if engine.is_postgresql(db) else ("entries", "relations", f"{FTS}_docsize")
    return {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}


def refused(db) -> type[Exception]:
    """What each engine raises when a constraint refuses a row."""
    if engine.is_postgresql(db):
        import psycopg

        return psycopg.errors.IntegrityError
    return apsw.ConstraintError


def fts_ok(db) -> None:
    """FTS5's own check of the index against the entries it indexes (raises on drift); SQLite's alone."""
    if engine.is_postgresql(db):
        return
    db.execute(f"INSERT INTO {FTS}({FTS}, rank) VALUES ('integrity-check', 1)")
    db.execute(f"INSERT INTO {FTS}({FTS}) VALUES ('integrity-check')")


def matches(db, word: str) -> list[int]:
    """The entries the `tenant` fixture's index finds for `word`, on either engine."""
    if engine.is_postgresql(db):
        from arbiter.store.pg import fulltext, indexing

        return sorted(fulltext.matching(db, indexing.scope_index(db, 1), f'"{word}"', 1000))
    return [r[0] for r in db.execute(f"SELECT rowid FROM {FTS} WHERE {FTS} MATCH ?", (f'"{word}"',))]


# ---- migrations ----------------------------------------------------------------


def _schema(conn: apsw.Connection) -> dict:
    """What must not depend on the step a file was made at: every object's SQL (whitespace folded), the
    settings fixed when a file is made or opened, each full-text index's own settings, the steps recorded."""
    objects = {(kind, name): " ".join((sql or "").split())
               for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master")}
    return {
        "objects": objects,
        "fts5 config": {name: sorted(conn.execute(f"SELECT k, v FROM {name}"))
                        for kind, name in objects if kind == "table" and name.endswith("_config")},
        "pragmas": {p: conn.pragma(p) for p in ("page_size", "auto_vacuum", "journal_mode", "user_version",
                                                  "application_id", "encoding", "foreign_keys")},
        "steps": conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall(),
    }


#: Each step's number, by name.
STEP = {name: k for k, (name, _) in enumerate(MIGRATIONS, start=1)}


def _file_at_step(path, k: int) -> None:
    """A file made by the first `k` steps, holding a tenant (from m015 also a team) made as the code of step k
    made one, so the steps that remake each tenant's or scope's index (m010, m015, m020, m023) have one to remake."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(db_module, "MIGRATIONS", MIGRATIONS[:k])
        conn = open_database(path, synchronous="NORMAL")  # no fsync a step: the files are thrown away
    with conn:
        if k < STEP["m015_users_teams"]:  # a tenant was its row, and from m010 its own index
            conn.execute("INSERT INTO tenants(name, token_hash, created_at) VALUES ('alice', x'01', ?)", (T0,))
            if k >= STEP["m010_tenant_fts"]:
                m010_index(conn, 1)
        else:  # store/fts.py makes a scope's index as the step a file is at made it
            tid, _ = tenants.create_tenant(conn, "alice", now=T0)
            users.create_team(conn, tid, "ops", now=T0)
    conn.close()


@pytest.fixture(scope="module")
def fresh_schemas(tmp_path_factory) -> dict[bool, dict]:
    """A new file's schema with the tenant of `_file_at_step`, without and with its team, made by live code."""
    schemas = {}
    for team in (False, True):
        conn = open_database(tmp_path_factory.mktemp("fresh") / "a.db", synchronous="NORMAL")
        with conn:
            tid, _ = tenants.create_tenant(conn, "alice", now=T0)
            if team:
                users.create_team(conn, tid, "ops", now=T0)
        schemas[team] = _schema(conn)
        conn.close()
    return schemas


@pytest.mark.parametrize("k", range(1, len(MIGRATIONS)))
def test_a_file_made_at_any_earlier_step_upgrades_to_a_new_files_schema(tmp_path, fresh_schemas, k):
    """Every upgrade path ends where a new file starts: the frozen steps agree with each other and with the live
    code that makes a new scope's index (store/fts.py). A change to that code, or to a shipped step, fails here
    until a new step brings existing files along."""
    path = tmp_path / "old.db"
    _file_at_step(path, k)
    conn = open_database(path, synchronous="NORMAL")
    assert _schema(conn) == fresh_schemas[k >= STEP["m015_users_teams"]]
    conn.close()


def test_a_new_file_whose_making_fails_is_left_with_no_schema(tmp_path, monkeypatch):
    """A new file takes every step in one transaction: a step that fails part way leaves nothing half made (the
    next start makes it whole) rather than a file stopped at some step."""
    def broken(conn):
        raise apsw.IOError("disk I/O error")

    steps = [*MIGRATIONS[:10], ("m011_broken", broken)]
    monkeypatch.setattr(db_module, "MIGRATIONS", steps)
    path = tmp_path / "new.db"
    with pytest.raises(apsw.IOError):
        open_database(path)
    conn = connect(path)
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    conn.close()


def test_every_step_file_is_applied_in_its_numbered_place():
    """A step file left out of NAMES would never run; NAMES out of number order would run steps out of order."""
    files = sorted(p.stem for p in Path(migrations.__file__).parent.glob("m[0-9][0-9][0-9]_*.py"))
    assert list(migrations.NAMES) == files
    assert [int(name[1:4]) for name in migrations.NAMES] == list(range(1, len(files) + 1))


def test_past_states_are_ranked_by_the_sql_that_keeps_recall_entries(db, tenant):
    """recall/past.py ranks a past state with its own copy of the SQL the recall_entries triggers hold."""
    v = users.first_viewer(db, tenant)
    texts = ["I said you would come", "two weeks in May", "You and me, 3 times: my you", "I'm here", "plain"]

    def agree(eid: int) -> bool:
        kept = db.execute("SELECT * FROM recall_entries WHERE entry_id = ?", (eid,)).fetchone()
        return db.execute(f"SELECT {past.recall_row('e')} FROM entries e WHERE e.id = ?", (eid,)).fetchone() == kept

    for text in texts:
        with db:
            eid = entries.remember(db, v, RememberParams(type="context", title="t", content=text), now=T0)
        assert agree(eid), text
        with db:  # and as the update trigger keeps it
            entries.update(db, v, UpdateParams(id=eid, content=f"Me: {text} (you said nine)"), now=T0 + US)
        assert agree(eid), text
    with db:  # and as a batch's insert keeps it (one statement, several rows)
        batch = entries.remember_many(db, v, [RememberParams(type="context", title="t", content=text)
                                              for text in texts], now=T0)
    assert all(agree(eid) for eid in batch)


@pytest.mark.sqlite_only("FTS5's tables, one set a tenant, are SQLite's")
def test_each_tenant_gets_an_index_of_its_own(db, tenant, other):
    objects = set(db.execute("SELECT type, name FROM sqlite_master WHERE name LIKE 'entries_fts%'"))
    assert objects == {(kind, name.format(n=n)) for n in (tenant, other) for kind, name in TENANT_OBJECTS}
    a = remember(db, tenant, content="zebra crossing")
    remember(db, other, content="zebra stripes")
    assert matches(db, "zebra") == [a]
    assert fts.totals(db, tenant) == (1, fts.totals(db, tenant)[1]) and fts.totals(db, tenant)[1] > 0
    fts_ok(db)


def test_migrating_a_round_one_database_splits_its_index_by_tenant(tmp_path):
    path = tmp_path / "old.db"
    conn = connect(path)
    conn.execute("CREATE TABLE schema_version(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)")
    for version, (name, sql) in enumerate(MIGRATIONS[:5], start=1):
        with conn:
            conn.execute(sql)
            conn.execute("INSERT INTO schema_version VALUES (?, ?, 0)", (version, name))
    with conn:
        for name in ("alice", "bob"):
            conn.execute("INSERT INTO tenants(name, token_hash, created_at) VALUES (?, ?, 0)", (name, name.encode()))
        for tenant_id, text in ((1, "zebra crossing"), (2, "zebra stripes"), (2, "yak shaving")):
            conn.execute(
                "INSERT INTO entries(tenant_id, type, title, content, content_hash, recorded_at, valid_from) "
                "VALUES (?, 'project', 't', ?, x'00', 0, 0)",
                (tenant_id, text),
            )
    conn.close()
    conn = open_database(path)
    assert fts.totals(conn, 1)[0] == 1 and fts.totals(conn, 2)[0] == 2
    assert [r[0] for r in conn.execute("SELECT rowid FROM entries_fts_2 WHERE entries_fts_2 MATCH 'zebra'")] == [2]
    assert conn.execute("SELECT count(*) FROM recall_entries").fetchone()[0] == 3
    # m015: each tenant's first user holds its name and token, and every entry is theirs, private.
    assert conn.execute("SELECT id, tenant_id, name, token_hash FROM users ORDER BY id").fetchall() == [
        (1, 1, "alice", b"alice"), (2, 2, "bob", b"bob")]
    assert users.user_by_token(conn, b"bob") == (2, "bob", 2, "bob")
    assert conn.execute("SELECT DISTINCT tenant_id, author_id, scope_id FROM entries ORDER BY 1").fetchall() == [
        (1, 1, 1), (2, 2, 2)]
    bob = users.first_viewer(conn, 2)
    assert bob.solo and bob.scopes == (2,)
    with conn:
        new = entries.remember(conn, bob, RememberParams(type="project", title="t", content="zebra again"), now=T0)
    assert [r[0] for r in conn.execute("SELECT rowid FROM entries_fts_2 WHERE entries_fts_2 MATCH 'zebra'")] == [2, new]
    conn.close()


def test_content_hash_is_computed_on_read_after_the_column_is_dropped(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:18])
    conn = open_database(path)
    with conn:
        tid, _ = tenants.create_tenant(conn, "alice", now=T0)
        conn.execute(
            "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content, content_hash, recorded_at, "
            "valid_from) VALUES (?, ?, ?, 'project', 't', 'zebra crossing', ?, ?, ?)",
            (tid, tid, tid, entries.content_hash("zebra crossing"), T0, T0),
        )
    conn.close()
    monkeypatch.undo()
    conn = open_database(path)
    assert "content_hash" not in {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
    e = entries.get(conn, users.first_viewer(conn, tid), 1)
    assert e.content_hash == hashlib.sha256(b"zebra crossing").hexdigest()
    assert [r[0] for r in conn.execute(f"SELECT rowid FROM {fts.table(tid)} WHERE {fts.table(tid)} MATCH 'zebra'")] == [1]
    conn.close()


def test_revisions_made_before_speakers_could_change_take_their_entrys_speaker(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    m024 = [name for name, _ in MIGRATIONS].index("m024_revision_speaker")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:m024])
    conn = open_database(path)
    with conn:
        tid, _ = tenants.create_tenant(conn, "alice", now=T0)
        v = users.first_viewer(conn, tid)
        said = entries.remember(conn, v, RememberParams(type="context", title="t", content="Friday",
                                                        speaker="Caroline"), now=T0)
        plain = entries.remember(conn, v, RememberParams(type="context", title="t", content="Friday"), now=T0)
        for eid in (said, plain):
            entries.update(conn, v, UpdateParams(id=eid, content="Monday"), now=T0 + US)
    conn.close()
    monkeypatch.undo()
    conn = open_database(path)
    v = users.first_viewer(conn, tid)
    then = {e.id: (e.content, e.speaker) for e in entries.list_entries(conn, v, ListParams(known_at=format_time(T0)))}
    assert then == {said: ("Friday", "Caroline"), plain: ("Friday", None)}
    with conn:  # and from now on a correction of the speaker is a revision of its own
        entries.update(conn, v, UpdateParams(id=said, speaker="Melanie"), now=T0 + 2 * US)
    assert entries.get(conn, v, said, known_at=T0 + US).speaker == "Caroline"
    assert entries.get(conn, v, said).speaker == "Melanie"
    conn.close()


def test_connection_settings(sqlite_db):
    db = sqlite_db
    assert db.pragma("journal_mode") == "wal"
    assert db.pragma("foreign_keys") == 1
    assert db.pragma("synchronous") == 2  # FULL


def test_reopening_migrates_nothing(tmp_path):
    path = tmp_path / "a.db"
    open_database(path).close()
    conn = open_database(path)
    assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()


def test_a_newer_database_is_refused(tmp_path):
    path = tmp_path / "a.db"
    conn = open_database(path)
    with conn:
        conn.execute("INSERT INTO schema_version VALUES (?, 'm999_future', 0)", (len(MIGRATIONS) + 1,))
    conn.close()
    with pytest.raises(SchemaTooNew):
        open_database(path)


# ---- entries -------------------------------------------------------------------


def test_remember_then_get(db, tenant):
    eid = remember(db, tenant, title="Ship v1", content="Target: Friday.", tags=["release", "v1", "release"],
                   source="standup")
    e = entries.get(db, users.first_viewer(db, tenant), eid)
    assert (e.id, e.type, e.title, e.content, e.source) == (eid, "project", "Ship v1", "Target: Friday.", "standup")
    assert e.tags == ["release", "v1"]  # duplicates dropped, order kept
    assert e.recorded_at == e.valid_from == format_time(T0)
    assert e.valid_to is None
    assert e.superseded_by == []
    assert len(bytes.fromhex(e.content_hash)) == 32


def test_what_remember_answers_is_what_get_reads_back(db, tenant):
    v = users.first_viewer(db, tenant)
    with db:
        conv = tenants.create_conversation(db, v, "standup", now=T0).id
        old = entries.remember(db, v, RememberParams(type="project", title="old", content="Target: Thursday."), now=T0)
    cases = [
        RememberParams(type="project", title="Ship v1", content="Target: Friday. ✓ «quoted»",
                       tags=["release", "v1", "release"], source="standup"),
        RememberParams(type="user", title="said", content="in a conversation", conversation_id=conv, speaker="bob",
                       valid_from=format_time(T0 - 3600 * US)),
        RememberParams(type="project", title="new", content="Target: Friday.", supersedes_ids=[old]),
        RememberParams(type="context", title="reply", content="a reply is read back", parent_id=old),
    ]
    for p in cases:
        with db:
            eid = entries.remember(db, v, p, now=T0 + 5)
        built = entries.written(v, eid, p, now=T0 + 5)
        assert built is None if p.parent_id else built == entries.get(db, v, eid), p.title


def test_get_of_a_missing_id_is_not_found(db, tenant):
    with pytest.raises(NotFound):
        entries.get(db, users.first_viewer(db, tenant), 12345)


def test_list_is_newest_first_with_hard_filters(db, tenant):
    a = remember(db, tenant, type="project", tags=["x"])
    b = remember(db, tenant, type="feedback", tags=["y"])
    c = remember(db, tenant, type="project", tags=["x", "y"])
    assert listed(db, tenant) == [c, b, a]
    assert listed(db, tenant, types=["project"]) == [c, a]
    assert listed(db, tenant, tag="y") == [c, b]
    assert listed(db, tenant, types=["feedback"], tag="x") == []
    assert listed(db, tenant, limit=2) == [c, b]
    assert listed(db, tenant, before_id=c) == [b, a]


def test_update_touches_only_active_rows(db, tenant):
    eid = remember(db, tenant, title="Tpyo", content="alpha words")
    with db:
        e = entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=eid, title="Typo", content="bravo words", tags=["fixed"]), now=T0 + 2 * US
        )
    assert (e.title, e.content, e.tags, e.type) == ("Typo", "bravo words", ["fixed"], "project")
    assert e.content_hash == entries.content_hash("bravo words").hex()
    with db:
        entries.forget(db, users.first_viewer(db, tenant), eid, now=T0 + US)
    before = db.execute("SELECT * FROM entries WHERE id = ?", (eid,)).fetchone()
    with pytest.raises(NotFound), db:
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=eid, title="Too late"), now=T0 + 2 * US)
    assert db.execute("SELECT * FROM entries WHERE id = ?", (eid,)).fetchone() == before


def test_forget_is_idempotent(db, tenant):
    eid = remember(db, tenant)
    with db:
        assert entries.forget(db, users.first_viewer(db, tenant), eid, now=T0 + 5) is True
    row = db.execute("SELECT * FROM entries WHERE id = ?", (eid,)).fetchone()
    with db:
        assert entries.forget(db, users.first_viewer(db, tenant), eid, now=T0 + 99) is False
    assert db.execute("SELECT * FROM entries WHERE id = ?", (eid,)).fetchone() == row
    assert entries.get(db, users.first_viewer(db, tenant), eid, as_of=T0 + 4).id == eid
    with pytest.raises(NotFound):
        entries.get(db, users.first_viewer(db, tenant), eid)


def test_forget_of_a_missing_id_is_not_found(db, tenant):
    with pytest.raises(NotFound) as info, db:
        entries.forget(db, users.first_viewer(db, tenant), 777, now=T0)
    assert info.value.path == "id"


def test_purge_removes_entry_relations_and_index_rows(db, tenant):
    a = remember(db, tenant, content="zebra crossing")
    b = remember(db, tenant, content="yak shaving")
    with db:
        relations.link(db, users.first_viewer(db, tenant), a, "relates_to", b, now=T0)
        relations.link(db, users.first_viewer(db, tenant), b, "supports", a, now=T0)
    with db:
        entries.purge(db, users.first_viewer(db, tenant), a)
    assert db.execute("SELECT count(*) FROM entries WHERE id = ?", (a,)).fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM relations").fetchone()[0] == 0
    if not engine.is_postgresql(db):  # FULLTEXT
        assert db.execute(f"SELECT count(*) FROM {FTS}_docsize WHERE id = ?", (a,)).fetchone()[0] == 0
        assert matches(db, "zebra") == []
        assert matches(db, "yak") == [b]
        fts_ok(db)
    with pytest.raises(NotFound), db:
        entries.purge(db, users.first_viewer(db, tenant), a)


def test_a_purged_id_is_never_reused(db, tenant):
    newest = remember(db, tenant, content="to be purged")
    with db:
        entries.purge(db, users.first_viewer(db, tenant), newest)
    after = remember(db, tenant, content="next")
    assert after > newest
    with db:
        entries.purge(db, users.first_viewer(db, tenant), after)
        bulk = entries.remember_many(db, users.first_viewer(db, tenant), [RememberParams(type="project", title=f"t{i}", content="c") for i in range(3)], now=T0
        )
    assert bulk == [after + 1, after + 2, after + 3]


def test_purge_keeps_replies_but_unparents_them(db, tenant):
    root = remember(db, tenant)
    child = remember(db, tenant, parent_id=root)
    with db:
        entries.purge(db, users.first_viewer(db, tenant), root)
    assert entries.get(db, users.first_viewer(db, tenant), child).parent_id is None


def test_history_walks_the_chain_both_ways(db, tenant):
    a = remember(db, tenant, title="v1", now=T0)
    b = remember(db, tenant, title="v2", now=T0 + US, supersedes_ids=[a])
    c = remember(db, tenant, title="v3", now=T0 + 2 * US, supersedes_ids=[b])
    unrelated = remember(db, tenant, title="other", now=T0 + 3 * US)
    with db:
        relations.link(db, users.first_viewer(db, tenant), c, "relates_to", unrelated, now=T0 + 4 * US)
    for start in (a, b, c):
        with db:
            chain, edges, _ = entries.history(db, users.first_viewer(db, tenant), start)
        assert [e.id for e in chain] == [a, b, c]
        assert [(r.source_id, r.relation, r.target_id) for r in edges] == [(b, "supersedes", a), (c, "supersedes", b)]
    assert entries.get(db, users.first_viewer(db, tenant), a, as_of=T0).superseded_by == [b]
    with db:
        chain, edges, _ = entries.history(db, users.first_viewer(db, tenant), unrelated)
    assert [e.id for e in chain] == [unrelated] and edges == []


def test_supersedes_retires_the_old_entries_at_the_new_valid_from(db, tenant):
    old1 = remember(db, tenant, now=T0)
    old2 = remember(db, tenant, now=T0)
    new = remember(db, tenant, now=T0 + 10 * US, supersedes_ids=[old1, old2, old1])
    for old in (old1, old2):
        assert db.execute("SELECT valid_to FROM entries WHERE id = ?", (old,)).fetchone()[0] == T0 + 10 * US
        assert entries.get(db, users.first_viewer(db, tenant), old, as_of=T0 + 9 * US).superseded_by == [new]
    assert listed(db, tenant) == [new]


def test_supersedes_with_one_missing_id_writes_nothing(db, tenant, other):
    old = remember(db, tenant)
    theirs = remember(db, other)
    for bad in (999, theirs):
        before = counts(db)
        with pytest.raises(NotFound) as info, db:
            remember(db, tenant, supersedes_ids=[old, bad])
        assert info.value.path == "supersedes_ids[1]"
        assert counts(db) == before
        assert entries.get(db, users.first_viewer(db, tenant), old).valid_to is None


def test_speaker_is_kept_and_shown(db, tenant):
    with db:
        said = entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="context", title="t", content="c", speaker="Caroline"),
                                now=T0)
        plain = entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="context", title="t", content="c"), now=T0)
        many = entries.remember_many(db, users.first_viewer(db, tenant), [RememberParams(type="context", title="t", content="c",
                                                                 speaker="user")], now=T0)
    assert entries.get(db, users.first_viewer(db, tenant), said).speaker == "Caroline"
    assert entries.get(db, users.first_viewer(db, tenant), plain).speaker is None
    assert entries.get(db, users.first_viewer(db, tenant), many[0]).speaker == "user"
    if not engine.is_postgresql(db):  # FULLTEXT
        # Never searched as text: the name is not in the index.
        index = fts.table(tenant)
        assert db.execute(f"SELECT count(*) FROM {index} WHERE {index} MATCH 'caroline'").fetchone()[0] == 0


def test_remember_refuses_foreign_parent_and_conversation(db, tenant, other):
    theirs = remember(db, other)
    with db:
        their_conv = tenants.create_conversation(db, users.first_viewer(db, other), "theirs", now=T0).id
    before = counts(db)
    with pytest.raises(NotFound) as info:
        remember(db, tenant, parent_id=theirs)
    assert info.value.path == "parent_id"
    with pytest.raises(NotFound) as info:
        remember(db, tenant, conversation_id=their_conv)
    assert info.value.path == "conversation_id"
    assert counts(db) == before


def test_remember_many_keeps_input_order_and_supersedes(db, tenant):
    old = remember(db, tenant, title="old")
    items = [RememberParams(type="user", title=f"n{i}", content=f"bulk item {i} quokka") for i in range(1203)]
    items[700] = RememberParams(type="user", title="n700", content="replaces old", supersedes_ids=[old])
    with db:
        ids = entries.remember_many(db, users.first_viewer(db, tenant), items, now=T0 + 1)
    assert ids == list(range(old + 1, old + 1 + len(items)))
    assert [entries.get(db, users.first_viewer(db, tenant), i).title for i in ids[:3]] == ["n0", "n1", "n2"]
    assert entries.get(db, users.first_viewer(db, tenant), ids[-1]).title == "n1202"
    assert entries.get(db, users.first_viewer(db, tenant), old, as_of=T0).superseded_by == [ids[700]]
    if not engine.is_postgresql(db):  # FULLTEXT
        assert len(matches(db, "quokka")) == 1202
    fts_ok(db)


def test_remember_many_ids_match_rows_across_insert_chunks(db, tenant):
    items = [RememberParams(type="context", title=f"turn {i}", content=f"c{i}") for i in range(1203)]
    with db:
        ids = entries.remember_many(db, users.first_viewer(db, tenant), items, now=T0)
    titles = dict(db.execute("SELECT id, title FROM entries"))
    assert [titles[i] for i in ids] == [p.title for p in items]


def test_remember_many_is_all_or_nothing(db, tenant, other):
    theirs = remember(db, other)
    before = counts(db)
    items = [RememberParams(type="user", title="t", content="fine")] * 600
    items = [*items, RememberParams(type="user", title="t", content="bad", parent_id=theirs)]
    with pytest.raises(NotFound) as info, db:
        entries.remember_many(db, users.first_viewer(db, tenant), items, now=T0)
    assert info.value.path == "entries[600].parent_id"
    assert counts(db) == before
    fts_ok(db)


# ---- validity windows ------------------------------------------------------------


def test_validity_is_half_open_at_valid_to(db, tenant):
    eid = remember(db, tenant, now=T0)
    t1 = T0 + 3 * US
    with db:
        entries.forget(db, users.first_viewer(db, tenant), eid, now=t1)
    assert entries.get(db, users.first_viewer(db, tenant), eid, as_of=t1 - 1).id == eid
    with pytest.raises(NotFound):
        entries.get(db, users.first_viewer(db, tenant), eid, as_of=t1)
    assert entries.get(db, users.first_viewer(db, tenant), eid, as_of=T0).id == eid
    with pytest.raises(NotFound):
        entries.get(db, users.first_viewer(db, tenant), eid, as_of=T0 - 1)
    assert listed(db, tenant, as_of=format_time(t1 - 1)) == [eid]
    assert listed(db, tenant, as_of=format_time(t1)) == []
    assert listed(db, tenant, as_of=format_time(T0 - 1)) == []


def test_supersession_boundary(db, tenant):
    old = remember(db, tenant, now=T0)
    t1 = T0 + US
    new = remember(db, tenant, now=t1, supersedes_ids=[old])
    assert listed(db, tenant, as_of=format_time(t1 - 1)) == [old]
    assert listed(db, tenant, as_of=format_time(t1)) == [new]


def test_a_window_never_ends_before_it_starts(db, tenant):
    late = remember(db, tenant, now=T0 + 200 * US, valid_from=(T0 + 100 * US) / US)
    # The new entry says it held from before `late` began: `late` retires at its own start.
    remember(db, tenant, now=T0 + 300 * US, valid_from=(T0 + 50 * US) / US, supersedes_ids=[late])
    vfrom, vto = db.execute("SELECT valid_from, valid_to FROM entries WHERE id = ?", (late,)).fetchone()
    assert vto == vfrom  # an empty window: never visible
    assert late not in listed(db, tenant, as_of=format_time(vfrom))


def test_a_valid_from_in_the_future_is_refused(db, tenant):
    with pytest.raises(InvalidParams) as err:
        remember(db, tenant, now=T0, valid_from=(T0 + 1) / US)
    assert err.value.path == "valid_from" and "future" in err.value.message
    assert listed(db, tenant) == []


# ---- relations ---------------------------------------------------------------------


def test_every_relation_type_is_registered_and_allowed():
    from arbiter.model import RELATION_TYPES

    assert set(relations.REGISTRY) == set(RELATION_TYPES)
    assert relations.REGISTRY["supersedes"].on_insert is not None
    assert all(k.on_insert is None for n, k in relations.REGISTRY.items() if n != "supersedes")


def test_link_and_unlink(db, tenant):
    a, b = remember(db, tenant), remember(db, tenant)
    with db:
        r = relations.link(db, users.first_viewer(db, tenant), a, "refines", b, now=T0)
    assert (r.source_id, r.relation, r.target_id, r.created_at) == (a, "refines", b, format_time(T0))
    with db:
        relations.unlink(db, users.first_viewer(db, tenant), a, "refines", b)
    with pytest.raises(NotFound), db:
        relations.unlink(db, users.first_viewer(db, tenant), a, "refines", b)


def test_causes_takes_a_qualifier_and_no_other_relation_does(db, tenant):
    from arbiter.model import RelationQualifier
    from typing import get_args

    # The registry and the column's CHECK (m019) name the same qualifiers.
    assert set(relations.REGISTRY["causes"].qualifiers) == set(get_args(RelationQualifier))
    a, b, c = remember(db, tenant), remember(db, tenant), remember(db, tenant)
    v = users.first_viewer(db, tenant)
    with db:
        r = relations.link(db, v, a, "causes", b, now=T0, qualifier="enables")
        relations.link(db, v, c, "causes", b, now=T0)
    assert r.qualifier == "enables"
    assert [(x.source_id, x.qualifier) for x in relations.edges_touching(db, v, b)] == [(a, "enables"), (c, None)]
    before = counts(db)
    for relation, qualifier, said in (("supports", "enables", "supports takes no qualifier: 'enables' qualifies only causes"),
                                      ("causes", "because", "'because' is not a qualifier (causes takes enables or prevents)")):
        with pytest.raises(InvalidParams) as info, db:
            relations.link(db, v, c, relation, a, now=T0, qualifier=qualifier)
        assert info.value.path == "qualifier" and info.value.message.startswith(said)
    with pytest.raises(Conflict), db:  # one causal link a pair, whatever its qualifier
        relations.link(db, v, a, "causes", b, now=T0, qualifier="prevents")
    assert counts(db) == before
    with pytest.raises(refused(db)), db:  # the column refuses it too, whoever writes
        db.execute("INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at, qualifier) "
                   "VALUES (?, ?, ?, 'supports', 0, 'prevents')", (tenant, c, a))


def test_duplicate_relation_is_a_conflict_naming_the_existing_one(db, tenant):
    a, b = remember(db, tenant), remember(db, tenant)
    with db:
        r = relations.link(db, users.first_viewer(db, tenant), a, "supports", b, now=T0)
    before = counts(db)
    with pytest.raises(Conflict) as info, db:
        relations.link(db, users.first_viewer(db, tenant), a, "supports", b, now=T0 + 1)
    assert info.value.existing_id == r.id
    assert counts(db) == before
    with db:  # the reverse direction and another label are different edges
        relations.link(db, users.first_viewer(db, tenant), b, "supports", a, now=T0)
        relations.link(db, users.first_viewer(db, tenant), a, "relates_to", b, now=T0)


def test_self_loop_is_invalid(db, tenant):
    a = remember(db, tenant)
    with pytest.raises(InvalidParams) as info, db:
        relations.link(db, users.first_viewer(db, tenant), a, "relates_to", a, now=T0)
    assert info.value.path == "target_id"


@pytest.mark.parametrize("end", ["source_id", "target_id"])
def test_cross_tenant_end_is_indistinguishable_from_a_missing_id(db, tenant, other, end):
    mine = remember(db, tenant)
    theirs = remember(db, other)
    missing = theirs + 1000

    def attempt(foreign):
        ends = (foreign, mine) if end == "source_id" else (mine, foreign)
        with pytest.raises(NotFound) as info, db:
            relations.link(db, users.first_viewer(db, tenant), ends[0], "relates_to", ends[1], now=T0)
        return info.value

    got, baseline = attempt(theirs), attempt(missing)
    assert got.path == baseline.path == end
    assert got.message == baseline.message.replace(str(missing), str(theirs))
    assert db.execute("SELECT count(*) FROM relations").fetchone()[0] == 0


def test_supersedes_link_retires_its_target(db, tenant):
    a, b = remember(db, tenant), remember(db, tenant)
    with db:
        relations.link(db, users.first_viewer(db, tenant), b, "supersedes", a, now=T0 + 7)
    assert db.execute("SELECT valid_to FROM entries WHERE id = ?", (a,)).fetchone()[0] == T0 + 7
    with db:  # unlinking does not revive it
        relations.unlink(db, users.first_viewer(db, tenant), b, "supersedes", a)
    with pytest.raises(NotFound):
        entries.get(db, users.first_viewer(db, tenant), a)


# ---- FTS index -----------------------------------------------------------------------


def test_fts_follows_update_forget_and_purge(db, tenant):
    a = remember(db, tenant, title="Kettle", content="descale the kettle monthly", tags=["home"])
    b = remember(db, tenant, title="Garden", content="water the ferns", source="notebook")
    fts_ok(db)
    assert matches(db, "kettle") == [a]
    with db:
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=a, content="replace the teapot", tags=["kitchen"]), now=T0 + 2 * US
        )
    fts_ok(db)
    assert matches(db, "descale") == []
    assert matches(db, "teapot") == [a]
    assert matches(db, "kitchen") == [a]
    assert matches(db, "home") == []
    assert matches(db, "kettle") == [a]  # still in the title
    with db:
        entries.forget(db, users.first_viewer(db, tenant), b, now=T0 + 1)
    fts_ok(db)
    assert matches(db, "ferns") == [b]  # retired rows stay searchable for as_of reads
    with db:
        entries.purge(db, users.first_viewer(db, tenant), b)
    fts_ok(db)
    assert matches(db, "ferns") == [] and matches(db, "notebook") == []
    if not engine.is_postgresql(db):
        assert db.execute(f"SELECT count(*) FROM {FTS}_docsize").fetchone()[0] == 1


def test_a_failed_transaction_leaves_no_index_rows(db, tenant):
    before = counts(db)
    with pytest.raises(NotFound), db:  # like remember_many: the first write lands, the second fails
        entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="user", title="t", content="orphaned walrus"), now=T0)
        entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="user", title="t", content="x", parent_id=4242), now=T0)
    assert counts(db) == before
    if not engine.is_postgresql(db):  # FULLTEXT
        assert matches(db, "walrus") == []
    fts_ok(db)


def test_readers_see_committed_writes_only(tmp_path):
    path = tmp_path / "a.db"
    writer = open_database(path)
    with writer:
        tid, _ = tenants.create_tenant(writer, "t", now=T0)
    reader = connect(path)
    writer.execute("BEGIN IMMEDIATE")
    entries.remember(writer, users.first_viewer(writer, tid), RememberParams(type="user", title="x", content="y"), now=T0)
    assert reader.execute("SELECT count(*) FROM entries").fetchone()[0] == 0  # not blocked, not dirty
    writer.execute("COMMIT")
    assert reader.execute("SELECT count(*) FROM entries").fetchone()[0] == 1
    reader.close()
    writer.close()


def test_check_constraints_back_the_model(db, tenant):
    with pytest.raises(refused(db)), db:
        db.execute(
            f"INSERT INTO entries(tenant_id, type, title, {stored_text.column(db)}, recorded_at, valid_from) "
            "VALUES (?, 'gossip', 't', ?, 0, 0)",
            (tenant, stored_text.stored(db, "c")),
        )


def test_tenant_names_are_unique(db, tenant):
    with pytest.raises(Conflict) as info, db:
        tenants.create_tenant(db, "alice", now=T0)
    assert info.value.existing_id == tenant


# ---- record time -------------------------------------------------------------------


def test_a_change_without_its_record_time_is_refused(db, tenant):
    eid = remember(db, tenant, content="kept")
    with pytest.raises(refused(db), match="revised_at"), db:
        db.execute(f"UPDATE entries SET {stored_text.column(db)} = ? WHERE id = ?", (stored_text.stored(db, "rewritten"), eid))
    assert entries.get(db, users.first_viewer(db, tenant), eid).content == "kept"
    assert db.execute("SELECT count(*) FROM entry_revisions").fetchone()[0] == 0


def test_purge_deletes_the_revisions_and_their_index_rows(db, tenant):
    eid = remember(db, tenant, content="walrus")
    with db:
        entries.update(db, users.first_viewer(db, tenant), UpdateParams(id=eid, content="narwhal"), now=T0 + US)
        entries.forget(db, users.first_viewer(db, tenant), eid, now=T0 + 2 * US)
    assert db.execute("SELECT count(*) FROM entry_revisions").fetchone()[0] == 2
    with db:
        entries.purge(db, users.first_viewer(db, tenant), eid)
    assert db.execute("SELECT count(*) FROM entry_revisions").fetchone()[0] == 0
    if engine.is_postgresql(db):  # FULLTEXT
        return
    db.execute("INSERT INTO entry_revisions_fts(entry_revisions_fts, rank) VALUES ('integrity-check', 1)")
    found = db.execute("SELECT count(*) FROM entry_revisions_fts WHERE entry_revisions_fts MATCH 'walrus'")
    assert found.fetchone()[0] == 0


def test_a_supersedes_cycle_left_by_an_older_database_is_refused(db, tenant):
    # Round 1 accepted `supersedes` from retired entries; a database it wrote may hold such a chain.
    a, b = remember(db, tenant, title="a"), remember(db, tenant, title="b")
    with db:
        db.execute(
            "INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at) "
            "VALUES (?, ?, ?, 'supersedes', ?)",
            (tenant, a, b, T0),
        )
    with pytest.raises(InvalidParams, match="cycle"), db:
        relations.link(db, users.first_viewer(db, tenant), b, "supersedes", a, now=T0 + US)
    assert entries.get(db, users.first_viewer(db, tenant), a).valid_to is None


def test_m017_gives_earlier_batches_to_their_tenants_first_user(tmp_path, monkeypatch):
    from arbiter.store import db as store_db

    monkeypatch.setattr(store_db, "MIGRATIONS", MIGRATIONS[:16])
    conn = open_database(tmp_path / "a.db")
    with conn:
        tenants.create_tenant(conn, "x", now=T0)
        users.create_user(conn, 1, "extra", now=T0)  # so tenant y's first user is not numbered as the tenant
        y, _ = tenants.create_tenant(conn, "y", now=T0)
        conn.execute("INSERT INTO patch_batches(tenant_id, origin, status, threshold, created_at) "
                     "VALUES (?, 'agent', 'proposed', 0.5, 1)", (y,))
    monkeypatch.undo()
    store_db.migrate(conn)
    first = users.first_user(conn, y)
    assert first != y
    assert conn.execute("SELECT author_id, scope_id FROM patch_batches").fetchall() == [
        (first, users.first_viewer(conn, y).private_scope)]
    conn.close()


# ---- several writers (PostgreSQL) ----------------------------------------------------


@pytest.mark.parametrize("what", ["team", "relation"])
def test_two_writers_adding_one_thing_at_once_get_one_row_and_a_conflict(pg_url, what):
    """Daemons sharing a database may add the same team, or the same edge, at once: the second waits for the
    first and is told it exists (Conflict, naming it), never a constraint error."""
    import threading

    from tests import pg

    first, second = connect(pg_url), connect(pg_url)
    try:
        with first:
            tid, _ = tenants.create_tenant(first, "alice", now=T0)
        a, b = remember(first, tid, title="a"), remember(first, tid, title="b")

        def add(conn) -> int:
            if what == "team":
                return users.create_team(conn, tid, "core", now=T0)
            return relations.link(conn, users.first_viewer(conn, tid), a, "supports", b, now=T0).id

        outcome = {}

        def add_again():
            try:
                with second:
                    add(second)
            except Conflict as e:
                outcome["conflict"] = e.existing_id

        with first:
            made = add(first)
            racer = threading.Thread(target=add_again)
            racer.start()
            pg.wait_until_blocked(first)
        racer.join()
        assert outcome == {"conflict": made}
        table = "teams" if what == "team" else "relations"
        assert first.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 1
    finally:
        first.close()
        second.close()


def test_two_writers_closing_a_supersedes_cycle_at_once_keep_one_half(pg_url):
    """Daemons sharing a database may be asked `a supersedes b` and `b supersedes a` at once: each half reads the
    other's ends as active until it commits. The second waits for the first and is refused (its target retired),
    so no cycle is stored and one of the two stays active."""
    import threading

    from tests import pg

    first, second = connect(pg_url), connect(pg_url)
    try:
        with first:
            tid, _ = tenants.create_tenant(first, "alice", now=T0)
        a, b = remember(first, tid, title="a"), remember(first, tid, title="b")
        outcome = {}

        def reverse():
            try:
                with second:
                    relations.link(second, users.first_viewer(second, tid), b, "supersedes", a, now=T0)
                outcome["linked"] = True
            except InvalidParams as e:
                outcome["refused"] = e.path

        with first:
            relations.link(first, users.first_viewer(first, tid), a, "supersedes", b, now=T0)
            racer = threading.Thread(target=reverse)
            racer.start()
            pg.wait_until_blocked(first)
        racer.join()
        assert outcome == {"refused": "source_id"}  # b, the reverse half's source, was retired by the first half
        assert first.execute("SELECT source_id, target_id FROM relations WHERE relation = 'supersedes'").fetchall() \
            == [(a, b)]
        assert first.execute("SELECT id FROM entries WHERE valid_to IS NULL").fetchall() == [(a,)]
    finally:
        first.close()
        second.close()
