"""Wire types of the entity verbs, and the two registries: entity types and entity relations.

The registries are the `EntityType` and `EntityRelationType` literals
(MemoryGraph's closed sets), declared in `arbiter.model` beside
`RememberParams` which uses them; the database CHECKs in migration m006 list
the same values, and a test holds them equal.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from arbiter.model import (  # noqa: F401  (the remember-side types live with RememberParams)
    EntityArg, EntityName, EntityRef, EntityRelationType, EntityType, Mention, NamedEntity, Params,
)

ENTITY_TYPES: tuple[str, ...] = EntityType.__args__
ENTITY_RELATIONS: tuple[str, ...] = EntityRelationType.__args__


class EntitiesParams(Params):
    """List entities: `query` matches names and aliases (prefix, case-insensitive); `type` filters."""

    query: Annotated[str, Meta(max_length=128)] = ""
    type: EntityType | None = None
    limit: Annotated[int, Meta(ge=1, le=1000)] = 50


#: The most entities one call of the MCP `entities` tool lists (the briefing says so where it cuts its list).
ENTITIES_PER_TOOL_CALL = 200


class EntityShowParams(Params):
    """An entity by name or alias: its entries, relations and cluster."""

    name: EntityName
    limit: Annotated[int, Meta(ge=1, le=200)] = 20


class EntityMergeParams(Params):
    """Fold `other` into `keep`: its names become aliases of `keep`, its links and relations move."""

    keep: EntityName
    other: EntityName


class EntityRenameParams(Params):
    """Give an entity a new name; the old one stays as an alias."""

    name: EntityName
    new_name: EntityName


class EntityRelateParams(Params):
    """Create the relation `source RELATION target`, or strengthen it by `weight`."""

    source: EntityName
    relation: EntityRelationType
    target: EntityName
    weight: Annotated[float, Meta(gt=0, le=100)] = 1.0


# ---- results ---------------------------------------------------------------


class Entity(Struct, kw_only=True):
    """A named thing. `mentions`: entries linked to it (retired ones too). `merged_into` is set on a merged-away entity."""

    id: int
    name: str
    type: str
    aliases: list[str]
    description: str | None
    #: When it was created; in a tenant of several users, the first entry (or active fact) the caller sees naming it.
    created_at: str
    #: When it last changed (renamed, merged, typed); with several users, the last entry or fact the caller sees naming it.
    updated_at: str
    mentions: int
    merged_into: int | None = None


class EntityList(Struct, kw_only=True):
    entities: list[Entity]


class EntityRelation(Struct, kw_only=True):
    id: int
    source: EntityRef
    relation: str
    target: EntityRef
    weight: float
    created_at: str
    updated_at: str


class EntityCluster(Struct, kw_only=True):
    """A Louvain community of the entity graph (co-mentions and relations); singletons are dropped."""

    id: int
    entities: list[EntityRef]


class MentioningEntry(Struct, kw_only=True):
    """An active entry that mentions the entity, newest first."""

    id: int
    type: str
    title: str
    recorded_at: str


class EntityContext(Struct, kw_only=True):
    """`entity show`: the entity, the entries mentioning it, its relations (both ways) and its cluster."""

    entity: Entity
    entries: list[MentioningEntry]
    relations: list[EntityRelation]
    cluster: EntityCluster | None
