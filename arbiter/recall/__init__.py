"""Recall: lexical retrieval over the FTS5 index.

This is the plain BM25 stage; the layered pipeline builds on it.
"""

from __future__ import annotations

import re

import apsw

from arbiter._time import format_time, parse_time
from arbiter.model import Hit, ListParams, RecallParams, RecallResult
from arbiter.store import entries

_TOKEN = re.compile(r"\w+", re.UNICODE)


def quote(token: str) -> str:
    """The only way user text reaches FTS5: one double-quoted string, quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def fts_query(text: str) -> str | None:
    """A bag-of-words OR over the query's tokens, or None if it has none."""
    tokens = list(dict.fromkeys(t.lower() for t in _TOKEN.findall(text)))
    return " OR ".join(quote(t) for t in tokens) or None


def _hit(entry, score: float, scope: str) -> Hit:
    return Hit(
        id=entry.id,
        type=entry.type,
        title=entry.title,
        source=entry.source,
        tags=entry.tags,
        conversation_id=entry.conversation_id,
        valid_from=entry.valid_from,
        valid_to=entry.valid_to,
        superseded=bool(entry.superseded_by),
        score=score,
        scope=scope,
    )


def recall(conn: apsw.Connection, tenant_id: int, p: RecallParams) -> RecallResult:
    """Rank visible entries by BM25; with no query, browse newest first."""
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    match = fts_query(p.query)
    if match is None:
        listed = entries.list_entries(
            conn, tenant_id,
            ListParams(types=p.types, tag=p.tag, conversation_id=p.conversation_id, as_of=p.as_of, limit=p.limit),
        )
        return RecallResult(hits=[_hit(e, 0.0, "tenant") for e in listed])
    cond, binds = entries.visible(as_of)
    rows = conn.execute(
        f"SELECT {entries.ENTRY_COLUMNS}, bm25(entries_fts, 10.0, 4.0, 8.0, 2.0) AS score "
        f"FROM entries_fts JOIN entries e ON e.id = entries_fts.rowid "
        f"WHERE entries_fts MATCH ? AND e.tenant_id = ? AND {cond} ORDER BY score LIMIT ?",
        (match, tenant_id, *binds, p.limit),
    )
    hits = [_hit(entries.entry_from_row(r[:-1]), -r[-1], "tenant") for r in rows]
    return RecallResult(hits=hits)
