"""Graph reads over relations: bounded BFS expansion and local density."""

from __future__ import annotations

import apsw

from arbiter.errors import NotFound
from arbiter import associations
from arbiter.model import AssociationEdge, Density, Graph
from arbiter.store import entries, relations

MAX_DEPTH = 2
MAX_NODES = 50


def expand(
    conn: apsw.Connection,
    tenant_id: int,
    start: int,
    *,
    depth: int = 1,
    limit: int = MAX_NODES,
    as_of: int | None = None,
    known_at: int | None = None,
) -> Graph:
    """Breadth-first subgraph around `start` over edges in both directions.

    Only entries visible now (or at `as_of`) are nodes, as recorded now (or
    at `known_at`, over the edges recorded by then); `truncated` says the node
    limit cut the walk short.
    """
    depth, limit = min(depth, MAX_DEPTH), min(limit, MAX_NODES)
    first = entries.get(conn, tenant_id, start, as_of=as_of, known_at=known_at)
    seen: dict[int, int] = {start: 0}
    nodes = {start: first}
    edges: dict[int, object] = {}
    frontier, truncated = [start], False
    for hop in range(1, depth + 1):
        next_frontier = []
        for node in frontier:
            for rel in relations.edges_touching(conn, tenant_id, node, known_at=known_at):
                other = rel.target_id if rel.source_id == node else rel.source_id
                if other not in seen:
                    if len(seen) >= limit:
                        truncated = True
                        continue
                    try:
                        nodes[other] = entries.get(conn, tenant_id, other, as_of=as_of, known_at=known_at)
                    except NotFound:  # not visible at that time
                        continue
                    seen[other] = hop
                    next_frontier.append(other)
                edges[rel.id] = rel
        frontier = next_frontier
    kept = [e for e in edges.values() if e.source_id in seen and e.target_id in seen]
    derived, truncated = _associations(conn, tenant_id, start, nodes, seen, limit, as_of, known_at, truncated)
    return Graph(nodes=list(nodes.values()), depth=seen, edges=sorted(kept, key=lambda r: r.id), truncated=truncated,
                 associations=derived)


def _associations(conn, tenant_id, start, nodes, seen, limit, as_of, known_at, truncated):
    """Derived edges next to the asserted ones: the start's (its neighbours join at hop 1) and those among the nodes."""
    out: list[AssociationEdge] = []
    pairs: set[tuple[int, int, str]] = set()
    for node in list(nodes):
        for a in associations.of(conn, tenant_id, node):
            if a.other_id not in nodes:
                if node != start:
                    continue
                if len(seen) >= limit:
                    truncated = True
                    continue
                try:
                    nodes[a.other_id] = entries.get(conn, tenant_id, a.other_id, as_of=as_of, known_at=known_at)
                except NotFound:
                    continue
                seen[a.other_id] = 1
            key = (min(node, a.other_id), max(node, a.other_id), a.kind)
            if key not in pairs:
                pairs.add(key)
                out.append(AssociationEdge(source_id=node, target_id=a.other_id, kind=a.kind, sub_type=a.sub_type,
                                           weight=a.weight))
    return out, truncated


def density(conn: apsw.Connection, tenant_id: int, entry_id: int) -> Density:
    """Degree, distinct relation labels and 2-hop reach (undirected) of an entry."""
    entries.get(conn, tenant_id, entry_id)
    out_degree, in_degree = conn.execute(
        "SELECT count(*) FILTER (WHERE source_id = ?1), count(*) FILTER (WHERE target_id = ?1) "
        "FROM relations WHERE tenant_id = ?2 AND (source_id = ?1 OR target_id = ?1)",
        (entry_id, tenant_id),
    ).fetchone()
    labels = [r[0] for r in conn.execute(
        "SELECT DISTINCT relation FROM relations WHERE tenant_id = ?2 AND (source_id = ?1 OR target_id = ?1) "
        "ORDER BY relation",
        (entry_id, tenant_id),
    )]
    reach = conn.execute(
        """
        WITH hop1(id) AS (
            SELECT target_id FROM relations WHERE tenant_id = ?2 AND source_id = ?1
            UNION SELECT source_id FROM relations WHERE tenant_id = ?2 AND target_id = ?1
        ), hop2(id) AS (
            SELECT id FROM hop1
            UNION SELECT r.target_id FROM relations r JOIN hop1 ON r.source_id = hop1.id
            UNION SELECT r.source_id FROM relations r JOIN hop1 ON r.target_id = hop1.id
        )
        SELECT count(*) FROM hop2 WHERE id != ?1
        """,
        (entry_id, tenant_id),
    ).fetchone()[0]
    kinds: dict[str, int] = {}
    for a in associations.of(conn, tenant_id, entry_id):
        kinds[a.kind] = kinds.get(a.kind, 0) + 1
    return Density(id=entry_id, in_degree=in_degree, out_degree=out_degree, relations=labels, reach_2hop=reach,
                   associations=kinds)
