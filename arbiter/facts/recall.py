"""Facts in recall: active facts that match the query, ranked beside the entry hits.

The query goes through recall's own stages 1-3 (the same tokenizer,
stopwords and FTS5 expression as entries), against `facts_fts` (subject,
predicate with its underscores as spaces, object), BM25 with the subject and
object weighted over the predicate, times the fact's confidence; validity
is the same as entries' (current, or valid at `as_of`; with `known_at`, as
recorded then), and only facts the caller sees match (their scope tokens are
in the MATCH). BM25's statistics are still those of the one shared index. Facts come back in
their own list (`RecallResult.facts`), so entry hits, their ranks and every
consumer of `hits` are unchanged; `disable=["facts"]` switches it off and
`explain` shows each fact hit's parts.
"""

from __future__ import annotations

import apsw

from arbiter._time import format_time, parse_time
from arbiter.model import FactHit, RecallParams
from arbiter.recall.query import STOPWORDS, analyze, expression, quote, tokenizer
from arbiter.facts.store import sources_sql
from arbiter.store.users import Viewer

#: Fact hits returned at most (fewer when `limit` is smaller).
FACT_HITS = 5
#: Best FTS matches read before visibility and confidence are applied: a
#: retired fact stays in the index (for `as_of`), so a bound keeps a read cheap
#: on a tenant with a long fact history.
DEPTH = 200
#: BM25 column weights: subject, predicate, object, scope (never matched).
WEIGHTS = (1.0, 0.5, 1.0, 0.0)


def scopes_match(conn: apsw.Connection, v: Viewer) -> str:
    """The FTS5 condition on `facts_fts.scope` ("s<scope> u<author>") for the facts `v` sees.

    In the MATCH itself, so the best `DEPTH` matches are all the caller's.
    """
    if v.everyone:
        whole = [(r[0], None) for r in conn.execute("SELECT id FROM scopes WHERE tenant_id = ?", (v.tenant_id,))]
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
    query = analyze(p.query, tokenizer(conn), stopwords=frozenset() if "stopwords" in off else STOPWORDS)
    if query.empty:
        return []
    expr = expression(query.terms, phrase=False, near=False)
    match = f"{{subject predicate object}} : ({expr.text}) AND {scopes_match(conn, v)}"
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    # With `known_at`, each fact in the state recorded then (the same revisions `facts` reads).
    state, join = "f", ""
    if known_at is not None:
        state = "r"
        join = (" JOIN fact_revisions r ON r.id = (SELECT max(x.id) FROM fact_revisions x WHERE x.fact_id = f.id "
                "AND x.recorded_at <= :known)")
    if as_of is None:
        visible = f"{state}.valid_to IS NULL"
    else:
        visible = f"f.valid_from <= :as_of AND ({state}.valid_to IS NULL OR {state}.valid_to > :as_of)"
    rows = conn.execute(
        f"""
        SELECT f.id, f.subject, f.predicate, f.object, {state}.confidence, f.valid_from, {state}.valid_to, m.relevance,
            {sources_sql(v)}
        FROM (SELECT rowid AS id, -bm25(facts_fts, {', '.join(map(str, WEIGHTS))}) AS relevance
              FROM facts_fts WHERE facts_fts MATCH :match ORDER BY relevance DESC LIMIT :depth) m
        JOIN facts f ON f.id = m.id{join}
        WHERE f.tenant_id = :t AND {state}.status = 'active' AND {visible} AND {v.sees('f')}
        ORDER BY m.relevance * {state}.confidence DESC, f.id LIMIT :limit
        """,
        {"match": match, "t": v.tenant_id, "as_of": as_of, "known": known_at, "limit": min(FACT_HITS, p.limit),
         "depth": DEPTH},
    ).fetchall()
    return [
        FactHit(
            id=fid, subject=s, predicate=pred, object=o, confidence=conf, valid_from=format_time(vfrom),
            valid_to=format_time(vto), sources=sorted(int(x) for x in src.split(",")) if src else [],
            score=relevance * conf, parts={"bm25": relevance, "confidence": conf} if p.explain else None,
        )
        for fid, s, pred, o, conf, vfrom, vto, relevance, src in rows
    ]
