"""Tenants (who may read what), their tokens, and conversations."""

from __future__ import annotations


import apsw

from arbiter._time import format_time
from arbiter.errors import NotFound
from arbiter.model import Conversation, Status, Tenant
from arbiter.store import engine, users
from arbiter.store.users import Viewer, hash_token


def create_tenant(conn: apsw.Connection, name: str, *, now: int, token: str | None = None) -> tuple[int, str]:
    """Create a tenant; returns (id, token). The token is never stored in clear; `token` is one already issued."""
    token = token or users.new_token()
    tenant_id = users.insert_named(conn, "tenants", "tenant", {"name": name, "token_hash": hash_token(token),
                                                               "created_at": now}, unique=("name",))
    # The tenant's first user holds the tenant token (store/users.py).
    users.create_user(conn, tenant_id, name, now=now, token_hash=hash_token(token))
    return tenant_id, token


def db_bytes(conn: apsw.Connection) -> int:
    """The database file's size (pages in use), or the PostgreSQL database's: the admin's figure, never a tenant's."""
    if engine.is_postgresql(conn):
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    pages, size = conn.execute("SELECT * FROM pragma_page_count, pragma_page_size").fetchone()
    return pages * size


def list_tenants(conn: apsw.Connection) -> list[Tenant]:
    return [
        Tenant(name=name, created_at=format_time(created))
        for name, created in conn.execute("SELECT name, created_at FROM tenants ORDER BY id")
    ]


def conversation_seen(v: Viewer, alias: str = "c") -> str:
    """SQL: conversation `alias` exists for `v`: they started it, or they see an entry in it."""
    if v.solo or v.everyone:
        return f"{alias}.tenant_id = {int(v.tenant_id)}"
    return (
        f"({alias}.tenant_id = {int(v.tenant_id)} AND ({alias}.author_id = {int(v.user_id)} OR EXISTS "
        f"(SELECT 1 FROM entries e WHERE e.conversation_id = {alias}.id AND {v.sees()})))"
    )


def create_conversation(conn: apsw.Connection, v: Viewer, title: str, *, now: int) -> Conversation:
    conversation_id = conn.execute(
        "INSERT INTO conversations(tenant_id, author_id, title, created_at) VALUES (?, ?, ?, ?) RETURNING id",
        (v.tenant_id, v.user_id, title, now),
    ).fetchall()[0][0]
    return Conversation(id=conversation_id, title=title, created_at=format_time(now))


def require_conversation(conn: apsw.Connection, v: Viewer, conversation_id: int, *, path: str = "conversation_id") -> None:
    """NotFound unless `v` sees the conversation (another tenant's, or another user's, looks missing)."""
    row = conn.execute(
        f"SELECT 1 FROM conversations c WHERE c.id = ? AND {conversation_seen(v)}", (conversation_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"conversation {conversation_id} not found", path=path)


def list_conversations(conn: apsw.Connection, v: Viewer, limit: int) -> list[Conversation]:
    rows = conn.execute(
        f"SELECT c.id, c.title, c.created_at FROM conversations c WHERE {conversation_seen(v)} "
        "ORDER BY c.id DESC LIMIT ?",
        (limit,),
    )
    return [Conversation(id=i, title=t, created_at=format_time(c)) for i, t, c in rows]


def status(conn: apsw.Connection, v: Viewer, tenant_name: str, *, version: str, schema: int) -> Status:
    """Counts of what the caller sees: their own, never a figure that moves with what others keep to themselves."""
    active, retired, last = conn.execute(
        "SELECT count(*) FILTER (WHERE e.valid_to IS NULL), count(*) FILTER (WHERE e.valid_to IS NOT NULL), "
        f"max(e.recorded_at) FROM entries e WHERE {v.sees()}"
    ).fetchone()
    rels = conn.execute(
        "SELECT count(*) FROM relations r JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.source_id "
        "JOIN entries t ON t.tenant_id = r.tenant_id AND t.id = r.target_id "
        f"WHERE r.tenant_id = ? AND {v.sees('e')} AND {v.sees('t')}",
        (v.tenant_id,),
    ).fetchone()[0]
    convs = conn.execute(f"SELECT count(*) FROM conversations c WHERE {conversation_seen(v)}").fetchone()[0]
    return Status(
        version=version,
        tenant=tenant_name,
        user=v.user_name,
        teams=users.team_list(conn, v),
        schema_version=schema,
        entries_active=active,
        entries_retired=retired,
        relations=rels,
        conversations=convs,
        last_write=format_time(last),
    )


def conversation_count(conn: apsw.Connection, v: Viewer) -> int:
    return conn.execute(f"SELECT count(*) FROM conversations c WHERE {conversation_seen(v)}").fetchone()[0]
