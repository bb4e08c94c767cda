"""Entity clusters: Louvain communities of the entity graph, persisted and refreshed by maintenance.

The graph: an edge between two entities for each active entry mentioning
both (weight: how many) plus each relation between them (its weight).
Louvain (graph/louvain.py, networkx's step for step; seeded, so a refresh of
an unchanged graph gives the same clusters) finds communities; singletons are dropped, as in
MemoryGraph. A cluster's id is its smallest entity id, so ids stay put
while membership is stable.
"""

from __future__ import annotations

import apsw

from arbiter.entities.visibility import whole
from arbiter.graph.louvain import louvain_communities
from arbiter.entities.model import EntityCluster, EntityRef
from arbiter.store.users import Viewer

#: Entities listed per cluster in `entity show` (most mentioned first).
SHOWN = 30
_SEED = 42

def edges(conn: apsw.Connection, tenant_id: int) -> list[tuple[int, int, float]]:
    """The tenant's entity graph as weighted edges, in the order they are added: co-mentions in active entries,
    then relations (a relation between two co-mentioned entities adds its weight to their edge)."""
    weights: dict[tuple[int, int], float] = {}
    # Louvain's result depends on the edges' order: ORDER BY says the order SQLite's grouping gives, which
    # PostgreSQL's (hashed) grouping does not.
    for a, b, n in conn.execute(
        "SELECT a.entity_id, b.entity_id, count(*) FROM entry_entities a "
        "JOIN entry_entities b ON b.tenant_id = a.tenant_id AND b.entry_id = a.entry_id AND b.entity_id > a.entity_id "
        "JOIN entries e ON e.tenant_id = a.tenant_id AND e.id = a.entry_id "
        "WHERE a.tenant_id = ? AND e.valid_to IS NULL GROUP BY 1, 2 ORDER BY 1, 2",
        (tenant_id,),
    ):
        weights[a, b] = n
    for a, b, w in conn.execute(
        "SELECT source_id, target_id, sum(weight) FROM entity_relations WHERE tenant_id = ? "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        (tenant_id,),
    ):
        key = (b, a) if (b, a) in weights else (a, b)  # undirected: the edge keeps the way it was first added
        weights[key] = weights.get(key, 0) + w
    return [(a, b, w) for (a, b), w in weights.items()]


def refresh(conn: apsw.Connection, tenant_id: int) -> int:
    """Recompute and store the tenant's clusters; how many there are."""
    communities = [c for c in louvain_communities(edges(conn, tenant_id), seed=_SEED) if len(c) > 1]
    conn.execute("DELETE FROM entity_clusters WHERE tenant_id = ?", (tenant_id,))
    conn.executemany(
        "INSERT INTO entity_clusters(entity_id, tenant_id, cluster) VALUES (?, ?, ?)",
        [(e, tenant_id, min(c)) for c in communities for e in c],
    )
    return len(communities)


def count(conn: apsw.Connection, v: Viewer) -> int:
    """How many clusters `v` is shown: none in a tenant of several users (see `cluster_of`)."""
    if not whole(v):
        return 0
    return conn.execute(
        "SELECT count(DISTINCT cluster) FROM entity_clusters WHERE tenant_id = ?", (v.tenant_id,)
    ).fetchone()[0]


def members(conn: apsw.Connection, tenant_id: int, cluster: int, limit: int = SHOWN) -> list[EntityRef]:
    """A cluster's entities, most mentioned first."""
    rows = conn.execute(
        "SELECT x.id, x.name, x.type FROM entity_clusters c JOIN entities x ON x.tenant_id = c.tenant_id "
        "AND x.id = c.entity_id "
        "WHERE c.tenant_id = ? AND c.cluster = ? AND x.merged_into IS NULL "
        # A constant tenant in the subquery: how Citus pins it to one shard (core._columns).
        f"ORDER BY (SELECT count(*) FROM entry_entities l WHERE l.tenant_id = {int(tenant_id)} AND l.entity_id = x.id) "
        "DESC, "
        "x.id LIMIT ?",
        (tenant_id, cluster, limit),
    )
    return [EntityRef(id=r[0], name=r[1], type=r[2]) for r in rows]


def cluster_of(conn: apsw.Connection, v: Viewer, entity_id: int) -> EntityCluster | None:
    """The cluster an entity was in at the last refresh, or None.

    Only for a viewer who sees the whole tenant (a tenant of one user):
    clusters are drawn from every entry's co-mentions, so showing one to a
    user of a shared tenant would tell them which entities others' private
    entries name together. Per-viewer clusters are not built.
    """
    if not whole(v):
        return None
    tenant_id = v.tenant_id
    row = conn.execute(
        "SELECT cluster FROM entity_clusters WHERE entity_id = ? AND tenant_id = ?", (entity_id, tenant_id)
    ).fetchone()
    if row is None:
        return None
    return EntityCluster(id=row[0], entities=members(conn, tenant_id, row[0]))
