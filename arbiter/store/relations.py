"""Relations: the closed vocabulary of edges, declared once with their handlers.

Edges are programs: a relation type may carry an `on_insert` handler that runs
in the same transaction as the edge (`supersedes` retires its target). Adding a
relation type is one entry in REGISTRY plus the CHECK in a migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import apsw

from arbiter._time import format_time
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.model import Relation


def _retire_target(conn: apsw.Connection, source_id: int, target_id: int, at: int, now: int) -> None:
    # Never before the target began: a window must not end before it starts.
    # Valid time ends at `at`; the change is recorded at `now` (record time).
    conn.execute(
        "UPDATE entries SET valid_to = max(valid_from, ?), revised_at = max(?, coalesce(revised_at, recorded_at) + 1) "
        "WHERE id = ? AND valid_to IS NULL",
        (at, now, target_id),
    )


@dataclass(frozen=True)
class RelationKind:
    """One relation type: its name, what it means, and what inserting it does.

    `on_insert(conn, source_id, target_id, at, now)`: `at` is when its effect
    holds in valid time, `now` the record instant. `active_ends`: both ends
    must be active and the edge must not close a cycle of its type (a
    `supersedes` from or to a retired entry would retire the current one with
    nothing left to undo it).
    """

    name: str
    meaning: str
    on_insert: Callable[[apsw.Connection, int, int, int, int], None] | None = None
    active_ends: bool = False


REGISTRY: dict[str, RelationKind] = {
    kind.name: kind
    for kind in (
        RelationKind("relates_to", "the two entries concern the same thing"),
        RelationKind("refines", "the source narrows or details the target"),
        RelationKind("contradicts", "the source disagrees with the target; both stay active"),
        RelationKind("supersedes", "the source replaces the target, which retires", _retire_target, active_ends=True),
        RelationKind("supports", "the source is evidence for the target"),
        # Mnemon's causal edge, confirmed: `remember` suggests causal candidates
        # (arbiter/associations) and the caller says yes with this relation.
        RelationKind("causes", "the source is a cause of the target (it happened, or was decided, because of it)"),
    )
}

RELATION_COLUMNS = "id, source_id, relation, target_id, created_at"


def relation_from_row(row: tuple) -> Relation:
    rid, source_id, relation, target_id, created_at = row
    return Relation(
        id=rid, source_id=source_id, relation=relation, target_id=target_id, created_at=format_time(created_at)
    )


def _require_entries(conn: apsw.Connection, tenant_id: int, ids: list[int], path: str) -> None:
    # One message whether the id is missing or in another tenant: a caller
    # must not learn that another tenant's id exists.
    for eid in ids:
        row = conn.execute("SELECT 1 FROM entries WHERE id = ? AND tenant_id = ?", (eid, tenant_id)).fetchone()
        if row is None:
            raise NotFound(f"entry {eid} not found", path=path)


def require_active(conn: apsw.Connection, tenant_id: int, entry_id: int, path: str, role: str) -> None:
    """NotFound unless the entry is in the tenant; InvalidParams naming when it retired unless it is active."""
    row = conn.execute("SELECT valid_to FROM entries WHERE id = ? AND tenant_id = ?", (entry_id, tenant_id)).fetchone()
    if row is None:
        raise NotFound(f"entry {entry_id} not found", path=path)
    if row[0] is not None:
        raise InvalidParams(
            f"entry {entry_id} is retired (since {format_time(row[0])}): a supersedes link needs an active {role}",
            path=path,
        )


def _closes_cycle(conn: apsw.Connection, source_id: int, relation: str, target_id: int) -> bool:
    """True if `target_id` already reaches `source_id` along edges of this type."""
    return conn.execute(
        """
        WITH RECURSIVE down(id) AS (
            SELECT ?1 UNION SELECT r.target_id FROM relations r JOIN down ON r.source_id = down.id WHERE r.relation = ?3
        )
        SELECT 1 FROM down WHERE id = ?2 LIMIT 1
        """,
        (target_id, source_id, relation),
    ).fetchone() is not None


def link(
    conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int, *, now: int, at: int | None = None
) -> Relation:
    """Insert an edge and run its handler; `at` is when a handler's effect takes hold (default now)."""
    if source_id == target_id:
        raise InvalidParams("an entry cannot be related to itself", path="target_id")
    if REGISTRY[relation].active_ends:
        require_active(conn, tenant_id, source_id, "source_id", "source")
        require_active(conn, tenant_id, target_id, "target_id", "target")
        if _closes_cycle(conn, source_id, relation, target_id):
            raise InvalidParams(f"{source_id} {relation} {target_id} would close a cycle", path="target_id")
    else:
        _require_entries(conn, tenant_id, [source_id], "source_id")
        _require_entries(conn, tenant_id, [target_id], "target_id")
    existing = conn.execute(
        "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND relation = ?",
        (source_id, target_id, relation),
    ).fetchone()
    if existing:
        raise Conflict(
            f"{source_id} {relation} {target_id} already exists as relation {existing[0]}",
            existing_id=existing[0],
        )
    return insert(conn, tenant_id, source_id, relation, target_id, now=now, at=at)


def insert(
    conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int, *, now: int, at: int | None = None
) -> Relation:
    """Insert an edge the caller has already checked, and run its handler."""
    conn.execute(
        "INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at) VALUES (?, ?, ?, ?, ?)",
        (tenant_id, source_id, target_id, relation, now),
    )
    rid = conn.last_insert_rowid()
    kind = REGISTRY[relation]
    if kind.on_insert:
        kind.on_insert(conn, source_id, target_id, now if at is None else at, now)
    return Relation(id=rid, source_id=source_id, relation=relation, target_id=target_id, created_at=format_time(now))


def unlink(conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int) -> None:
    """Remove an edge. Handler effects stay: unlinking `supersedes` does not revive the target (`restore` does)."""
    conn.execute(
        "DELETE FROM relations WHERE tenant_id = ? AND source_id = ? AND target_id = ? AND relation = ?",
        (tenant_id, source_id, target_id, relation),
    )
    if conn.changes() == 0:
        raise NotFound(f"no relation {source_id} {relation} {target_id}")


def edges_touching(conn: apsw.Connection, tenant_id: int, entry_id: int, *, known_at: int | None = None) -> list[Relation]:
    """Every edge with `entry_id` at either end (made by `known_at`, if given)."""
    made = "" if known_at is None else f" AND created_at <= {int(known_at)}"
    rows = conn.execute(
        f"SELECT {RELATION_COLUMNS} FROM relations WHERE tenant_id = ? AND source_id = ?{made} "
        f"UNION SELECT {RELATION_COLUMNS} FROM relations WHERE tenant_id = ? AND target_id = ?{made} ORDER BY id",
        (tenant_id, entry_id, tenant_id, entry_id),
    )
    return [relation_from_row(r) for r in rows]
