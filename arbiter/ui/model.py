"""Wire types of the web view's read verb."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct, field

from arbiter.model import AssociationKind, Params, Time, TopicCluster


class GraphViewParams(Params):
    """The newest `limit` entries visible at `as_of` (default now) with the edges among them, or (`view`
    "entities") the most mentioned entities known then with their relations."""

    as_of: Time | None = None
    limit: Annotated[int, Meta(ge=1, le=5000)] = 2000
    view: Literal["entries", "entities"] = "entries"


class GraphNode(Struct, kw_only=True):
    """An entry (or entity: `title` its name, `type` its type) as the graph draws it.

    `cluster` indexes `GraphView.clusters` (None: in no topic); an entity's is
    the topic most of the active entries the caller sees that mention it belong to.
    """

    id: int
    type: str
    title: str
    tags: list[str]
    valid_from: str
    cluster: int | None


class GraphEdge(Struct, kw_only=True):
    """A relation between two drawn entries (`reply` for a thread's parent link), or between two entities."""

    source: int
    target: int
    relation: str


class GraphAssociation(Struct, kw_only=True):
    """A derived edge between two drawn entries (`arbiter.associations`), `evidence` in words."""

    source: int
    target: int
    kind: AssociationKind
    evidence: str


class GraphView(Struct, kw_only=True):
    """What the web view draws. `earliest` is the oldest `valid_from` (the time slider's start).

    `associations` (entries view only) are the derived edges among the drawn
    entries, thinned to what a drawing can show: per kind, each entry to the
    next drawn one in its conversation, within 24 hours, or naming the same
    entity, and the stored similarity edges as they are.
    """

    nodes: list[GraphNode]
    edges: list[GraphEdge]
    clusters: list[TopicCluster]
    earliest: str | None
    truncated: bool
    view: str = "entries"
    associations: list[GraphAssociation] = field(default_factory=list)
