"""Facts in recall: active facts that match the query, ranked beside the entry hits.

The query goes through recall's own stages 1-3 (the same tokenizer,
stopwords and FTS5 expression as entries), against `facts_fts` (subject,
predicate with its underscores as spaces, object), BM25 with the subject and
object weighted over the predicate, times the fact's confidence; validity
is the same as entries' (current, or valid at `as_of`; with `known_at`, as
recorded then), and only facts the caller sees match (their scope tokens are
in the MATCH). BM25 is recall's own (`recall/_rank.py`) with statistics of
the caller's facts alone: the document count, each term's document frequency
and the average length are read with the caller's scope tokens in the MATCH,
so another tenant's or user's facts move no score (one `facts_fts` table
holds everyone's; FTS5's built-in `bm25()` would use its totals). Facts come back in
their own list (`RecallResult.facts`), so entry hits, their ranks and every
consumer of `hits` are unchanged; `disable=["facts"]` switches it off and
`explain` shows each fact hit's parts.
"""

from __future__ import annotations

import threading
import weakref

import apsw

from arbiter._time import format_time, parse_time
from arbiter.model import FactHit, RecallParams
from arbiter.recall import _rank
from arbiter.recall.query import STOPWORDS, analyze, expression, quote, tokenizer
from arbiter.facts.store import known_join, sources_sql
from arbiter.store import engine, users
from arbiter.store.users import Viewer

#: Fact hits returned at most (fewer when `limit` is smaller).
FACT_HITS = 5
#: Best FTS matches read before visibility and confidence are applied: a
#: retired fact stays in the index (for `as_of`), so a bound keeps a read cheap
#: on a tenant with a long fact history.
DEPTH = 200
#: BM25 column weights: subject, predicate, object, scope (never matched).
WEIGHTS = (1.0, 0.5, 1.0, 0.0)
#: Length normalization: FTS5's default, what facts were ranked with before the statistics became the caller's.
B = 0.75


def scopes_match(conn: apsw.Connection, v: Viewer) -> str:
    """The FTS5 condition on `facts_fts.scope` ("s<scope> u<author>") for the facts `v` sees.

    In the MATCH itself, so the best `DEPTH` matches are all the caller's.
    """
    if v.everyone:
        whole = [(s, None) for s in users.tenant_scopes(conn, v.tenant_id)]
    else:
        whole = v.indexes()
    terms = [quote(f"s{s}") if author is None else f"({quote(f's{s}')} AND {quote(f'u{author}')})"
             for s, author in whole]
    return f"{{scope}} : ({' OR '.join(terms)})"


def search(conn: apsw.Connection, v: Viewer, p: RecallParams) -> list[FactHit]:
    """The best active facts `v` sees for `p.query`, visible now or at `p.as_of`; [] with no terms or with `facts` disabled."""
    off = frozenset(p.disable)
    if "facts" in off or not p.query.strip():
        return []
    scopes = scopes_match(conn, v)
    n, avgdl = _totals(conn, scopes, v.tenant_id)
    if not n:  # no fact the caller sees (most homes): no query analysis, per-word counts or ranking
        return []
    tokenize = tokenizer(conn)
    query = analyze(p.query, tokenize, stopwords=frozenset() if "stopwords" in off else STOPWORDS,
                    parties="parties" not in off)
    if query.empty:
        return []
    expr = expression(query.terms, phrase=False, near=False)
    match = f"{{subject predicate object}} : ({expr.text}) AND {scopes}"
    idf = [
        _rank.idf(_count(conn, f"{{subject predicate object}} : ({quote(t.text, prefix=t.prefix)}) AND {scopes}",
                         v.tenant_id), n)
        for t in query.terms
    ]
    spec = _rank.Spec(idf=idf, weights=WEIGHTS, k1=_rank.K1, b=B, avgdl=avgdl)
    relevance = dict(_rank.ranked(conn, "facts_fts", match, spec, DEPTH, tenant_id=v.tenant_id))
    if not relevance:
        return []
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    # With `known_at`, each fact in the state recorded then (the same revisions `facts` reads).
    state, join = "f", ""
    if known_at is not None:
        state = "r"
        join = known_join(conn, v.tenant_id)
    if as_of is None:
        visible = f"{state}.valid_to IS NULL"
    else:
        visible = f"f.valid_from <= :as_of AND ({state}.valid_to IS NULL OR {state}.valid_to > :as_of)"
    ids = ",".join(str(int(i)) for i in relevance)
    rows = conn.execute(
        f"""
        SELECT f.id, f.subject, f.predicate, f.object, {state}.confidence, f.valid_from, {state}.valid_to,
            {sources_sql(conn, v)}
        FROM facts f{join}
        WHERE f.id IN ({ids}) AND f.tenant_id = :t AND {state}.status = 'active' AND {visible} AND {v.sees('f')}
        """,
        {"t": v.tenant_id, "as_of": as_of, "known": known_at},
    ).fetchall()
    rows.sort(key=lambda r: (-relevance[r[0]] * r[4], r[0]))
    rows = [r for r in rows if _answers(tokenize, query.terms, r[1], r[2], r[3])]
    return [
        FactHit(
            id=fid, subject=s, predicate=pred, object=o, confidence=conf, valid_from=format_time(vfrom),
            valid_to=format_time(vto), sources=sorted(int(x) for x in src.split(",")) if src else [],
            score=relevance[fid] * conf,
            parts={"bm25": relevance[fid], "confidence": conf} if p.explain else None,
        )
        for fid, s, pred, o, conf, vfrom, vto, src in rows[:min(FACT_HITS, p.limit)]
    ]


def _answers(tokenize, terms, subject: str, predicate: str, obj: str) -> bool:
    """Does the fact say something the query asks about, beyond whom it is about?

    A question names its subject ("the user", "Caroline") and what it wants
    to know ("job", "dog"); a fact matched by its subject alone is about
    whoever is asked after, not an answer (measured: nearly every
    third-person and LoCoMo question matched some fact that way, and such
    facts shown above the hits cost R@5 70-80 points; docs/retrieval.md).
    A query that names only the subject ("Caroline") keeps all its facts.
    """
    said = {stem for _, stem in tokenize(f"{predicate.replace('_', ' ')} {obj}")}
    if any(_holds(t, said) for t in terms):
        return True
    named = {stem for _, stem in tokenize(subject)}
    return all(_holds(t, named) for t in terms)


def _holds(term, stems: set[str]) -> bool:
    if term.prefix:
        return any(s.startswith(term.stem.rstrip("*")) for s in stems)
    return all(w in stems for w in term.stem.split())


def _count(conn: apsw.Connection, match: str, tenant_id: int) -> int:
    if engine.is_postgresql(conn):  # the tenant's facts index (store/pg/fulltext.py)
        from arbiter.store.pg import fulltext

        return fulltext.count(conn, fulltext.Index(tenant_id, fulltext.FACTS), match)
    return conn.execute("SELECT count(*) FROM facts_fts WHERE facts_fts MATCH ?", (match,)).fetchone()[0]


class _Lengths:
    """Average fact length (tokens) over the facts a scope set holds, cached until their count moves by a tenth.

    The count is read on every search (one doclist walk of the scope tokens);
    the lengths need a pass over those facts, so they are kept: an average
    only has to be about right.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[int, float]] = {}
        self._registered: weakref.WeakSet = weakref.WeakSet()

    def __call__(self, conn: apsw.Connection, scopes: str, tenant_id: int) -> tuple[int, float]:
        """(facts the scopes hold, their average length)."""
        if engine.is_postgresql(conn):  # PostgreSQL keeps each document's length: summed at once, no cache
            from arbiter.store.pg import fulltext

            index = fulltext.Index(tenant_id, fulltext.FACTS)
            # Most tenants hold no fact: the index's kept totals say so in a key lookup, where the filtered sum
            # is a statement to plan (a tenth of a recall at 250K entries).
            if not fulltext.totals(conn, index)[0]:
                return 0, 1.0
            n, tokens = fulltext.lengths(conn, index, scopes)
            return n, (tokens / n if n else 1.0) or 1.0
        n = _count(conn, scopes, tenant_id)
        key = (conn.filename or f"memory:{id(conn)}", scopes)
        with self._lock:
            base, avgdl = self._cache.get(key, (-1, 1.0))
        if base < 0 or n > base * 1.1 or n < base:
            if conn not in self._registered:
                conn.register_fts5_function(_SIZE, lambda api, *_: api.column_size(-1))
                self._registered.add(conn)
            # An auxiliary function cannot sit inside an aggregate: the rows come out and are summed here.
            total = sum(r[0] for r in conn.execute(
                f"SELECT {_SIZE}(facts_fts) FROM facts_fts WHERE facts_fts MATCH ?", (scopes,)
            ))
            avgdl = total / n if n else 1.0
            with self._lock:
                self._cache[key] = (n, avgdl)
        return n, avgdl or 1.0


_SIZE = "arbiter_fact_size"
_totals = _Lengths()
