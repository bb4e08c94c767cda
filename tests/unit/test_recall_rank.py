"""recall/_rank.py: the BM25 rank function FTS5 calls once per match, against the formula worked by hand."""

from __future__ import annotations

import threading

import pytest

from arbiter.recall import _rank
from arbiter.store import connect

WEIGHTS = (2.5, 1.0, 2.0, 0.5, 0.0)
TEXT = "{title content tags source}"
# (title, content, tags, source, scope): plain words the porter stemmer leaves whole, so a word's
# count is what the eye sees; a row's length is its words in every column, scope included.
ROWS = [
    ("kettle notes", "the kettle sang and the kettle cooled", "kitchen", "", "c1"),
    ("garden plan", "plant the garden by the kettle shed", "garden", "notes", "c1"),
    ("zebra", "a zebra in the garden", "", "", "c2"),
    ("long day", "nothing here but words and more words and still more words to pad it out", "", "", "c2"),
]


@pytest.fixture
def table(tmp_path):
    conn = connect(tmp_path / "rank.db")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(title, content, tags, source, scope, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    with conn:
        for i, row in enumerate(ROWS, start=1):
            conn.execute("INSERT INTO t(rowid, title, content, tags, source, scope) VALUES (?, ?, ?, ?, ?, ?)", (i, *row))
    yield conn
    conn.close()


def expected(words: list[str], idf: list[float], *, k1: float, b: float, avgdl: float) -> dict[int, float]:
    """rowid -> BM25 over `words` (one phrase each), worked from ROWS by counting words."""
    out = {}
    for rowid, row in enumerate(ROWS, start=1):
        columns = [c.split() for c in row]
        dl = sum(len(c) for c in columns)
        total = 0.0
        for word, weight in zip(words, idf):
            f = sum(w * c.count(word) for w, c in zip(WEIGHTS[:4], columns))
            if f:
                total += weight * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        if total:
            out[rowid] = total
    return out


def average_length() -> float:
    return sum(len(c.split()) for row in ROWS for c in row) / len(ROWS)


def match(words: list[str]) -> str:
    return f"{TEXT} : ({' OR '.join(f'{chr(34)}{w}{chr(34)}' for w in words)})"


@pytest.mark.parametrize("words, idf", [
    (["kettle"], [2.0]),  # one phrase: read without the presence test
    (["garden"], [0.7]),  # in title, content and tags of one row
    (["kettle", "garden", "zebra"], [1.5, 0.7, 3.0]),  # most rows hold some of the phrases, none all
    (["absent", "zebra"], [4.0, 3.0]),  # a phrase no row holds
])
def test_scores_are_bm25_of_the_weighted_counts(table, words, idf):
    spec = _rank.Spec(idf=idf, weights=WEIGHTS, k1=1.2, b=0.75, avgdl=9.0)
    want = expected(words, idf, k1=1.2, b=0.75, avgdl=9.0)
    got = _rank.ranked(table, "t", match(words), spec, 10)
    assert dict(got) == pytest.approx(want, rel=1e-12)
    assert [r for r, _ in got] == sorted(want, key=lambda r: (-want[r], r))


def test_without_an_average_length_the_tables_own_is_used_and_kept_for_later_passes(table):
    spec = _rank.Spec(idf=[1.0, 2.0], weights=WEIGHTS, k1=1.2, b=1.0)
    got = dict(_rank.ranked(table, "t", match(["kettle", "zebra"]), spec, 10))
    assert got == pytest.approx(expected(["kettle", "zebra"], [1.0, 2.0], k1=1.2, b=1.0, avgdl=average_length()),
                                rel=1e-12)
    assert spec.avgdl == average_length()


def test_the_depth_and_the_scope_filter_after_the_text_phrases(table):
    spec = _rank.Spec(idf=[1.5, 0.7], weights=WEIGHTS, k1=1.2, b=1.0, avgdl=9.0)
    want = expected(["kettle", "garden"], [1.5, 0.7], k1=1.2, b=1.0, avgdl=9.0)
    in_c1 = {r: s for r, s in want.items() if ROWS[r - 1][4] == "c1"}
    got = _rank.ranked(table, "t", f'{match(["kettle", "garden"])} AND {{scope}} : "c1"', spec, 1)
    best = max(in_c1, key=lambda r: (in_c1[r], -r))
    assert got == [(best, pytest.approx(in_c1[best], rel=1e-12))]


def test_connections_ranking_at_once_in_threads_each_score_their_own_query(tmp_path, table):
    other = connect(tmp_path / "rank.db")
    queries = {
        table: (match(["kettle", "garden", "zebra"]), _rank.Spec(idf=[1.5, 0.7, 3.0], weights=WEIGHTS, avgdl=9.0)),
        other: (match(["garden"]), _rank.Spec(idf=[0.4], weights=WEIGHTS, k1=2.0, b=0.5, avgdl=12.0)),
    }
    alone = {conn: _rank.ranked(conn, "t", m, spec, 10) for conn, (m, spec) in queries.items()}
    start = threading.Barrier(len(queries))
    seen: dict = {}

    def run(conn):
        m, spec = queries[conn]
        start.wait(timeout=10)
        seen[conn] = [_rank.ranked(conn, "t", m, spec, 10) for _ in range(300)]

    threads = [threading.Thread(target=run, args=(conn,)) for conn in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    other.close()
    assert all(runs == [alone[conn]] * len(runs) for conn, runs in seen.items()) and len(seen) == 2
