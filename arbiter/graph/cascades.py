"""Cascades: what a change to an entry does to the entries joined to it, declared per edge kind.

Reflect ran its cascades as plain functions and named "a formalised edge-type
abstraction" as future work. Here each kind of edge declares, beside its
meaning, a handler per event (`share`, `unshare`, `forget`, `purge`); the
verbs run the event on the entry and then every kind's handler, in the same
transaction. Relations already carry their insert handler in
`store.relations.REGISTRY` (`supersedes` retires its target); the reply edge
(`entries.parent_id`) is the one with cascades today:

- share / unshare a thread root: the whole thread the caller sees follows,
  whoever wrote the replies (unshared, each entry goes back to its own
  author's private scope); a reply they do not see (unshared back to its
  author, or in a team they left) stays where it is, with what is below it;
- forget a parent: the caller's own replies below it retire with it, never
  a teammate's;
- purge a parent: the caller's own replies below it are purged too; a
  teammate's reply loses its parent (`ON DELETE SET NULL`) and is kept.

Who may do it is checked before any handler runs: only an entry's author
shares, forgets or purges it (`entries.require_author`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import apsw

from arbiter.errors import InvalidParams
from arbiter.store import entries
from arbiter.store.users import Viewer

Event = Literal["share", "unshare", "forget", "purge"]
#: handler(conn, viewer, entry id, now, scope) -> ids of the other entries it changed
Handler = Callable[[apsw.Connection, Viewer, int, int, int | None], list[int]]

_MAX_DEPTH = 1000


def below(conn: apsw.Connection, tenant_id: int, entry_id: int, *,
          seen_by: Viewer | None = None) -> list[tuple[int, int]]:
    """(id, author id) of every entry below `entry_id` (of `tenant_id`) in its thread, whoever wrote it and
    whatever its state.

    With `seen_by`, only down through the replies that viewer sees: what lies below one they do not see is left out.
    """
    seen = f"AND {seen_by.sees()} " if seen_by is not None else ""
    return conn.execute(
        f"""
        WITH RECURSIVE down(id, depth) AS (
            SELECT ?1, 0
            UNION ALL SELECT e.id, down.depth + 1 FROM entries e JOIN down ON e.parent_id = down.id
            WHERE e.tenant_id = ?3 AND down.depth < ?2 {seen}
        )
        SELECT e.id, e.author_id FROM down JOIN entries e ON e.id = down.id
        WHERE e.tenant_id = ?3 AND down.depth > 0 ORDER BY e.id
        """,
        (entry_id, _MAX_DEPTH, tenant_id),
    ).fetchall()


def _move(conn: apsw.Connection, tenant_id: int, ids: list[int], scope: int | None) -> list[int]:
    """Put entries in `scope` (None: each back in its own author's private scope); their index rows follow (triggers)."""
    if ids:
        marks = ",".join("?" * len(ids))
        conn.execute(
            "UPDATE entries SET scope_id = coalesce(?, (SELECT s.id FROM scopes s WHERE s.user_id = entries.author_id)) "
            f"WHERE tenant_id = ? AND id IN ({marks})",
            (scope, tenant_id, *ids),
        )
    return ids


def _thread_follows(conn: apsw.Connection, v: Viewer, root: int, now: int, scope: int | None) -> list[int]:
    # Only down through replies the caller sees: a teammate's reply unshared back to its author, or
    # written for a team the caller has left, would otherwise go to a team of the caller's choosing
    # (and the caller see it again); what lies below such a reply stays with it.
    ids = [eid for eid, _ in below(conn, v.tenant_id, root, seen_by=v)]
    return _move(conn, v.tenant_id, ids, scope)


def _retire_own_replies(conn: apsw.Connection, v: Viewer, parent: int, now: int, _scope) -> list[int]:
    own = [eid for eid, author in below(conn, v.tenant_id, parent) if author == v.user_id]
    return [eid for eid in own if entries.retire(conn, v.tenant_id, eid, now=now)]


def _purge_own_replies(conn: apsw.Connection, v: Viewer, parent: int, now: int, _scope) -> list[int]:
    own = [eid for eid, author in below(conn, v.tenant_id, parent) if author == v.user_id]
    if own:
        conn.execute(f"DELETE FROM entries WHERE tenant_id = ? AND id IN ({','.join('?' * len(own))})",
                     (v.tenant_id, *own))
    return own


@dataclass(frozen=True)
class EdgeKind:
    """One kind of edge between entries: what it means, and what each event on an entry does along it."""

    name: str
    meaning: str
    handlers: dict[str, Handler]


KINDS: dict[str, EdgeKind] = {
    kind.name: kind
    for kind in (
        EdgeKind(
            "reply",
            "the entry answers or continues its parent (entries.parent_id); a root and its replies are a thread",
            {
                "share": _thread_follows,
                "unshare": _thread_follows,
                "forget": _retire_own_replies,
                "purge": _purge_own_replies,
            },
        ),
    )
}


def run(conn: apsw.Connection, v: Viewer, event: Event, entry_id: int, *, now: int, scope: int | None = None) -> list[int]:
    """Run every edge kind's handler for `event` on `entry_id`; the ids of the other entries changed."""
    changed: list[int] = []
    for kind in KINDS.values():
        if handler := kind.handlers.get(event):
            changed += handler(conn, v, entry_id, now, scope)
    return changed


def share(conn: apsw.Connection, v: Viewer, root: int, scope: int | None, *, now: int) -> list[int]:
    """Move a thread the caller started to `scope` (a team's; None: back to private). Ids moved, root first."""
    entries.require_author(conn, v, root, "share")
    parent = conn.execute("SELECT parent_id FROM entries WHERE tenant_id = ? AND id = ?",
                          (v.tenant_id, root)).fetchone()[0]
    if parent is not None:
        raise InvalidParams(
            f"entry {root} is a reply: a thread is shared (or unshared) by its root, the first entry thread {root} shows",
            path="id",
        )
    _move(conn, v.tenant_id, [root], scope)
    return [root, *run(conn, v, "share" if scope is not None else "unshare", root, now=now, scope=scope)]
