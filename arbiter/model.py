"""Every wire type: verb params and results, as msgspec Structs.

Limits are checked here, at decode time, so a bad request never reaches the
store. New fields get defaults; existing field types never change.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

EntryType = Literal["user", "feedback", "project", "reference", "learning", "context"]
RelationType = Literal["relates_to", "refines", "contradicts", "supersedes", "supports"]
ENTRY_TYPES: tuple[str, ...] = EntryType.__args__
RELATION_TYPES: tuple[str, ...] = RelationType.__args__

#: RFC 3339 text or epoch seconds.
Time = int | float | str
Id = Annotated[int, Meta(ge=1)]
Tag = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[^\s\x00-\x1f]+$")]
Tags = Annotated[list[Tag], Meta(max_length=32)]
Limit = Annotated[int, Meta(ge=1, le=1000)]

TITLE_MAX_BYTES = 200
CONTENT_MAX_BYTES = 64 * 1024
SOURCE_MAX_BYTES = 200
NAME_MAX = 64


class Params(Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every verb's params: unknown fields are errors, not silently dropped."""


def _check_bytes(field: str, value: str | None, limit: int, *, required: bool = False) -> None:
    # The limits are in UTF-8 bytes (what the row costs), which msgspec's
    # length constraints (characters) cannot express.
    if value is None:
        return
    if required and not value.strip():
        raise ValueError(f"{field}: must not be empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"{field}: {size} bytes is over the limit of {limit}")


class Empty(Params):
    """No params."""


class RememberParams(Params):
    """Write one entry. `supersedes_ids` retires each listed entry in the same transaction."""

    type: EntryType
    title: str
    content: str
    tags: Tags = []
    source: str | None = None
    conversation_id: Id | None = None
    parent_id: Id | None = None
    supersedes_ids: Annotated[list[Id], Meta(max_length=64)] = []
    valid_from: Time | None = None
    auto_tag: bool = False
    auto_supersede: bool = False

    def __post_init__(self) -> None:
        _check_bytes("title", self.title, TITLE_MAX_BYTES, required=True)
        _check_bytes("content", self.content, CONTENT_MAX_BYTES, required=True)
        _check_bytes("source", self.source, SOURCE_MAX_BYTES)


class RememberManyParams(Params):
    """Write many entries in one transaction (all or nothing)."""

    entries: Annotated[list[RememberParams], Meta(min_length=1, max_length=10_000)]


class IdParams(Params):
    id: Id


class GetParams(Params):
    id: Id
    as_of: Time | None = None


class ListParams(Params):
    """Browse: `types`, `tag` and `conversation_id` are hard filters; newest first."""

    types: list[EntryType] = []
    tag: Tag | None = None
    conversation_id: Id | None = None
    as_of: Time | None = None
    limit: Limit = 50
    before_id: Id | None = None


class UpdateParams(Params):
    """Correct an active entry in place; omitted fields keep their value."""

    id: Id
    type: EntryType | None = None
    title: str | None = None
    content: str | None = None
    tags: Tags | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        _check_bytes("title", self.title, TITLE_MAX_BYTES, required=True)
        _check_bytes("content", self.content, CONTENT_MAX_BYTES, required=True)
        _check_bytes("source", self.source, SOURCE_MAX_BYTES)


class LinkParams(Params):
    source_id: Id
    relation: RelationType
    target_id: Id


class ExpandParams(Params):
    id: Id
    depth: Annotated[int, Meta(ge=1, le=2)] = 1
    limit: Annotated[int, Meta(ge=1, le=50)] = 50
    as_of: Time | None = None


class RecallParams(Params):
    """Search. With no query it browses (filters become hard filters)."""

    query: Annotated[str, Meta(max_length=4096)] = ""
    conversation_id: Id | None = None
    types: list[EntryType] = []
    tag: Tag | None = None
    as_of: Time | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 10
    explain: bool = False


class ConversationCreateParams(Params):
    title: Annotated[str, Meta(min_length=1, max_length=200)]


class ConversationListParams(Params):
    limit: Limit = 100


class TenantCreateParams(Params):
    name: Annotated[str, Meta(min_length=1, max_length=NAME_MAX, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]


# ---- results ---------------------------------------------------------------


class Entry(Struct, kw_only=True):
    """One memory entry as the wire shows it. Times are RFC 3339 UTC."""

    id: int
    type: str
    title: str
    content: str
    tags: list[str]
    source: str | None
    conversation_id: int | None
    parent_id: int | None
    content_hash: str
    recorded_at: str
    valid_from: str
    valid_to: str | None
    superseded_by: list[int] = []


class EntryList(Struct, kw_only=True):
    entries: list[Entry]


class RememberManyResult(Struct, kw_only=True):
    ids: list[int]


class ForgetResult(Struct, kw_only=True):
    id: int
    forgotten: bool


class PurgeResult(Struct, kw_only=True):
    id: int
    purged: bool


class Relation(Struct, kw_only=True):
    id: int
    source_id: int
    relation: str
    target_id: int
    created_at: str


class UnlinkResult(Struct, kw_only=True):
    removed: bool


class History(Struct, kw_only=True):
    """The supersession chain through an entry, oldest first, and the edges joining it."""

    entries: list[Entry]
    relations: list[Relation]


class Graph(Struct, kw_only=True):
    """A BFS subgraph: `depth` is each node's hop distance from the start."""

    nodes: list[Entry]
    depth: dict[int, int]
    edges: list[Relation]
    truncated: bool


class Density(Struct, kw_only=True):
    id: int
    in_degree: int
    out_degree: int
    relations: list[str]
    reach_2hop: int


class Hit(Struct, kw_only=True):
    """One recall result. `scope` is "conversation" when the conversation pass found it."""

    id: int
    type: str
    title: str
    source: str | None
    tags: list[str]
    conversation_id: int | None
    valid_from: str
    valid_to: str | None
    superseded: bool
    score: float
    scope: str
    excerpt: str | None = None
    parts: dict[str, float] | None = None


class RecallResult(Struct, kw_only=True):
    hits: list[Hit]
    note: str | None = None
    searched: list[str] = []


class Conversation(Struct, kw_only=True):
    id: int
    title: str
    created_at: str


class ConversationList(Struct, kw_only=True):
    conversations: list[Conversation]


class TenantCreated(Struct, kw_only=True):
    name: str
    token: str


class Tenant(Struct, kw_only=True):
    name: str
    created_at: str


class TenantList(Struct, kw_only=True):
    tenants: list[Tenant]


class Pong(Struct, kw_only=True):
    version: str


class Status(Struct, kw_only=True):
    version: str
    tenant: str
    schema_version: int
    entries_active: int
    entries_retired: int
    relations: int
    conversations: int
    last_write: str | None
    db_bytes: int


# ---- framing -----------------------------------------------------------------


class Request(Struct, kw_only=True):
    """A JSON-RPC 2.0 request. `token` (an Arbiter extension) names the tenant."""

    jsonrpc: Literal["2.0"]
    method: str
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")
    token: str | None = None


class WireError(Struct, kw_only=True):
    code: int
    message: str
    data: dict | None = None


class Response(Struct, kw_only=True):
    """A JSON-RPC 2.0 response as the client decodes it (`result` stays raw until typed)."""

    jsonrpc: str = "2.0"
    id: int | str | None = None
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: WireError | None = None
