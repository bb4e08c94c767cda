"""The graph projection: implicit edges (threads, `#ID` mentions, shared tags) beside explicit relations.

Nothing here is stored: each edge is read from the rows that imply it.
A mention is `#ID` in an entry's title or content ("see #42"); it is found
through the full-text index (the id as a token), then confirmed by pattern.
"""

from __future__ import annotations

import re

import apsw

from arbiter import associations
from arbiter.graph import tags, threads
from arbiter.model import Around, Backlink, Backlinks, Entry, RelatedEntry, TagNeighbor
from arbiter.store import engine, entries, fts, relations
from arbiter.store.users import Viewer

MAX_LINKS = 200  # per kind, for backlinks
MAX_RELATIONS = 50

# `#42`, not `&#42;` (an HTML entity), `x#42` or `#42b`.
_MENTION = re.compile(r"(?<![\w&#])#(\d{1,18})(?![\w#])")


def mentioned_ids(text: str) -> list[int]:
    """The entry ids `text` mentions as `#ID`, in order of first mention."""
    return list(dict.fromkeys(int(m) for m in _MENTION.findall(text)))


def mentioning(conn: apsw.Connection, v: Viewer, entry_id: int, *, limit: int) -> list[Entry]:
    """Active entries `v` sees whose title or content mention `#entry_id`, newest first."""
    if engine.is_postgresql(conn):
        # No per-scope index to ask for the id as a token: the tenant's active texts holding "#ID", which the
        # pattern check below narrows as it narrows FTS5's candidates (a scan of the tenant, for the graph
        # reads only; recall never comes here).
        needle = f"#{int(entry_id)}"
        rows = conn.execute(
            f"SELECT {entries.columns(v)} FROM entries e WHERE e.tenant_id = ? AND e.valid_to IS NULL AND e.id != ? "
            f"AND (strpos(e.title, ?) > 0 OR strpos(e.content, ?) > 0) AND {v.sees()}",
            (v.tenant_id, entry_id, needle, needle),
        ).fetchall()
        return _mentions_of(entry_id, rows, limit)
    # The id is an int we format ourselves, never user text, so it can sit in
    # the FTS5 expression directly; the pattern check drops "42 ms" and the like.
    match = f'{{title content}} : "{int(entry_id)}"'
    rows = []
    for scope, _ in v.indexes():  # the author filter of a left team's index is `sees` below
        t = fts.table(scope)
        rows += conn.execute(
            f"SELECT {entries.columns(v)} FROM {t} JOIN entries e ON e.id = {t}.rowid "
            f"WHERE {t} MATCH ? AND {v.sees()} AND e.valid_to IS NULL AND e.id != ?",
            (match, entry_id),
        ).fetchall()
    return _mentions_of(entry_id, rows, limit)


def _mentions_of(entry_id: int, rows: list, limit: int) -> list[Entry]:
    """The first `limit` of the candidate rows, newest first, that do mention `#entry_id`."""
    rows.sort(key=lambda r: -r[0])
    out = []
    for row in rows:
        e = entries.entry_from_row(row)
        if entry_id in mentioned_ids(e.title + "\n" + e.content):
            out.append(e)
            if len(out) >= limit:
                break
    return out


def _require(conn: apsw.Connection, v: Viewer, entry_id: int) -> None:
    if not conn.execute(f"SELECT 1 FROM entries e WHERE e.id = ? AND {v.sees()}", (entry_id,)).fetchone():
        raise relations.missing(entry_id, "id")


def _active(conn: apsw.Connection, v: Viewer, ids: list[int]) -> list[Entry]:
    return [e for e in entries.get_any(conn, v, ids) if e.valid_to is None]


def backlinks(conn: apsw.Connection, v: Viewer, entry_id: int) -> Backlinks:
    """What points at an entry (any state) from entries `v` sees: active replies, active mentions, incoming relations."""
    _require(conn, v, entry_id)
    links = [
        Backlink(kind="reply", entry=e)
        for e in _active(conn, v, threads.children(conn, v, entry_id, limit=MAX_LINKS))
    ]
    links += [Backlink(kind="mention", entry=e) for e in mentioning(conn, v, entry_id, limit=MAX_LINKS)]
    incoming = conn.execute(
        "SELECT r.source_id, r.relation FROM relations r JOIN entries e ON e.tenant_id = r.tenant_id "
        "AND e.id = r.source_id "
        f"WHERE r.tenant_id = ? AND r.target_id = ? AND {v.sees()} ORDER BY r.id DESC LIMIT ?",
        (v.tenant_id, entry_id, MAX_LINKS),
    ).fetchall()
    sources = {e.id: e for e in entries.get_any(conn, v, [s for s, _ in incoming])}
    links += [Backlink(kind="relation", relation=rel, entry=sources[s]) for s, rel in incoming if s in sources]
    return Backlinks(id=entry_id, links=links)


def around(conn: apsw.Connection, v: Viewer, entry_id: int, *, k: int) -> Around:
    """An active entry's neighbourhood in one read; `k` caps each list but relations (at most 50).

    Shared-tag neighbours leave out the parent, children and siblings already listed.
    """
    entry = entries.get(conn, v, entry_id)
    parent = None
    siblings: list[Entry] = []
    if entry.parent_id is not None:
        (parent,) = entries.get_any(conn, v, [entry.parent_id]) or (None,)
        siblings = _active(conn, v, threads.children(conn, v, entry.parent_id, limit=k, exclude=entry_id))
    kids = _active(conn, v, threads.children(conn, v, entry_id, limit=k))
    # Thread members share their parent's tags; listed above already, they would crowd out the rest.
    shown = {e.id for e in (parent, *kids, *siblings) if e is not None}
    neighbors = [
        (eid, t) for eid, t in tags.shared_tag_neighbors(conn, v, entry_id, k=k + len(shown)) if eid not in shown
    ][:k]
    by_id = {e.id: e for e in entries.get_any(conn, v, [eid for eid, _ in neighbors])}
    shared = [TagNeighbor(entry=by_id[eid], shared_tags=t) for eid, t in neighbors if eid in by_id]
    referenced = [i for i in mentioned_ids(entry.title + "\n" + entry.content) if i != entry_id]
    references = _active(conn, v, referenced[: k * 4])[:k]
    related = []
    for rel in relations.edges_touching(conn, v, entry_id)[:MAX_RELATIONS]:
        out = rel.source_id == entry_id
        related.append((rel, "out" if out else "in", rel.target_id if out else rel.source_id))
    others = {e.id: e for e in entries.get_any(conn, v, [o for _, _, o in related])}
    return Around(
        entry=entry,
        parent=parent,
        children=kids,
        siblings=siblings,
        shared_tags=shared,
        references=references,
        mentioned_by=mentioning(conn, v, entry_id, limit=k),
        relations=[RelatedEntry(relation=r.relation, direction=d, entry=others[o], qualifier=r.qualifier)
                   for r, d, o in related if o in others],
        associations=_associations(conn, v, entry_id, k),
    )


def _associations(conn: apsw.Connection, v: Viewer, entry_id: int, k: int):
    """The entry's derived edges to entries `v` sees, the `k` strongest of each kind."""
    per_kind: dict[str, int] = {}
    out = []
    derived = associations.of(conn, v, entry_id)
    seen = {e.id for e in entries.get_any(conn, v, [a.other_id for a in derived])}
    for a in sorted(derived, key=lambda a: -a.weight):
        if a.other_id in seen and per_kind.get(a.kind, 0) < k:
            per_kind[a.kind] = per_kind.get(a.kind, 0) + 1
            out.append(a)
    return out
