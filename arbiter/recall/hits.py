"""Stage 9: candidates become hits; the top `excerpts` (3 by default) carry an excerpt.

An excerpt is the window of the entry's text that holds the most distinct
query terms, matched words in **bold**. It is cut with the index's tokenizer,
so "running" in the text counts for "run" in the query, as in the search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw
import msgspec

from arbiter._time import format_time, parse_time
from arbiter.model import Entry, Hit, ListParams, RecallParams, RecallResult
from arbiter.recall import _sql
from arbiter.recall.query import TOKENIZER, expression
from arbiter.store import entries
from arbiter.store.tokens import tokenizing
from arbiter.store.users import Viewer

if TYPE_CHECKING:
    from arbiter.recall import Ranking

#: Tokens in an excerpt window.
WINDOW = 24
#: Texts longer than this get FTS5's own snippet() rather than a scan here.
_SCAN_BYTES = 8 * 1024
_LEAD_CHARS = 200
_tags = msgspec.json.Decoder(list[str])


def render(conn: apsw.Connection, v: Viewer, ranking: Ranking, p: RecallParams) -> RecallResult:
    """The top `p.limit` candidates as hits, the first `p.excerpts` with excerpts.

    Only the columns a hit shows are read, and the text (inflated from its
    stored form) only for the hits that get an excerpt.
    """
    top = ranking.candidates[: p.limit]
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    ids = [c.id for c in top]
    rows = _sql.hit_rows(conn, v, ids, ids[: p.excerpts], known_at=known_at)
    stems = {s for t in ranking.query.terms for s in t.stem.split(" ")}
    hits = []
    for rank, c in enumerate(top):
        row = rows.get(c.id)
        if row is None:
            continue
        etype, title, tags, source, conv, recorded, valid_from, valid_to, superseded, scope, content = row
        text = None
        if rank < p.excerpts:
            text = excerpt(conn, content, stems)
            if text is None and known_at is not None:  # the index holds today's text, not that state's
                text = lead(content)
            elif text is None:
                bag = expression(ranking.query.terms, phrase=False, near=False).text
                text = _sql.snippet(conn, _sql.text_match(bag), c.id, scope)
        hits.append(Hit(
            id=c.id,
            type=etype,
            title=title,
            source=source,
            tags=_tags.decode(tags),
            conversation_id=conv,
            valid_from=format_time(valid_from),
            valid_to=format_time(valid_to),
            recorded_at=format_time(recorded),
            superseded=bool(superseded),
            score=c.score,
            scope=_scope(p, conv),
            excerpt=text,
            parts=c.parts if p.explain else None,
        ))
    return RecallResult(hits=hits, expression=ranking.expression if p.explain else None)


#: The note of a recall whose query holds no word to search for.
NO_WORDS = "no searchable word in the query, so nothing was searched (an empty query lists the newest entries)"


def unranked(conn: apsw.Connection, v: Viewer, p: RecallParams) -> RecallResult:
    """A query with no terms: an empty one browses; one with text but no searchable word ("🚀", "*") finds nothing.

    Browse results are never passed off as matches: a query that was meant to
    search gets no hits and a note saying why.
    """
    if p.query.strip():
        return RecallResult(hits=[], note=NO_WORDS)
    return browse(conn, v, p)


def browse(conn: apsw.Connection, v: Viewer, p: RecallParams) -> RecallResult:
    """No query terms: newest first, and `types`, `tag` and `conversation_id` are hard filters."""
    listed = entries.list_entries(
        conn,
        v,
        ListParams(
            types=p.types, tag=p.tag, conversation_id=p.conversation_id, as_of=p.as_of, known_at=p.known_at,
            limit=p.limit,
        ),
    )
    hits = [
        _hit(e, 0.0, p, excerpt=lead(e.content) if rank < p.excerpts else None, parts={} if p.explain else None)
        for rank, e in enumerate(listed)
    ]
    return RecallResult(hits=hits)


def excerpt(conn: apsw.Connection, text: str, stems: set[str], *, window: int = WINDOW) -> str | None:
    """The `window`-token passage of `text` holding the most distinct `stems`; None if too long to scan."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > _SCAN_BYTES:
        return None
    name, args = TOKENIZER
    tokens = tokenizing(conn).fts5_tokenizer(name, list(args))(data, apsw.FTS5_TOKENIZE_DOCUMENT, None)
    if not tokens:
        return lead(text)
    prefixes = tuple(s[:-1] for s in stems if s.endswith("*"))
    # t[2] is the stem: indexing, not unpacking (`_, _, stem, *_`), is a third of the cost a token
    hits = [i for i, t in enumerate(tokens) if t[2] in stems or (prefixes and t[2].startswith(prefixes))]
    best, best_count = 0, -1
    counts: dict[str, int] = {}
    lo = hi = 0  # hits[lo:hi] lie in the window being scored
    for i in hits:
        start = max(0, min(i - window // 4, len(tokens) - window))
        while hi < len(hits) and hits[hi] < start + window:
            stem = tokens[hits[hi]][2]
            counts[stem] = counts.get(stem, 0) + 1
            hi += 1
        while hits[lo] < start:
            stem = tokens[hits[lo]][2]
            counts[stem] -= 1
            if not counts[stem]:
                del counts[stem]
            lo += 1
        if len(counts) > best_count:
            best, best_count = start, len(counts)
    end = min(len(tokens), best + window)
    marked = set(hits)
    out = ["…" if best > 0 else ""]
    cursor = tokens[best][0]
    for j in range(best, end):
        s, e = tokens[j][0], tokens[j][1]
        out.append(data[cursor:s].decode("utf-8", "replace"))
        word = data[s:e].decode("utf-8", "replace")
        out.append(f"**{word}**" if j in marked else word)
        cursor = e
    if end < len(tokens):
        out.append("…")
    return " ".join("".join(out).split())


def lead(text: str) -> str:
    """The opening of a text, whitespace folded, for browse hits."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _LEAD_CHARS else flat[:_LEAD_CHARS].rstrip() + "…"


def _scope(p: RecallParams, conversation_id: int | None) -> str:
    """Where a hit was found: in the conversation the recall is scoped to, or elsewhere in the tenant."""
    return "conversation" if p.conversation_id is not None and conversation_id == p.conversation_id else "tenant"


def _hit(e: Entry, value: float, p: RecallParams, *, excerpt: str | None, parts: dict | None) -> Hit:
    """A browse hit, from an entry read whole (`render` builds ranked hits from the few columns they show)."""
    return Hit(
        id=e.id,
        type=e.type,
        title=e.title,
        source=e.source,
        tags=e.tags,
        conversation_id=e.conversation_id,
        valid_from=e.valid_from,
        valid_to=e.valid_to,
        recorded_at=e.recorded_at,
        superseded=bool(e.superseded_by),
        score=value,
        scope=_scope(p, e.conversation_id),
        excerpt=excerpt,
        parts=parts,
    )
