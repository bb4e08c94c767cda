"""Relations: the closed vocabulary of edges, declared once with their handlers.

Edges are programs: a relation type may carry an `on_insert` handler that runs
in the same transaction as the edge (`supersedes` retires its target). Adding a
relation type is one entry in REGISTRY plus the CHECK in a migration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import apsw

from arbiter._time import format_time
from arbiter.store import engine
from arbiter.errors import Conflict, Forbidden, InvalidParams, NotFound
from arbiter.model import Relation
from arbiter.store import engine
from arbiter.store.users import Viewer


def _retire_target(conn: apsw.Connection, tenant_id: int, source_id: int, target_id: int, at: int, now: int) -> None:
    # Never before the target began: a window must not end before it starts.
    # Valid time ends at `at`; the change is recorded at `now` (record time).
    conn.execute(
        "UPDATE entries SET valid_to = max(valid_from, ?), revised_at = max(?, coalesce(revised_at, recorded_at) + 1) "
        "WHERE tenant_id = ? AND id = ? AND valid_to IS NULL",
        (at, now, tenant_id, target_id),
    )


@dataclass(frozen=True)
class RelationKind:
    """One relation type: its name, what it means, and what inserting it does.

    `on_insert(conn, tenant_id, source_id, target_id, at, now)`: `at` is when its effect
    holds in valid time, `now` the record instant. `active_ends`: both ends
    must be active and the edge must not close a cycle of its type (a
    `supersedes` from or to a retired entry would retire the current one with
    nothing left to undo it). `qualifiers`: the words that may refine it
    (`causes`: enables, prevents); the `relations.qualifier` column's CHECK
    (migration m019) must list the same.
    """

    name: str
    meaning: str
    on_insert: Callable[[apsw.Connection, int, int, int, int, int], None] | None = None
    active_ends: bool = False
    #: The qualifiers it takes, with their meanings (none: it takes none).
    qualifiers: dict[str, str] = field(default_factory=dict)


REGISTRY: dict[str, RelationKind] = {
    kind.name: kind
    for kind in (
        RelationKind("relates_to", "the two entries concern the same thing"),
        RelationKind("refines", "the source narrows or details the target"),
        RelationKind("contradicts", "the source disagrees with the target; both stay active"),
        RelationKind("supersedes", "the source replaces the target, which retires", _retire_target, active_ends=True),
        RelationKind("supports", "the source is evidence for the target"),
        # Mnemon's causal edge, confirmed: `remember` suggests causal candidates
        # (arbiter/associations) and the caller says yes with this relation, and
        # how with Mnemon's sub-types as its qualifier.
        RelationKind(
            "causes", "the source is a cause of the target (it happened, or was decided, because of it)",
            qualifiers={
                "enables": "the source made the target possible (an enabling condition, not the whole cause)",
                "prevents": "the source kept the target from happening or held it back (a preventing factor)",
            },
        ),
    )
}

RELATION_COLUMNS = "id, source_id, relation, target_id, created_at, qualifier"


def relation_from_row(row: tuple) -> Relation:
    rid, source_id, relation, target_id, created_at, qualifier = row
    return Relation(
        id=rid, source_id=source_id, relation=relation, target_id=target_id, created_at=format_time(created_at),
        qualifier=qualifier,
    )


def require_qualifier(relation: str, qualifier: str | None, path: str = "qualifier") -> None:
    """InvalidParams unless `qualifier` is None or one that `relation` takes."""
    if qualifier is None:
        return
    if qualifier in REGISTRY[relation].qualifiers:
        return
    owners = [k for k in REGISTRY.values() if qualifier in k.qualifiers]
    if owners:
        raise InvalidParams(f"{relation} takes no qualifier: {qualifier!r} qualifies only "
                            f"{', '.join(k.name for k in owners)}", path=path)
    takers = "; ".join(f"{k.name} takes {' or '.join(k.qualifiers)}" for k in REGISTRY.values() if k.qualifiers)
    raise InvalidParams(f"{qualifier!r} is not a qualifier ({takers})", path=path)


def missing(entry_id: int, path: str | None, *, known_at: int | None = None) -> NotFound:
    """The NotFound for an entry the caller does not see, with where to find the ids they can.

    One text whether the id never existed or is another tenant's or another
    user's private entry: a caller must not learn that it exists. The verbs
    it names are called the same in the CLI, the protocol and MCP.
    """
    when = " at that time" if known_at is not None else ""
    return NotFound(f"entry {entry_id} not found{when}: list or recall shows the ids you can see", path=path)


def require_entries(conn: apsw.Connection, v: Viewer, ids: list[int], path: str) -> None:
    for eid in ids:
        row = conn.execute(f"SELECT 1 FROM entries e WHERE e.id = ? AND {v.sees()}", (eid,)).fetchone()
        if row is None:
            raise missing(eid, path)


def require_active(conn: apsw.Connection, v: Viewer, entry_id: int, path: str, role: str) -> None:
    """NotFound unless `v` sees the entry; InvalidParams naming when it retired unless it is active."""
    row = conn.execute(f"SELECT e.valid_to FROM entries e WHERE e.id = ? AND {v.sees()}", (entry_id,)).fetchone()
    if row is None:
        raise missing(entry_id, path)
    if row[0] is not None:
        raise InvalidParams(
            f"entry {entry_id} is retired (since {format_time(row[0])}): a supersedes link needs an active {role}",
            path=path,
        )


def _closes_cycle(conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int) -> bool:
    """True if `target_id` already reaches `source_id` along edges of this type (in `tenant_id`)."""
    return conn.execute(
        """
        WITH RECURSIVE down(id) AS (
            SELECT ?1 UNION SELECT r.target_id FROM relations r JOIN down ON r.source_id = down.id
            WHERE r.tenant_id = ?4 AND r.relation = ?3
        )
        SELECT 1 FROM down WHERE id = ?2 LIMIT 1
        """,
        (target_id, source_id, relation, tenant_id),
    ).fetchone() is not None


def link(
    conn: apsw.Connection, v: Viewer, source_id: int, relation: str, target_id: int, *, now: int, at: int | None = None,
    qualifier: str | None = None,
) -> Relation:
    """Insert an edge between two entries `v` sees and run its handler; `at` is when its effect takes hold (default now).

    `qualifier` must be one the relation takes (`causes`: enables, prevents).

    An edge whose handler changes its target (`supersedes` retires it) needs
    the target to be the caller's own: no one retires a teammate's memory.
    """
    require_qualifier(relation, qualifier)
    if source_id == target_id:
        raise InvalidParams("an entry cannot be related to itself", path="target_id")
    if REGISTRY[relation].active_ends:
        if engine.is_postgresql(conn):
            # Daemons sharing the database: `a supersedes b` and `b supersedes a` at once would each read the
            # other's ends as active. Locking both ends (in id order: two links never wait on each other) makes
            # the later one read the earlier one's retirement once it commits; of the edges of any cycle, the
            # last to lock its source finds it retired.
            conn.execute("SELECT id FROM entries WHERE tenant_id = ? AND id IN (?, ?) ORDER BY id FOR UPDATE",
                         (v.tenant_id, source_id, target_id))
        require_active(conn, v, source_id, "source_id", "source")
        require_active(conn, v, target_id, "target_id", "target")
        if _closes_cycle(conn, v.tenant_id, source_id, relation, target_id):
            raise InvalidParams(f"{source_id} {relation} {target_id} would close a cycle", path="target_id")
    else:
        require_entries(conn, v, [source_id], "source_id")
        require_entries(conn, v, [target_id], "target_id")
    if REGISTRY[relation].on_insert is not None:
        require_own(conn, v, target_id, f"retire it with {relation}")
    return insert(conn, v.tenant_id, source_id, relation, target_id, now=now, at=at, qualifier=qualifier)


def insert(
    conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int, *, now: int,
    at: int | None = None, qualifier: str | None = None,
) -> Relation:
    """Insert an edge the caller has already checked, and run its handler; Conflict, naming it, if it exists.

    Inserted first and checked after: where daemons share a database, two may add one edge at once.
    """
    row = conn.execute(
        "INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at, qualifier) "
        "VALUES (?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT ({engine.conflict_key(conn, 'source_id, target_id, relation')}) DO NOTHING RETURNING id",
        (tenant_id, source_id, target_id, relation, now, qualifier),
    ).fetchall()
    if not row:
        existing = conn.execute(
            "SELECT id FROM relations WHERE tenant_id = ? AND source_id = ? AND target_id = ? AND relation = ?",
            (tenant_id, source_id, target_id, relation),
        ).fetchone()[0]
        raise Conflict(f"{source_id} {relation} {target_id} already exists as relation {existing}",
                       existing_id=existing)
    rid = row[0][0]
    kind = REGISTRY[relation]
    if kind.on_insert:
        kind.on_insert(conn, tenant_id, source_id, target_id, now if at is None else at, now)
    return Relation(id=rid, source_id=source_id, relation=relation, target_id=target_id, created_at=format_time(now),
                    qualifier=qualifier)


def unlink(conn: apsw.Connection, v: Viewer, source_id: int, relation: str, target_id: int) -> None:
    """Remove an edge between entries `v` sees. Handler effects stay: unlinking `supersedes` does not revive the target (`restore` does)."""
    conn.execute(
        f"DELETE FROM relations WHERE tenant_id = ? AND source_id = ? AND target_id = ? AND relation = ? "
        f"AND EXISTS (SELECT 1 FROM entries e WHERE e.id = source_id AND {v.sees()}) "
        f"AND EXISTS (SELECT 1 FROM entries e WHERE e.id = target_id AND {v.sees()})",
        (v.tenant_id, source_id, target_id, relation),
    )
    if conn.changes() == 0:
        raise NotFound(f"no relation {source_id} {relation} {target_id}")


def require_own(conn: apsw.Connection, v: Viewer, entry_id: int, what: str, *, path: str = "target_id") -> None:
    """Forbidden unless `v`'s user wrote the entry (which `v` is known to see)."""
    author = conn.execute("SELECT author_id FROM entries WHERE tenant_id = ? AND id = ?",
                          (v.tenant_id, entry_id)).fetchone()[0]
    if author != v.user_id and not v.everyone:
        raise Forbidden(
            f"entry {entry_id} is another user's: you cannot {what} (reply to it, or relate your entry with supports, "
            "refines or contradicts)",
            path=path,
        )


def edges_touching(conn: apsw.Connection, v: Viewer, entry_id: int, *, known_at: int | None = None) -> list[Relation]:
    """Every edge with `entry_id` at one end and an entry `v` sees at the other (made by `known_at`, if given)."""
    made = "" if known_at is None else f" AND r.created_at <= {int(known_at)}"
    cols = ", ".join(f"r.{c.strip()}" for c in RELATION_COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {cols} FROM relations r JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.target_id "
        f"WHERE r.tenant_id = ?1 AND r.source_id = ?2{made} AND {v.sees()} "
        f"UNION SELECT {cols} FROM relations r JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.source_id "
        f"WHERE r.tenant_id = ?1 AND r.target_id = ?2{made} AND {v.sees()} ORDER BY 1",
        (v.tenant_id, entry_id),
    )
    return [relation_from_row(r) for r in rows]
