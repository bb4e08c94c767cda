"""PostgreSQL's write path, where it is built for speed (issue #31, "Performance"): what it writes is what was given,
and what the server derives is what SQLite derives."""

from __future__ import annotations

import psycopg
import pytest

from arbiter import verbs
from arbiter.model import RememberParams
from arbiter.server.runner import Caller, Runner
from arbiter.store import entries, open_database, tenants, users
from arbiter.store.db import numerals
from arbiter.store.pg import fulltext
from arbiter.store.pg.connection import Connection
from arbiter.store.pg.fulltext import ENTRIES, Index
from tests.unit.conftest import execute

T0 = 1795168800 * 1_000_000

# Texts at the edges of `numerals`: a number word against each kind of break, inside a longer word, after a
# digit, in capitals, beside punctuation that is no break, after each of the spaces Python's str.split() cuts at.
TEXTS = [
    None, "", "two", "Two", "x two", "twofold", "network", "(five)", "ten,", "two&", "two_x", "a-twelve-b",
    "nine's", "one", "1 two", "hello\tthree\n", "İ seven", "fifty/fifty", "\"Dozen\"", "seventy;", "twenty!?",
    "a hundred.", "thousand:s", "eleven*", "[six]", "sixty—", "zero nine", "ninety9", "tenth", "\u200bten",
] + [f"one{c}seven{c}" for c in "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"]


@pytest.fixture
def pg(pg_url):
    conn = open_database(pg_url)
    yield conn
    conn.close()


def test_number_words_are_counted_as_the_sqlite_function_counts_them(pg):
    got = [pg.execute("SELECT arbiter_numerals(?)", (t,)).fetchone()[0] for t in TEXTS]
    assert got == [numerals(t) for t in TEXTS]


def _viewer(conn, name: str = "alice"):
    with conn:
        tid, _ = tenants.create_tenant(conn, name, now=T0)
    return users.first_viewer(conn, tid)


def test_a_batch_is_written_as_given_and_found_by_its_words(pg):
    v = _viewer(pg)
    items = [
        RememberParams(type="user", title="Quotes 'single' \"double\" \\back\\slash", content="tab\there\nnewline"),
        RememberParams(type="project", title="Ünïcödé ☃ 𝄞 emoji 🙂", content="Straße façade naïve — twelve",
                       tags=["a,b", "{brace}", "quote\"d"], source="src:1", speaker="Bob"),
        RememberParams(type="learning", title="nulls", content="{\"json\": [1, 2]} null NULL \\N"),
    ] + [RememberParams(type="context", title=f"entry {i}", content=f"filler words number{i}") for i in range(40)]
    with pg:
        ids = entries.remember_many(pg, v, items, now=T0)
    assert len(set(ids)) == len(items)
    for i, p in zip(ids, items):
        e = entries.get(pg, v, i)
        assert (e.type, e.title, e.content, e.tags, e.source, e.speaker) == (
            p.type, p.title, p.content, p.tags, p.source, p.speaker)
    index = Index(v.tenant_id, ENTRIES, v.private_scope)
    assert fulltext.matching(pg, index, '"façade"', 10) == [ids[1]]
    assert fulltext.matching(pg, index, '"number7"', 10) == [ids[3 + 7]]
    assert fulltext.totals(pg, index)[0] == len(items)
    bytes_, numeral = pg.execute("SELECT bytes, numerals FROM recall_entries WHERE tenant_id = ? AND entry_id = ?",
                                 (v.tenant_id, ids[1])).fetchone()
    assert (bytes_, numeral) == (len(items[1].content.encode()), 2)


# Texts at the edges of the recall copy's self and other references (m004's expressions on SQLite, p008's here).
REFS = [
    "I said", "I'm here", "x I y", "x I'd", "my my", " my ", "me me me", "you", "You and you", "youyou", "I",
    "so I I I", "tell me", "ask my boss", "thank you, You!", "it is mine", "I\tam", "Ünï I café me",
]


def test_a_batchs_recall_copy_counts_references_and_numbers_as_sqlite_does(pg, sqlite_db):
    words = TEXTS[2:TEXTS.index("\u200bten") + 1]  # the number words' edges an entry may hold (no control characters)
    items = [RememberParams(type="user", title=f"t{i}", content=text) for i, text in enumerate(REFS + words)]
    copies = []
    for conn in (pg, sqlite_db):
        v = _viewer(conn)
        with conn:
            ids = entries.remember_many(conn, v, items, now=T0)
        copies.append([conn.execute("SELECT bytes, self_refs, other_refs, numerals FROM recall_entries "
                                    "WHERE tenant_id = ? AND entry_id = ?", (v.tenant_id, i)).fetchone() for i in ids])
    assert copies[0] == copies[1]


def test_a_segment_keeps_large_counts_and_ids_past_32_bits(pg):
    index = Index(1, ENTRIES, 1)
    big = 3 << 40
    with pg:
        fulltext.add_many(pg, index, [(big + 1, ("", "word " * 70_000, "", "", "u1")),
                                      (big, ("word", "other", "", "", "u1")), (7, ("", "", "", "", ""))])
    assert fulltext.matching(pg, index, '"word"', 10) == [big + 1, big]
    assert fulltext.frequencies(pg, index, ["word", "other", "u1"]) == {"word": 2, "other": 1, "u1": 2}
    assert fulltext.totals(pg, index) == (3, 70_000 + 1 + 3)
    (t0, t1), = pg.execute("SELECT t0, t1 FROM fulltext_postings WHERE tenant_id = 1 AND term = 'word'").fetchall()
    assert (t0, t1) == ([1, 0], [0, 70_000])
    with pg:  # a batch of one document with no token: still one document
        fulltext.add_many(pg, index, [(8, ("", "", "", "", ""))])
    assert fulltext.totals(pg, index) == (4, 70_000 + 1 + 3)


def test_a_read_only_transaction_pays_no_indexing_round_trip(pg, monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    with pg:
        pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        pg.execute("SELECT count(*) FROM entries WHERE tenant_id = ?", (1,)).fetchone()
        pg.execute("WITH n AS (SELECT count(*) FROM entries WHERE tenant_id = ?) SELECT * FROM n", (1,)).fetchone()
    assert [s for s in sent if "derive_queue" in s or "arbiter.unsettled" in s] == []


def test_a_snapshot_is_one_repeatable_read_read_only_transaction_begun_in_one_statement(pg, monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    with pg.snapshot():
        level, ro = pg.execute("SELECT current_setting(?), current_setting(?)",
                               ("transaction_isolation", "transaction_read_only")).fetchone()
    assert (level, ro) == ("repeatable read", "on")
    assert len(sent) == 1  # the mode went with BEGIN (untraced): no SET TRANSACTION, nothing settled on the way out
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        with pg.snapshot():
            pg.execute("INSERT INTO tenants(name, created_at) VALUES (?, ?)", ("nobody", T0))
    with pg:  # the next transaction is a plain one again
        assert pg.execute("SELECT current_setting(?)", ("transaction_read_only",)).fetchone()[0] == "off"


def _queued_text(conn) -> int:
    return conn.execute("SELECT count(*) FROM derive_queue WHERE deriver IN ('fulltext', 'past_text', 'fact_text')"
                        ).fetchone()[0]


def test_a_transaction_writing_two_tenants_indexes_both_and_leaves_no_queue(pg):
    # settle reads the queue tenant by tenant, from the tenants the triggers noted: none may be missed.
    a, b = _viewer(pg), _viewer(pg, "bob")
    with pg:
        ea = entries.remember(pg, a, RememberParams(type="user", title="first", content="walrus tusks"), now=T0)
        eb = entries.remember(pg, b, RememberParams(type="user", title="second", content="narwhal horns"), now=T0)
        pg.execute("UPDATE entries SET content = 'walrus whiskers', revised_at = ? WHERE tenant_id = ? AND id = ?",
                   (T0 + 1, a.tenant_id, ea))
    assert _queued_text(pg) == 0
    assert fulltext.matching(pg, Index(a.tenant_id, ENTRIES, a.private_scope), '"whiskers"', 10) == [ea]
    assert fulltext.matching(pg, Index(a.tenant_id, ENTRIES, a.private_scope), '"tusks"', 10) == []
    assert fulltext.matching(pg, Index(b.tenant_id, ENTRIES, b.private_scope), '"narwhal"', 10) == [eb]
    # The session now guesses the tenant it settled last; a transaction of the other one alone is indexed too.
    for v, text in ((a, "seals bark"), (b, "orcas sing"), (b, "whales hum")):
        with pg:
            e = entries.remember(pg, v, RememberParams(type="user", title="more", content=text), now=T0)
        assert _queued_text(pg) == 0
        assert fulltext.matching(pg, Index(v.tenant_id, ENTRIES, v.private_scope), f'"{text.split()[1]}"', 10) == [e]


def test_a_remember_settles_in_one_statement_once_the_session_knows_its_tenant(pg, monkeypatch):
    v = _viewer(pg)
    with pg:
        entries.remember(pg, v, RememberParams(type="user", title="first", content="puffins nest"), now=T0)
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    with pg:
        e = entries.remember(pg, v, RememberParams(type="user", title="second", content="gannets dive"), now=T0)
        sent.clear()  # what the COMMIT sends from here: settle's statements, the index's insert, COMMIT itself
    reads = [s for s in sent if "derive_queue" in s or "arbiter.unsettled" in s]
    assert len(reads) == 1
    assert fulltext.matching(pg, Index(v.tenant_id, ENTRIES, v.private_scope), '"gannets"', 10) == [e]


def test_a_rolled_back_savepoint_takes_back_its_tenant_and_the_next_transaction_starts_clean(pg):
    a, b = _viewer(pg), _viewer(pg, "bob")
    with pg:
        kept = entries.remember(pg, a, RememberParams(type="user", title="kept", content="otters float"), now=T0)
        with pytest.raises(RuntimeError):
            with pg:
                entries.remember(pg, b, RememberParams(type="user", title="gone", content="beavers dam"), now=T0)
                raise RuntimeError("undo the savepoint")
        assert pg.execute("SELECT current_setting('arbiter.unsettled', true)").fetchone()[0] == f"{a.tenant_id},"
    assert _queued_text(pg) == 0
    assert pg.execute("SELECT current_setting('arbiter.unsettled', true)").fetchone()[0] in ("", None)
    assert fulltext.matching(pg, Index(a.tenant_id, ENTRIES, a.private_scope), '"otters"', 10) == [kept]
    assert fulltext.matching(pg, Index(b.tenant_id, ENTRIES, b.private_scope), '"beavers"', 10) == []


def test_an_entrys_names_are_read_in_one_statement(pg, monkeypatch):
    from arbiter.entities.core import Linker

    v = _viewer(pg)
    with pg:
        entry = entries.remember(pg, v, RememberParams(type="user", title="t", content="c"), now=T0)
        Linker(pg, v.tenant_id, T0, v).link(entry, [("Ada", "person", "given"), ("Kubernetes", None, "given"),
                                                    ("Grace", "person", "given")])
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    names = [("Ada", "person", "given"), ("Kubernetes", None, "given"), ("Grace", "person", "given"),
             ("Lovelace", None, "known"), ("Babbage", None, "known")]
    with pg:
        other = entries.remember(pg, v, RememberParams(type="user", title="t2", content="c2"), now=T0)
        linked = Linker(pg, v.tenant_id, T0, v).link(other, names)
    by_key = [s for s in sent if "FROM entity_names" in s and "key" in s.split("WHERE", 1)[-1] and "norm" not in s]
    assert len(by_key) == 1
    assert [r.matched for r, _ in linked] == ["exact", "exact", "exact"]
    assert pg.execute("SELECT count(*) FROM entry_entities WHERE tenant_id = ? AND entry_id = ?",
                      (v.tenant_id, other)).fetchone()[0] == 3


def test_rows_inserted_by_executemany_go_as_one_statement_of_arrays_but_an_upsert_stays_row_by_row(pg, monkeypatch):
    pg.execute("CREATE TEMP TABLE few(k bigint PRIMARY KEY, n bigint, w double precision, s text)")
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    # More rows than a statement of a placeholder per value would hold, a float column given ints as well, NULLs.
    rows = [(k, 1, 0.5 if k % 2 else 1, None if k % 3 else f"s{k}") for k in range(300)] + [(1, 9, 9.0, "again")]
    with pg:
        pg.executemany("INSERT INTO few(k, n, w, s) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", rows)
        # Successive upserts of one key add up; one statement could not apply DO UPDATE to a row twice.
        pg.executemany("INSERT INTO few(k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = few.n + excluded.n",
                       [(2, 1), (2, 1)])
    inserts = [s for s in sent if s.startswith("INSERT INTO few")]
    assert len(inserts) == 2 and "unnest(" in inserts[0] and inserts[0].count("%s") == 4
    assert "VALUES (%s, %s) ON CONFLICT (k)" in inserts[1]
    assert pg.execute("SELECT count(*), sum(n), sum(w), count(s) FROM few").fetchone() == (300, 302, 225.0, 100)
    assert pg.execute("SELECT n, w, s FROM few WHERE k = 1").fetchone() == (1, 0.5, None)
    with pytest.raises(psycopg.ProgrammingError, match="another length"), pg:
        pg.executemany("INSERT INTO few(k, n) VALUES (?, ?)", [(500, 1), (501,)])
    assert pg.execute("SELECT count(*) FROM few WHERE k >= 500").fetchone() == (0,)


def test_a_request_reads_who_its_caller_is_with_the_token_and_not_again(pg, monkeypatch):
    """On PostgreSQL nothing about a caller is cached between requests (another daemon may change it): the user's
    name the token lookup read serves the request, so what they see is the one read left."""
    v = _viewer(pg)
    with pg:
        kept = entries.remember(pg, v, RememberParams(type="user", title="kept", content="herons wade"), now=T0)
    caller = Caller(*users.user_by_token(pg, pg.execute("SELECT token_hash FROM users WHERE id = ?",
                                                        (v.user_id,)).fetchone()[0]))
    sent: list[str] = []
    monkeypatch.setattr(Connection, "trace", sent.append)
    got = Runner(pg, lambda lane: pg, shared=True, clock=lambda: T0).execute(
        verbs.VERBS["get"], verbs.VERBS["get"].params(id=kept), caller)
    assert got.title == "kept"
    assert not [s for s in sent if s.startswith("SELECT name FROM users")], sent


def test_a_verb_settles_its_callers_tenant_without_the_triggers_note(pg):
    """Under Citus the queue triggers run on the worker, whose session keeps their note of the tenants a transaction
    queued: here the note is wiped before COMMIT, as the coordinator would not see it. The verb said whose write it
    is, so its text is indexed all the same, though the session last settled another tenant."""
    first, second = _viewer(pg), _viewer(pg, "bob")
    with pg:
        entries.remember(pg, first, RememberParams(type="user", title="first", content="puffins nest"), now=T0)
    pg.before_commit.insert(0, lambda conn: conn.execute("SELECT set_config('arbiter.unsettled', '', true)"))
    try:
        written = execute(pg, second.tenant_id, "remember", {"type": "user", "title": "second", "content": "gannets dive"},
                          now=T0, tenant_name="bob")
    finally:
        del pg.before_commit[0]
    assert fulltext.matching(pg, Index(second.tenant_id, ENTRIES, second.private_scope), '"gannets"', 10) == [written.id]
