"""The web view (`arbiter ui`): a local page of the memory's graph, over the same `Client`.

`graph_view` is its one read verb (the page's other calls are `get`,
`history`, `backlinks` and `recall`); `arbiter.ui.server` serves the page.
"""

from __future__ import annotations

from collections import Counter

import msgspec

from arbiter._time import format_time
from arbiter.graph import clusters
from arbiter.model import Empty
from arbiter.store.entries import visible
from arbiter.ui.model import GraphEdge, GraphNode, GraphView, GraphViewParams
from arbiter.verb import Context, Verb, _as_of

_tags = msgspec.json.Decoder(list[str])


def graph_view(ctx: Context, p: GraphViewParams) -> GraphView:
    """The newest entries visible at `as_of`, their relations and reply links, and their topic clusters (named as in the briefing)."""
    from arbiter.verbs import topic_clusters  # the verb table imports this module

    as_of = _as_of(p.as_of)
    cond, args = visible(as_of)
    rows = ctx.conn.execute(
        f"SELECT e.id, e.type, e.title, e.tags, e.valid_from, e.parent_id FROM entries e "
        f"WHERE e.tenant_id = ? AND {cond} ORDER BY e.id DESC LIMIT ?",
        (ctx.tenant_id, *args, p.limit + 1),
    ).fetchall()
    truncated = len(rows) > p.limit
    rows = rows[: p.limit]
    named = topic_clusters(ctx, Empty()).clusters
    where = {t: i for i, c in enumerate(named) for t in c.tags}
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    ids = {r[0] for r in rows}
    for id_, type_, title, tags_json, valid_from, parent in rows:
        tags = _tags.decode(tags_json)
        votes = Counter(where[t] for t in tags if t in where)
        nodes.append(GraphNode(
            id=id_, type=type_, title=title, tags=tags, valid_from=format_time(valid_from),
            cluster=clusters.assign(votes) if votes else None,
        ))
        if parent in ids:
            edges.append(GraphEdge(source=id_, target=parent, relation="reply"))
    if ids:
        for source, target, relation in ctx.conn.execute(
            "SELECT source_id, target_id, relation FROM relations WHERE tenant_id = ? AND source_id >= ? "
            "AND created_at <= ?",
            (ctx.tenant_id, min(ids), ctx.now if as_of is None else as_of),
        ):
            if source in ids and target in ids:
                edges.append(GraphEdge(source=source, target=target, relation=relation))
    earliest = ctx.conn.execute("SELECT min(valid_from) FROM entries WHERE tenant_id = ?", (ctx.tenant_id,)).fetchone()[0]
    return GraphView(nodes=nodes, edges=edges, clusters=named, earliest=format_time(earliest), truncated=truncated)


VERBS = {
    "graph_view": Verb(GraphViewParams, graph_view),
}
