"""The verbs: transport-free functions from typed params to typed results.

Each verb is declared once in VERBS with its params type, whether it writes
(writes are serialized on one connection) and whether it needs the admin
token. The socket daemon, the tests and anything else call verbs through
`Context` + VERBS; none of them touch SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import apsw
import msgspec

from arbiter import __version__, graph, recall as recall_mod
from arbiter._time import parse_time
from arbiter.model import (
    ConversationCreateParams,
    ConversationList,
    ConversationListParams,
    Empty,
    EntryList,
    ExpandParams,
    ForgetResult,
    GetParams,
    History,
    IdParams,
    LinkParams,
    ListParams,
    Pong,
    PurgeResult,
    RecallParams,
    RememberManyParams,
    RememberManyResult,
    RememberParams,
    TenantCreateParams,
    TenantCreated,
    TenantList,
    UnlinkResult,
    UpdateParams,
)
from arbiter.store import entries, relations, schema_version, tenants


@dataclass
class Context:
    """What a verb runs with: a connection (inside a transaction), the caller's tenant, the instant."""

    conn: apsw.Connection
    tenant_id: int
    tenant_name: str
    now: int
    services: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verb:
    params: type[msgspec.Struct]
    run: Callable[[Context, Any], msgspec.Struct]
    writes: bool = False
    admin: bool = False
    public: bool = False  # needs no token (health checks)


def _as_of(value) -> int | None:
    return None if value is None else parse_time(value, path="as_of")


def remember(ctx: Context, p: RememberParams):
    """Write one entry; returns it as stored."""
    return entries.get(ctx.conn, ctx.tenant_id, entries.remember(ctx.conn, ctx.tenant_id, p, now=ctx.now))


def remember_many(ctx: Context, p: RememberManyParams):
    """Write many entries in one transaction; returns their ids in order."""
    ids = [
        entries.remember(ctx.conn, ctx.tenant_id, item, now=ctx.now, path=f"entries[{i}].")
        for i, item in enumerate(p.entries)
    ]
    return RememberManyResult(ids=ids)


def get(ctx: Context, p: GetParams):
    """One entry visible now (or at `as_of`); retired or missing is `not_found`."""
    return entries.get(ctx.conn, ctx.tenant_id, p.id, as_of=_as_of(p.as_of))


def list_(ctx: Context, p: ListParams):
    """Browse newest first; every filter is a hard filter. Page with `before_id`."""
    return EntryList(entries=entries.list_entries(ctx.conn, ctx.tenant_id, p))


def update(ctx: Context, p: UpdateParams):
    """Correct an active entry in place; omitted fields keep their value."""
    return entries.update(ctx.conn, ctx.tenant_id, p)


def forget(ctx: Context, p: IdParams):
    """Retire an entry now; `forgotten` is false (and nothing changes) if it was already retired."""
    return ForgetResult(id=p.id, forgotten=entries.forget(ctx.conn, ctx.tenant_id, p.id, now=ctx.now))


def purge(ctx: Context, p: IdParams):
    """Delete an entry for good, with its relations and index rows."""
    entries.purge(ctx.conn, ctx.tenant_id, p.id)
    return PurgeResult(id=p.id, purged=True)


def history(ctx: Context, p: IdParams):
    """The supersession chain through an entry, both ways, oldest first."""
    chain, edges = entries.history(ctx.conn, ctx.tenant_id, p.id)
    return History(entries=chain, relations=edges)


def link(ctx: Context, p: LinkParams):
    """Add a directed relation; a duplicate is `conflict` with `existing_id`."""
    return relations.link(ctx.conn, ctx.tenant_id, p.source_id, p.relation, p.target_id, now=ctx.now)


def unlink(ctx: Context, p: LinkParams):
    """Remove a relation; effects already applied (a retired target) stay."""
    relations.unlink(ctx.conn, ctx.tenant_id, p.source_id, p.relation, p.target_id)
    return UnlinkResult(removed=True)


def expand(ctx: Context, p: ExpandParams):
    """Breadth-first subgraph around an entry (depth ≤ 2, ≤ 50 nodes) with relation labels."""
    return graph.expand(ctx.conn, ctx.tenant_id, p.id, depth=p.depth, limit=p.limit, as_of=_as_of(p.as_of))


def density(ctx: Context, p: IdParams):
    """In/out degree, distinct relation labels and 2-hop reach of an entry."""
    return graph.density(ctx.conn, ctx.tenant_id, p.id)


def recall(ctx: Context, p: RecallParams):
    """Search memory; with no query, browse with hard filters."""
    return recall_mod.recall(ctx.conn, ctx.tenant_id, p)


def conversation_create(ctx: Context, p: ConversationCreateParams):
    """Create a conversation (a scope that recall searches first)."""
    return tenants.create_conversation(ctx.conn, ctx.tenant_id, p.title, now=ctx.now)


def conversation_list(ctx: Context, p: ConversationListParams):
    """Conversations, newest first."""
    return ConversationList(conversations=tenants.list_conversations(ctx.conn, ctx.tenant_id, p.limit))


def status(ctx: Context, p: Empty):
    """Counts and sizes for the caller's tenant."""
    return tenants.status(
        ctx.conn, ctx.tenant_id, ctx.tenant_name, version=__version__, schema=schema_version(ctx.conn)
    )


def ping(ctx: Context, p: Empty):
    """Liveness check; needs no token."""
    return Pong(version=__version__)


def tenant_create(ctx: Context, p: TenantCreateParams):
    """Admin: create a tenant and return its token (shown once)."""
    _, token = tenants.create_tenant(ctx.conn, p.name, now=ctx.now)
    return TenantCreated(name=p.name, token=token)


def tenant_list(ctx: Context, p: Empty):
    """Admin: all tenants."""
    return TenantList(tenants=tenants.list_tenants(ctx.conn))


VERBS: dict[str, Verb] = {
    "remember": Verb(RememberParams, remember, writes=True),
    "remember_many": Verb(RememberManyParams, remember_many, writes=True),
    "get": Verb(GetParams, get),
    "list": Verb(ListParams, list_),
    "update": Verb(UpdateParams, update, writes=True),
    "forget": Verb(IdParams, forget, writes=True),
    "purge": Verb(IdParams, purge, writes=True),
    "history": Verb(IdParams, history),
    "link": Verb(LinkParams, link, writes=True),
    "unlink": Verb(LinkParams, unlink, writes=True),
    "expand": Verb(ExpandParams, expand),
    "density": Verb(IdParams, density),
    "recall": Verb(RecallParams, recall),
    "conversation_create": Verb(ConversationCreateParams, conversation_create, writes=True),
    "conversation_list": Verb(ConversationListParams, conversation_list),
    "status": Verb(Empty, status),
    "ping": Verb(Empty, ping, public=True),
    "tenant_create": Verb(TenantCreateParams, tenant_create, writes=True, admin=True),
    "tenant_list": Verb(Empty, tenant_list, admin=True),
}
