"""The entity verbs: `entities`, `entity_show`, `entity_merge`, `entity_rename`, `entity_relate`."""

from __future__ import annotations

from arbiter.entities import core
from arbiter.entities.model import (
    EntitiesParams,
    EntityContext,
    EntityList,
    EntityMergeParams,
    EntityRelateParams,
    EntityRenameParams,
    EntityShowParams,
)
from arbiter.verb import Context, Verb


def entities(ctx: Context, p: EntitiesParams):
    """Known entities, most mentioned first; `query` matches the start of a name or alias; `type` filters."""
    return EntityList(entities=core.list_entities(ctx.conn, ctx.viewer, query=p.query, type=p.type, limit=p.limit))


def entity_show(ctx: Context, p: EntityShowParams):
    """An entity by name or alias: the active entries mentioning it (newest first), its relations and its cluster.

    Only what the caller sees: an entity no entry or fact of theirs names is `not_found`.
    """
    v = ctx.viewer
    entity_id = core.require(ctx.conn, v, p.name, "name")
    from arbiter.entities import clusters

    return EntityContext(
        entity=core.get(ctx.conn, v, entity_id),
        entries=core.mentioning_entries(ctx.conn, v, entity_id, p.limit),
        relations=core.relations_of(ctx.conn, v, entity_id),
        cluster=clusters.cluster_of(ctx.conn, v, entity_id),
    )


def entity_merge(ctx: Context, p: EntityMergeParams):
    """Fold `other` into `keep` (names become aliases, links and relations move); recorded, never deleted."""
    return core.merge(ctx.conn, ctx.viewer, p.keep, p.other, now=ctx.now)


def entity_rename(ctx: Context, p: EntityRenameParams):
    """Rename an entity; the old name stays an alias. A name another entity answers to is `conflict`."""
    return core.rename(ctx.conn, ctx.viewer, p.name, p.new_name, now=ctx.now)


def entity_relate(ctx: Context, p: EntityRelateParams):
    """Create `source RELATION target` between two known entities, or strengthen it by `weight`."""
    return core.relate(ctx.conn, ctx.viewer, p.source, p.relation, p.target, weight=p.weight, now=ctx.now)


VERBS: dict[str, Verb] = {
    "entities": Verb(EntitiesParams, entities),
    "entity_show": Verb(EntityShowParams, entity_show),
    "entity_merge": Verb(EntityMergeParams, entity_merge, writes=True),
    "entity_rename": Verb(EntityRenameParams, entity_rename, writes=True),
    "entity_relate": Verb(EntityRelateParams, entity_relate, writes=True),
}
