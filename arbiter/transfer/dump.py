"""The export verbs: a tenant's records a page at a time, already encoded as the file's lines."""

from __future__ import annotations

import msgspec

from arbiter._time import format_time
from arbiter.errors import NotFound
from arbiter.transfer.model import (
    ConversationRecord,
    EntityEventRecord,
    EntityMergeRecord,
    EntityNameRecord,
    EntityRecord,
    EntityRelationRecord,
    MentionRecord,
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
    elif p.kind in _ENTITY_PAGES:
        return _ENTITY_PAGES[p.kind](conn, tenant_id, p)
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


def _rows_page(rows: list, build, limit: int) -> ExportPage:
    """A page whose cursor is the first column of its rows (not a field of its records)."""
    raw = [msgspec.Raw(_encode(build(r))) for r in rows]
    return ExportPage(records=raw, next=rows[-1][0] if len(rows) == limit else None)


def _entities(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, name, type, description, created_at, updated_at, retired_at FROM entities "
        "WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", (tenant_id, p.after, p.limit),
    ).fetchall()
    names: dict[int, list[EntityNameRecord]] = {}
    if rows:
        for entity_id, name, alias, created in conn.execute(
            "SELECT entity_id, name, is_alias, created_at FROM entity_names WHERE tenant_id = ? AND entity_id "
            "BETWEEN ? AND ? ORDER BY id", (tenant_id, rows[0][0], rows[-1][0]),
        ):
            names.setdefault(entity_id, []).append(
                EntityNameRecord(name=name, alias=bool(alias), created_at=format_time(created)))
    return _rows_page(rows, lambda r: EntityRecord(
        id=r[0], name=r[1], type=r[2], description=r[3], created_at=format_time(r[4]),
        updated_at=format_time(r[5]), retired_at=format_time(r[6]), names=names.get(r[0], []),
    ), p.limit)


def _merges(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, merged_into FROM entities WHERE tenant_id = ? AND id > ? AND merged_into IS NOT NULL "
        "ORDER BY id LIMIT ?", (tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityMergeRecord(id=r[0], into=r[1]), p.limit)


def _mentions(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    # entry_entities is keyed (entry, entity), not by a rowid: page by entry id, whole entries at a time.
    rows = conn.execute(
        "SELECT entry_id, entity_id, how FROM entry_entities WHERE tenant_id = ? AND entry_id IN ("
        "SELECT DISTINCT entry_id FROM entry_entities WHERE tenant_id = ? AND entry_id > ? ORDER BY entry_id LIMIT ?"
        ") ORDER BY entry_id, entity_id", (tenant_id, tenant_id, p.after, p.limit),
    ).fetchall()
    raw = [msgspec.Raw(_encode(MentionRecord(entry_id=e, entity_id=n, how=h))) for e, n, h in rows]
    entries = len({r[0] for r in rows})
    return ExportPage(records=raw, next=rows[-1][0] if entries == p.limit else None)


def _entity_relations(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, source_id, relation, target_id, weight, created_at, updated_at FROM entity_relations "
        "WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?", (tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityRelationRecord(
        source_id=r[1], relation=r[2], target_id=r[3], weight=r[4], created_at=format_time(r[5]),
        updated_at=format_time(r[6]),
    ), p.limit)


def _entity_events(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, entity_id, kind, detail, at FROM entity_events WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
        (tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityEventRecord(entity_id=r[1], event=r[2], detail=r[3], at=format_time(r[4])),
                      p.limit)


_ENTITY_PAGES = {
    "entity": _entities, "entity_merge": _merges, "mention": _mentions, "entity_relation": _entity_relations,
    "entity_event": _entity_events,
}


def export_page(ctx: Context, p: ExportPageParams) -> ExportPage:
    """One page of this tenant's records of one kind (conversation, entry, revision, relation, entity, ...) for `arbiter export`."""
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
