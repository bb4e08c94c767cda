"""Recall's SQL: scope filters, ranked passes, candidate rows, snippets.

Reads the tenant's own FTS index (store/fts.py, its `scope` column) and
`recall_entries` (migration m004_recall_index), and what the signals and hits
show of candidates from `entries` (as recorded at `known_at` for a past read).
"""

from __future__ import annotations

import apsw

from arbiter.recall import _rank
from arbiter.recall.query import quote
from arbiter.store import engine, entries, fts
from arbiter.store.users import Viewer

#: The FTS columns user terms may match; `scope` is only ever filtered on.
TEXT_COLUMNS = "{title content tags source}"
SCOPE_COLUMN = "{scope}"
#: How many more FTS rows to read when visibility filtering left a pass short.
_REFILL = 4


def text_match(expr: str) -> str:
    """Restrict an expression to the text columns."""
    return f"{TEXT_COLUMNS} : ({expr})"


def conversation_scope(tenant_id: int, conversation_id: int) -> str:
    """The scope filter of a conversation pass: that conversation plus the tenant's unscoped rows."""
    return f"{SCOPE_COLUMN} : ({quote(f'c{conversation_id}')} OR {quote(f'u{tenant_id}')})"


def tenant_scope(tenant_id: int) -> str:
    """The scope filter of an index that holds every tenant (the past-text index)."""
    return f"{SCOPE_COLUMN} : {quote(f't{tenant_id}')}"


def scoped(text: str, tenant_id: int, *, conversation_id: int | None = None, besides: int | None = None) -> str:
    """A text match limited to a conversation pass's rows, or to a tenant pass's.

    The index is the tenant's own, so a tenant pass needs no filter; `besides`
    leaves out what that conversation's pass covers.
    """
    if conversation_id is not None:
        return f"{text} AND {conversation_scope(tenant_id, conversation_id)}"
    if besides is not None:
        return f"({text} NOT {conversation_scope(tenant_id, besides)})"
    return text


def seen(v: Viewer, column: str) -> str:
    """SQL: the entry whose id is `column` exists for `v` (true for a tenant's only user, whose every entry it is)."""
    if v.solo:
        return "TRUE"
    return f"EXISTS (SELECT 1 FROM entries e WHERE e.id = {column} AND {v.sees()})"


def candidates(conn: apsw.Connection, v: Viewer, ids: list[int], as_of: int | None) -> dict[int, tuple]:
    """Rows among `ids` visible (in valid time, and to `v`): id -> (type, conversation_id, valid_from, bytes, self_refs, other_refs, numerals)."""
    if not ids:
        return {}
    cond, binds = entries.visible(as_of, alias="r")
    rows = conn.execute(
        "SELECT r.entry_id, r.type, r.conversation_id, r.valid_from, r.bytes, r.self_refs, r.other_refs, r.numerals "
        f"FROM recall_entries r WHERE r.entry_id IN ({','.join('?' * len(ids))}) AND r.tenant_id = ? AND {cond} "
        f"AND {seen(v, 'r.entry_id')}",
        (*ids, v.tenant_id, *binds),
    )
    return {r[0]: r[1:] for r in rows}


def neighbours(
    conn: apsw.Connection, v: Viewer, ids: list[int], as_of: int | None, *, before: bool = True, after: bool = True
) -> dict[int, tuple[int | None, int | None, int]]:
    """id -> (the turn of its conversation before it, the turn after it, its size in bytes), as `v` sees them.

    Turns are ordered by valid time, then id. Only entries in a conversation
    with a neighbour on a side asked for are in; a side not asked for, or
    with no turn, is None. Both sides come from one query on
    `recall_entries` (narrow rows, indexed by conversation and time).
    """
    if not ids or not (before or after):
        return {}
    cond, binds = entries.visible(as_of, alias="n")

    # The tenant as a constant, not `= q.tenant_id`: Citus pins a subquery of the SELECT list to one shard only so
    # (correlated, a recall over a conversation went to every shard).
    def turn(side: str, order: str) -> str:
        return (
            f"(SELECT n.entry_id FROM recall_entries n WHERE n.tenant_id = {int(v.tenant_id)} "
            "AND n.conversation_id = q.conversation_id "
            f"AND (n.valid_from, n.entry_id) {side} (q.valid_from, q.entry_id) AND {cond} AND {seen(v, 'n.entry_id')} "
            f"ORDER BY n.valid_from {order}, n.entry_id {order} LIMIT 1)"
        )

    rows = conn.execute(
        f"SELECT q.entry_id, {turn('<', 'DESC') if before else 'NULL'}, {turn('>', 'ASC') if after else 'NULL'}, "
        f"q.bytes FROM recall_entries q WHERE q.entry_id IN ({','.join('?' * len(ids))}) AND q.tenant_id = ? "
        "AND q.conversation_id IS NOT NULL",
        (*(binds if before else ()), *(binds if after else ()), *ids, v.tenant_id),
    ).fetchall()
    return {q: (b, a, size) for q, b, a, size in rows if b is not None or a is not None}


def speakers(conn: apsw.Connection, tenant_id: int, ids: list[int], *,
             asking: list[int]) -> tuple[dict[int, str], set[int]]:
    """The speakers of the entries among `ids` and `asking` (where one is recorded), and those of `asking` that ask.

    A turn asks if its text ends in a question mark. Only the texts of
    `asking` (a few short turns) are read, in the same query as the speakers.
    """
    said: dict[int, str] = {}
    asks: set[int] = set()
    if not ids and not asking:
        return said, asks
    marks = ",".join("?" * len(asking)) or "NULL"
    for eid, speaker, content in conn.execute(
        f"SELECT id, speaker, CASE WHEN id IN ({marks}) THEN content END FROM entries "
        f"WHERE tenant_id = ? AND id IN ({','.join('?' * (len(asking) + len(ids)))})",
        [*asking, tenant_id, *asking, *ids],
    ):
        if speaker is not None:
            said[eid] = speaker
        if content is not None and content.rstrip().endswith("?"):
            asks.add(eid)
    return said, asks


def at(conn: apsw.Connection, tenant_id: int, ids: list[int], column: str, *, known_at: int | None = None) -> dict:
    """id -> `column` of the entries (of `tenant_id`) among `ids` as recorded at `known_at` (default now), where it
    is not null.

    What a signal reads of the candidates a pass ranked (their text, tags,
    speaker): a `known_at` recall ranks past states, so it reads those.
    """
    if not ids:
        return {}
    return dict(conn.execute(
        f"SELECT e.id, e.{column} FROM {entries.states_at(tenant_id, known_at)} "
        f"WHERE e.tenant_id = ? AND e.id IN ({','.join('?' * len(ids))}) AND e.{column} IS NOT NULL", (tenant_id, *ids)
    ))


def echoes(conn: apsw.Connection, tenant_id: int, ids: list[int]) -> dict[int, tuple[int, str]]:
    """reply id -> (parent id, content) for the entries among `ids` whose title is "Re: <their parent's title>".

    Titles come before the content in a row, so the first test reads no
    long text; only the few "Re: " rows are joined to their parents.
    """
    if not ids:
        return {}
    marked = [
        i for (i,) in conn.execute(
            f"SELECT id FROM entries WHERE tenant_id = ? AND id IN ({','.join('?' * len(ids))}) "
            "AND substr(title, 1, 4) = 'Re: '", (tenant_id, *ids)
        )
    ]
    if not marked:
        return {}
    rows = conn.execute(
        "SELECT r.id, r.parent_id, r.content FROM entries r JOIN entries p ON p.tenant_id = r.tenant_id "
        "AND p.id = r.parent_id "
        f"WHERE r.tenant_id = ? AND r.id IN ({','.join('?' * len(marked))}) AND r.title = 'Re: ' || p.title",
        (tenant_id, *marked),
    )
    return {r: (parent, content) for r, parent, content in rows}


def newest(conn: apsw.Connection, scope: int, match: str, count: int) -> int:
    """The rowid from which `match` has its newest `count` matches in a scope's index (0 if it has fewer).

    FTS5 walks the doclists in rowid order without calling the ranking
    function, so this costs a small share of ranking the same matches.
    """
    if engine.is_postgresql(conn):
        from arbiter.store.pg import fulltext, indexing

        return fulltext.newest(conn, indexing.scope_index(conn, scope), match, count)
    t = fts.table(scope)
    row = conn.execute(
        f"SELECT rowid FROM {t} WHERE {t} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?", (match, count - 1)
    ).fetchone()
    return row[0] if row else 0


def searched(v: Viewer, match: str) -> list[tuple[int, str]]:
    """(scope, MATCH) for each index `v` searches: a left team's index only for what they wrote there."""
    return [
        (scope, match if author is None else f"({match}) AND {SCOPE_COLUMN} : {quote(f'a{author}')}")
        for scope, author in v.indexes()
    ]


def ranked_visible(
    conn: apsw.Connection,
    v: Viewer,
    match: str,
    spec: _rank.Spec,
    depth: int,
    as_of: int | None,
    *,
    budget: int | None = None,
) -> list[tuple[int, float, tuple]]:
    """The `depth` best visible matches over `v`'s indexes: FTS ranks first, rows are read for the top only.

    Ranking inside FTS5 and reading entries for the top few avoids a row
    lookup per match; retired rows are dropped afterwards, and if that leaves
    the pass short, it reads deeper. Scores from different indexes compare:
    `spec` carries one idf and one average length for all of them. With a
    `budget`, an index ranks only its newest `budget` matches.
    """
    kept: list[tuple[int, float, tuple]] = []
    for scope, scoped_match in searched(v, match):
        floor = newest(conn, scope, scoped_match, budget) if budget else 0
        want = depth
        while True:
            hits = _rank.ranked(conn, fts.table(scope), scoped_match, spec, want, min_rowid=floor)
            rows = candidates(conn, v, [i for i, _ in hits], as_of)
            found = [(i, s, rows[i]) for i, s in hits if i in rows]
            if len(found) >= depth or len(hits) < want:
                kept += found[:depth]
                break
            want *= _REFILL
    kept.sort(key=lambda r: (-r[1], r[0]))
    return kept[:depth]


def hit_rows(
    conn: apsw.Connection, v: Viewer, ids: list[int], texts: list[int], *, known_at: int | None = None
) -> dict[int, tuple]:
    """id -> what a hit shows, for the entries among `ids` that `v` sees (as recorded at `known_at`).

    A row is (type, title, tags, source, conversation_id, recorded_at,
    valid_from, valid_to, superseded, scope_id, content), and `content` is
    read (inflated) only for the ids in `texts`, the hits that get an
    excerpt; it is None for the others. `superseded` follows
    `entries.superseded_by`: only superseding entries `v` sees count.
    """
    if not ids:
        return {}
    want = ",".join("?" * len(texts)) or "NULL"
    rows = conn.execute(
        "SELECT e.id, e.type, e.title, e.tags, e.source, e.conversation_id, e.recorded_at, e.valid_from, e.valid_to, "
        f"{entries.superseded_by(v, known_at)} IS NOT NULL, e.scope_id, "
        f"CASE WHEN e.id IN ({want}) THEN e.content END "
        f"FROM {entries.states_at(v.tenant_id, known_at)} WHERE {v.sees()} AND e.id IN ({','.join('?' * len(ids))})",
        (*texts, *ids),
    )
    return {r[0]: r[1:] for r in rows}


def snippet(conn: apsw.Connection, match: str, rowid: int, scope: int, *, tokens: int = 24) -> str | None:
    """FTS5's snippet (matched words in **bold**) of one row, from its scope's index."""
    if engine.is_postgresql(conn):  # the same excerpt, cut in Python from the entry's texts (store/pg/fulltext.py)
        from arbiter.store.pg import fulltext, indexing

        columns = indexing.entry_document(conn, rowid, scope)
        return None if columns is None else fulltext.snippet(fulltext.ENTRIES, match, columns, tokens=tokens)
    t = fts.table(scope)
    row = conn.execute(
        f"SELECT snippet({t}, -1, '**', '**', '…', ?) FROM {t} WHERE {t} MATCH ? AND rowid = ?",
        (tokens, match, rowid),
    ).fetchone()
    return row[0] if row and row[0] else None
