"""Threads: replies (entries with a `parent_id`), whole-thread reads and open threads.

A thread is a root entry (no parent) and every entry below it. An open thread
is an active root with at least one active reply anywhere below it.
"""

from __future__ import annotations

import apsw
import msgspec

from arbiter._time import format_time
from arbiter.errors import NotFound
from arbiter.model import TITLE_MAX_BYTES, EntryRef, RememberParams, ReplyParams, Thread, ThreadSummary
from arbiter.store import entries, relations
from arbiter.store.users import Viewer

_MAX_DEPTH = 1000  # parent chains are acyclic (a parent exists before its child); this only bounds the walk
_tags_decoder = msgspec.json.Decoder(list[str])
REF_COLUMNS = "id, type, title, tags, recorded_at, valid_to, valid_from"


def ref_from_row(row: tuple) -> EntryRef:
    eid, etype, title, tags, recorded_at, valid_to, valid_from = row
    return EntryRef(
        id=eid,
        type=etype,
        title=title,
        tags=_tags_decoder.decode(tags),
        recorded_at=format_time(recorded_at),
        valid_to=format_time(valid_to),
        valid_from=format_time(valid_from),
    )


def refs(conn: apsw.Connection, v: Viewer, ids: list[int]) -> dict[int, EntryRef]:
    """Content-free views of the entries among `ids` that `v` sees, whatever their state."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    cols = ", ".join(f"e.{c.strip()}" for c in REF_COLUMNS.split(","))
    rows = conn.execute(f"SELECT {cols} FROM entries e WHERE {v.sees()} AND e.id IN ({marks})", ids)
    return {r.id: r for r in map(ref_from_row, rows)}


def _clip_title(title: str) -> str:
    data = title.encode("utf-8", "surrogatepass")
    if len(data) <= TITLE_MAX_BYTES:
        return title
    return data[: TITLE_MAX_BYTES - 3].decode("utf-8", "ignore").rstrip() + "..."


def _reply_title(title: str) -> str:
    return title if title.startswith("Re: ") else "Re: " + title


def reply(conn: apsw.Connection, v: Viewer, p: ReplyParams, *, now: int) -> int:
    """Write a reply by `v`'s user under an active parent they see; omitted type, title and tags come from the parent.

    The reply joins the thread's scope: whoever sees the thread sees it.
    """
    try:
        parent = entries.get(conn, v, p.parent_id)
    except NotFound:
        raise NotFound(f"entry {p.parent_id} not found (or retired): reply to an active entry", path="parent_id") from None
    params = RememberParams(
        type=p.type or parent.type,
        title=p.title if p.title is not None else _clip_title(_reply_title(parent.title)),
        content=p.content,
        tags=parent.tags if p.tags is None else p.tags,
        source=p.source,
        conversation_id=parent.conversation_id,
        parent_id=parent.id,
        speaker=p.speaker,
    )
    return entries.remember(conn, v, params, now=now)


def root_of(conn: apsw.Connection, v: Viewer, entry_id: int, *, known_at: int | None = None) -> int:
    """The top of the parent chain above `entry_id` that `v` sees (itself when it has no parent); written by `known_at`, if given."""
    written = "" if known_at is None else f" AND recorded_at <= {int(known_at)}"
    row = conn.execute(
        f"""
        WITH RECURSIVE up(id, parent_id, n) AS (
            SELECT e.id, e.parent_id, 0 FROM entries e WHERE e.id = ?1 AND {v.sees()}{written}
            UNION ALL
            SELECT e.id, e.parent_id, up.n + 1 FROM entries e JOIN up ON e.id = up.parent_id
            WHERE {v.sees()} AND up.n < ?2
        )
        SELECT id FROM up ORDER BY n DESC LIMIT 1
        """,
        (entry_id, _MAX_DEPTH),
    ).fetchone()
    if row is None:
        raise relations.missing(entry_id, "id")
    return row[0]


def descendants(conn: apsw.Connection, v: Viewer, root: int) -> dict[int, int]:
    """Every entry below `root` (any state) that `v` sees, with its depth (hops through replies they do not see count)."""
    rows = conn.execute(
        f"""
        WITH RECURSIVE down(id, depth) AS (
            SELECT ?1, 0
            UNION ALL
            SELECT e.id, down.depth + 1 FROM entries e JOIN down ON e.parent_id = down.id
            WHERE e.tenant_id = ?2 AND down.depth < ?3
        )
        SELECT down.id, down.depth FROM down JOIN entries e ON e.id = down.id WHERE down.depth > 0 AND {v.sees()}
        """,
        (root, v.tenant_id, _MAX_DEPTH),
    )
    return dict(rows)


def thread(
    conn: apsw.Connection, v: Viewer, entry_id: int, *, as_of: int | None = None, known_at: int | None = None
) -> Thread:
    """The thread through `entry_id`: its root (whatever its state) and the visible replies, oldest first.

    With `known_at`, as recorded then: the texts of that time, and no reply written later.
    With `as_of`, `entry_id` must have held then (as `get` asks), else NotFound saying when it did.
    """
    if as_of is not None:
        entries.get(conn, v, entry_id, as_of=as_of, known_at=known_at)
    root_id = root_of(conn, v, entry_id, known_at=known_at)
    depth = descendants(conn, v, root_id)
    (root,) = entries.get_any(conn, v, [root_id], known_at=known_at)
    replies = []
    if depth:
        cond, binds = entries.visible(as_of)
        marks = ",".join("?" * len(depth))
        rows = conn.execute(
            f"SELECT {entries.columns(v, known_at)} FROM {entries.states_at(v.tenant_id, known_at)} "
            f"WHERE e.tenant_id = ? AND e.id IN ({marks}) AND {cond} ORDER BY e.recorded_at, e.id",
            (v.tenant_id, *depth, *binds),
        )
        replies = [entries.entry_from_row(r) for r in rows]
    return Thread(root=root, replies=replies, depth={e.id: depth[e.id] for e in replies})


def children(conn: apsw.Connection, v: Viewer, parent_id: int, *, limit: int, exclude: int | None = None) -> list[int]:
    """Ids of the active direct replies to `parent_id` that `v` sees, oldest first."""
    rows = conn.execute(
        f"SELECT e.id FROM entries e WHERE e.parent_id = ? AND e.valid_to IS NULL AND e.id != ? AND {v.sees()} "
        "ORDER BY e.recorded_at, e.id LIMIT ?",
        (parent_id, exclude or 0, limit),
    )
    return [r[0] for r in rows]


def open_threads(conn: apsw.Connection, v: Viewer, *, limit: int) -> tuple[list[ThreadSummary], int]:
    """The first `limit` active roots `v` sees with active replies they see, newest activity first (teammates' shared
    threads too), and how many such threads `v` sees in all (they are all ranked anyway)."""
    # One pass over the active replies (a covering index: entries_thread), then
    # the parent chains in memory: cheaper than a recursive CTE per reply.
    replies = conn.execute(
        "SELECT e.id, e.parent_id, e.recorded_at FROM entries e "
        f"WHERE e.tenant_id = ? AND e.parent_id IS NOT NULL AND e.valid_to IS NULL AND {v.sees()}",
        (v.tenant_id,),
    ).fetchall()
    if not replies:
        return [], 0
    parent_of = {rid: pid for rid, pid, _ in replies}
    missing = {pid for pid in parent_of.values() if pid not in parent_of}
    # Parents that are themselves retired replies: follow them up too.
    while missing:
        marks = ",".join("?" * len(missing))
        found = conn.execute(
            f"SELECT id, parent_id FROM entries WHERE tenant_id = ? AND id IN ({marks}) AND parent_id IS NOT NULL",
            (v.tenant_id, *missing),
        ).fetchall()
        parent_of.update(found)
        missing = {pid for _, pid in found if pid not in parent_of}

    def root(eid: int) -> int:
        for _ in range(_MAX_DEPTH):
            if eid not in parent_of:
                return eid
            eid = parent_of[eid]
        return eid

    stats: dict[int, list] = {}  # root -> [reply count, (recorded_at, id) of the newest reply]
    for rid, _, recorded in replies:
        s = stats.setdefault(root(rid), [0, (0, 0)])
        s[0] += 1
        s[1] = max(s[1], (recorded, rid))
    if not stats:
        return [], 0
    marks = ",".join("?" * len(stats))
    live_roots = {
        rid: recorded
        for rid, recorded in conn.execute(
            f"SELECT e.id, e.recorded_at FROM entries e WHERE e.id IN ({marks}) AND e.valid_to IS NULL AND {v.sees()}",
            list(stats),
        )
    }
    every = sorted(
        ((max(stats[r][1][0], live_roots[r]), r) for r in stats if r in live_roots),
        reverse=True,
    )
    ranked = every[:limit]
    views = refs(conn, v, [r for _, r in ranked] + [stats[r][1][1] for _, r in ranked])
    people = {
        eid: (author, team) for eid, author, team in conn.execute(
            "SELECT e.id, u.name, t.name FROM entries e JOIN users u ON u.id = e.author_id "
            "JOIN scopes s ON s.id = e.scope_id LEFT JOIN teams t ON t.id = s.team_id "
            f"WHERE e.tenant_id = ? AND e.id IN ({','.join('?' * len(ranked))})",
            [v.tenant_id, *(r for _, r in ranked)],
        )
    } if ranked else {}
    return [
        ThreadSummary(
            root=views[r],
            replies=stats[r][0],
            last_activity=format_time(last),
            last_reply=views[stats[r][1][1]],
            author=None if v.solo else people[r][0],
            team=people[r][1],
        )
        for last, r in ranked
    ], len(every)
