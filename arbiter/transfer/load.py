"""The import verb: a batch of an export file's records into the caller's tenant, ids remapped.

Each batch is one transaction: written whole or not at all. The import's
row (`imports`, keyed by tenant and the file's sha256, and by the user for
anyone but the tenant's first user) records how many lines are done, and
`import_ids` the id map, so an interrupted import goes on from its last
committed batch and a finished one is never written twice.

Who wrote what: an import writes as the importing user. Every entry and
conversation is theirs, and an entry shared with a team stays shared if
that team exists here and they are in it (else it is theirs alone, counted
in `private`). With `authors` (`import --all`, the tenant's first user),
the file's users, teams and memberships are created where missing and each
record keeps its author and team.
"""

from __future__ import annotations

import hashlib

import msgspec

from arbiter._time import format_time, parse_time
from arbiter.errors import InvalidParams
from arbiter.entities import names as entity_names
from arbiter.entities.core import add_name
from arbiter import derive
from arbiter.duplicates import fingerprint
from arbiter.store import engine, entries as store_entries, relations, text, users
from arbiter.transfer import facts as fact_records
from arbiter.transfer.model import (
    ConversationRecord,
    FactBatchRecord,
    FactLinkRecord,
    FactRecord,
    PredicateRecord,
    EntryRecord,
    ImportBatchParams,
    ImportProgress,
    EntityEventRecord,
    EntityMergeRecord,
    EntityRecord,
    EntityRelationRecord,
    MemberRecord,
    MentionRecord,
    RelationRecord,
    RetirementRecord,
    RevisionRecord,
    SalienceRecord,
    TeamRecord,
    TenantRecord,
    UserRecord,
)
from arbiter.verb import Context, Verb

_encode = msgspec.json.Encoder().encode


def _columns(conn) -> str:
    """An imported entry's columns, its text in the engine's column (store/text.py)."""
    return (f"tenant_id, type, title, {text.column(conn)}, tags, source, conversation_id, parent_id, "
            "recorded_at, valid_from, valid_to, revised_at, speaker, author_id, scope_id")


def _time(value: str | None, path: str) -> int | None:
    return None if value is None else parse_time(value, path=path)


def _tenant_of(conn) -> str:
    """SQL: `tenant_id = ? AND ` where `import_ids` has the column (PostgreSQL, p005_tenant_keys: each statement
    names its tenant, so Citus keeps it on the tenant's node); SQLite's has not (an import is one tenant's)."""
    return "tenant_id = ? AND " if engine.is_postgresql(conn) else ""


def _tenant(conn, tenant_id: int) -> tuple[int, ...]:
    """The binding `_tenant_of` asks for, if it asks."""
    return (tenant_id,) if engine.is_postgresql(conn) else ()


class _Map:
    """Old id -> new id for one kind: this batch's in memory, earlier batches' from `import_ids`."""

    def __init__(self, conn, tenant_id: int, import_id: int, kind: str):
        self.conn, self.tenant_id, self.import_id, self.kind = conn, tenant_id, import_id, kind
        self.fresh: dict[int, int] = {}
        #: Old ids mapped onto an entity the tenant already had (same name): never altered by the import.
        self.existing: set[int] = set()

    def __getitem__(self, old: int) -> int | None:
        if (new := self.fresh.get(old)) is not None:
            return new
        new = self._saved(old)
        return None if new is None else abs(new)

    def created(self, old: int) -> bool:
        """Whether `old` maps to a row this import made (not onto an entity the tenant already had)."""
        if old in self.fresh:
            return old not in self.existing
        new = self._saved(old)
        return new is not None and new > 0

    def _saved(self, old: int) -> int | None:
        row = self.conn.execute(
            f"SELECT new_id FROM import_ids WHERE {_tenant_of(self.conn)}import_id = ? AND kind = ? AND old_id = ?",
            (*_tenant(self.conn, self.tenant_id), self.import_id, self.kind, old),
        ).fetchone()
        return row[0] if row else None

    def save(self) -> None:
        # One mapped onto an existing entity is saved negated, so a later batch (a merge) still knows not to alter it.
        pg = engine.is_postgresql(self.conn)
        self.conn.executemany(
            f"INSERT INTO import_ids({'tenant_id, ' if pg else ''}import_id, kind, old_id, new_id) "
            f"VALUES ({'?, ' if pg else ''}?, ?, ?, ?)",
            ((*_tenant(self.conn, self.tenant_id), self.import_id, self.kind, old, -new if old in self.existing else new)
             for old, new in self.fresh.items()),
        )


class _People:
    """Authors and scopes by name, for one batch: the importer's own, or (with `authors`) the file's."""

    def __init__(self, ctx: Context, authors: bool):
        self.conn, self.v, self.authors, self.now = ctx.conn, ctx.viewer, authors, ctx.now
        self.private = 0
        self.new_users: list[str] = []
        self.teams_created = 0
        self._users: dict[str, int] = {}
        self._scopes: dict[int, int] = {}
        self._teams: dict[str, int | None] = {}

    def user(self, name: str | None) -> int:
        if not self.authors or name is None:
            return self.v.user_id
        if name not in self._users:
            row = self.conn.execute("SELECT id FROM users WHERE tenant_id = ? AND name = ?",
                                    (self.v.tenant_id, name)).fetchone()
            if row is None:
                raise InvalidParams(f"author {name!r} is no user of this tenant nor of the file",
                                    path="author")
            self._users[name] = row[0]
        return self._users[name]

    def add_user(self, rec: UserRecord) -> None:
        if self.conn.execute("SELECT 1 FROM users WHERE tenant_id = ? AND name = ?",
                             (self.v.tenant_id, rec.name)).fetchone() is None:
            # A fresh token nobody holds: the first user issues a real one (`arbiter user rotate`).
            users.create_user(self.conn, self.v.tenant_id, rec.name, now=parse_time(rec.created_at, path="created_at"))
            self.new_users.append(rec.name)

    def team(self, name: str, *, created_at: int | None = None) -> int:
        """The team's id, created if missing (`authors` only)."""
        row = self.conn.execute("SELECT id FROM teams WHERE tenant_id = ? AND name = ?",
                                (self.v.tenant_id, name)).fetchone()
        if row is not None:
            return row[0]
        self.teams_created += 1
        return users.create_team(self.conn, self.v.tenant_id, name, now=created_at or self.now)

    def scope(self, author: int, team: str | None, *, count: bool = True) -> int:
        """Where an entry goes: its team's scope if it may stay shared, else its author's private scope (`count`ed)."""
        if team is not None:
            if team not in self._teams:
                if self.authors:
                    self._teams[team] = users.team_scope(self.conn, self.team(team))
                else:
                    row = self.conn.execute("SELECT id FROM teams WHERE tenant_id = ? AND name = ?",
                                            (self.v.tenant_id, team)).fetchone()
                    self._teams[team] = users.team_scope(self.conn, row[0]) if row and row[0] in self.v.teams else None
            if (scope := self._teams[team]) is not None:
                return scope
            self.private += count
        if author not in self._scopes:
            self._scopes[author] = self.conn.execute("SELECT id FROM scopes WHERE user_id = ?", (author,)).fetchone()[0]
        return self._scopes[author]


def _progress(row, **counts) -> ImportProgress:
    _, lines_done, lines, finished_at = row
    return ImportProgress(
        lines_done=lines_done, lines=lines, finished=finished_at is not None, finished_at=format_time(finished_at),
        **counts,
    )


def _entity(conn, tenant: int, rec: EntityRecord, ents: _Map) -> None:
    """Create the entity, or, if the tenant already has one by its name, map onto that one and add the new aliases.

    Names are unique per tenant (case-folded), so importing into a tenant
    that already knows "Postgres" links the imported mentions to its
    Postgres instead of failing.
    """
    owner = {}
    for n in rec.names:
        row = conn.execute("SELECT entity_id FROM entity_names WHERE tenant_id = ? AND key = ?",
                           (tenant, entity_names.key(n.name))).fetchone()
        if row is not None:
            owner[n.name] = row[0]
    primary = next((owner.get(n.name) for n in rec.names if not n.alias), None)
    if primary is not None:
        entity_id = primary
        ents.existing.add(rec.id)
    else:
        entity_id = conn.execute(
            "INSERT INTO entities(tenant_id, name, type, description, created_at, updated_at, retired_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (tenant, rec.name, rec.type, rec.description, parse_time(rec.created_at, path="created_at"),
             parse_time(rec.updated_at, path="updated_at"), _time(rec.retired_at, "retired_at")),
        ).fetchall()[0][0]
    ents.fresh[rec.id] = entity_id
    for n in rec.names:
        if n.name not in owner:
            add_name(conn, tenant, entity_id, n.name, alias=n.alias or primary is not None,
                      now=parse_time(n.created_at, path="names.created_at"))


def import_batch(ctx: Context, p: ImportBatchParams) -> ImportProgress:
    """Write one batch of an export file (lines `first_line`..) into this tenant, ids remapped; resumable, never twice."""
    with text.packing():  # the index upkeep reads the batch's texts back: handed back, not inflated again
        return _import_batch(ctx, p)


def _import_batch(ctx: Context, p: ImportBatchParams) -> ImportProgress:
    conn, tenant, v = ctx.conn, ctx.tenant_id, ctx.viewer
    if p.authors:
        users.require_owner(conn, v, "importing with each record's author (import --all)")
        if forget := ctx.services.people_changed:  # its users and memberships change who sees what
            ctx.committed.append(lambda conn: forget())
    digest = bytes.fromhex(p.digest)
    if v.user_id != users.first_user(conn, tenant):
        # Another user's import of the same file is theirs: not "already imported" because someone else did.
        digest = hashlib.sha256(digest + b"user %d" % v.user_id).digest()
    # Daemons sharing a PostgreSQL database may be sent batches of one import at once: the import's row is made
    # by whichever comes first, and locked while a batch is written, so the next one waits and then finds it
    # already done (SQLite has one writer at a time).
    conn.execute(
        "INSERT INTO imports(tenant_id, digest, source, lines, lines_done, started_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tenant_id, digest) DO NOTHING",
        (tenant, digest, p.source, p.lines, p.first_line - 1, ctx.now),
    )
    row = conn.execute(
        "SELECT id, lines_done, lines, finished_at FROM imports WHERE tenant_id = ? AND digest = ?"
        + (" FOR UPDATE" if engine.is_postgresql(conn) else ""), (tenant, digest)
    ).fetchone()
    if row[3] is not None:
        return msgspec.structs.replace(_progress(row), already=True)
    import_id, lines_done = row[0], row[1]
    if p.first_line != lines_done + 1:
        return _progress(row)  # not where this import stands: the caller goes on from lines_done
    conversations, entries, ents = (_Map(conn, tenant, import_id, kind) for kind in "cen")
    counts = {"conversations": 0, "entries": 0, "revisions": 0, "relations": 0, "entities": 0, "mentions": 0}
    people = _People(ctx, p.authors)
    facts = fact_records.Loader(conn, tenant, people, batches=_Map(conn, tenant, import_id, "b"),
                                facts=_Map(conn, tenant, import_id, "f"),
                                entries=entries, entities=ents, now=ctx.now)

    def ref(mapping: _Map, old: int | None, field: str, what: str) -> int | None:
        if old is None:
            return None
        new = mapping[old]
        if new is None:
            raise InvalidParams(f"{field} {old} names no {what} earlier in the file", path=field)
        return new

    pending: list[tuple[int, tuple, str]] = []  # (old id, row, its text) of entries not yet inserted
    waiting: set[int] = set()
    links: list[tuple] = []
    revisions: list[tuple] = []

    def insert_pending() -> None:
        # As remember_many does (store/entries.py): the entries triggers keep what is derived from them.
        if not pending:
            return
        new = store_entries.insert_rows(conn, _columns(conn), [row for _, row, _ in pending],
                                        scopes={row[-1] for _, row, _ in pending}, tenant_id=tenant,
                                        keys=[fingerprint(content) for _, _, content in pending])
        # The file carries its entity links (mention records): extracting them again would add links, and
        # entities, its memory never had, and an export of the copy would differ from the file.
        derive.queued(conn, tenant, new, ("entities",))
        for (old, _, _), new_id in zip(pending, new):
            entries.fresh[old] = new_id
        pending.clear()
        waiting.clear()

    for line, rec in enumerate(p.records, start=p.first_line):
        try:
            if isinstance(rec, EntryRecord):
                if rec.parent_id in waiting:  # a reply to an entry of this chunk: give the parent its id first
                    insert_pending()
                author = people.user(rec.author)
                pending.append((rec.id, (
                    tenant, rec.type, rec.title, text.stored(conn, rec.content),
                    _encode(list(dict.fromkeys(rec.tags))).decode(),
                    rec.source, ref(conversations, rec.conversation_id, "conversation_id", "conversation"),
                    ref(entries, rec.parent_id, "parent_id", "entry"),
                    parse_time(rec.recorded_at, path="recorded_at"), parse_time(rec.valid_from, path="valid_from"),
                    _time(rec.valid_to, "valid_to"), _time(rec.revised_at, "revised_at"), rec.speaker,
                    author, people.scope(author, rec.team),
                ), rec.content))
                waiting.add(rec.id)
                counts["entries"] += 1
            elif isinstance(rec, RevisionRecord):
                if pending:
                    insert_pending()
                revisions.append((
                    ref(entries, rec.entry_id, "entry_id", "entry"), tenant,
                    ref(conversations, rec.conversation_id, "conversation_id", "conversation"),
                    parse_time(rec.recorded_from, path="recorded_from"), parse_time(rec.recorded_to, path="recorded_to"),
                    rec.type, rec.title, text.stored(conn, rec.content), _encode(rec.tags).decode(), rec.source,
                    parse_time(rec.valid_from, path="valid_from"), _time(rec.valid_to, "valid_to"),
                    rec.speaker is msgspec.UNSET, None if rec.speaker is msgspec.UNSET else rec.speaker,
                ))
                counts["revisions"] += 1
            elif isinstance(rec, RelationRecord):
                if pending:
                    insert_pending()
                relations.require_qualifier(rec.relation, rec.qualifier)
                links.append((
                    tenant, ref(entries, rec.source_id, "source_id", "entry"),
                    ref(entries, rec.target_id, "target_id", "entry"), rec.relation,
                    parse_time(rec.created_at, path="created_at"), rec.qualifier,
                ))
                counts["relations"] += 1
            elif isinstance(rec, SalienceRecord):
                if pending:
                    insert_pending()
                conn.execute(
                    "INSERT INTO entry_salience(entry_id, tenant_id, initial, decay_rate, permanent, accesses, "
                    "last_access, reinforcements) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (ref(entries, rec.entry_id, "entry_id", "entry"), tenant, rec.initial, rec.decay_rate,
                     int(rec.permanent), rec.accesses, _time(rec.last_access, "last_access"), rec.reinforcements),
                )
            elif isinstance(rec, RetirementRecord):
                if pending:
                    insert_pending()
                conn.execute(
                    "INSERT INTO entry_retirements(tenant_id, entry_id, reason, salience, at) VALUES (?, ?, ?, ?, ?)",
                    (tenant, ref(entries, rec.entry_id, "entry_id", "entry"), rec.reason, rec.salience,
                     parse_time(rec.at, path="at")),
                )
            elif isinstance(rec, EntityRecord):
                if pending:
                    insert_pending()
                _entity(conn, tenant, rec, ents)
                counts["entities"] += 1
            elif isinstance(rec, EntityMergeRecord):
                if ents.created(rec.id):  # never re-point an entity that was here
                    conn.execute("UPDATE entities SET merged_into = ? WHERE tenant_id = ? AND id = ?",
                                 (ref(ents, rec.into, "into", "entity"), tenant, ents[rec.id]))
            elif isinstance(rec, MentionRecord):
                if pending:
                    insert_pending()
                entity = ref(ents, rec.entity_id, "entity_id", "entity")
                conn.execute(  # the name it came through, if the entity answers to it here (else none: see m025)
                    "INSERT INTO entry_entities(entry_id, entity_id, tenant_id, how, name_id) VALUES "
                    "(?, ?, ?, ?, (SELECT id FROM entity_names WHERE tenant_id = ? AND key = ? AND entity_id = ?)) "
                    "ON CONFLICT DO NOTHING",
                    (ref(entries, rec.entry_id, "entry_id", "entry"), entity, tenant, rec.how,
                     tenant, entity_names.key(rec.name or ""), entity),
                )
                counts["mentions"] += 1
            elif isinstance(rec, EntityRelationRecord):
                source = ref(ents, rec.source_id, "source_id", "entity")
                target = ref(ents, rec.target_id, "target_id", "entity")
                if source != target:  # both ends mapped onto one entity the tenant had: nothing left to relate
                    conn.execute(
                        "INSERT INTO entity_relations(tenant_id, source_id, relation, target_id, weight, created_at, "
                        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                        f"ON CONFLICT ({engine.conflict_key(conn, 'source_id, target_id, relation')}) DO NOTHING",
                        (tenant, source, rec.relation, target, rec.weight,
                         parse_time(rec.created_at, path="created_at"), parse_time(rec.updated_at, path="updated_at")),
                    )
            elif isinstance(rec, EntityEventRecord):
                conn.execute(
                    "INSERT INTO entity_events(tenant_id, entity_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)",
                    (tenant, ref(ents, rec.entity_id, "entity_id", "entity"), rec.event, rec.detail,
                     parse_time(rec.at, path="at")),
                )
            elif isinstance(rec, (PredicateRecord, FactBatchRecord, FactRecord, FactLinkRecord)):
                if pending:
                    insert_pending()
                facts.add(rec, ref)
            elif isinstance(rec, ConversationRecord):
                conversations.fresh[rec.id] = conn.execute(
                    "INSERT INTO conversations(tenant_id, author_id, title, created_at) VALUES (?, ?, ?, ?) RETURNING id",
                    (tenant, people.user(rec.author), rec.title, parse_time(rec.created_at, path="created_at")),
                ).fetchall()[0][0]
                counts["conversations"] += 1
            elif isinstance(rec, (UserRecord, TeamRecord, MemberRecord)):
                if not p.authors:
                    raise InvalidParams(
                        f"line {line}: a {rec.__struct_config__.tag} record: the file's people go in with "
                        "`arbiter import --all`", path="kind")
                if isinstance(rec, UserRecord):
                    people.add_user(rec)
                elif isinstance(rec, TeamRecord):
                    people.team(rec.name, created_at=parse_time(rec.created_at, path="created_at"))
                else:
                    team = people.team(rec.team)
                    user = people.user(rec.user)
                    # Created where missing: one the tenant has (current or ended) is its own, as the import found it.
                    if conn.execute("SELECT 1 FROM team_members WHERE team_id = ? AND user_id = ?",
                                    (team, user)).fetchone() is None:
                        users.join(conn, team, user, now=parse_time(rec.joined_at, path="joined_at"))
                        if rec.left_at is not None:
                            users.leave(conn, team, user, now=parse_time(rec.left_at, path="left_at"))
            elif isinstance(rec, TenantRecord):
                raise InvalidParams(
                    "a tenant record: this is an --all export; import it with `arbiter import --all`",
                    path="kind",
                )
        except InvalidParams as e:  # every refusal of a record names its line, once
            raise InvalidParams(f"line {line}: {e.message}", path=e.path) from None
    insert_pending()
    # Past states go in as rows: the record-time triggers fire only on updates, so nothing is re-derived.
    conn.executemany(
        "INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to, type, title, "
        f"{text.column(conn)}, tags, source, valid_from, valid_to, speaker) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12, "
        "CASE WHEN ?13 THEN (SELECT speaker FROM entries WHERE tenant_id = ?2 AND id = ?1) ELSE ?14 END)", revisions,
    )
    conn.executemany(
        "INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at, qualifier) "
        "VALUES (?, ?, ?, ?, ?, ?)", links
    )
    facts.finish()
    conversations.save()
    entries.save()
    ents.save()
    facts.batches.save()
    facts.facts.save()
    lines_done = p.first_line + len(p.records) - 1
    finished = ctx.now if lines_done >= row[2] else None
    conn.execute("UPDATE imports SET lines_done = ?, finished_at = ? WHERE tenant_id = ? AND id = ?",
                 (lines_done, finished, tenant, import_id))
    if finished is not None:
        conn.execute(f"DELETE FROM import_ids WHERE {_tenant_of(conn)}import_id = ?", (*_tenant(conn, tenant), import_id))
    return _progress((import_id, lines_done, row[2], finished), **counts, facts=facts.count, teams=people.teams_created,
                     new_users=people.new_users, private=people.private)


VERBS = {
    "import_batch": Verb(ImportBatchParams, import_batch, writes=True),
}
