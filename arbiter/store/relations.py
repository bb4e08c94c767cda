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


def _retire_target(conn: apsw.Connection, source_id: int, target_id: int, at: int) -> None:
    # Never before the target began: a window must not end before it starts.
    conn.execute(
        "UPDATE entries SET valid_to = max(valid_from, ?) WHERE id = ? AND valid_to IS NULL",
        (at, target_id),
    )


@dataclass(frozen=True)
class RelationKind:
    """One relation type: its name, what it means, and what inserting it does."""

    name: str
    meaning: str
    on_insert: Callable[[apsw.Connection, int, int, int], None] | None = None


REGISTRY: dict[str, RelationKind] = {
    kind.name: kind
    for kind in (
        RelationKind("relates_to", "the two entries concern the same thing"),
        RelationKind("refines", "the source narrows or details the target"),
        RelationKind("contradicts", "the source disagrees with the target; both stay active"),
        RelationKind("supersedes", "the source replaces the target, which retires", _retire_target),
        RelationKind("supports", "the source is evidence for the target"),
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


def link(
    conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int, *, now: int, at: int | None = None
) -> Relation:
    """Insert an edge and run its handler; `at` is when a handler's effect takes hold (default now)."""
    if source_id == target_id:
        raise InvalidParams("an entry cannot be related to itself", path="target_id")
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
        kind.on_insert(conn, source_id, target_id, now if at is None else at)
    return Relation(id=rid, source_id=source_id, relation=relation, target_id=target_id, created_at=format_time(now))


def unlink(conn: apsw.Connection, tenant_id: int, source_id: int, relation: str, target_id: int) -> None:
    """Remove an edge. Handler effects stay: unlinking `supersedes` does not revive the target."""
    conn.execute(
        "DELETE FROM relations WHERE tenant_id = ? AND source_id = ? AND target_id = ? AND relation = ?",
        (tenant_id, source_id, target_id, relation),
    )
    if conn.changes() == 0:
        raise NotFound(f"no relation {source_id} {relation} {target_id}")


def edges_touching(conn: apsw.Connection, tenant_id: int, entry_id: int) -> list[Relation]:
    """Every edge with `entry_id` at either end."""
    rows = conn.execute(
        f"SELECT {RELATION_COLUMNS} FROM relations WHERE tenant_id = ? AND source_id = ? "
        f"UNION SELECT {RELATION_COLUMNS} FROM relations WHERE tenant_id = ? AND target_id = ? ORDER BY id",
        (tenant_id, entry_id, tenant_id, entry_id),
    )
    return [relation_from_row(r) for r in rows]
