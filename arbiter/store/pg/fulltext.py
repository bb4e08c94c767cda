"""Full-text search and BM25 on PostgreSQL: what FTS5 and recall/_rank.py do on SQLite, same stems, same scores.

No extension: postings in plain tables (migration p002_fulltext.sql), BM25 in
SQL. A ranking over the same documents with the same `Spec` gives the same ids
in the same order and the same scores as `recall._rank.ranked` over FTS5
(tests/unit/test_pg_fulltext.py checks it against SQLite), because:

- terms are SQLite's own FTS5 tokenizer's stems (`porter unicode61
  remove_diacritics 2`, through apsw), so the two engines cannot disagree on
  what a token is;
- a document's length counts every column, the scope column too, as FTS5's
  `column_size(-1)` does; per column token counts stand beside each posting;
- MATCH strings are FTS5's, parsed (fulltext_query.py), and a phrase counts
  the instances FTS5's `phrase_locations` reports (NEAR trimming, column
  filters, branches that miss report none);
- the score is `_rank`'s expression, operation for operation, summed in
  phrase order, so the floats are the same floats.

An index is an `Index(tenant_id, kind, scope_id)`, every key and statement
within one tenant:

    Index(t, ENTRIES, scope)  one visibility scope's entries (SQLite: entries_fts_<scope>);
                              columns title, content, tags, source, scope ("c<conv>" | "u<tenant>", " a<author>")
    Index(t, REVISIONS)       the tenant's past texts (entry_revisions_fts); same columns, scope "t<t> c<conv>|u<t>"
    Index(t, FACTS)           the tenant's active facts (facts_fts); subject, predicate, object, scope "s<scope> u<author>"

Writes (in the caller's transaction; `columns` are the texts FTS5 would index,
in the kind's column order, the scope column's tokens last):

    add(conn, index, doc_id, columns) / add_many(conn, index, [(doc_id, columns), ...])
    remove(conn, index, doc_ids) -> documents removed
    replace(conn, index, doc_id, columns)
    merge(conn, index) -> segments folded (idle upkeep: one-entry writes leave a segment each)

Reads, each the counterpart of an FTS5 read:

    ranked(conn, index, match, spec, depth, *, min_rowid=0) -> [(doc_id, score)]    _rank.ranked
    count(conn, index, match) -> int                                                 SELECT count(*) ... MATCH
    newest(conn, index, match, count) -> doc_id (0 if fewer)                          _sql.newest
    matching(conn, index, match, limit, *, below=None) -> [doc_id], newest first       rowid < ? ORDER BY rowid DESC
    lengths(conn, index, match) -> (documents, tokens)                               facts' average length
    totals(conn, index) -> (rows, tokens)                                            fts.totals
    frequencies(conn, index, stems) -> {stem: documents}  ("x*": a prefix, summed)    fts5vocab's counts
    snippet(kind, match, columns, *, tokens=24) -> str | None                         FTS5 snippet(), in Python

`conn` is anything with `execute(sql, params)` in qmark style returning a
cursor (the PostgreSQL connection wrapper). `spec` is duck-typed as
`_rank.Spec` (idf per leading phrase, weights of columns 0-3, k1, b, avgdl).

Where the work is done. Postings are segments, as in FTS5: a row per term
and write, holding that write's documents with the term (ids, lengths,
tokens per column) as arrays; positions are one packed row per document
(p002_fulltext.sql). Words, prefixes and scope filters are SQL: a ranked
search over an OR of words and prefixes (what recall writes), with scope
filters ANDed or NOTed on, is one statement (each term's segments unnested,
a GROUP BY document, the score, ORDER BY, LIMIT). A phrase of several words
or a NEAR group: SQL finds the documents holding all its words, their
positions are matched here by fulltext_query's rules, and the counts join
the same statement. Any other shape (an AND between words) is matched and
scored here from the documents SQL finds.

Statistics are read exactly on every call (`frequencies` sums a term's
segments); `_rank.Frequencies` caches them on both engines. A
one-entry write is a segment of one document until `merge` folds the small
segments into one.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

from arbiter.store.pg import fulltext_query as q
from arbiter.store.pg import fulltext_snippet

ENTRIES, REVISIONS, FACTS = 1, 2, 3
#: Each kind's columns, as its FTS5 table names them; the last is the scope column (filtered, never scored).
COLUMNS = {
    ENTRIES: ("title", "content", "tags", "source", "scope"),
    REVISIONS: ("title", "content", "tags", "source", "scope"),
    FACTS: ("subject", "predicate", "object", "scope"),
}
_SCORED = 4  # `_rank` weighs columns 0-3
_TF = ("t0", "t1", "t2", "t3", "t4")


class Connection(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...


@dataclass(frozen=True, slots=True)
class Index:
    """One full-text index: a tenant's visibility scope (ENTRIES), or its past texts or facts (scope_id 0)."""

    tenant_id: int
    kind: int
    scope_id: int = 0

    @property
    def columns(self) -> tuple[str, ...]:
        return COLUMNS[self.kind]

    @property
    def key(self) -> tuple[int, int, int]:
        return (int(self.tenant_id), int(self.kind), int(self.scope_id))


_KEY = "tenant_id = ? AND kind = ? AND scope_id = ?"


def _key(alias: str) -> str:
    return f"{alias}.tenant_id = ? AND {alias}.kind = ? AND {alias}.scope_id = ?"


# -- writes ---------------------------------------------------------------------------------------------------


def _document(columns: Sequence[str | None]) -> tuple[int, list[str], dict[str, list[int]]]:
    """(length, scope tokens, {stem: [t0, t1, t2, t3, t4, n, position, ...]}) of one document's column texts:
    its counts per column, then its positions as `fulltext_docs.pos` holds them (their number, then each).

    One list a stem: a batch holds ~70 of them an entry, and every object more is an allocation and a share of
    the cyclic collector's passes over the batch.
    """
    postings: dict[str, list[int]] = {}
    get = postings.get
    length = 0
    scope: list[str] = []
    last = len(columns) - 1
    for col, text in enumerate(columns):
        if not text:
            continue
        stems = q.stems(text)
        for offset, stem in enumerate(stems, start=col << q.SHIFT):
            entry = get(stem)
            if entry is None:
                postings[stem] = entry = [0, 0, 0, 0, 0, 1, offset]
            else:
                entry[5] += 1
                entry.append(offset)
            entry[col] += 1
        length += len(stems)
        if col == last:
            scope = stems
    return length, scope, postings


class _Int4s(bytes):
    """Integers as PostgreSQL's binary `integer[]` (`_int4s`), sent as such (`_Int4sDumper`). A 2,000-entry batch's
    ~800K posting counts went as decimal text: parsing them was ~70 of the statement's ~290 ms of server time,
    and writing them a tenth of add_many's Python. This is built and read a whole array at a time."""


def _int4s(values: Iterable[int]) -> _Int4s:
    """`values` (each fitting 32 bits) as a one-dimensional `integer[]` in the binary format."""
    items = array("i", values)
    # Each element is its length (4) then its value, all big-endian, after the header: 1 dimension, no NULLs,
    # the element type (int4), the length and the lower bound 1.
    out = array("i", [4]) * (2 * len(items))
    out[1::2] = items
    head = array("i", [1, 0, _INT4_OID, len(items), 1])
    if sys.byteorder == "little":
        out.byteswap()
        head.byteswap()
    return _Int4s(head.tobytes() + out.tobytes())


_INT4_OID, _INT4_ARRAY_OID = 23, 1007


class _Int4sDumper(Dumper):
    format = Format.BINARY
    oid = _INT4_ARRAY_OID

    def dump(self, obj: _Int4s) -> bytes:
        return obj


# For every connection made after this module is imported (the store's are: store/pg/db.py imports it first).
psycopg.adapters.register_dumper(_Int4s, _Int4sDumper)


def _unpack(terms: str, data: bytes, wanted: Callable[[str], bool]) -> dict[str, list[int]]:
    """{stem: positions} of the stems `wanted` keeps, from a docs row's `terms` and `pos`."""
    if not terms:  # a document with no token
        return {}
    values = array("i")
    values.frombytes(data)
    if sys.byteorder != "little":
        values.byteswap()
    out, at = {}, 0
    for stem in terms.split(" "):
        n = values[at]
        if wanted(stem):
            out[stem] = values[at + 1 : at + 1 + n].tolist()
        at += 1 + n
    return out


def add_many(conn: Connection, index: Index, docs: Iterable[tuple[int, Sequence[str | None]]]) -> int:
    """Index documents (ids new to the index) as one segment; returns how many. One statement whatever their number
    (a round trip is a tenth of a one-entry `remember`)."""
    width = len(index.columns)
    d_ids: list[int] = []
    d_lens: list[int] = []
    d_scopes: list[str] = []
    d_terms: list[str] = []
    d_sizes: list[int] = []
    packed: list[int] = []  # the documents' `pos`, one after the other
    # term -> its documents in id order (a segment reads like a doclist): doc id (as text), length, t0..t4, seven
    # items a document in one flat list, whose slices [i::7] are then the row's arrays.
    rows: dict[str, list] = {}
    get = rows.get
    tokens = 0
    for doc_id, columns in sorted(docs, key=lambda d: d[0]):
        if len(columns) != width:
            raise ValueError(f"an index of kind {index.kind} has {width} columns, not {len(columns)}")
        length, scope, postings = _document(columns)
        doc_id = int(doc_id)
        d_ids.append(doc_id)
        d_lens.append(length)
        d_scopes.append(" ".join(scope))
        d_terms.append(" ".join(postings))
        d_sizes.append(4 * (length + len(postings)))  # a count a term, a position a token
        tokens += length
        doc = str(doc_id)
        for stem, e in postings.items():
            packed += e[5:]
            row = get(stem)
            if row is None:
                rows[stem] = row = []
            row += (doc, length, e[0], e[1], e[2], e[3], e[4])
    if not d_ids:
        return 0
    pos = array("i", packed)
    if sys.byteorder != "little":
        pos.byteswap()
    key = index.key
    # Terms in order: the postings' index is then written page after page, not a random page per row.
    terms = sorted(rows)
    flat = [rows[t] for t in terms]
    # A row's arrays are slices of two batch-wide ones: its documents' ids at `at` in `ids` (decimal text, parsed
    # once), and their lengths and t0..t4, six runs of n at 6 * at in `tf` (binary). Adapting the batch's ~1M
    # integers one by one in Python cost as much CPU as the whole insert, and parsing 7 small arrays per postings
    # row (~18K rows a 2,000-entry batch) was most of the server's.
    tf: list[int] = []
    for r in flat:
        for i in range(1, 7):
            tf += r[i::7]
    docs = (pos.tobytes(), ",".join(map(str, d_ids)), _int4s(array("i", d_lens)), "\n".join(["", *d_scopes]),
            "\n".join(["", *d_terms]), _int4s(array("i", d_sizes)))
    counts, words, sizes = _int4s(tf), " ".join(terms), _int4s([len(r) // 7 for r in flat])
    if getattr(conn, "citus", False):  # `engine.writes_in_with`, asked of any connection the tests pass
        seg = conn.execute("SELECT nextval('fulltext_segments')").fetchone()[0]
        conn.execute(_ADD_SPLIT[0], (*key, seg, *docs))
        conn.execute(_ADD_SPLIT[1], (*key, seg, [int(i) for r in flat for i in r[0::7]], counts, words, sizes))
        conn.execute(_ADD_SPLIT[2], (*key, len(d_ids), tokens))
    else:
        conn.execute(_ADD, (*key, *docs, ",".join([",".join(r[0::7]) for r in flat]), counts, *key, words, sizes,
                            *key, len(d_ids), tokens))
    return len(d_ids)


_TF_SLICES = ", ".join(f"f.tf[6 * t.at + {i} * t.n + 1 : 6 * t.at + {i + 1} * t.n]" for i in range(6))
# add_many's writes: the documents, their postings, the totals (`?` in that order: the full-text tests run them
# through a bare qmark wrapper), each reading the new segment number as `{seg}`. A batch's documents' texts go as
# one string each, a line a document after a first empty one (a stem or scope token holds no line break; the first
# line keeps a lone empty document from reading as none), not as a list psycopg adapts item by item.
_DOCS = (
    "INSERT INTO fulltext_docs (tenant_id, kind, scope_id, doc_id, len, seg, scope, terms, pos) "
    "SELECT ?, ?, ?, u.doc_id, u.len, {seg}, string_to_array(u.scope, ' '), u.terms, "
    "substring(?::bytea FROM u.at + 1 FOR u.size) "
    "FROM {from_seg}(SELECT u.*, (sum(u.size) OVER (ORDER BY u.n) - u.size)::integer AS at "
    "FROM unnest(('{{' || ? || '}}')::bigint[], ?::integer[], (string_to_array(?, chr(10)))[2:], "
    "(string_to_array(?, chr(10)))[2:], ?::integer[]) WITH ORDINALITY AS u(doc_id, len, scope, terms, size, n)) u"
)
_FLAT = "SELECT ('{{' || ? || '}}')::bigint[] AS ids, ?::integer[] AS tf"
_POSTINGS = (
    f"INSERT INTO fulltext_postings (tenant_id, kind, scope_id, term, seg, min_doc, max_doc, doc_ids, "
    f"lens, {', '.join(_TF)}) "
    "SELECT ?, ?, ?, t.term, {seg}, f.ids[t.at + 1], f.ids[t.at + t.n], f.ids[t.at + 1 : t.at + t.n], "
    f"{_TF_SLICES} "
    "FROM {from_seg}{flat} f, (SELECT t.term, t.n, (sum(t.n) OVER (ORDER BY t.i) - t.n)::integer AS at "
    "FROM unnest(string_to_array(?, ' '), ?::integer[]) "
    "WITH ORDINALITY AS t(term, n, i)) t"
)
_TOTALS = (
    "INSERT INTO fulltext_totals (tenant_id, kind, scope_id, rows, tokens) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant_id, kind, scope_id) DO UPDATE "
    "SET rows = fulltext_totals.rows + excluded.rows, tokens = fulltext_totals.tokens + excluded.tokens"
)
# One statement: a new segment number, then the three writes.
_ADD = (
    "WITH seg AS (SELECT nextval('fulltext_segments') AS seg), "
    f"docs AS ({_DOCS.format(seg='seg.seg', from_seg='seg, ')}), "
    f"flat AS MATERIALIZED ({_FLAT.format()}), "
    f"postings AS ({_POSTINGS.format(seg='seg.seg', from_seg='seg, ', flat='flat')}) "
    f"{_TOTALS}"
)
# Under Citus (`engine.writes_in_with`), three statements after the number: an INSERT ... SELECT from arrays alone
# goes to the one shard its rows go to.
# Its postings read the ids as an array parameter: the flat row as a plain subquery is folded into each reference,
# and the text parsed again for every row (200 entries took 9 s).
_ADD_SPLIT = (
    _DOCS.format(seg="?", from_seg=""),
    _POSTINGS.format(seg="?", from_seg="", flat="(SELECT ?::bigint[] AS ids, ?::integer[] AS tf)"),
    _TOTALS,
)


def add(conn: Connection, index: Index, doc_id: int, columns: Sequence[str | None]) -> None:
    """Index one document."""
    add_many(conn, index, [(doc_id, columns)])


def remove(conn: Connection, index: Index, doc_ids: Sequence[int]) -> int:
    """Take documents out of the index (ids it does not hold are skipped); returns how many it held.

    Each segment row holding one of them is rewritten without it (or deleted, if it held nothing else).
    """
    key = index.key
    ids = sorted({int(i) for i in doc_ids})
    if not ids:
        return 0
    gone = conn.execute(
        f"DELETE FROM fulltext_docs WHERE {_KEY} AND doc_id = ANY(?::bigint[]) RETURNING doc_id, len, seg, terms",
        (*key, ids),
    ).fetchall()
    if not gone:
        return 0
    pairs = sorted({(term, seg) for _, _, seg, terms in gone for term in terms.split(" ") if term})
    ids = [r[0] for r in gone]
    targets = ([t for t, _ in pairs], [s for _, s in pairs])
    rows = (f"unnest(?::text[], ?::bigint[]) AS t(term, seg) WHERE {_key('p')} AND p.term = t.term "
            "AND p.seg = t.seg")
    conn.execute(f"DELETE FROM fulltext_postings p USING {rows} AND p.doc_ids <@ ?::bigint[]", (*targets, *key, ids))
    arrays = ("doc_ids", "lens", *_TF)
    conn.execute(
        f"UPDATE fulltext_postings p SET (min_doc, max_doc, {', '.join(arrays)}) = (SELECT min(u.doc_ids), max(u.doc_ids), "
        + ", ".join(f"array_agg(u.{a} ORDER BY u.n)" for a in arrays)
        + f" FROM unnest({', '.join('p.' + a for a in arrays)}) WITH ORDINALITY AS u({', '.join(arrays)}, n) "
        f"WHERE u.doc_ids <> ALL(?::bigint[])) FROM {rows} AND p.doc_ids && ?::bigint[]",
        (ids, *targets, *key, ids),
    )
    conn.execute(
        f"UPDATE fulltext_totals SET rows = rows - ?, tokens = tokens - ? WHERE {_KEY}",
        (len(gone), sum(r[1] for r in gone), *key),
    )
    return len(gone)


def replace(conn: Connection, index: Index, doc_id: int, columns: Sequence[str | None]) -> None:
    """Index a document's new text in place of its old (or index it, if the index did not hold it)."""
    remove(conn, index, [doc_id])
    add(conn, index, doc_id, columns)


def merge(conn: Connection, index: Index, *, below: int = 1000) -> int:
    """Fold the index's segments of fewer than `below` documents into one; returns how many were folded.

    One-entry writes leave a segment each (a row per word of the entry);
    idle upkeep merges them, as FTS5's automerge does, so a term is a few
    rows whatever the writes were. Ranking reads the same postings before
    and after.
    """
    key = index.key
    small = [r[0] for r in conn.execute(
        f"SELECT seg FROM fulltext_docs WHERE {_KEY} GROUP BY seg HAVING count(*) < ?", (*key, below)
    )]
    if len(small) < 2:
        return 0
    seg = conn.execute("SELECT nextval('fulltext_segments')").fetchone()[0]
    arrays = ("doc_ids", "lens", *_TF)
    conn.execute(
        f"WITH old AS (DELETE FROM fulltext_postings WHERE {_KEY} AND seg = ANY(?::bigint[]) "
        f"RETURNING term, {', '.join(arrays)}) "
        f"INSERT INTO fulltext_postings (tenant_id, kind, scope_id, term, seg, min_doc, max_doc, {', '.join(arrays)}) "
        f"SELECT ?, ?, ?, o.term, ?, min(u.doc_ids), max(u.doc_ids), "
        + ", ".join(f"array_agg(u.{a} ORDER BY u.doc_ids)" for a in arrays)
        + f" FROM old o CROSS JOIN LATERAL unnest({', '.join('o.' + a for a in arrays)}) AS u({', '.join(arrays)}) "
        "GROUP BY o.term",
        (*key, small, *key, seg),
    )
    conn.execute(f"UPDATE fulltext_docs SET seg = ? WHERE {_KEY} AND seg = ANY(?::bigint[])", (seg, *key, small))
    return len(small)


# -- statistics -----------------------------------------------------------------------------------------------


def totals(conn: Connection, index: Index) -> tuple[int, int]:
    """(documents, tokens) in the index, kept by every write (no scan)."""
    row = conn.execute(f"SELECT rows, tokens FROM fulltext_totals WHERE {_KEY}", index.key).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def frequencies(conn: Connection, index: Index, stems: Sequence[str]) -> dict[str, int]:
    """{stem: documents holding it} in the index; a stem ending in `*` is a prefix: its words' counts, summed, at most
    the index's documents (an upper bound, as `_rank.Frequencies` reads it from fts5vocab)."""
    words = sorted({s for s in stems if not s.endswith("*")})
    found: dict[str, int] = dict.fromkeys(stems, 0)
    if words:
        for term, docs in conn.execute(
            f"SELECT term, sum(cardinality(doc_ids)) FROM fulltext_postings WHERE {_KEY} AND term = ANY(?::text[]) "
            "GROUP BY term",
            (*index.key, words),
        ):
            found[term] = int(docs)
    prefixes = [s for s in dict.fromkeys(stems) if s.endswith("*")]
    if prefixes:
        n = totals(conn, index)[0]
        for s in prefixes:
            low = s[:-1]
            if not low:
                found[s] = n
                continue
            # The bounds `_rank.Frequencies` reads fts5vocab with, compared bytewise as FTS5 compares terms.
            high = low[:-1] + chr(ord(low[-1]) + 1)
            docs = conn.execute(
                f"SELECT coalesce(sum(cardinality(doc_ids)), 0) FROM fulltext_postings WHERE {_KEY} AND term >= ? "
                "AND term < ?",
                (*index.key, low, high),
            ).fetchone()[0]
            found[s] = min(int(docs), n)
    return found


# -- matching -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sql:
    """A compiled part of an expression: a set of doc ids (`filter` False) or a condition on `d`, a docs row."""

    sql: str
    params: tuple
    filter: bool


#: doc id -> (length, {phrase number: instances}): what a phrase or NEAR group matched where, worked out here.
Found = dict[int, tuple[int, dict[int, list[int]]]]


def _scope_only(node: q.Node, scope_col: int) -> bool:
    """True if every phrase under `node` is one whole token in the scope column alone: a test of `docs.scope`."""
    if isinstance(node, q.Near) and len(node.phrases) > 1:
        return False
    if isinstance(node, q.Not):
        return _scope_only(node.left, scope_col) and _scope_only(node.right, scope_col)
    if isinstance(node, (q.And, q.Or)):
        return all(_scope_only(c, scope_col) for c in node.children)
    return all(len(p.stems) == 1 and not p.prefix and p.cols == {scope_col} for p in q.phrases(node))


def _term(stem: str, prefix: bool) -> tuple[str, tuple]:
    """The condition picking a term's postings: the stem, or every stem it begins."""
    if not prefix:
        return "term = ?", (stem,)
    if not stem:
        return "TRUE", ()
    last = ord(stem[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:
        last = 0xE000
    if last > 0x10FFFF:
        return "term >= ? AND starts_with(term, ?)", (stem, stem)
    return "term >= ? AND term < ?", (stem, stem[:-1] + chr(last))


def _postings(cond: str, cols: Iterable[str] = (), arrays: dict[str, str] | None = None, *, ranged: bool) -> str:
    """A term's segments, a row per document: `FROM ... WHERE` (and the id range, if `ranged`), for `u.doc_id`,
    `u.len`, `u.t0`..; its parameters are the index's key, `cond`'s, then `_Compiler.range`.

    A search of the whole index says no range at all: the planner takes a range's conditions, even from 0 to the
    last id, to keep a sliver of the postings, and groups the few rows it expects by sorting them, where
    hashing the thousands that come is faster (a fifth of a ranking at 250K entries).

    Only the arrays the statement reads (`cols`, beside the ids; `arrays` may give one as an expression): each
    is read and unnested on its own. Unnested in the select list (in step, as ROWS FROM would), not in a
    LATERAL function scan, which stores each segment row's rows before reading them: ~1.5x faster a posting.
    """
    names = ["doc_id", *dict.fromkeys(cols)]
    given = {"doc_id": "doc_ids", "len": "lens", **(arrays or {})}
    unnested = ", ".join(f"unnest({given.get(n, n)}) AS {n}" for n in names)
    if not ranged:
        return f"FROM (SELECT {unnested} FROM fulltext_postings WHERE {_KEY} AND {cond}) u WHERE TRUE"
    return (f"FROM (SELECT {unnested} FROM fulltext_postings WHERE {_KEY} AND {cond} AND max_doc >= ? "
            "AND min_doc <= ?) u WHERE u.doc_id BETWEEN ? AND ?")


_LAST = (1 << 63) - 1


def _in_cols(cols: frozenset[int], width: int) -> tuple[str, list[str]]:
    """SQL: the posting has a token in one of `cols` (TRUE when that is every column), and the arrays it reads."""
    if len(cols & set(range(width))) == width:
        return "TRUE", []
    read = [_TF[c] for c in sorted(cols) if c < width]
    return ("(" + " + ".join(f"u.{t}" for t in read) + ") > 0" if cols else "FALSE"), read


def _plain(node: q.Node) -> bool:
    """An AND or OR of scope tokens, no NOT: the documents it matches lie between its tokens' first and last."""
    if isinstance(node, (q.And, q.Or)):
        return all(_plain(c) for c in node.children)
    return isinstance(node, (q.Phrase, q.Near))


def _simple(node: q.Node) -> bool:
    """A phrase of one word or prefix (or a NEAR group of one): its postings say where it is, no positions needed."""
    if isinstance(node, q.Near):
        return len(node.phrases) == 1 and _simple(node.phrases[0])
    return isinstance(node, q.Phrase) and len(node.stems) == 1


class _Compiler:
    """An expression as a SQL set of doc ids over one index, from `min_rowid` up.

    Words, prefixes and scope tokens are SQL. A phrase of several words or a
    NEAR group is worked out here: SQL finds the documents holding all its
    words, their positions come back, and `fulltext_query.instances` keeps
    those where it stands as FTS5 would find it; `found` keeps the instances
    for ranking, and the SQL gets the ids.
    """

    def __init__(self, conn: Connection, index: Index, min_rowid: int) -> None:
        self.conn, self.index, self.min_rowid = conn, index, int(min_rowid)
        self.max_rowid = _LAST
        self.width = len(index.columns)
        self.scope_col = self.width - 1
        self.found: dict[int, Found] = {}  # id(node) -> what it matched

    def postings(self, stem: str, prefix: bool, cols: frozenset[int]) -> _Sql:
        cond, params = _term(stem, prefix)
        in_cols, read = _in_cols(cols, self.width)
        arrays = None
        if read and cols >= set(range(self.scope_col)):
            # Every column but the scope's (recall's text match): a posting fails only if all its tokens are in the
            # scope column, so a segment whose term has none there passes whole, its ids alone unnested; the
            # counts per column (NULL, so the test is skipped) are read only where it has some.
            scope = _TF[self.scope_col]
            arrays = {t: f"CASE WHEN 0 < ANY({scope}) THEN {t} END" for t in read}
            in_cols = f"coalesce({in_cols}, TRUE)"
        sql = f"SELECT u.doc_id {_postings(cond, read, arrays, ranged=bool(self.range))} AND {in_cols}"
        return _Sql(sql, (*self.index.key, *params, *self.range), False)

    @property
    def range(self) -> tuple[int, ...]:
        """The parameters of `_postings`' id range: none when the search is not bounded."""
        if self.min_rowid <= 0 and self.max_rowid == _LAST:
            return ()
        return self.min_rowid, self.max_rowid, self.min_rowid, self.max_rowid

    def narrow(self, filters: list[tuple[q.Node, bool]]) -> bool:
        """Bound the ids searched by where the documents a positive scope filter names lie; False if nowhere.

        A conversation's entries are a short run of ids among the tenant's:
        its words' segments outside that run are skipped, not unnested (the
        scope tokens are postings too, so their first and last ids are a
        lookup). The filter itself still decides, on each match.
        """
        for node, negated in filters:
            if negated or not _plain(node):
                continue
            stems = sorted({p.stems[0] for p in q.phrases(node)})
            low, high = self.conn.execute(
                f"SELECT min(min_doc), max(max_doc) FROM fulltext_postings WHERE {_KEY} AND term = ANY(?::text[])",
                (*self.index.key, stems),
            ).fetchone()
            if low is None:
                return False
            self.min_rowid, self.max_rowid = max(self.min_rowid, int(low)), min(self.max_rowid, int(high))
        return self.min_rowid <= self.max_rowid

    def as_set(self, part: _Sql) -> _Sql:
        if not part.filter:
            return part
        sql = f"SELECT d.doc_id FROM fulltext_docs d WHERE {_key('d')} AND d.doc_id BETWEEN ? AND ? AND ({part.sql})"
        return _Sql(sql, (*self.index.key, self.min_rowid, self.max_rowid, *part.params), False)

    def restrict(self, part: _Sql, cond: str, params: tuple) -> _Sql:
        sql = (f"SELECT x.doc_id FROM ({part.sql}) x JOIN fulltext_docs d ON {_key('d')} AND d.doc_id = x.doc_id "
               f"WHERE {cond}")
        return _Sql(sql, (*part.params, *self.index.key, *params), False)

    def compile(self, node: q.Node) -> _Sql:
        if _scope_only(node, self.scope_col):
            return self.scope_filter(node)
        if isinstance(node, (q.Phrase, q.Near)):
            if not _simple(node):
                return _Sql("SELECT unnest(?::bigint[]) AS doc_id", (sorted(self.evaluate(node)),), False)
            p = node if isinstance(node, q.Phrase) else node.phrases[0]
            return self.postings(p.stems[0], p.prefix, p.cols)
        if isinstance(node, q.Not):
            left, right = self.compile(node.left), self.compile(node.right)
            if left.filter and right.filter:
                return _Sql(f"({left.sql}) AND NOT ({right.sql})", (*left.params, *right.params), True)
            left = self.as_set(left)
            if right.filter:
                return self.restrict(left, f"NOT ({right.sql})", right.params)
            return _Sql(f"({left.sql}) EXCEPT ({right.sql})", (*left.params, *right.params), False)
        parts = [self.compile(c) for c in node.children]
        if isinstance(node, q.Or):
            sets = [self.as_set(p) for p in parts]
            return _Sql(" UNION ".join(f"({p.sql})" for p in sets), tuple(x for p in sets for x in p.params), False)
        sets = [p for p in parts if not p.filter]
        filters = [p for p in parts if p.filter]
        if not sets:
            return _Sql(" AND ".join(f"({p.sql})" for p in filters), tuple(x for p in filters for x in p.params), True)
        out = self.intersect(sets)
        if filters:
            out = self.restrict(out, " AND ".join(f"({p.sql})" for p in filters),
                                tuple(x for p in filters for x in p.params))
        return out

    def intersect(self, parts: list[_Sql]) -> _Sql:
        return _Sql(" INTERSECT ".join(f"({p.sql})" for p in parts), tuple(x for p in parts for x in p.params), False)

    def evaluate(self, node: q.Phrase | q.Near) -> Found:
        """Where a phrase of several words or a NEAR group matches, with its instances."""
        if id(node) in self.found:
            return self.found[id(node)]
        group = node.phrases if isinstance(node, q.Near) else (node,)
        words = [self.postings(s, p.prefix and i == len(p.stems) - 1, p.cols)
                 for p in group for i, s in enumerate(p.stems)]
        found: Found = {}
        if all(p.stems for p in group):
            within = self.intersect(words)
            for doc_id, (length, doc) in _positions(self.conn, self.index, group, within).items():
                ok, inst = q.instances(node, doc, lambda prefix, d=doc: [t for t in d if t.startswith(prefix)])
                if ok:
                    found[doc_id] = (length, inst)
        self.found[id(node)] = found
        return found

    def scope_filter(self, node: q.Node) -> _Sql:
        if isinstance(node, q.Near):
            node = node.phrases[0]
        if isinstance(node, q.Phrase):
            return _Sql("? = ANY(d.scope)", (node.stems[0],), True)
        if isinstance(node, q.Not):
            left, right = self.scope_filter(node.left), self.scope_filter(node.right)
            return _Sql(f"({left.sql}) AND NOT ({right.sql})", (*left.params, *right.params), True)
        parts = [self.scope_filter(c) for c in node.children]
        op = " OR " if isinstance(node, q.Or) else " AND "
        return _Sql(op.join(f"({p.sql})" for p in parts), tuple(x for p in parts for x in p.params), True)


def _positions(conn: Connection, index: Index, group: Iterable[q.Phrase], within: _Sql) -> dict[int, tuple[int, dict]]:
    """doc id -> (length, {stem: sorted positions}) of the stems of `group`, for the documents of the set `within`."""
    exact = {s for p in group for i, s in enumerate(p.stems) if not (p.prefix and i == len(p.stems) - 1)}
    prefixes = tuple(p.stems[-1] for p in group if p.prefix and p.stems)

    def wanted(stem: str) -> bool:
        return stem in exact or stem.startswith(prefixes)

    return {
        doc_id: (int(length), _unpack(terms, pos, wanted))
        for doc_id, length, terms, pos in conn.execute(
            f"SELECT d.doc_id, d.len, d.terms, d.pos FROM fulltext_docs d JOIN ({within.sql}) w "
            f"ON w.doc_id = d.doc_id WHERE {_key('d')}",
            (*within.params, *index.key),
        )
    }


def _compiled(conn: Connection, index: Index, match: str, min_rowid: int = 0) -> tuple[q.Node, _Compiler, _Sql]:
    tree = q.parse(match, index.columns)
    compiler = _Compiler(conn, index, min_rowid)
    return tree, compiler, compiler.as_set(compiler.compile(tree))


def count(conn: Connection, index: Index, match: str) -> int:
    """How many documents match."""
    _, _, sql = _compiled(conn, index, match)
    return int(conn.execute(f"SELECT count(*) FROM ({sql.sql}) c", sql.params).fetchone()[0])


def matching(conn: Connection, index: Index, match: str, limit: int, *, below: int | None = None) -> list[int]:
    """The ids of the newest `limit` matches (below `below` if given), newest first."""
    _, _, sql = _compiled(conn, index, match)
    cond, params = ("WHERE c.doc_id < ?", (int(below),)) if below is not None else ("", ())
    return [r[0] for r in conn.execute(
        f"SELECT c.doc_id FROM ({sql.sql}) c {cond} ORDER BY c.doc_id DESC LIMIT ?", (*sql.params, *params, limit)
    )]


def newest(conn: Connection, index: Index, match: str, count: int) -> int:
    """The id from which the match has its newest `count` matches (0 if it has fewer): `_sql.newest`."""
    _, _, sql = _compiled(conn, index, match)
    row = conn.execute(
        f"SELECT c.doc_id FROM ({sql.sql}) c ORDER BY c.doc_id DESC LIMIT 1 OFFSET ?", (*sql.params, count - 1)
    ).fetchone()
    return int(row[0]) if row else 0


def lengths(conn: Connection, index: Index, match: str) -> tuple[int, int]:
    """(documents matching, their tokens in all): the average length over a filtered set (facts' `_totals`)."""
    _, _, sql = _compiled(conn, index, match)
    row = conn.execute(
        f"SELECT count(*), coalesce(sum(d.len), 0) FROM ({sql.sql}) c JOIN fulltext_docs d "
        f"ON {_key('d')} AND d.doc_id = c.doc_id",
        (*sql.params, *index.key),
    ).fetchone()
    return int(row[0]), int(row[1])


# -- ranking --------------------------------------------------------------------------------------------------


def _split(node: q.Node, scope_col: int) -> tuple[q.Node, list[tuple[q.Node, bool]]] | None:
    """(the text part, [(scope filter, negated)]) of `text AND filter`, `text NOT filter`...; None if not so made."""
    filters: list[tuple[q.Node, bool]] = []
    while True:
        if isinstance(node, q.And):
            rest = [c for c in node.children if not _scope_only(c, scope_col)]
            filters += [(c, False) for c in node.children if _scope_only(c, scope_col)]
            if len(rest) != 1:
                return None
            node = rest[0]
        elif isinstance(node, q.Not) and _scope_only(node.right, scope_col):
            filters.append((node.right, True))
            node = node.left
        else:
            return node, filters


def _branches(node: q.Node) -> list[q.Phrase | q.Near] | None:
    """The phrases and NEAR groups of an OR of them (what recall writes), or None: in an OR, each branch found
    in a document reports its instances, whatever the others do."""
    if isinstance(node, (q.Phrase, q.Near)):
        return [node]
    if isinstance(node, q.Or):
        out: list[q.Phrase | q.Near] = []
        for c in node.children:
            part = _branches(c)
            if part is None:
                return None
            out += part
        return out
    return None


def ranked(
    conn: Connection, index: Index, match: str, spec, depth: int, *, min_rowid: int = 0
) -> list[tuple[int, float]]:
    """(doc id, BM25) of the `depth` best matches from `min_rowid` up, best first: `_rank.ranked` on PostgreSQL.

    `spec.idf[i]` is the idf of the MATCH's phrase i (the text phrases come
    first); phrases past it are not scored.
    """
    tree = q.parse(match, index.columns)
    avgdl = spec.avgdl
    if avgdl is None:  # as `_rank` does without one: the searched index's own average
        rows, tokens = totals(conn, index)
        avgdl = tokens / max(rows, 1) or 1.0
    idf = [float(x) for x in spec.idf]
    consts = (tuple(float(w) for w in spec.weights[:4]), float(spec.k1), 1.0 - spec.b, float(spec.b),
              spec.k1 + 1.0, float(avgdl))
    compiler = _Compiler(conn, index, min_rowid)
    split = _split(tree, compiler.scope_col)
    branches = _branches(split[0]) if split else None
    if branches is not None and all(p.index >= len(idf) for node, _ in split[1] for p in q.phrases(node)):
        if not compiler.narrow(split[1]):
            return []
        return _ranked_sql(compiler, branches, split[1], idf, consts, depth)
    return _ranked_here(compiler, tree, idf, consts, depth)


def _ranked_here(compiler: _Compiler, tree: q.Node, idf: list[float], consts: tuple, depth: int):
    """Any other expression: matched and scored in Python, from the positions of the documents SQL finds."""
    conn, index = compiler.conn, compiler.index
    within = compiler.as_set(compiler.compile(tree))
    (w0, w1, w2, w3), k1, one_minus_b, b, k1p1, avgdl = consts
    scored = []
    for doc_id, (length, doc) in _positions(conn, index, q.phrases(tree), within).items():
        ok, inst = q.instances(tree, doc, lambda prefix, d=doc: [t for t in d if t.startswith(prefix)])
        if not ok:
            continue
        # `_rank._rank`, expression for expression, so the floats are the same.
        norm = k1 * (one_minus_b + b * length / avgdl)
        total = 0.0
        for i, phrase_idf in enumerate(idf):
            per = _per_column(inst.get(i, ()))
            f = w0 * per[0] + w1 * per[1] + w2 * per[2] + w3 * per[3]
            if f:
                total += phrase_idf * f * k1p1 / (f + norm)
        scored.append((doc_id, total))
    scored.sort(key=lambda r: (-r[1], r[0]))
    return scored[:depth]


def _per_column(where: Iterable[int]) -> list[int]:
    per = [0, 0, 0, 0]
    for x in where:
        c = x >> q.SHIFT
        if c < _SCORED:
            per[c] += 1
    return per


def _ranked_sql(compiler: _Compiler, branches, filters, idf: list[float], consts: tuple, depth: int):
    """BM25 of an OR of phrases and NEAR groups, in one statement: a scan per word, a sum per document.

    A word or prefix is an index-only scan of its postings; a phrase of
    several words or a NEAR group comes in as rows of counts worked out in
    Python (`_Compiler.evaluate`).
    """
    index = compiler.index
    weights, k1, one_minus_b, b, k1p1, avgdl = consts
    width = len(index.columns)
    scans, params = [], []
    extra: list[list] = [[], [], [], [], [], [], []]  # phrase, doc, len, a0..a3
    numbered: list[q.Phrase] = []
    for node in branches:
        if not _simple(node):
            group = node.phrases if isinstance(node, q.Near) else (node,)
            numbered += group
            for doc_id, (length, inst) in compiler.evaluate(node).items():
                for p in group:
                    for column, value in enumerate((p.index, doc_id, length, *_per_column(inst.get(p.index, ())))):
                        extra[column].append(value)
            continue
        p = node if isinstance(node, q.Phrase) else node.phrases[0]
        numbered.append(p)
        cond, ps = _term(p.stems[0], p.prefix)
        tf = [f"u.t{c}" if c in p.cols else "0" for c in range(_SCORED)]
        in_cols, read = _in_cols(p.cols, width)
        scan = _postings(cond, ["len", *(_TF[c] for c in range(_SCORED) if c in p.cols), *read],
                         ranged=bool(compiler.range)) + f" AND {in_cols}"
        if p.prefix:  # one phrase, several words: its counts are their sums
            scans.append(f"SELECT {p.index} AS ph, u.doc_id, min(u.len) AS len, "
                         + ", ".join(f"sum({t})::int AS a{c}" for c, t in enumerate(tf))
                         + f" {scan} GROUP BY u.doc_id")
        else:
            scans.append(f"SELECT {p.index} AS ph, u.doc_id, u.len, "
                         + ", ".join(f"{t} AS a{c}" for c, t in enumerate(tf))
                         + f" {scan}")
        params += [*index.key, *ps, *compiler.range]
    if extra[0]:
        scans.append("SELECT * FROM unnest(?::int[], ?::bigint[], ?::int[], ?::int[], ?::int[], ?::int[], ?::int[]) "
                     "AS x(ph, doc_id, len, a0, a1, a2, a3)")
        params += extra
    if not scans:
        return []
    scored = [p for p in numbered if p.index < len(idf)]
    # f per phrase as `_rank` computes it: w0 * n0 + w1 * n1 + w2 * n2 + w3 * n3 (a column outside the phrase's
    # filter counts 0); then idf * f * (k1 + 1) / (f + norm), added in phrase order to 0.0, skipping f = 0.
    fs = [f"max(CASE WHEN u.ph = {p.index} THEN ?::float8 * u.a0 + ?::float8 * u.a1 + ?::float8 * u.a2 "
          f"+ ?::float8 * u.a3 END) AS f{p.index}" for p in scored]
    f_params = [w for _ in scored for w in weights]
    norm = "?::float8 * (?::float8 + ?::float8 * h.len / ?::float8)"
    terms, s_params = [], []
    for p in sorted(scored, key=lambda p: p.index):
        f = f"h.f{p.index}"
        terms.append(f"CASE WHEN {f} <> 0 THEN ?::float8 * {f} * ?::float8 / ({f} + {norm}) ELSE 0.0 END")
        s_params += [idf[p.index], k1p1, k1, one_minus_b, b, avgdl]
    score = " + ".join(["0.0::float8", *terms])
    inner = (f"SELECT u.doc_id, max(u.len) AS len{''.join(', ' + f for f in fs)} "
             f"FROM ({' UNION ALL '.join(scans)}) u GROUP BY u.doc_id")
    sql = f"SELECT h.doc_id, {score} AS s FROM ({inner}) h ORDER BY s DESC, h.doc_id"
    w_params: list = []
    if filters:
        # The scope filter is tested best first, one document at a time, until `depth` pass: a scalar subquery
        # the planner cannot turn into a join, over the sorted matches, whose order the LIMIT then keeps. A
        # conversation pass's filter (its conversation or no conversation) keeps a fraction of a large tenant's
        # matches: joining every match to its document first cost more than the ranking.
        conds = []
        for node, negated in filters:
            part = compiler.scope_filter(node)
            conds.append(f"NOT ({part.sql})" if negated else f"({part.sql})")
            w_params += part.params
        sql = (f"SELECT r.doc_id, r.s FROM ({sql} OFFSET 0) r WHERE (SELECT {' AND '.join(conds)} FROM fulltext_docs d "
               f"WHERE {_key('d')} AND d.doc_id = r.doc_id) ORDER BY r.s DESC, r.doc_id")
    all_params = (*s_params, *f_params, *params, *w_params, *(index.key if filters else ()), depth)
    return [(int(i), float(s)) for i, s in compiler.conn.execute(sql + " LIMIT ?", all_params)]


# -- snippets -------------------------------------------------------------------------------------------------


def snippet(kind: int, match: str, columns: Sequence[str | None], *, tokens: int = 24,
            start: str = "**", end: str = "**", ellipsis: str = "…") -> str | None:
    """FTS5's `snippet(t, -1, start, end, ellipsis, tokens)` of one document, in Python; None if nothing matches.

    `columns` are the document's texts as indexed (fulltext_snippet.py says how the window is chosen).
    """
    return fulltext_snippet.snippet(COLUMNS[kind], match, columns, tokens=tokens, start=start, end=end,
                                    ellipsis=ellipsis)
