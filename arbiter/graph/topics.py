"""The topic-cluster verbs: every cluster of what the caller sees, or a tag's, named.

Names come from the cache, the advisor or a fallback (graph/clusters.py); a
name the advisor just made is saved after the read, on the writer.
"""

from __future__ import annotations

from arbiter.briefing import NAMING_BUDGET_S
from arbiter.graph import clusters
from arbiter.model import Empty, TopicClusterParams, TopicClusterResult, TopicClusters
from arbiter.verb import Context, Verb, advisor_for


def save_names(ctx: Context, fresh: list) -> None:
    """Cache the cluster names a read just made, on the writer after it (`ctx.after`)."""
    if fresh:
        tenant_id = ctx.tenant_id
        ctx.after.append(lambda conn: clusters.save_names(conn, tenant_id, fresh))


def topic_clusters(ctx: Context, p: Empty):
    """Every topic cluster of what the caller sees, named (cache, advisor or fallback), largest first."""
    named, fresh = clusters.name(
        ctx.conn, ctx.viewer, clusters.shapes(ctx.conn, ctx.viewer), advisor=advisor_for(ctx), now=ctx.now,
        deadline=clusters.naming_deadline(NAMING_BUDGET_S),
    )
    save_names(ctx, fresh)
    return TopicClusters(clusters=named)


def topic_cluster(ctx: Context, p: TopicClusterParams):
    """The cluster a tag belongs to, named, with its most recent entries."""
    shape, members = clusters.cluster_entries(ctx.conn, ctx.viewer, p.tag, limit=p.limit)
    (named,), fresh = clusters.name(
        ctx.conn, ctx.viewer, [shape], advisor=advisor_for(ctx), now=ctx.now,
        deadline=clusters.naming_deadline(NAMING_BUDGET_S),
    )
    save_names(ctx, fresh)
    return TopicClusterResult(cluster=named, entries=members)


VERBS = {
    "topic_clusters": Verb(Empty, topic_clusters),
    "topic_cluster": Verb(TopicClusterParams, topic_cluster),
}
