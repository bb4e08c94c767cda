"""`transfer.migrate`: a home moved between SQLite and PostgreSQL exports the same lines, keeps its ids and tokens."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from arbiter._time import US
from arbiter.errors import Conflict, InvalidParams, StorageFull, Unavailable
from arbiter.model import RememberParams, UpdateParams
from arbiter.store import connect, engine, entries, open_database, relations, tenants, users
from arbiter.transfer import dump, migrate
from arbiter.transfer.model import KINDS, PEOPLE_KINDS, ExportPageParams

T0 = 1795168800 * US  # 2026-11-20T10:00:00Z
HOUR = 3600 * US

#: The tables each kind of export record reads: a kind is compared once both engines have them (entities and
#: facts on PostgreSQL arrive with p003_features.sql).
_READS = {
    "user": {"users"}, "team": {"teams"}, "member": {"team_members"}, "conversation": {"conversations"},
    "entry": {"entries"}, "revision": {"entry_revisions"}, "relation": {"relations"}, "salience": {"entry_salience"},
    "retirement": {"entry_retirements"}, "entity": {"entities", "entity_names"}, "entity_merge": {"entities"},
    "mention": {"entry_entities", "entities"}, "entity_relation": {"entity_relations", "entities"},
    "entity_event": {"entity_events", "entities"}, "predicate": {"predicates", "facts"},
    "fact_batch": {"patch_batches", "facts"}, "fact": {"facts", "fact_revisions"}, "fact_link": {"fact_sources"},
}


def build(conn) -> dict[str, str]:
    """A home of two tenants: users, a team one of them left, private and shared entries, a conversation, a thread,
    an update (an earlier state), a supersession, a relation, a forgotten entry, and a purged one (the newest id).
    Returns the tokens issued."""
    now = iter(range(T0, T0 + 1000 * HOUR, HOUR))
    with conn:
        alice_t, alice_token = tenants.create_tenant(conn, "alice", now=next(now))
        bob, bob_token = users.create_user(conn, alice_t, "bob", now=next(now))
        core = users.create_team(conn, alice_t, "core", now=next(now))
        alice = users.first_user(conn, alice_t)
        users.join(conn, core, alice, now=next(now))
        users.join(conn, core, bob, now=next(now))
        zed_t, zed_token = tenants.create_tenant(conn, "zed", now=next(now))
    a = users.viewer(conn, alice_t, alice, "alice")
    b = users.viewer(conn, alice_t, bob, "bob")
    z = users.first_viewer(conn, zed_t)

    def remember(v, **kw):
        with conn:
            return entries.remember(conn, v, RememberParams(**{"type": "project", **kw}), now=next(now))

    with conn:
        chat = tenants.create_conversation(conn, b, "planning", now=next(now)).id
    first = remember(a, title="Ship v1", content="Target: Friday, 3 reviewers", tags=["release", "v1"])
    remember(a, title="Ship v1 slips", content="Target: Monday", tags=["release"], supersedes_ids=[first])
    shared = remember(b, title="Design doc", content="The store has two engines. " * 40, team="core",
                      conversation_id=chat, speaker="bob")
    remember(a, type="feedback", title="Re: design", content="I like it", parent_id=shared)
    noted = remember(a, type="learning", title="Naming", content="Names say what a thing is", tags=["style"])
    with conn:
        entries.update(conn, a, UpdateParams(id=noted, content="Names say what a thing is in the domain",
                                             tags=["style", "words"]), now=next(now))
        relations.link(conn, a, noted, "relates_to", first, now=next(now))
    gone = remember(a, type="context", title="Scratch", content="to forget")
    with conn:
        entries.forget(conn, a, gone, now=next(now))
        users.leave(conn, core, bob, now=next(now))
    remember(z, type="user", title="Zed's own", content="Another tenant's private note", tags=["release"])
    purged = remember(z, type="context", title="Oops", content="written by mistake")
    with conn:
        entries.purge(conn, z, purged)
    return {"alice": alice_token, "bob": bob_token, "zed": zed_token}


def export(conn, kinds) -> list[bytes]:
    """Every tenant's records of `kinds`, whole (the pages `arbiter export --all` writes, by the same code)."""
    lines = []
    for tenant_id, name in conn.execute("SELECT id, name FROM tenants ORDER BY name").fetchall():
        v = users.whole_tenant(tenant_id)
        for kind in kinds:
            after = 0
            while after is not None:
                page = dump.page(conn, v, ExportPageParams(kind=kind, after=after, limit=3))
                lines += [bytes(r) for r in page.records]
                after = page.next
        lines.append(name.encode())
    return lines


def compared(a, b) -> list[str]:
    """The export kinds whose tables both stores have."""
    have = migrate.table_names(a) & migrate.table_names(b)
    return [k for k in PEOPLE_KINDS + KINDS if _READS[k] <= have]


def same_rows(a, b, table: migrate.Table) -> bool:
    """Whether two stores hold the same rows of `table`, in the columns both have (PostgreSQL gives some tables a
    tenant_id SQLite derives; SQLite's text is also a packed column)."""
    theirs = migrate.table_columns(b, table.name)[0]
    both = [c for c in migrate.table_columns(a, table.name)[0] if c in theirs and c != "content_z"]
    query = f"SELECT {', '.join(both)} FROM {table.name} ORDER BY {', '.join(table.key)}"
    return a.execute(query).fetchall() == b.execute(query).fetchall()


def moved_where_held(home, tmp_path, pg_url, table: str, kinds: set[str]) -> list:
    """Move `home` into a new SQLite file, into PostgreSQL, and from there into another new file, wherever the
    target's engine holds `table` (PostgreSQL: once p003_features.sql does): each copy exports the same records
    of `kinds` (and every other kind) and holds the same rows as `home`. Where the engine lacks it, the move is
    refused and writes nothing. Returns the SQLite copies made."""
    made = []
    for source, target in ((home, tmp_path / "copy.db"), (home, pg_url), (pg_url, tmp_path / "back.db")):
        if source == pg_url and pg_url not in made:
            break  # nothing went into PostgreSQL to come back
        probe = open_database(target)
        holds = table in migrate.table_names(probe)
        probe.close()
        if not engine.is_url(target):
            target.unlink()  # opened above to look: a move writes only a new file
        if not holds:
            with pytest.raises(InvalidParams):
                migrate.migrate(source, target)
            if engine.is_url(target):
                check = connect(target)
                assert check.execute("SELECT count(*) FROM tenants").fetchone()[0] == 0
                check.close()
            continue
        migrate.migrate(source, target)
        made.append(target)
        original, copy = connect(home), connect(target)
        try:
            assert kinds <= set(compared(original, copy))
            assert export(original, compared(original, copy)) == export(copy, compared(original, copy))
            for t in migrate.TABLES:
                if t.name in migrate.table_names(original) & migrate.table_names(copy):
                    assert same_rows(original, copy, t), (target, t.name)
        finally:
            original.close()
            copy.close()
    return [m for m in made if not engine.is_url(m)]


def test_a_home_moved_to_postgresql_and_back_exports_the_same_lines(tmp_path, pg_url):
    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    tokens = build(conn)
    conn.close()

    moved = migrate.migrate(home, pg_url)
    back = tmp_path / "back.db"
    returned = migrate.migrate(pg_url, back)
    assert moved.rows["entries"] == returned.rows["entries"] == 7  # the forgotten one too; not the purged one

    sq, pg, again = connect(home), connect(pg_url), open_database(back)
    try:
        kinds = compared(sq, pg)
        assert {"user", "team", "member", "entry", "revision", "relation", "conversation"} <= set(kinds)
        assert export(sq, kinds) == export(pg, kinds) == export(again, compared(sq, again))
        # Planned with statistics from the first recall, not once autovacuum comes round.
        assert pg.execute("SELECT count(*) FROM pg_stat_user_tables WHERE relname IN ('entries', 'relations') "
                          "AND last_analyze IS NOT NULL").fetchone()[0] == 2
        # Earlier states: the superseded entry's, the updated one's, the forgotten one's.
        assert len(export(sq, ["revision"])) == 3 + 2  # and a line naming each tenant
        for table in migrate.TABLES:  # the rows themselves, ids and all, not only what an export shows
            if table.name in migrate.table_names(sq) & migrate.table_names(pg):
                assert same_rows(sq, pg, table) and same_rows(sq, again, table), table.name
        for name, token in tokens.items():  # the home's token files still open it
            assert users.user_by_token(again, users.hash_token(token))[3] == name
            assert users.user_by_token(pg, users.hash_token(token))[3] == name
        # The purged entry's id is not handed out again on either engine.
        top = sq.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entries'").fetchone()[0]
        z = users.first_viewer(pg, pg.execute("SELECT id FROM tenants WHERE name = 'zed'").fetchone()[0])
        for target in (pg, again):
            with target:
                new = entries.remember(target, users.first_viewer(target, z.tenant_id),
                                       RememberParams(type="user", title="after", content="after the move"), now=T0)
            assert new == top + 1
    finally:
        for c in (sq, pg, again):
            c.close()


def test_a_session_closing_as_the_move_starts_is_waited_for_and_one_that_stays_refuses_it(tmp_path, pg_url):
    """A daemon just stopped leaves its sessions listed until their server processes exit: the move waits them out,
    and is refused only by a session still there after that (tests/integration/test_migrate.py serves one)."""
    import threading

    import psycopg

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    daemon_like = psycopg.connect(pg_url, application_name="arbiter")
    closing = threading.Timer(0.3, daemon_like.close)
    closing.start()
    try:
        migrate.migrate(home, pg_url)
    finally:
        closing.join()
    moved = connect(pg_url)
    assert moved.execute("SELECT count(*) FROM entries").fetchone()[0] > 0
    moved.close()
    staying = psycopg.connect(pg_url, application_name="arbiter")
    try:
        with pytest.raises(Unavailable):
            migrate.migrate(pg_url, tmp_path / "back.db")
    finally:
        staying.close()
    assert not (tmp_path / "back.db").exists()


def test_the_sqlite_copy_searches_every_scope(tmp_path, pg_url):
    """Each scope's full-text index is made and filled on a SQLite target (a move never writes through fts's
    triggers otherwise), and the past-text index too."""
    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    migrate.migrate(home, pg_url)
    back = tmp_path / "back.db"
    migrate.migrate(pg_url, back)
    before, after = connect(home), connect(back)
    try:
        scopes = [r[0] for r in before.execute("SELECT id FROM scopes ORDER BY id")]
        for scope in scopes:
            query = f"SELECT rowid FROM entries_fts_{scope} WHERE entries_fts_{scope} MATCH ? ORDER BY rowid"
            for word in ("target", "engines", "names", "release", "private"):
                assert after.execute(query, (word,)).fetchall() == before.execute(query, (word,)).fetchall()
        past = "SELECT rowid FROM entry_revisions_fts WHERE entry_revisions_fts MATCH 'names' ORDER BY rowid"
        assert after.execute(past).fetchall() == before.execute(past).fetchall() != []
        assert after.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        before.close()
        after.close()


def test_a_target_holding_a_memory_is_refused_and_left_as_it_was(tmp_path, pg_url):
    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    other = connect(pg_url)
    with other:
        tenants.create_tenant(other, "default", now=T0)
    other.close()
    with pytest.raises(Conflict):
        migrate.migrate(home, pg_url)
    check = connect(pg_url)
    try:
        assert check.execute("SELECT name FROM tenants").fetchall() == [("default",)]
    finally:
        check.close()
    existing = tmp_path / "taken.db"
    existing.write_bytes(b"mine")
    with pytest.raises(Conflict):
        migrate.migrate(home, existing)
    assert existing.read_bytes() == b"mine"


def test_a_failed_move_leaves_no_target_behind(tmp_path, pg_url):
    """A row the target refuses midway rolls the whole copy back: PostgreSQL keeps no row; no SQLite file appears."""
    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.execute("PRAGMA foreign_keys = OFF")  # a relation to an entry that is not there, which no target takes
    with conn:
        conn.execute("UPDATE relations SET target_id = 99999 WHERE relation = 'relates_to'")
    conn.close()
    with pytest.raises(InvalidParams):
        migrate.migrate(home, pg_url)
    check = connect(pg_url)
    try:
        assert check.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
        assert check.execute("SELECT count(*) FROM tenants").fetchone()[0] == 0
    finally:
        check.close()
    with pytest.raises(InvalidParams):
        migrate.migrate(home, tmp_path / "copy.db")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == []


def test_a_source_that_is_not_an_arbiter_store_is_refused(tmp_path, pg_databases):
    empty = pg_databases.create(empty=True)
    try:
        with pytest.raises(InvalidParams):
            migrate.migrate(empty, tmp_path / "copy.db")
        assert not (tmp_path / "copy.db").exists()
    finally:
        pg_databases.drop(empty)
    with pytest.raises(InvalidParams):
        migrate.migrate(tmp_path / "missing.db", tmp_path / "copy.db")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database")
    other = tmp_path / "other.db"
    theirs = apsw.Connection(str(other))
    theirs.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY)")
    theirs.close()
    before = other.read_bytes()
    for source in (notes, other):
        with pytest.raises(InvalidParams):
            migrate.migrate(source, tmp_path / "copy.db")
    assert notes.read_text() == "not a database" and other.read_bytes() == before  # not even switched to WAL
    assert not (tmp_path / "copy.db").exists()


def test_a_home_is_not_moved_onto_itself(tmp_path):
    home = tmp_path / "arbiter.db"
    open_database(home).close()
    size = home.stat().st_size
    with pytest.raises(Conflict):
        migrate.migrate(home, home)
    assert home.stat().st_size == size


def test_a_home_named_by_a_relative_path_moves(tmp_path, monkeypatch):
    """The lock a daemon would hold is taken once, whether the path is given relative or absolute: taking it twice
    through two spellings of one file refused the move as if another daemon served it."""
    conn = open_database(tmp_path / "arbiter.db")
    build(conn)
    conn.close()
    monkeypatch.chdir(tmp_path)
    migrate.migrate(Path("arbiter.db"), Path("copy.db"))
    original, copy = connect(tmp_path / "arbiter.db"), connect(tmp_path / "copy.db")
    try:
        kinds = compared(original, copy)
        assert "entry" in kinds and export(original, kinds) == export(copy, kinds)
    finally:
        original.close()
        copy.close()


def test_derived_features_move_where_the_target_engine_holds_them(tmp_path, pg_url, monkeypatch):
    """Entities and mentions the derivers wrote move with their ids into a store that has their tables
    (SQLite; PostgreSQL once p003_features.sql holds them), an entity merged into a newer one too, read two rows a
    page (keys of one and of three columns); into a store that has not, the move is refused and writes nothing."""
    from arbiter import derive
    from arbiter.entities import core as entity_core

    monkeypatch.setattr(migrate, "PAGE", 2)

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    with conn:
        v = users.first_viewer(conn, 1)
        for text in ("Alice Martin from Acme Corp reviews the Apollo plan in Berlin",
                     "Apollo slips a week: Alice Martin asks Acme Corp for the parts"):
            entries.remember(conn, v, RememberParams(type="project", title="Apollo", content=text), now=T0)
        derive.drain(conn, now=T0 + 999 * HOUR, urgent=False)
        first_id, first_name = conn.execute("SELECT id, name FROM entities ORDER BY id LIMIT 1").fetchone()
        last_id, last_name = conn.execute("SELECT id, name FROM entities ORDER BY id DESC LIMIT 1").fetchone()
        entity_core.merge(conn, v, last_name, first_name, now=T0 + 999 * HOUR)
    merged = conn.execute("SELECT merged_into FROM entities WHERE id = ?", (first_id,)).fetchone()[0]
    assert merged == last_id > first_id + 2  # pages of two rows apart
    assert conn.execute("SELECT count(*) FROM derive_queue").fetchone()[0] == 0
    conn.close()
    moved_where_held(home, tmp_path, pg_url, "entities", {"entity", "mention"})
    back = connect(tmp_path / "copy.db")
    try:
        assert back.execute("SELECT count(*) FROM entry_entities").fetchone()[0] > 0
    finally:
        back.close()


def test_the_postgresql_copy_searches_every_scope(tmp_path, pg_url):
    """A copy into PostgreSQL is indexed as it is written (store/pg/indexing.py): each scope's index and the
    past-text index find what the SQLite home's FTS5 tables find."""
    from arbiter.store.pg import fulltext, indexing

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    migrate.migrate(home, pg_url)
    before, after = connect(home), connect(pg_url)
    try:
        scopes = [r[0] for r in before.execute("SELECT id FROM scopes ORDER BY id")]
        for scope in scopes:
            query = f"SELECT rowid FROM entries_fts_{scope} WHERE entries_fts_{scope} MATCH ? ORDER BY rowid"
            for word in ("target", "engines", "names", "release", "private"):
                found = fulltext.matching(after, indexing.scope_index(after, scope), f'"{word}"', 100)
                assert sorted(found) == [r[0] for r in before.execute(query, (word,))]
        past = "SELECT rowid FROM entry_revisions_fts WHERE entry_revisions_fts MATCH 'names' ORDER BY rowid"
        tenants = [r[0] for r in after.execute("SELECT id FROM tenants ORDER BY id")]
        held = sorted(i for t in tenants
                      for i in fulltext.matching(after, fulltext.Index(t, fulltext.REVISIONS), '"names"', 100))
        assert held == [r[0] for r in before.execute(past)] != []
        assert after.execute("SELECT count(*) FROM derive_queue WHERE deriver IN ('fulltext', 'past_text')"
                             ).fetchone()[0] == 0
    finally:
        before.close()
        after.close()


def test_facts_move_through_the_gate_with_their_history(tmp_path, pg_url):
    """Facts in every state (applied, superseded and so retired, rejected, still a candidate), their batches,
    sources, aspects and recorded states move as they stand: the target's gate lets each in by its own path (a
    candidate, then what it became), and every fact's recorded states read the same, into a store whose engine
    holds facts (SQLite; PostgreSQL once p003_features.sql does); into one that does not, nothing is moved."""
    import msgspec

    from arbiter.facts import verbs as fv
    from arbiter.facts.model import BatchIdParams, PredicateDeclareParams, ProposeParams
    from arbiter.verb import Context

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    now = iter(range(T0 + 500 * HOUR, T0 + 600 * HOUR, HOUR))
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'alice'").fetchone()[0]

    def call(verb, params):
        with conn:
            return verb(Context(conn, tenant, "alice", next(now)), params)

    def propose(*facts, apply=False):
        return call(fv.facts_propose, msgspec.convert({"facts": list(facts), "apply": apply}, ProposeParams))

    call(fv.predicate_declare, PredicateDeclareParams(name="works_at", functional=True))
    propose({"subject": "user", "predicate": "works_at", "object": "Acme", "valid_from": "2026-01-01T00:00:00Z",
             "sources": [1], "aspects": ["career"]}, apply=True)
    propose({"subject": "user", "predicate": "works_at", "object": "Globex", "valid_from": "2026-06-01T00:00:00Z",
             "confidence": 0.9, "aspects": ["career"]},
            {"subject": "user", "predicate": "listens_to", "object": "jazz", "aspects": ["music"]}, apply=True)
    rejected = propose({"subject": "user", "predicate": "lives_in", "object": "Berlin"})
    call(fv.batch_reject, BatchIdParams(id=rejected.id))
    propose({"subject": "user", "predicate": "enjoys", "object": "chess", "confidence": 0.7})
    assert {r[0] for r in conn.execute("SELECT status FROM facts")} == {"active", "rejected", "candidate"}
    assert conn.execute("SELECT count(*) FROM facts WHERE valid_to IS NOT NULL").fetchone()[0] == 1
    conn.close()

    searched = "SELECT rowid, subject, predicate, object, scope FROM facts_fts ORDER BY rowid"
    for copy in moved_where_held(home, tmp_path, pg_url, "facts", {"predicate", "fact_batch", "fact", "fact_link"}):
        before, after = connect(home), connect(copy)
        try:  # the facts' search index, filled as each fact became active
            assert after.execute(searched).fetchall() == before.execute(searched).fetchall() != []
        finally:
            before.close()
            after.close()


@pytest.mark.parametrize("room", [0, 200 * 1024], ids=["none", "some"])
def test_a_full_disk_is_said_and_leaves_nothing(tmp_path, small_disk, room):
    """No room even for the lock file, or room for it and part of the copy: either way `storage_full`, and the disk
    holds what it held."""
    from tests.conftest import fill

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    fill(small_disk / "ballast")
    os.truncate(small_disk / "ballast", (small_disk / "ballast").stat().st_size - room)
    with pytest.raises(StorageFull):
        migrate.migrate(home, small_disk / "copy.db")
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast"]


def test_postgresql_lost_mid_move_is_unavailable_and_leaves_nothing(tmp_path, pg_url):
    """The server ends the move's session after its first page (as a restart would): `unavailable`, and the target
    holds nothing, its transaction gone with the session."""
    import psycopg

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    ended = []

    def end_the_session(_n):
        if not ended:
            with psycopg.connect(pg_url, autocommit=True) as admin:
                ended.append(admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = %s", (migrate.APPLICATION,)).fetchall())

    with pytest.raises(Unavailable):
        migrate.migrate(home, pg_url, progress=end_the_session)
    assert ended == [[(True,)]]
    check = connect(pg_url)
    try:
        assert check.execute("SELECT count(*) FROM tenants").fetchone()[0] == 0
    finally:
        check.close()


def test_another_programs_postgresql_database_is_refused_untouched(tmp_path, pg_databases):
    import psycopg

    home = tmp_path / "arbiter.db"
    conn = open_database(home)
    build(conn)
    conn.close()
    theirs = pg_databases.create(empty=True)
    try:
        with psycopg.connect(theirs, autocommit=True) as c:
            c.execute("CREATE TABLE invoices(id int)")
        with pytest.raises(InvalidParams):
            migrate.migrate(home, theirs)
        with psycopg.connect(theirs, autocommit=True) as c:
            assert c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall() == [("invoices",)]
    finally:
        pg_databases.drop(theirs)
    empty = pg_databases.create(empty=True)  # a new database: the move sets up Arbiter's schema in it, then copies
    try:
        assert migrate.migrate(home, empty).rows["entries"] == 7
    finally:
        pg_databases.drop(empty)
