"""The export file format (JSON Lines) and the wire types of the export and import verbs.

Line 1 is a `Header`; every other line is one record, tagged by `kind`.
Records come in dependency order: conversations, entries (by id, so a
reply's parent precedes it), their earlier recorded states (revisions),
then relations; then entities (with their names), merges, which entries
mention which entity, entity relations and entity events. Ids are the exporting
database's; import maps them to new ones and keeps the references. Times are
RFC 3339 with microseconds, exact both ways. `--all` exports put a `tenant`
record before each tenant's records.

Derived data is not exported: the full-text index, the recall and tag-graph
tables are rebuilt by the store's triggers as rows go in, and topic-cluster
names are recomputed (and re-named) on first use.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta, Struct

from arbiter.validation import pattern
from arbiter.model import EntityRelationType, EntityType, EntryType, Params, RelationType, Tags, _check_bytes, CONTENT_MAX_BYTES, SOURCE_MAX_BYTES, TITLE_MAX_BYTES

#: Bumped when a record changes incompatibly; an importer refuses a newer one.
FORMAT = 1


class Header(Struct, kw_only=True, tag="arbiter-export", tag_field="kind"):
    """Line 1: the format version, the Arbiter that wrote it, when, and which tenant (None: `--all`)."""

    format: int
    arbiter: str
    exported_at: str
    tenant: str | None


class TenantRecord(Struct, kw_only=True, tag="tenant", tag_field="kind"):
    """In an `--all` export: the records after it, up to the next one, are this tenant's."""

    name: str


class ConversationRecord(Struct, kw_only=True, tag="conversation", tag_field="kind"):
    id: int
    title: str
    created_at: str


class EntryRecord(Struct, kw_only=True, tag="entry", tag_field="kind"):
    """An entry's current state with both time axes (`recorded_at`; `valid_from`/`valid_to`)."""

    id: int
    type: EntryType
    title: str
    content: str
    tags: Tags
    source: str | None
    conversation_id: int | None
    parent_id: int | None
    recorded_at: str
    valid_from: str
    valid_to: str | None
    #: When this state was recorded, if the entry changed after `recorded_at` (earlier states: `revision` records).
    revised_at: str | None = None

    def __post_init__(self) -> None:
        _check_bytes("title", self.title, TITLE_MAX_BYTES, required=True)
        _check_bytes("content", self.content, CONTENT_MAX_BYTES, required=True)
        _check_bytes("source", self.source, SOURCE_MAX_BYTES)


class RevisionRecord(Struct, kw_only=True, tag="revision", tag_field="kind"):
    """A state an entry held on the record-time axis, over [recorded_from, recorded_to)."""

    entry_id: int
    conversation_id: int | None
    recorded_from: str
    recorded_to: str
    type: EntryType
    title: str
    content: str
    tags: list[str]
    source: str | None
    valid_from: str
    valid_to: str | None


class RelationRecord(Struct, kw_only=True, tag="relation", tag_field="kind"):
    id: int
    source_id: int
    relation: RelationType
    target_id: int
    created_at: str


class EntityNameRecord(Struct, kw_only=True):
    """One name an entity answers to: its name or an alias."""

    name: Annotated[str, Meta(min_length=1, max_length=128)]
    alias: bool
    created_at: str


class EntityRecord(Struct, kw_only=True, tag="entity", tag_field="kind"):
    """A named thing, with every name it answers to (merged-away entities keep their row and no names)."""

    id: int
    name: Annotated[str, Meta(min_length=1, max_length=128)]
    type: EntityType
    description: str | None
    created_at: str
    updated_at: str
    retired_at: str | None
    names: list[EntityNameRecord]


class EntityMergeRecord(Struct, kw_only=True, tag="entity_merge", tag_field="kind"):
    """Entity `id` was merged into `into` (after every entity record: `into` may be a later one)."""

    id: int
    into: int


class MentionRecord(Struct, kw_only=True, tag="mention", tag_field="kind"):
    """Entry `entry_id` mentions entity `entity_id`; `how` it was linked."""

    entry_id: int
    entity_id: int
    how: Literal["given", "extracted", "speaker", "advisor"]


class EntityRelationRecord(Struct, kw_only=True, tag="entity_relation", tag_field="kind"):
    source_id: int
    relation: EntityRelationType
    target_id: int
    weight: float
    created_at: str
    updated_at: str


class EntityEventRecord(Struct, kw_only=True, tag="entity_event", tag_field="kind"):
    """A merge, rename or retype, as recorded (`detail` verbatim: the ids in it are the exporting database's)."""

    entity_id: int
    event: Literal["merge", "rename", "retype"]
    detail: str
    at: str


Record = Union[
    TenantRecord, ConversationRecord, EntryRecord, RevisionRecord, RelationRecord, EntityRecord, EntityMergeRecord,
    MentionRecord, EntityRelationRecord, EntityEventRecord,
]
#: The export order: each kind refers only to kinds before it.
KINDS = ("conversation", "entry", "revision", "relation", "entity", "entity_merge", "mention", "entity_relation",
         "entity_event")


class ExportPageParams(Params):
    """One page of a tenant's records of one `kind`, ids after `after`."""

    kind: Literal["conversation", "entry", "revision", "relation", "entity", "entity_merge", "mention",
                  "entity_relation", "entity_event"]
    after: int = 0
    limit: Annotated[int, Meta(ge=1, le=10_000)] = 5000


class ExportPageAdminParams(ExportPageParams, kw_only=True):
    """Admin: the same page of the named tenant's records."""

    tenant: str


class ExportPage(Struct, kw_only=True):
    """Records in id order; `next` is the cursor for the following page (None: the last)."""

    records: list[msgspec.Raw]
    next: int | None


class ImportBatchParams(Params):
    """A batch of an import: file lines `first_line`.. of the file with this `digest`, whose part for this tenant ends at line `lines`.

    The daemon keeps each import's id map and progress, keyed by the file's
    sha256 and the tenant: a batch that does not start where the last one
    ended is not written, and the answer says where to go on from.
    """

    digest: Annotated[str, Meta(pattern=pattern(r"^[0-9a-f]{64}$", "the file's sha256: 64 lowercase hex digits"))]
    lines: Annotated[int, Meta(ge=1)]
    first_line: Annotated[int, Meta(ge=1)]
    records: Annotated[list[Record], Meta(max_length=10_000)]
    source: str = "arbiter"


class ImportProgress(Struct, kw_only=True):
    """Where an import stands: lines done (of `lines`), whether it had finished before, counts written."""

    lines_done: int
    lines: int
    finished: bool
    already: bool = False
    finished_at: str | None = None
    conversations: int = 0
    entries: int = 0
    revisions: int = 0
    relations: int = 0
    entities: int = 0
    mentions: int = 0
