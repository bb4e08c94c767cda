"""The export verbs: a tenant's records a page at a time, already encoded as the file's lines."""

from __future__ import annotations

import msgspec

from arbiter._time import format_time
from arbiter.errors import NotFound
from arbiter.transfer.model import (
    ConversationRecord,
    EntryRecord,
    ExportPage,
    ExportPageAdminParams,
    ExportPageParams,
    RelationRecord,
    RevisionRecord,
)
from arbiter.verb import Context, Verb

_encode = msgspec.json.Encoder().encode
_tags = msgspec.json.Decoder(list[str])


def page(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    """Up to `p.limit` records of `p.kind` with ids after `p.after`, oldest first."""
    args = (tenant_id, p.after, p.limit)
    if p.kind == "entry":
        rows = conn.execute(
            "SELECT id, type, title, content, tags, source, conversation_id, parent_id, recorded_at, valid_from, "
            "valid_to, revised_at FROM entries WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", args,
        )
        records = [
            EntryRecord(
                id=r[0], type=r[1], title=r[2], content=r[3], tags=_tags.decode(r[4]), source=r[5],
                conversation_id=r[6], parent_id=r[7], recorded_at=format_time(r[8]), valid_from=format_time(r[9]),
                valid_to=format_time(r[10]), revised_at=format_time(r[11]),
            )
            for r in rows
        ]
    elif p.kind == "revision":
        rows = conn.execute(
            "SELECT id, entry_id, conversation_id, recorded_from, recorded_to, type, title, content, tags, source, "
            "valid_from, valid_to FROM entry_revisions WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", args,
        ).fetchall()
        records = [
            RevisionRecord(
                entry_id=r[1], conversation_id=r[2], recorded_from=format_time(r[3]), recorded_to=format_time(r[4]),
                type=r[5], title=r[6], content=r[7], tags=_tags.decode(r[8]), source=r[9],
                valid_from=format_time(r[10]), valid_to=format_time(r[11]),
            )
            for r in rows
        ]
        raw = [msgspec.Raw(_encode(r)) for r in records]
        return ExportPage(records=raw, next=rows[-1][0] if len(rows) == p.limit else None)
    elif p.kind == "conversation":
        rows = conn.execute(
            "SELECT id, title, created_at FROM conversations WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", args
        )
        records = [ConversationRecord(id=i, title=t, created_at=format_time(c)) for i, t, c in rows]
    else:
        rows = conn.execute(
            "SELECT id, source_id, relation, target_id, created_at FROM relations "
            "WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", args,
        )
        records = [
            RelationRecord(id=i, source_id=s, relation=r, target_id=t, created_at=format_time(c))
            for i, s, r, t, c in rows
        ]
    raw = [msgspec.Raw(_encode(r)) for r in records]
    return ExportPage(records=raw, next=records[-1].id if len(records) == p.limit else None)


def export_page(ctx: Context, p: ExportPageParams) -> ExportPage:
    """One page of this tenant's records of one kind (conversation, entry, revision, relation) for `arbiter export`."""
    return page(ctx.conn, ctx.tenant_id, p)


def export_page_admin(ctx: Context, p: ExportPageAdminParams) -> ExportPage:
    """Admin: one page of the named tenant's records, for `arbiter export --all`."""
    row = ctx.conn.execute("SELECT id FROM tenants WHERE name = ?", (p.tenant,)).fetchone()
    if row is None:
        raise NotFound(f"no tenant {p.tenant!r}", path="tenant")
    return page(ctx.conn, row[0], p)


VERBS = {
    "export_page": Verb(ExportPageParams, export_page),
    "export_page_admin": Verb(ExportPageAdminParams, export_page_admin, admin=True),
}
