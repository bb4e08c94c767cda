"""Entity clusters: Louvain communities of the entity graph, persisted by maintenance.

Filled in by maintenance (a later step); until then no entity has a cluster.
"""

from __future__ import annotations

import apsw

from arbiter.entities.model import EntityCluster


def cluster_of(conn: apsw.Connection, tenant_id: int, entity_id: int) -> EntityCluster | None:
    return None
