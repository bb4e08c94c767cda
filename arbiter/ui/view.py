"""The web view (`arbiter ui`): a local page of the memory's graph, over the same `Client`.

`graph_view` is its one read verb (the page's other calls are `get`,
`history`, `backlinks` and `recall`); `arbiter.ui.server` serves the page.
It draws what the calling user sees (`Viewer.sees`), like every read: their
entries and their teams' shares, and the entities those mention.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import pairwise

import msgspec

from arbiter._time import format_time
from arbiter.associations.core import HOUR_US, PROXIMITY_HOURS
from arbiter.entities.core import most_mentioned
from arbiter.entities.visibility import dated_sql, links_sql, sees_most, seen_links_sql, whole
from arbiter.graph import clusters
from arbiter.graph.topics import topic_clusters
from arbiter.model import Empty
from arbiter.store.entries import visible
from arbiter.ui.model import GraphAssociation, GraphEdge, GraphNode, GraphView, GraphViewParams
from arbiter.verb import Context, Verb, _as_of

_tags = msgspec.json.Decoder(list[str])
_ids = msgspec.json.Encoder()


def graph_view(ctx: Context, p: GraphViewParams) -> GraphView:
    """The newest entries visible at `as_of`, their relations, reply links and associations, and their topic clusters (named as in the briefing); or the entities."""
    as_of = _as_of(p.as_of)
    if p.view == "entities":
        return _entities(ctx, p, as_of)
    cond, args = visible(as_of)
    v = ctx.viewer
    rows = ctx.conn.execute(
        f"SELECT e.id, e.type, e.title, e.tags, e.valid_from, e.parent_id, e.conversation_id FROM entries e "
        f"WHERE {v.sees('e')} AND {cond} ORDER BY e.id DESC LIMIT ?",
        (*args, p.limit + 1),
    ).fetchall()
    truncated = len(rows) > p.limit
    rows = rows[: p.limit]
    named, where = _clusters(ctx)
    nodes: list[GraphNode] = []
    edges: list[GraphEdge] = []
    ids = {r[0] for r in rows}
    for id_, type_, title, tags_json, valid_from, parent, _ in rows:
        tags = _tags.decode(tags_json)
        nodes.append(GraphNode(
            id=id_, type=type_, title=title, tags=tags, valid_from=format_time(valid_from),
            cluster=clusters.of_tags(tags, where),
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
    return GraphView(nodes=nodes, edges=edges, clusters=named, earliest=_earliest(ctx), truncated=truncated,
                     associations=_associations(ctx, rows, ctx.now if as_of is None else as_of))


def _associations(ctx: Context, rows: list[tuple], at: int) -> list[GraphAssociation]:
    """The derived edges among the drawn entries (`rows`: id, ..., valid_from, parent, conversation), as chains.

    `associations.of` gives an entry up to 10 neighbours in time and 5 per entity: for 2,000 drawn entries that
    is tens of thousands of lines (a bulk load puts thousands at one instant), and one query per entry. Chaining
    each entry to the next drawn one of its conversation, instant (within 24 hours) or entity keeps every group
    joined with one line an entry per kind, from the rows read and two queries. Similarity edges are few (at most 3 an
    entry, stored) and drawn as stored. Every end is a drawn entry, so the caller sees both.
    """
    if not rows:
        return []
    out: list[GraphAssociation] = []
    by_conversation: defaultdict[int, list[int]] = defaultdict(list)
    for r in sorted(rows):
        if r[6] is not None:
            by_conversation[r[6]].append(r[0])
    joined = set()
    for ids in by_conversation.values():
        for a, b in pairwise(ids):
            joined.add((a, b))
            out.append(GraphAssociation(source=b, target=a, kind="temporal", evidence="next to it in the conversation"))
    in_time = sorted((r[4], r[0]) for r in rows)
    for (t0, a), (t1, b) in pairwise(in_time):
        if t1 - t0 <= PROXIMITY_HOURS * HOUR_US and (min(a, b), max(a, b)) not in joined:
            out.append(GraphAssociation(source=b, target=a, kind="temporal",
                                        evidence=f"{(t1 - t0) / HOUR_US:.2f} hours apart"))
    drawn = _ids.encode([r[0] for r in rows]).decode()
    last: dict[int, int] = {}
    for entity_id, entry_id, name in ctx.conn.execute(
        "SELECT m.entity_id, m.entry_id, x.name FROM entry_entities m JOIN entities x ON x.tenant_id = m.tenant_id "
        "AND x.id = m.entity_id "
        "WHERE m.tenant_id = ? AND m.entry_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?)) "
        "ORDER BY m.entity_id, m.entry_id", (ctx.tenant_id, drawn),
    ):
        if entity_id in last:
            out.append(GraphAssociation(source=entry_id, target=last[entity_id], kind="entity",
                                        evidence=f"both mention {name}"))
        last[entity_id] = entry_id
    out += [
        GraphAssociation(source=b, target=a, kind="similarity", evidence=f"{w:.0%} of their words shared")
        for a, b, w in ctx.conn.execute(
            "SELECT a, b, weight FROM associations WHERE tenant_id = ?2 AND created_at <= ?3 "
            "AND a IN (SELECT CAST(value AS BIGINT) FROM json_each(?1)) "
            "AND b IN (SELECT CAST(value AS BIGINT) FROM json_each(?1))",
            (drawn, ctx.tenant_id, at),
        )
    ]
    return out


def _earliest(ctx: Context) -> str | None:
    """The oldest `valid_from` the caller sees: the time slider's start."""
    return format_time(ctx.conn.execute(f"SELECT min(e.valid_from) FROM entries e WHERE {ctx.viewer.sees('e')}").fetchone()[0])


def _clusters(ctx: Context):
    named = topic_clusters(ctx, Empty()).clusters
    return named, {t: i for i, c in enumerate(named) for t in c.tags}


def _colours(ctx: Context, ids: list[int], where: dict[str, int]) -> dict[int, int]:
    """Each entity's topic: the one most of the active entries the caller sees naming it belong to (ties: lower).

    Only entries the caller sees vote, so nothing another user keeps private colours a node. The top entities'
    links are many (34K for the 200 most mentioned of 47K entities), so their entries are read in id order
    (`visibility.links_sql`), tagless ones are skipped in SQL, and an entry's topic is worked out once per distinct tag list.
    """
    if not ids:
        return {}
    rows = ctx.conn.execute(
        f"WITH {links_sql(ctx.tenant_id, len(ids))} SELECT m.entity_id, e.tags FROM m CROSS JOIN entries e "
        f"WHERE e.id = m.entry_id AND e.valid_to IS NULL AND e.tags != '[]' AND {ctx.viewer.sees('e')}", ids,
    )
    topic_of: dict[str, int | None] = {}
    votes: defaultdict[int, Counter] = defaultdict(Counter)
    for entity_id, tags_json in rows:
        try:
            topic = topic_of[tags_json]
        except KeyError:
            topic = topic_of[tags_json] = clusters.of_tags(_tags.decode(tags_json), where)
        if topic is not None:
            votes[entity_id][topic] += 1
    return {i: clusters.assign(c) for i, c in votes.items()}


def _entities(ctx: Context, p: GraphViewParams, as_of: int | None) -> GraphView:
    """The most mentioned live entities created by `as_of`, their relations, each coloured by its entries' topic."""
    at = ctx.now if as_of is None else as_of
    v = ctx.viewer
    # Counted over the entries the caller sees; with others in the tenant, only entities those mention exist for them.
    if whole(v):
        # A count per entity from the link index and a top-N sort: a join grouped by entity sorted every link
        # first (53 -> 16 ms of CPU at 47K entities and 232K links). A past moment counts only the mentions
        # recorded by then, as a shared tenant's does; now, every link is.
        # The tenant as a constant: Citus pins a subquery of the SELECT list to one shard only so (correlated with
        # `n`, the view went to every shard).
        tenant = int(ctx.tenant_id)
        past = ("" if as_of is None else
                f" AND (SELECT e.recorded_at FROM entries e WHERE e.tenant_id = {tenant} AND e.id = m.entry_id) <= ?")
        rows = ctx.conn.execute(
            "SELECT n.id, n.name, n.type, n.created_at, "
            f"(SELECT count(*) FROM entry_entities m WHERE m.tenant_id = {tenant} AND m.entity_id = n.id{past}) "
            "AS uses FROM entities n "
            "WHERE n.tenant_id = ? AND n.merged_into IS NULL AND n.created_at <= ? ORDER BY uses DESC, n.id LIMIT ?",
            (*([at] if past else []), ctx.tenant_id, at, p.limit + 1),
        ).fetchall()
    else:
        # Known by `at` through an entry they see recorded by then, and dated as they know it (entities'
        # times_sql): an entity another user's earlier private entry created must not show, on the slider or in
        # its date, before theirs named it. Ranked as the entities list is (most_mentioned): counting every
        # entity's links through their entries and dating every one cost 338 ms of CPU at 47K entities, where a
        # one-user tenant's graph costs 173. Counted and dated in one pass over the links, in entry order (62 -> 22
        # ms at 47K): every ranked entity has an entry they see by `at`, so the earliest of those is their earliest.
        def rank(ids: list[int]):
            created, _ = dated_sql(v, "n", "c.first", "c.last")
            return ((r[4], r) for r in ctx.conn.execute(
                f"WITH {seen_links_sql(v, len(ids), until=True)} "
                f"SELECT n.id, n.name, n.type, {created}, c.n FROM c JOIN entities n ON n.tenant_id = ? "
                "AND n.id = c.id",
                (*ids, at, ctx.tenant_id),
            ))
        live = "x.tenant_id = ? AND x.merged_into IS NULL AND x.created_at <= ?"

        def counts():  # a user who sees few entries: counted from those
            return ctx.conn.execute(
                "SELECT count(*), x.id FROM entries e JOIN entry_entities m ON m.tenant_id = e.tenant_id "
                "AND m.entry_id = e.id "
                f"JOIN entities x ON x.tenant_id = m.tenant_id AND x.id = m.entity_id WHERE {live} "
                f"AND e.recorded_at <= ? AND {v.sees('e')} "
                "GROUP BY x.id", (ctx.tenant_id, at, at),
            )
        rows = most_mentioned(ctx.conn, live, [ctx.tenant_id, at], p.limit + 1, rank, counts,
                              little=not sees_most(ctx.conn, v), tenant_id=ctx.tenant_id)
    truncated = len(rows) > p.limit
    rows = rows[: p.limit]
    ids = [r[0] for r in rows]
    named, where = _clusters(ctx)
    colour = _colours(ctx, ids, where)
    nodes = [
        GraphNode(id=i, type=t, title=name, tags=[], valid_from=format_time(created), cluster=colour.get(i))
        for i, name, t, created, _ in rows
    ]
    shown = set(ids)
    edges = []
    if ids:
        marks = ",".join("?" * len(ids))
        edges = [
            GraphEdge(source=s, target=t, relation=r)
            for s, t, r in ctx.conn.execute(
                "SELECT source_id, target_id, relation FROM entity_relations "
                f"WHERE tenant_id = ? AND source_id IN ({marks}) AND created_at <= ?", (ctx.tenant_id, *ids, at),
            )
            if t in shown
        ]
    return GraphView(nodes=nodes, edges=edges, clusters=named, earliest=_earliest(ctx), truncated=truncated,
                     view="entities")


VERBS = {
    "graph_view": Verb(GraphViewParams, graph_view),
}
