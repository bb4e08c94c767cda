"""Tenants (who may read what), their tokens, and conversations."""

from __future__ import annotations

import hashlib
import secrets

import apsw

from arbiter._time import format_time
from arbiter.errors import Conflict, NotFound
from arbiter.model import Conversation, Status, Tenant
from arbiter.store import fts


def hash_token(token: str) -> bytes:
    # Tokens are 256 random bits, so a plain hash is enough: there is nothing
    # to brute-force that a slow KDF would protect.
    return hashlib.sha256(token.encode()).digest()


def create_tenant(conn: apsw.Connection, name: str, *, now: int) -> tuple[int, str]:
    """Create a tenant; returns (id, token). The token is never stored in clear."""
    if existing := conn.execute("SELECT id FROM tenants WHERE name = ?", (name,)).fetchone():
        raise Conflict(f"tenant {name!r} already exists", path="name", existing_id=existing[0])
    token = "arb_" + secrets.token_urlsafe(32)
    conn.execute(
        "INSERT INTO tenants(name, token_hash, created_at) VALUES (?, ?, ?)", (name, hash_token(token), now)
    )
    tenant_id = conn.last_insert_rowid()
    fts.create(conn, tenant_id)
    return tenant_id, token


def tenant_by_token(conn: apsw.Connection, token: str) -> tuple[int, str] | None:
    """(id, name) of the tenant holding `token`, or None."""
    row = conn.execute("SELECT id, name FROM tenants WHERE token_hash = ?", (hash_token(token),)).fetchone()
    return (row[0], row[1]) if row else None


def db_bytes(conn: apsw.Connection) -> int:
    """The database file's size (pages in use): the admin's figure, never a tenant's."""
    pages, size = conn.execute("SELECT * FROM pragma_page_count, pragma_page_size").fetchone()
    return pages * size


def list_tenants(conn: apsw.Connection) -> list[Tenant]:
    return [
        Tenant(name=name, created_at=format_time(created))
        for name, created in conn.execute("SELECT name, created_at FROM tenants ORDER BY id")
    ]


def create_conversation(conn: apsw.Connection, tenant_id: int, title: str, *, now: int) -> Conversation:
    conn.execute(
        "INSERT INTO conversations(tenant_id, title, created_at) VALUES (?, ?, ?)", (tenant_id, title, now)
    )
    return Conversation(id=conn.last_insert_rowid(), title=title, created_at=format_time(now))


def require_conversation(
    conn: apsw.Connection, tenant_id: int, conversation_id: int, *, path: str = "conversation_id"
) -> None:
    """NotFound unless the conversation is the tenant's (another tenant's looks missing)."""
    row = conn.execute(
        "SELECT 1 FROM conversations WHERE id = ? AND tenant_id = ?", (conversation_id, tenant_id)
    ).fetchone()
    if row is None:
        raise NotFound(f"conversation {conversation_id} not found", path=path)


def list_conversations(conn: apsw.Connection, tenant_id: int, limit: int) -> list[Conversation]:
    rows = conn.execute(
        "SELECT id, title, created_at FROM conversations WHERE tenant_id = ? ORDER BY id DESC LIMIT ?",
        (tenant_id, limit),
    )
    return [Conversation(id=i, title=t, created_at=format_time(c)) for i, t, c in rows]


def status(conn: apsw.Connection, tenant_id: int, tenant_name: str, *, version: str, schema: int) -> Status:
    """Counts for one tenant: its own, never a figure that moves with other tenants' writes."""
    active, retired, last = conn.execute(
        "SELECT count(*) FILTER (WHERE valid_to IS NULL), count(*) FILTER (WHERE valid_to IS NOT NULL), "
        "max(recorded_at) FROM entries WHERE tenant_id = ?",
        (tenant_id,),
    ).fetchone()
    rels = conn.execute("SELECT count(*) FROM relations WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]
    convs = conn.execute("SELECT count(*) FROM conversations WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]
    return Status(
        version=version,
        tenant=tenant_name,
        schema_version=schema,
        entries_active=active,
        entries_retired=retired,
        relations=rels,
        conversations=convs,
        last_write=format_time(last),
    )


def conversation_count(conn: apsw.Connection, tenant_id: int) -> int:
    return conn.execute("SELECT count(*) FROM conversations WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]
