"""Graph reads over relations: bounded BFS expansion and local density."""

from __future__ import annotations

import apsw

from arbiter.errors import NotFound
from arbiter import associations
from arbiter.model import AssociationEdge, Density, Entry, Graph
from arbiter.store import entries, relations
from arbiter.store.users import Viewer

MAX_DEPTH = 2
MAX_NODES = 50


def expand(
    conn: apsw.Connection,
    v: Viewer,
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
    first = entries.get(conn, v, start, as_of=as_of, known_at=known_at)
    seen: dict[int, int] = {start: 0}
    nodes = {start: first}
    edges: dict[int, object] = {}
    frontier, truncated = [start], False
    for hop in range(1, depth + 1):
        next_frontier = []
        for node in frontier:
            for rel in relations.edges_touching(conn, v, node, known_at=known_at):
                other = rel.target_id if rel.source_id == node else rel.source_id
                if other not in seen:
                    if len(seen) >= limit:
                        truncated = True
                        continue
                    try:
                        nodes[other] = entries.get(conn, v, other, as_of=as_of, known_at=known_at)
                    except NotFound:  # not visible at that time
                        continue
                    seen[other] = hop
                    next_frontier.append(other)
                edges[rel.id] = rel
        frontier = next_frontier
    kept = [e for e in edges.values() if e.source_id in seen and e.target_id in seen]
    derived, truncated = _associations(conn, v, start, nodes, seen, limit, as_of, known_at, truncated)
    return Graph(nodes=list(nodes.values()), depth=seen, edges=sorted(kept, key=lambda r: r.id), truncated=truncated,
                 associations=derived)


def _associations(conn, v, start, nodes, seen, limit, as_of, known_at, truncated):
    """Derived edges next to the asserted ones: the start's (its neighbours join at hop 1) and those among the nodes."""
    out: list[AssociationEdge] = []
    pairs: set[tuple[int, int, str]] = set()
    for node in list(nodes):
        for a in associations.of(conn, v, node):
            if a.other_id not in nodes:
                if node != start:
                    continue
                if len(seen) >= limit:
                    truncated = True
                    continue
                try:
                    nodes[a.other_id] = entries.get(conn, v, a.other_id, as_of=as_of, known_at=known_at)
                except NotFound:  # not visible at that time, or not to this caller
                    continue
                seen[a.other_id] = 1
            key = (min(node, a.other_id), max(node, a.other_id), a.kind)
            if key not in pairs:
                pairs.add(key)
                out.append(AssociationEdge(source_id=node, target_id=a.other_id, kind=a.kind, sub_type=a.sub_type,
                                           weight=a.weight))
    return out, truncated


def density(conn: apsw.Connection, v: Viewer, entry_id: int) -> Density:
    """Degree and distinct labels of an entry's relations, 2-hop reach over them (undirected), and its replies and
    `#ID` mentions both ways, over what `v` sees."""
    entry = entries.get(conn, v, entry_id)
    out_degree, in_degree = conn.execute(
        "SELECT count(*) FILTER (WHERE r.source_id = ?1), count(*) FILTER (WHERE r.target_id = ?1) "
        "FROM relations r JOIN entries e ON e.id = (CASE WHEN r.source_id = ?1 THEN r.target_id ELSE r.source_id END) "
        f"WHERE r.tenant_id = ?2 AND (r.source_id = ?1 OR r.target_id = ?1) AND {v.sees()}",
        (entry_id, v.tenant_id),
    ).fetchone()
    labels = [r[0] for r in conn.execute(
        "SELECT DISTINCT r.relation FROM relations r "
        "JOIN entries e ON e.id = (CASE WHEN r.source_id = ?1 THEN r.target_id ELSE r.source_id END) "
        f"WHERE r.tenant_id = ?2 AND (r.source_id = ?1 OR r.target_id = ?1) AND {v.sees()} ORDER BY r.relation",
        (entry_id, v.tenant_id),
    )]
    reach = conn.execute(
        f"""
        WITH hop1 AS (
            SELECT target_id AS id FROM relations WHERE tenant_id = ?2 AND source_id = ?1
            UNION SELECT source_id FROM relations WHERE tenant_id = ?2 AND target_id = ?1
        ), seen1 AS (
            SELECT hop1.id AS id FROM hop1 JOIN entries e ON e.id = hop1.id WHERE {v.sees()}
        ), hop2 AS (
            SELECT id FROM seen1
            UNION SELECT r.target_id FROM relations r JOIN seen1 ON r.source_id = seen1.id WHERE r.tenant_id = ?2
            UNION SELECT r.source_id FROM relations r JOIN seen1 ON r.target_id = seen1.id WHERE r.tenant_id = ?2
        )
        SELECT count(*) FROM hop2 JOIN entries e ON e.id = hop2.id WHERE hop2.id != ?1 AND {v.sees()}
        """,
        (entry_id, v.tenant_id),
    ).fetchone()[0]
    replies, mentioned_by, mentions = _implicit_links(conn, v, entry)
    derived = associations.of(conn, v, entry_id)
    seen = {e.id for e in entries.get_any(conn, v, [a.other_id for a in derived])}
    kinds: dict[str, int] = {}
    for a in derived:
        if a.other_id in seen:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
    return Density(id=entry_id, in_degree=in_degree, out_degree=out_degree, relations=labels, reach_2hop=reach,
                   associations=kinds, replies=replies, mentioned_by=mentioned_by, mentions=mentions)


def _implicit_links(conn: apsw.Connection, v: Viewer, entry: Entry) -> tuple[int, int, int]:
    """The links no relation row holds, among active entries `v` sees: (its replies, the entries that mention it
    as `#ID`, the entries it mentions)."""
    from arbiter.graph import projection, threads  # projection imports this package

    replies = len(threads.children(conn, v, entry.id, limit=projection.MAX_LINKS))
    mentioned_by = len(projection.mentioning(conn, v, entry.id, limit=projection.MAX_LINKS))
    named = [i for i in projection.mentioned_ids(entry.title + "\n" + entry.content) if i != entry.id]
    mentions = sum(e.valid_to is None for e in entries.get_any(conn, v, named))
    return replies, mentioned_by, mentions
