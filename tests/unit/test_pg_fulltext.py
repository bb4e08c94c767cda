"""PostgreSQL full text (arbiter/store/pg/fulltext.py) against SQLite's FTS5 and recall's own BM25, side by side.

The same documents go into an FTS5 table (the columns and tokenizer of
store/fts.py) and into PostgreSQL; the queries are what recall writes
(`analyze` + `expression` on real questions, scope filters from recall/_sql.py,
quoted phrases, prefixes, NEAR, the associations probe). Both engines rank
with the same `Spec`: the same ids, in the same order, with the same scores.

Needs a PostgreSQL where it may CREATE DATABASE: `ARBITER_TEST_PG` (a libpq
conninfo, e.g. `host=/tmp/pgdev user=postgres`); a fresh database per module.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import apsw
import pytest

from arbiter.recall import _rank, _sql
from arbiter.recall.query import analyze, expression, quote, tokenizer
from arbiter.store.pg import fulltext as ft
from bench.load import Vocabulary, make_entry
from tests import corpus

psycopg = pytest.importorskip("psycopg")

DATA = Path(__file__).resolve().parents[1] / "data"
MIGRATION = Path(ft.__file__).parent / "migrations" / "p002_fulltext.sql"
TENANT, OTHER, SCOPE = 7, 8, 3
COLS = "title, content, tags, source, scope"


class Qmark:
    """The apsw subset the store uses, over psycopg: `?` placeholders, a cursor back (until the lead's wrapper)."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql.replace("?", "%s"), params, prepare=False)


@pytest.fixture(scope="module")
def pg(pg_databases):
    """A database holding only the full-text tables (p002), through psycopg itself."""
    url = pg_databases.create(empty=True)
    try:
        conn = psycopg.connect(url, autocommit=True)
        conn.execute(MIGRATION.read_text())
        yield Qmark(conn)
        conn.close()
    finally:
        pg_databases.drop(url)


def _documents() -> list[tuple[int, tuple]]:
    """(id, (title, content, tags, source, scope)): real notes and conversation turns, then generated entries."""
    texts: list[tuple[str, str, list[str], str | None, int | None]] = []
    for _, title, prio, area, kind, body in corpus.TICKETS:
        texts.append((title, body, ["ticket", prio, area, kind], "tracker", None))
    for _, title, body in corpus.DECISIONS:
        texts.append((title, body, ["decision", "adr"], None, None))
    for _, title, kind, body in corpus.RUNBOOKS:
        texts.append((title, body, ["runbook", "ops", kind], None, None))
    for _, title, kind, body in corpus.SESSIONS:
        texts.append((title, body, ["session", kind], None, None))
    for _, title, _, tags, body in corpus.NOISE:
        texts.append((title, body, list(tags), None, None))
    conv = 100
    for q in json.loads((DATA / "longmemeval_tiny.json").read_text()):
        for session in q["haystack_sessions"]:
            conv += 1
            for turn in session:
                texts.append((turn["content"][:60], turn["content"], [], None, conv))
    for sample in json.loads((DATA / "locomo_tiny.json").read_text()):
        c = sample["conversation"]
        for key in sorted(k for k in c if re.fullmatch(r"session_\d+", k)):
            conv += 1
            for turn in c[key]:
                texts.append((f"{turn['speaker']} said", turn["text"], [], None, conv))
    rng = random.Random(31)
    vocab = Vocabulary(rng, size=3000)
    for n in range(1200):
        e = make_entry(vocab, rng, n)
        texts.append((e["title"], e["content"], e["tags"], e.get("source"), 200 + n % 9 if n % 3 else None))
    out = []
    for i, (title, content, tags, source, conv_id) in enumerate(texts, start=1):
        scope = f"c{conv_id}" if conv_id is not None else f"u{TENANT}"
        if i % 4 == 0:  # a team scope's index holds the author too
            scope += f" a{i % 3 + 1}"
        out.append((i * 3, (title, content, json.dumps(tags), source, scope)))
    return out


DOCS = _documents()


@pytest.fixture(scope="module")
def both(pg):
    """(sqlite connection holding the FTS5 table `e`, postgres connection, the tenant's entries index)."""
    lite = apsw.Connection(":memory:")
    lite.execute(f"CREATE VIRTUAL TABLE e USING fts5({COLS}, tokenize='porter unicode61 remove_diacritics 2')")
    with lite:
        for doc_id, cols in DOCS:
            lite.execute(f"INSERT INTO e(rowid, {COLS}) VALUES (?, ?, ?, ?, ?, ?)", (doc_id, *cols))
    index = ft.Index(TENANT, ft.ENTRIES, SCOPE)
    with pg.conn.transaction():
        ft.add_many(pg, index, DOCS)
    return lite, pg, index


def _questions() -> list[str]:
    qs = [q["question"] for q in json.loads((DATA / "longmemeval_tiny.json").read_text())]
    qs += [qa["question"] for s in json.loads((DATA / "locomo_tiny.json").read_text()) for qa in s["qa"]]
    qs += [
        "Why does the login fail with a 500 for a plus sign?",
        "what did we decide about the queue?",
        "rollback the orders migration runbook",
        'the "orders migration" that locked writes',
        'deploy* steps and "release announcement"',
        "migrat* backfill",
        "ticket p0 bug",
        "Caroline adoption support group",
        "project release deploy server database",
        "kubernetes docker linux kernel compiler",
    ]
    return qs


def _spec(lite, pg, index, expr, terms, slots=None):
    """The Spec recall builds: idf per slot from the document frequencies, one average length (checked equal).

    `slots` (a stem per phrase) stands for `expr.slots` where the expression is not `expression`'s.
    """
    stems = list(dict.fromkeys(s for t in terms for s in t.stem.split(" ")))
    stems += [s for s in slots or () if s not in stems]
    n_lite = lite.execute("SELECT count(*) FROM e").fetchone()[0]
    vocab = dict(lite.execute(
        f"SELECT term, doc FROM e_v WHERE term IN ({','.join('?' * len(stems))})", stems
    )) if stems else {}
    for s in stems:
        if s.endswith("*"):
            low = s[:-1]
            high = low[:-1] + chr(ord(low[-1]) + 1)
            vocab[s] = lite.execute("SELECT min(coalesce(sum(doc), 0), ?) FROM e_v WHERE term >= ? AND term < ?",
                                    (n_lite, low, high)).fetchone()[0]
    df = ft.frequencies(pg, index, stems)
    assert df == {s: vocab.get(s, 0) for s in stems}
    n, tokens = ft.totals(pg, index)
    assert n == n_lite
    idf = {s: _rank.idf(df[s], n) for s in stems}
    factor = {"phrase": 1.5, "near": 0.5, "bag": 1.0}
    if slots is not None:
        return _rank.Spec(idf=[idf[s] for s in slots], weights=(2.0, 1.0, 0.7, 0.3), avgdl=tokens / n)
    return _rank.Spec(idf=[factor[b] * sum(idf[s] for s in st) for b, st in expr.slots],
                      weights=(2.0, 1.0, 0.7, 0.3), avgdl=tokens / n)


def _cases(lite):
    tok = tokenizer(lite)
    for text in _questions():
        query = analyze(text, tok)
        if query.empty:
            continue
        for phrase, near in ((False, False), (True, True)):
            expr = expression(query.terms, phrase=phrase, near=near)
            match = _sql.text_match(expr.text)
            yield text, query.terms, expr, match
            yield text, query.terms, expr, _sql.scoped(match, TENANT, conversation_id=101)
            yield text, query.terms, expr, _sql.scoped(match, TENANT, besides=101)
            yield text, query.terms, expr, f"({match}) AND {_sql.SCOPE_COLUMN} : {quote('a2')}"


def _shapes(lite):
    """Expressions recall does not write today but FTS5 ranks: ANDed words, NEAR and NOT among text phrases.

    In `(a AND b) OR NEAR(a c, 3) OR c`, a document with a and c far apart
    scores c alone: a branch that misses reports no instances.
    """
    tok = tokenizer(lite)
    for text in _questions():
        words = [t for t in analyze(text, tok).terms if not t.phrase and not t.prefix][:3]
        if len(words) < 3:
            continue
        a, b, c = (quote(t.text) for t in words)
        stems = [t.stem for t in words]
        for expr_text, slots in (
            (f"({a} AND {b}) OR NEAR({a} {c}, 3) OR {c}", [stems[0], stems[1], stems[0], stems[2], stems[2]]),
            (f"({a} OR {c}) NOT {b}", [stems[0], stems[2], stems[1]]),
            (f"{a} {b} OR {c}*", [stems[0], stems[1], stems[2] + "*"]),
        ):
            yield text, words, slots, _sql.text_match(expr_text)


@pytest.fixture(scope="module")
def vocab_table(both):
    lite, _, _ = both
    lite.execute("CREATE VIRTUAL TABLE e_v USING fts5vocab(e, row)")
    return lite


def _same(got, want):
    assert [i for i, _ in got] == [i for i, _ in want]
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-9, abs=0)


def test_ranked_gives_fts5s_ids_order_and_scores_for_what_recall_writes(both, vocab_table):
    lite, pg, index = both
    checked = 0
    for text, terms, expr, match in _cases(lite):
        spec = _spec(lite, pg, index, expr, terms)
        for depth, floor in ((30, 0), (10, DOCS[len(DOCS) // 2][0])):
            want = _rank.ranked(lite, "e", match, spec, depth, min_rowid=floor)
            got = ft.ranked(pg, index, match, spec, depth, min_rowid=floor)
            assert len(got) == len(want), (text, match)
            _same(got, want)
            checked += bool(want)
    assert checked > 100  # the cases rank something: a parity of empty lists would prove nothing


def test_ranked_is_fts5s_for_ands_nots_and_near_among_words(both, vocab_table):
    lite, pg, index = both
    checked = 0
    for text, words, slots, match in _shapes(lite):
        spec = _spec(lite, pg, index, None, words, slots)
        want = _rank.ranked(lite, "e", match, spec, 40)
        got = ft.ranked(pg, index, match, spec, 40)
        assert len(got) == len(want), (text, match)
        _same(got, want)
        assert ft.count(pg, index, match) == lite.execute("SELECT count(*) FROM e WHERE e MATCH ?", (match,)).fetchone()[0]
        checked += bool(want)
    assert checked > 20


def test_count_newest_and_lengths_are_fts5s(both):
    lite, pg, index = both
    lite.register_fts5_function("size", lambda api, *_: api.column_size(-1))
    for text, _, _, match in _cases(lite):
        want = lite.execute("SELECT count(*) FROM e WHERE e MATCH ?", (match,)).fetchone()[0]
        assert ft.count(pg, index, match) == want, (text, match)
        for k in (1, 50):
            row = lite.execute("SELECT rowid FROM e WHERE e MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                               (match, k - 1)).fetchone()
            assert ft.newest(pg, index, match, k) == (row[0] if row else 0), (text, match, k)
        total = sum(r[0] for r in lite.execute("SELECT size(e) FROM e WHERE e MATCH ?", (match,)))
        assert ft.lengths(pg, index, match) == (want, total)


def test_the_associations_probe_finds_fts5s_newest_matches(both):
    lite, pg, index = both
    probe = [quote(w) for w in ("orders", "migration", "lock", "table", "writes")]
    pairs = " OR ".join(f"({a} AND ({' OR '.join(probe[i + 1:])}))" for i, a in enumerate(probe[:-1]))
    match = f"{{title content}} : ({pairs})"
    below = DOCS[-1][0]
    want = [r[0] for r in lite.execute(
        "SELECT rowid FROM e WHERE e MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT 20", (match, below))]
    assert want and ft.matching(pg, index, match, 20, below=below) == want


def test_another_tenants_documents_move_no_score(both, vocab_table):
    lite, pg, index = both
    cases = list(_cases(lite))[::7]
    before = [(ft.ranked(pg, index, m, _spec(lite, pg, index, e, t), 20), ft.count(pg, index, m))
              for _, t, e, m in cases]
    stats = ft.totals(pg, index)
    stems = ["orders", "migrat", "support", "user"]
    seen = ft.frequencies(pg, index, stems)
    # The same words and the same scope id, in another tenant: a shared table, not a shared index.
    other = ft.Index(OTHER, ft.ENTRIES, SCOPE)
    with pg.conn.transaction():
        ft.add_many(pg, other, [(doc_id + 1, cols) for doc_id, cols in DOCS[: len(DOCS) // 2]])
    try:
        assert ft.totals(pg, index) == stats
        assert ft.frequencies(pg, index, stems) == seen
        assert ft.frequencies(pg, other, stems) != seen
        after = [(ft.ranked(pg, index, m, _spec(lite, pg, index, e, t), 20), ft.count(pg, index, m))
                 for _, t, e, m in cases]
        assert after == before
        assert ft.totals(pg, other)[0] == len(DOCS) // 2
    finally:
        with pg.conn.transaction():
            ft.remove(pg, other, [doc_id + 1 for doc_id, _ in DOCS[: len(DOCS) // 2]])
    assert ft.totals(pg, other) == (0, 0)


def test_replace_and_remove_keep_parity(pg):
    """An update and a delete on both engines: statistics and rankings stay equal (and the index's rows are exact)."""
    lite = apsw.Connection(":memory:")
    lite.execute(f"CREATE VIRTUAL TABLE e USING fts5({COLS}, tokenize='porter unicode61 remove_diacritics 2')")
    lite.execute("CREATE VIRTUAL TABLE e_v USING fts5vocab(e, row)")
    index = ft.Index(TENANT, ft.ENTRIES, SCOPE + 1)
    docs = DOCS[:300]
    with lite:
        for doc_id, cols in docs:
            lite.execute(f"INSERT INTO e(rowid, {COLS}) VALUES (?, ?, ?, ?, ?, ?)", (doc_id, *cols))
    with pg.conn.transaction():
        ft.add_many(pg, index, docs)
    changed = {doc_id: (cols[0], cols[1] + " orders migration rollback", *cols[2:]) for doc_id, cols in docs[::5]}
    gone = [doc_id for doc_id, _ in docs[1::5]]
    with lite:
        for doc_id, cols in changed.items():
            lite.execute("DELETE FROM e WHERE rowid = ?", (doc_id,))
            lite.execute(f"INSERT INTO e(rowid, {COLS}) VALUES (?, ?, ?, ?, ?, ?)", (doc_id, *cols))
        for doc_id in gone:
            lite.execute("DELETE FROM e WHERE rowid = ?", (doc_id,))
    with pg.conn.transaction():
        for doc_id, cols in changed.items():
            ft.replace(pg, index, doc_id, cols)
        assert ft.remove(pg, index, gone + [999_999]) == len(gone)
    tok = tokenizer(lite)

    def same_rankings():
        for text in ("rollback the orders migration", "support group adoption", "deploy* release",
                     'the "orders migration"'):
            terms = analyze(text, tok).terms
            expr = expression(terms)
            match = _sql.text_match(expr.text)
            spec = _spec(lite, pg, index, expr, terms)
            _same(ft.ranked(pg, index, match, spec, 50), _rank.ranked(lite, "e", match, spec, 50))

    same_rankings()
    segments = "SELECT count(DISTINCT seg) FROM fulltext_postings WHERE tenant_id = ? AND kind = ? AND scope_id = ?"
    assert pg.execute(segments, index.key).fetchone()[0] == 1 + len(changed)  # a replace writes a segment of one
    with pg.conn.transaction():
        assert ft.merge(pg, index) == 1 + len(changed)
    assert pg.execute(segments, index.key).fetchone()[0] == 1
    same_rankings()
    lite.register_fts5_function("size", lambda api, *_: api.column_size(-1))
    sizes = [r[0] for r in lite.execute("SELECT size(e) FROM e")]
    assert ft.totals(pg, index) == (len(docs) - len(gone), sum(sizes))
    assert pg.execute("SELECT count(*) FROM fulltext_postings WHERE tenant_id = ? AND kind = ? AND scope_id = ? "
                      "AND doc_ids && ?::bigint[]", (*index.key, gone)).fetchone()[0] == 0


def test_facts_rank_with_the_scope_tokens_in_the_match(pg):
    """facts/recall.py's search: scope tokens in the MATCH, weights over subject, predicate, object."""
    lite = apsw.Connection(":memory:")
    lite.execute("CREATE VIRTUAL TABLE f USING fts5(subject, predicate, object, scope, "
                 "tokenize='porter unicode61 remove_diacritics 2')")
    facts = [
        (1, ("the user", "owns pet", "a cat named Miso", "s3 u1")),
        (2, ("the user", "works at", "a bakery in Porto", "s3 u1")),
        (3, ("Caroline", "attended", "an LGBTQ support group", "s4 u2")),
        (4, ("the user", "owns pet", "a dog", "s4 u1")),
        (5, ("Melanie", "painted", "a sunrise over the lake", "s3 u2")),
    ]
    with lite:
        for fid, cols in facts:
            lite.execute("INSERT INTO f(rowid, subject, predicate, object, scope) VALUES (?, ?, ?, ?, ?)", (fid, *cols))
    index = ft.Index(TENANT, ft.FACTS)
    with pg.conn.transaction():
        ft.add_many(pg, index, facts)
    scopes = f'{{scope}} : ({quote("s3")} OR ({quote("s4")} AND {quote("u1")}))'
    terms = analyze("what pet does the user own", tokenizer(lite)).terms
    expr = expression(terms, phrase=False, near=False)
    match = f"{{subject predicate object}} : ({expr.text}) AND {scopes}"
    count = "SELECT count(*) FROM f WHERE f MATCH ?"
    n = lite.execute(count, (scopes,)).fetchone()[0]
    assert ft.count(pg, index, scopes) == n == 4
    idf = []
    for t in terms:
        one = f"{{subject predicate object}} : ({quote(t.text)}) AND {scopes}"
        assert ft.count(pg, index, one) == lite.execute(count, (one,)).fetchone()[0]
        idf.append(_rank.idf(ft.count(pg, index, one), n))
    spec = _rank.Spec(idf=idf, weights=(1.0, 0.5, 1.0, 0.0), b=0.75, avgdl=ft.lengths(pg, index, scopes)[1] / n)
    want = _rank.ranked(lite, "f", match, spec, 10)
    assert sorted(i for i, _ in want) == [1, 4]
    _same(ft.ranked(pg, index, match, spec, 10), want)


def test_a_match_arbiter_never_writes_is_refused(pg):
    index = ft.Index(TENANT, ft.ENTRIES, SCOPE)
    for bad in ("bare words", '{nosuch} : "x"', '"a" AND', '^"a"'):
        with pytest.raises(ValueError):
            ft.count(pg, index, bad)


def test_snippets_are_fts5s(both):
    """The same excerpt FTS5's snippet() cuts, for every hit of every case (scope filters' instances included)."""
    lite, _, _ = both
    texts = dict(DOCS)
    checked = 0
    for text, _, _, match in _cases(lite):
        for rowid, want in lite.execute(
            "SELECT rowid, snippet(e, -1, '**', '**', '…', 24) FROM e WHERE e MATCH ? LIMIT 5", (match,)
        ):
            assert ft.snippet(ft.ENTRIES, match, texts[rowid]) == want, (text, match, rowid)
            checked += 1
    assert checked > 300
    assert ft.snippet(ft.ENTRIES, _sql.text_match('"kubernetes"'), texts[DOCS[0][0]]) is None


def test_a_word_that_is_also_a_scope_token_matches_only_where_the_text_holds_it(pg):
    """Recall's text match leaves out the scope column: a document holding "c7" only as its conversation's token is
    no match, one holding it in a text column is, whether or not its segment has scope tokens of the word too."""
    lite = apsw.Connection(":memory:")
    lite.execute(f"CREATE VIRTUAL TABLE e USING fts5({COLS}, tokenize='porter unicode61 remove_diacritics 2')")
    index = ft.Index(TENANT, ft.ENTRIES, SCOPE + 2)
    writes = [
        [(1, ("c7 planning", "the plan", "[]", None, "c7")), (2, ("other", "nothing", "[]", None, "c7")),
         (3, ("notes", "room c7 booked", "[]", None, "u7"))],
        [(4, ("c7", "again", "[]", None, "u7")), (5, ("more", "words", "[]", None, "u7"))],  # no "c7" in scopes
        [(6, ("late", "things", "[]", None, "c7")), (7, ("later", "stuff", "[]", None, "c7 a2"))],  # only in scopes
    ]
    for docs in writes:
        with lite:
            for doc_id, cols in docs:
                lite.execute(f"INSERT INTO e(rowid, {COLS}) VALUES (?, ?, ?, ?, ?, ?)", (doc_id, *cols))
        with pg.conn.transaction():
            ft.add_many(pg, index, docs)
    for match in (_sql.text_match(quote("c7")), _sql.text_match(f"{quote('c7')} OR {quote('word')}"),
                  f"{{title content}} : {quote('c7')}"):
        want = lite.execute("SELECT count(*) FROM e WHERE e MATCH ?", (match,)).fetchone()[0]
        assert ft.count(pg, index, match) == want, match
        for k in (1, 2, 3):
            row = lite.execute("SELECT rowid FROM e WHERE e MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                               (match, k - 1)).fetchone()
            assert ft.newest(pg, index, match, k) == (row[0] if row else 0), (match, k)
    assert ft.count(pg, index, _sql.text_match(quote("c7"))) == 3
