"""The import verb: a batch of an export file's records into the caller's tenant, ids remapped.

Each batch is one transaction: written whole or not at all. The import's
row (`imports`, keyed by tenant and the file's sha256) records how many
lines are done, and `import_ids` the id map, so an interrupted import goes
on from its last committed batch and a finished one is never written twice.
"""

from __future__ import annotations

import msgspec

from arbiter._time import format_time, parse_time
from arbiter.errors import InvalidParams
from arbiter.entities import names as entity_names
from arbiter.entities.core import _add_name
from arbiter.store.entries import content_hash
from arbiter.transfer.model import (
    ConversationRecord,
    EntryRecord,
    ImportBatchParams,
    ImportProgress,
    EntityEventRecord,
    EntityMergeRecord,
    EntityRecord,
    EntityRelationRecord,
    MentionRecord,
    RelationRecord,
    RevisionRecord,
    TenantRecord,
)
from arbiter.verb import Context, Verb

_encode = msgspec.json.Encoder().encode
_INSERT = (
    "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content, tags, source, conversation_id, "
    "parent_id, content_hash, recorded_at, valid_from, valid_to, revised_at) VALUES "
)
_ROW = "(" + ",".join("?" * 15) + ")"
_ROWS_PER_INSERT = 500


def _time(value: str | None, path: str) -> int | None:
    return None if value is None else parse_time(value, path=path)


class _Map:
    """Old id -> new id for one kind: this batch's in memory, earlier batches' from `import_ids`."""

    def __init__(self, conn, import_id: int, kind: str):
        self.conn, self.import_id, self.kind = conn, import_id, kind
        self.fresh: dict[int, int] = {}
        #: Old ids mapped onto an entity the tenant already had (same name): never altered by the import.
        self.existing: set[int] = set()

    def __getitem__(self, old: int) -> int | None:
        if (new := self.fresh.get(old)) is not None:
            return new
        row = self.conn.execute(
            "SELECT new_id FROM import_ids WHERE import_id = ? AND kind = ? AND old_id = ?",
            (self.import_id, self.kind, old),
        ).fetchone()
        return row[0] if row else None

    def save(self) -> None:
        self.conn.executemany(
            "INSERT INTO import_ids(import_id, kind, old_id, new_id) VALUES (?, ?, ?, ?)",
            ((self.import_id, self.kind, old, new) for old, new in self.fresh.items()),
        )


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
        conn.execute(
            "INSERT INTO entities(tenant_id, name, type, description, created_at, updated_at, retired_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tenant, rec.name, rec.type, rec.description, parse_time(rec.created_at, path="created_at"),
             parse_time(rec.updated_at, path="updated_at"), _time(rec.retired_at, "retired_at")),
        )
        entity_id = conn.last_insert_rowid()
    ents.fresh[rec.id] = entity_id
    for n in rec.names:
        if n.name not in owner:
            _add_name(conn, tenant, entity_id, n.name, alias=n.alias or primary is not None,
                      now=parse_time(n.created_at, path="names.created_at"))


def import_batch(ctx: Context, p: ImportBatchParams) -> ImportProgress:
    """Write one batch of an export file (lines `first_line`..) into this tenant, ids remapped; resumable, never twice."""
    conn, tenant = ctx.conn, ctx.tenant_id
    digest = bytes.fromhex(p.digest)
    row = conn.execute(
        "SELECT id, lines_done, lines, finished_at FROM imports WHERE tenant_id = ? AND digest = ?", (tenant, digest)
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO imports(tenant_id, digest, source, lines, lines_done, started_at) VALUES (?, ?, ?, ?, ?, ?)",
            (tenant, digest, p.source, p.lines, p.first_line - 1, ctx.now),
        )
        row = (conn.last_insert_rowid(), p.first_line - 1, p.lines, None)
    if row[3] is not None:
        return msgspec.structs.replace(_progress(row), already=True)
    import_id, lines_done = row[0], row[1]
    if p.first_line != lines_done + 1:
        return _progress(row)  # not where this import stands: the caller goes on from lines_done
    conversations, entries, ents = _Map(conn, import_id, "c"), _Map(conn, import_id, "e"), _Map(conn, import_id, "n")
    counts = {"conversations": 0, "entries": 0, "revisions": 0, "relations": 0, "entities": 0, "mentions": 0}

    def ref(mapping: _Map, old: int | None, line: int, field: str, what: str) -> int | None:
        if old is None:
            return None
        new = mapping[old]
        if new is None:
            raise InvalidParams(f"line {line}: {field} {old} names no {what} earlier in the file", path=field)
        return new

    pending: list[tuple[int, tuple]] = []  # (old id, row) of entries not yet inserted
    waiting: set[int] = set()
    links: list[tuple] = []
    revisions: list[tuple] = []

    def insert_pending() -> None:
        # Multi-row INSERTs, as remember_many does: one statement per entry
        # would flush a tiny FTS segment per entry (half the speed).
        for start in range(0, len(pending), _ROWS_PER_INSERT):
            chunk = pending[start:start + _ROWS_PER_INSERT]
            conn.execute(_INSERT + ",".join([_ROW] * len(chunk)), [v for _, row in chunk for v in row])
            last = conn.last_insert_rowid()  # one writer: the chunk's ids are consecutive, ending here
            for (old, _), new in zip(chunk, range(last - len(chunk) + 1, last + 1)):
                entries.fresh[old] = new
        pending.clear()
        waiting.clear()

    for line, rec in enumerate(p.records, start=p.first_line):
        try:
            if isinstance(rec, EntryRecord):
                if rec.parent_id in waiting:  # a reply to an entry of this chunk: give the parent its id first
                    insert_pending()
                pending.append((rec.id, (
                    tenant, ctx.viewer.user_id, ctx.viewer.private_scope, rec.type, rec.title, rec.content, _encode(list(dict.fromkeys(rec.tags))).decode(),
                    rec.source, ref(conversations, rec.conversation_id, line, "conversation_id", "conversation"),
                    ref(entries, rec.parent_id, line, "parent_id", "entry"), content_hash(rec.content),
                    parse_time(rec.recorded_at, path="recorded_at"), parse_time(rec.valid_from, path="valid_from"),
                    _time(rec.valid_to, "valid_to"), _time(rec.revised_at, "revised_at"),
                )))
                waiting.add(rec.id)
                counts["entries"] += 1
            elif isinstance(rec, RevisionRecord):
                if pending:
                    insert_pending()
                revisions.append((
                    ref(entries, rec.entry_id, line, "entry_id", "entry"), tenant,
                    ref(conversations, rec.conversation_id, line, "conversation_id", "conversation"),
                    parse_time(rec.recorded_from, path="recorded_from"), parse_time(rec.recorded_to, path="recorded_to"),
                    rec.type, rec.title, rec.content, _encode(rec.tags).decode(), rec.source,
                    parse_time(rec.valid_from, path="valid_from"), _time(rec.valid_to, "valid_to"),
                ))
                counts["revisions"] += 1
            elif isinstance(rec, RelationRecord):
                if pending:
                    insert_pending()
                links.append((
                    tenant, ref(entries, rec.source_id, line, "source_id", "entry"),
                    ref(entries, rec.target_id, line, "target_id", "entry"), rec.relation,
                    parse_time(rec.created_at, path="created_at"),
                ))
                counts["relations"] += 1
            elif isinstance(rec, EntityRecord):
                if pending:
                    insert_pending()
                _entity(conn, tenant, rec, ents)
                counts["entities"] += 1
            elif isinstance(rec, EntityMergeRecord):
                if rec.id in ents.fresh and rec.id not in ents.existing:  # never re-point an entity that was here
                    conn.execute("UPDATE entities SET merged_into = ? WHERE id = ?",
                                 (ref(ents, rec.into, line, "into", "entity"), ents.fresh[rec.id]))
            elif isinstance(rec, MentionRecord):
                if pending:
                    insert_pending()
                conn.execute(
                    "INSERT OR IGNORE INTO entry_entities(entry_id, entity_id, tenant_id, how) VALUES (?, ?, ?, ?)",
                    (ref(entries, rec.entry_id, line, "entry_id", "entry"),
                     ref(ents, rec.entity_id, line, "entity_id", "entity"), tenant, rec.how),
                )
                counts["mentions"] += 1
            elif isinstance(rec, EntityRelationRecord):
                conn.execute(
                    "INSERT INTO entity_relations(tenant_id, source_id, relation, target_id, weight, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source_id, target_id, relation) DO NOTHING",
                    (tenant, ref(ents, rec.source_id, line, "source_id", "entity"), rec.relation,
                     ref(ents, rec.target_id, line, "target_id", "entity"), rec.weight,
                     parse_time(rec.created_at, path="created_at"), parse_time(rec.updated_at, path="updated_at")),
                )
            elif isinstance(rec, EntityEventRecord):
                conn.execute(
                    "INSERT INTO entity_events(tenant_id, entity_id, kind, detail, at) VALUES (?, ?, ?, ?, ?)",
                    (tenant, ref(ents, rec.entity_id, line, "entity_id", "entity"), rec.event, rec.detail,
                     parse_time(rec.at, path="at")),
                )
            elif isinstance(rec, ConversationRecord):
                conn.execute(
                    "INSERT INTO conversations(tenant_id, author_id, title, created_at) VALUES (?, ?, ?, ?)",
                    (tenant, ctx.viewer.user_id, rec.title, parse_time(rec.created_at, path="created_at")),
                )
                conversations.fresh[rec.id] = conn.last_insert_rowid()
                counts["conversations"] += 1
            elif isinstance(rec, TenantRecord):
                raise InvalidParams(
                    f"line {line}: a tenant record: this is an --all export; import it with `arbiter import --all`",
                    path="kind",
                )
        except InvalidParams as e:
            if e.message.startswith("line "):
                raise
            raise InvalidParams(f"line {line}: {e.message}", path=e.path) from None
    insert_pending()
    # Past states go in as rows: the record-time triggers fire only on updates, so nothing is re-derived.
    conn.executemany(
        "INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to, type, title, "
        "content, tags, source, valid_from, valid_to) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", revisions,
    )
    conn.executemany(
        "INSERT INTO relations(tenant_id, source_id, target_id, relation, created_at) VALUES (?, ?, ?, ?, ?)", links
    )
    conversations.save()
    entries.save()
    ents.save()
    lines_done = p.first_line + len(p.records) - 1
    finished = ctx.now if lines_done >= row[2] else None
    conn.execute("UPDATE imports SET lines_done = ?, finished_at = ? WHERE id = ?", (lines_done, finished, import_id))
    if finished is not None:
        conn.execute("DELETE FROM import_ids WHERE import_id = ?", (import_id,))
    return _progress((import_id, lines_done, row[2], finished), **counts)


VERBS = {
    "import_batch": Verb(ImportBatchParams, import_batch, writes=True),
}
