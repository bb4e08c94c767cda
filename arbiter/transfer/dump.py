"""The export verbs: a tenant's records a page at a time, already encoded as the file's lines.

A user exports what they see (store/users.py `Viewer`): their own entries
and their teams' shares, the conversations those are in, the relations
between two of them, and the entities they mention; anything else is not
in the file, as it is not in any other read. The admin's `--all` reads each
tenant whole, with its users, teams and memberships.
"""

from __future__ import annotations

import msgspec

from arbiter._time import format_time
from arbiter.errors import NotFound
from arbiter.entities import visibility
from arbiter.store import users
from arbiter.transfer import facts as fact_records
from arbiter.store.tenants import conversation_seen
from arbiter.store.users import Viewer
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
    MemberRecord,
    RelationRecord,
    RetirementRecord,
    RevisionRecord,
    SalienceRecord,
    TeamRecord,
    UserRecord,
)
from arbiter.verb import Context, Verb

_encode = msgspec.json.Encoder().encode
_tags = msgspec.json.Decoder(list[str])


def page(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    """Up to `p.limit` records of `p.kind` that `v` sees, with ids after `p.after`, oldest first."""
    args = (p.after, p.limit)
    if p.kind == "entry":
        rows = conn.execute(
            "SELECT e.id, e.type, e.title, e.content, e.tags, e.source, e.conversation_id, e.parent_id, "
            "e.recorded_at, e.valid_from, e.valid_to, e.revised_at, e.speaker, u.name, t.name FROM entries e "
            "LEFT JOIN users u ON u.id = e.author_id LEFT JOIN scopes s ON s.id = e.scope_id "
            f"LEFT JOIN teams t ON t.id = s.team_id WHERE {v.sees('e')} AND e.id > ? ORDER BY e.id LIMIT ?", args,
        )
        records = [
            EntryRecord(
                id=r[0], type=r[1], title=r[2], content=r[3], tags=_tags.decode(r[4]), source=r[5],
                conversation_id=r[6], parent_id=r[7], recorded_at=format_time(r[8]), valid_from=format_time(r[9]),
                valid_to=format_time(r[10]), revised_at=format_time(r[11]), speaker=r[12], author=r[13], team=r[14],
            )
            for r in rows
        ]
        # A parent the reader does not see is not in the file: the reply is exported without it.
        if not (v.solo or v.everyone):
            parents = [r.parent_id for r in records if r.parent_id is not None]
            seen = _seen(conn, v, parents)
            records = [r if r.parent_id is None or r.parent_id in seen else msgspec.structs.replace(r, parent_id=None)
                       for r in records]
    elif p.kind == "revision":
        rows = conn.execute(
            "SELECT r.id, r.entry_id, r.conversation_id, r.recorded_from, r.recorded_to, r.type, r.title, r.content, "
            "r.tags, r.source, r.valid_from, r.valid_to, r.speaker FROM entry_revisions r "
            "JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.entry_id "
            f"WHERE {v.sees('e')} AND r.id > ? ORDER BY r.id LIMIT ?", args,
        ).fetchall()
        records = [
            RevisionRecord(
                entry_id=r[1], conversation_id=r[2], recorded_from=format_time(r[3]), recorded_to=format_time(r[4]),
                type=r[5], title=r[6], content=r[7], tags=_tags.decode(r[8]), source=r[9],
                valid_from=format_time(r[10]), valid_to=format_time(r[11]), speaker=r[12],
            )
            for r in rows
        ]
        raw = [msgspec.Raw(_encode(r)) for r in records]
        return ExportPage(records=raw, next=rows[-1][0] if len(rows) == p.limit else None)
    elif p.kind == "conversation":
        rows = conn.execute(
            "SELECT c.id, c.title, c.created_at, u.name FROM conversations c LEFT JOIN users u ON u.id = c.author_id "
            f"WHERE {conversation_seen(v)} AND c.id > ? ORDER BY c.id LIMIT ?", args
        )
        records = [ConversationRecord(id=i, title=t, created_at=format_time(c), author=a) for i, t, c, a in rows]
    elif p.kind in _PAGES:
        return _PAGES[p.kind](conn, v, p)
    elif p.kind in fact_records.PAGES:
        return fact_records.PAGES[p.kind](conn, v, p)
    elif p.kind in _PEOPLE_PAGES:
        return _PEOPLE_PAGES[p.kind](conn, v.tenant_id, p)
    else:
        rows = conn.execute(
            "SELECT r.id, r.source_id, r.relation, r.target_id, r.created_at, r.qualifier FROM relations r "
            "JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.source_id "
            "JOIN entries f ON f.tenant_id = r.tenant_id AND f.id = r.target_id "
            f"WHERE r.tenant_id = {int(v.tenant_id)} AND {v.sees('e')} AND {v.sees('f')} AND r.id > ? "
            "ORDER BY r.id LIMIT ?", args,
        )
        records = [
            RelationRecord(id=i, source_id=s, relation=r, target_id=t, created_at=format_time(c), qualifier=q)
            for i, s, r, t, c, q in rows
        ]
    raw = [msgspec.Raw(_encode(r)) for r in records]
    return ExportPage(records=raw, next=records[-1].id if len(records) == p.limit else None)


def _seen(conn, v: Viewer, ids: list[int]) -> set[int]:
    """Those of `ids` that `v` sees."""
    if not ids:
        return set()
    marks = ",".join("?" * len(set(ids)))
    return {r[0] for r in conn.execute(f"SELECT e.id FROM entries e WHERE e.id IN ({marks}) AND {v.sees('e')}",
                                       sorted(set(ids)))}


def _rows_page(rows: list, build, limit: int) -> ExportPage:
    """A page whose cursor is the first column of its rows (not a field of its records)."""
    raw = [msgspec.Raw(_encode(build(r))) for r in rows]
    return ExportPage(records=raw, next=rows[-1][0] if len(rows) == limit else None)


def _entity_seen(v: Viewer, column: str) -> str:
    """SQL: the entity `column` is in `v`'s export: one that exists for them (an entry or an active fact they see names it)."""
    table = column.rpartition(".")[0]
    return (f"{table + '.' if table else ''}tenant_id = {int(v.tenant_id)} "
            f"AND {column} IN (SELECT x.id FROM entities x WHERE {visibility.visible_sql(v)})")


def _entities(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    # Dated as the exporter knows them (visibility.times_sql, retired_sql), not by another user's earlier private
    # note or their merge.
    created_at, updated_at = visibility.times_sql(v, "n")
    rows = conn.execute(
        f"SELECT n.id, n.name, n.type, n.description, {created_at}, {updated_at}, {visibility.retired_sql(v, 'n')} "
        "FROM entities n "
        f"WHERE {_entity_seen(v, 'n.id')} AND n.id > ? ORDER BY n.id LIMIT ?", (p.after, p.limit),
    ).fetchall()
    # The names the exporter knows (visibility.names_sql), an alias dated by the first entry they see that named
    # it; a name is never older than the entity for someone who does not see the whole tenant.
    first = {r[0]: 0 if visibility.whole(v) else r[4] for r in rows}
    known, met = visibility.names_sql(v, "m")
    names: dict[int, list[EntityNameRecord]] = {}
    if rows:
        for entity_id, name, alias, created in conn.execute(
            f"SELECT m.entity_id, m.name, m.is_alias, {met} FROM entity_names m WHERE m.tenant_id = ? AND m.entity_id "
            f"BETWEEN ? AND ? AND {known} ORDER BY m.id", (v.tenant_id, rows[0][0], rows[-1][0]),
        ):
            if entity_id in first:
                names.setdefault(entity_id, []).append(EntityNameRecord(
                    name=name, alias=bool(alias), created_at=format_time(max(created, first[entity_id]))))
    return _rows_page(rows, lambda r: EntityRecord(
        id=r[0], name=r[1], type=r[2], description=r[3], created_at=format_time(r[4]),
        updated_at=format_time(r[5]), retired_at=format_time(r[6]), names=names.get(r[0], []),
    ), p.limit)


def _merges(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, merged_into FROM entities WHERE merged_into IS NOT NULL "
        f"AND {_entity_seen(v, 'id')} AND {_entity_seen(v, 'merged_into')} AND id > ? ORDER BY id LIMIT ?",
        (p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityMergeRecord(id=r[0], into=r[1]), p.limit)


def _mentions(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    # entry_entities is keyed (entry, entity), not by a rowid: page by entry id, whole entries at a time.
    rows = conn.execute(
        "SELECT l.entry_id, l.entity_id, l.how, "
        # A constant tenant in the subquery: how Citus pins a SELECT list's subquery to one shard (entities/core.py).
        f"(SELECT name FROM entity_names n WHERE n.tenant_id = {int(v.tenant_id)} AND n.id = l.name_id) "
        f"FROM entry_entities l WHERE l.tenant_id = {int(v.tenant_id)} AND l.entry_id IN ("
        "SELECT DISTINCT m.entry_id FROM entry_entities m JOIN entries e ON e.tenant_id = m.tenant_id "
        "AND e.id = m.entry_id "
        f"WHERE m.tenant_id = {int(v.tenant_id)} AND {v.sees('e')} AND m.entry_id > ? ORDER BY m.entry_id LIMIT ?"
        ") ORDER BY l.entry_id, l.entity_id", (p.after, p.limit),
    ).fetchall()
    raw = [msgspec.Raw(_encode(MentionRecord(entry_id=e, entity_id=n, how=h, name=name))) for e, n, h, name in rows]
    entries = len({r[0] for r in rows})
    return ExportPage(records=raw, next=rows[-1][0] if entries == p.limit else None)


def _entity_relations(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    created_at, updated_at = visibility.relation_times_sql(v, "r")  # never before the exporter knew both ends
    rows = conn.execute(
        f"SELECT r.id, r.source_id, r.relation, r.target_id, r.weight, {created_at}, {updated_at} FROM entity_relations r "
        f"WHERE r.tenant_id = ? AND {_entity_seen(v, 'r.source_id')} AND {_entity_seen(v, 'r.target_id')} "
        "AND r.id > ? ORDER BY r.id LIMIT ?", (v.tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityRelationRecord(
        source_id=r[1], relation=r[2], target_id=r[3], weight=r[4], created_at=format_time(r[5]),
        updated_at=format_time(r[6]),
    ), p.limit)


def _entity_events(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    # An event records an action on the tenant's one namespace, whoever's entries it touched: a merge's
    # detail lists every entry it moved. Only an export of the whole tenant (a one-user tenant, --all)
    # carries them; a user's export would name other users' private entries.
    if not visibility.whole(v):
        return ExportPage(records=[], next=None)
    rows = conn.execute(
        f"SELECT id, entity_id, kind, detail, at FROM entity_events WHERE tenant_id = ? AND {_entity_seen(v, 'entity_id')} "
        "AND id > ? ORDER BY id LIMIT ?",
        (v.tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: EntityEventRecord(entity_id=r[1], event=r[2], detail=r[3], at=format_time(r[4])),
                      p.limit)


def _users(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, name, created_at FROM users WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
        (tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: UserRecord(name=r[1], created_at=format_time(r[2])), p.limit)


def _teams(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT id, name, created_at FROM teams WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
        (tenant_id, p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: TeamRecord(name=r[1], created_at=format_time(r[2])), p.limit)


def _members(conn, tenant_id: int, p: ExportPageParams) -> ExportPage:
    # team_members has no rowid: page by team id, whole teams at a time.
    rows = conn.execute(
        "SELECT t.id, t.name, u.name, m.joined_at, m.left_at FROM team_members m JOIN teams t ON t.id = m.team_id "
        "JOIN users u ON u.id = m.user_id WHERE t.id IN (SELECT id FROM teams WHERE tenant_id = ? AND id > ? "
        "ORDER BY id LIMIT ?) ORDER BY t.id, u.id", (tenant_id, p.after, p.limit),
    ).fetchall()
    raw = [msgspec.Raw(_encode(MemberRecord(team=r[1], user=r[2], joined_at=format_time(r[3]),
                                            left_at=format_time(r[4])))) for r in rows]
    teams = len({r[0] for r in rows})
    return ExportPage(records=raw, next=rows[-1][0] if teams == p.limit else None)


def _salience(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    # The inputs only: `salience`/`computed_at` are maintenance's cache of the formula over them.
    rows = conn.execute(
        "SELECT s.entry_id, s.initial, s.decay_rate, s.permanent, s.accesses, s.last_access, s.reinforcements "
        f"FROM entry_salience s JOIN entries e ON e.tenant_id = s.tenant_id AND e.id = s.entry_id WHERE {v.sees('e')} "
        "AND s.entry_id > ? "
        "ORDER BY s.entry_id LIMIT ?", (p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: SalienceRecord(
        entry_id=r[0], initial=r[1], decay_rate=r[2], permanent=bool(r[3]), accesses=r[4],
        last_access=format_time(r[5]), reinforcements=r[6],
    ), p.limit)


def _retirements(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT r.id, r.entry_id, r.reason, r.salience, r.at FROM entry_retirements r JOIN entries e "
        f"ON e.tenant_id = r.tenant_id AND e.id = r.entry_id WHERE {v.sees('e')} "
        "AND r.id > ? ORDER BY r.id LIMIT ?", (p.after, p.limit),
    ).fetchall()
    return _rows_page(rows, lambda r: RetirementRecord(entry_id=r[1], reason=r[2], salience=r[3], at=format_time(r[4])),
                      p.limit)


_PEOPLE_PAGES = {"user": _users, "team": _teams, "member": _members}
_PAGES = {
    "salience": _salience, "retirement": _retirements, "entity": _entities, "entity_merge": _merges, "mention": _mentions, "entity_relation": _entity_relations,
    "entity_event": _entity_events,
}


def export_page(ctx: Context, p: ExportPageParams) -> ExportPage:
    """One page of the records of one kind (conversation, entry, revision, relation, entity, ...) the caller sees, for `arbiter export`."""
    return page(ctx.conn, ctx.viewer, p)


def export_page_admin(ctx: Context, p: ExportPageAdminParams) -> ExportPage:
    """Admin: one page of the named tenant's records, for `arbiter export --all`."""
    row = ctx.conn.execute("SELECT id FROM tenants WHERE name = ?", (p.tenant,)).fetchone()
    if row is None:
        raise NotFound(f"no tenant {p.tenant!r}", path="tenant")
    return page(ctx.conn, users.whole_tenant(row[0]), p)


VERBS = {
    "export_page": Verb(ExportPageParams, export_page),
    "export_page_admin": Verb(ExportPageAdminParams, export_page_admin, admin=True),
}
