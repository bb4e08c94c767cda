"""The export file format (JSON Lines) and the wire types of the export and import verbs.

Line 1 is a `Header`, the last an `End` counting the lines between them
(format 4 on); every other line is one record, tagged by `kind`.
Records come in dependency order: conversations, entries (by id, so a
reply's parent precedes it), their earlier recorded states (revisions),
then relations; then entities (with their names), merges, which entries
mention which entity, entity relations and entity events; then facts: declared
predicates, patch batches, facts (each with every recorded state), and the
links between facts (supersedes, the fact a finding names). Ids are the exporting
database's; import maps them to new ones and keeps the references. Times are
RFC 3339 with microseconds, exact both ways. `--all` exports put a `tenant`
record before each tenant's records, then its users, teams and memberships.

Entries and conversations name their author, and an entry the team it is
shared with (names, not ids: a user or team is the same one in another
home when it has the same name). A user's export holds what that user sees,
nothing else; an `--all` export (admin) holds everything.

Derived data is not exported: the full-text indexes, the recall and tag-graph
tables, the facts' search index and aspect counts are rebuilt by the store's
triggers as rows go in, aspect scores are recomputed at import, and
topic-cluster names are recomputed (and re-named) on first use.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta, Struct

from arbiter.errors import InvalidParams
from arbiter.validation import pattern
from arbiter.facts.model import (
    OBJECT_MAX_BYTES, PREDICATE_MAX_BYTES, PREDICATE_RE, SUBJECT_MAX_BYTES, BatchOrigin, BatchStatus, Confidence,
    FactStatus, Finding, _check_part,
)
from arbiter.model import Name, EntityRelationType, EntityType, EntryType, Params, RelationQualifier, RelationType, Speaker, Tags, Title, _check_bytes, CONTENT_MAX_BYTES, SOURCE_MAX_BYTES, TITLE_MAX_BYTES

#: Bumped when a record changes incompatibly; an importer refuses a newer one.
#: 2: entries carry author, team and speaker, conversations their author; salience inputs and retirement
#: reasons are records; `--all` holds users and teams
#: (an older Arbiter would drop them silently and make everything its importer's).
#: 3: facts, their batches and declared predicates (`predicate`, `fact_batch`, `fact`, `fact_link`).
#: 4: the last line is an `End` counting the lines between the header and it, so a copy cut short at a line
#: boundary is refused rather than imported in part.
FORMAT = 4
#: The first format whose files must end with an `End` line.
FORMAT_END = 4


class Torn(InvalidParams):
    """Records of a file disagree: one names a record not earlier in it, is in it twice, or says a batch it
    is not applied.

    What an export read page by page while agents wrote can hold (it is no
    one snapshot), so an export made again may not; every other line the
    check refuses, it would refuse again.
    """


class Header(Struct, kw_only=True, tag="arbiter-export", tag_field="kind"):
    """Line 1: the format version, the Arbiter that wrote it, when, and which tenant (None: `--all`)."""

    format: int
    arbiter: str
    exported_at: str
    tenant: str | None


class End(Struct, kw_only=True, tag="end", tag_field="kind"):
    """The last line (format 4 on): how many lines come between the header and it.

    Every line of an export is whole JSON, so a file cut at a line boundary
    (a copy, a download or a disk that stopped early) reads as a valid,
    smaller export; without this line its import would write part of a
    memory and call it done.
    """

    records: Annotated[int, Meta(ge=0)]


def end_line(records: int) -> bytes:
    """A file's last line, `records` lines after its header."""
    return msgspec.json.encode(End(records=records)) + b"\n"


class TenantRecord(Struct, kw_only=True, tag="tenant", tag_field="kind"):
    """In an `--all` export: the records after it, up to the next one, are this tenant's."""

    name: str


class UserRecord(Struct, kw_only=True, tag="user", tag_field="kind"):
    """In an `--all` export: a user of the tenant (never their token: an import issues new ones)."""

    name: Name
    created_at: str


class TeamRecord(Struct, kw_only=True, tag="team", tag_field="kind"):
    """In an `--all` export: a team of the tenant."""

    name: Name
    created_at: str


class MemberRecord(Struct, kw_only=True, tag="member", tag_field="kind"):
    """In an `--all` export: `user` belongs (or, with `left_at`, belonged) to `team`."""

    team: Name
    user: Name
    joined_at: str
    left_at: str | None = None


class ConversationRecord(Struct, kw_only=True, tag="conversation", tag_field="kind"):
    id: int
    title: str
    created_at: str
    #: Who started it (format 1 files: none, the importer).
    author: str | None = None


class EntryRecord(Struct, kw_only=True, tag="entry", tag_field="kind"):
    """An entry's current state with both time axes (`recorded_at`; `valid_from`/`valid_to`)."""

    id: int
    type: EntryType
    title: Title
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
    #: Who said it, if it was said in a conversation (a name or a role).
    speaker: Speaker | None = None
    #: The user who wrote it and the team it is shared with (None: private to its author). Format 1: none.
    author: str | None = None
    team: str | None = None

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
    title: Title
    content: str
    tags: list[str]
    source: str | None
    valid_from: str
    valid_to: str | None
    #: Who said it in this state; absent (files before `update` could correct it): the entry's speaker.
    speaker: Speaker | None | msgspec.UnsetType = msgspec.UNSET


class RelationRecord(Struct, kw_only=True, tag="relation", tag_field="kind", omit_defaults=True):
    """A relation; `qualifier` only on `causes`, and only written when set (older files have none)."""

    id: int
    source_id: int
    relation: RelationType
    target_id: int
    created_at: str
    qualifier: RelationQualifier | None = None


class SalienceRecord(Struct, kw_only=True, tag="salience", tag_field="kind"):
    """An entry's salience inputs where they depart from the defaults (its salience now is recomputed from them)."""

    entry_id: int
    initial: Annotated[float, Meta(ge=0, le=1)]
    decay_rate: Annotated[float, Meta(ge=0)]
    permanent: bool
    accesses: Annotated[int, Meta(ge=0)]
    last_access: str | None
    reinforcements: Annotated[int, Meta(ge=0)]


class RetirementRecord(Struct, kw_only=True, tag="retirement", tag_field="kind"):
    """Why maintenance retired an entry (its salience then), so `restore` still knows after a round trip."""

    entry_id: int
    reason: str
    salience: float
    at: str


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


class MentionRecord(Struct, kw_only=True, tag="mention", tag_field="kind", omit_defaults=True):
    """Entry `entry_id` mentions entity `entity_id`; `how` it was linked; `name`: which of its names the link came
    through, where known (in a tenant of several users, an alias shows only to who sees an entry linked so)."""

    entry_id: int
    entity_id: int
    how: Literal["given", "extracted", "speaker", "advisor"]
    name: str | None = None


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


class PredicateRecord(Struct, kw_only=True, tag="predicate", tag_field="kind"):
    """A declared predicate: the tenant's schema (ones only registered by applying a fact are re-registered so)."""

    name: Annotated[str, Meta(pattern=pattern(r"^[a-z][a-z0-9_]*\Z", "a snake_case predicate name"), max_length=64)]
    functional: bool
    declared_at: str


class FactBatchRecord(Struct, kw_only=True, tag="fact_batch", tag_field="kind"):
    """A patch batch as it stands, with its author and the team its facts are shared with (None: private)."""

    id: int
    origin: BatchOrigin
    status: BatchStatus
    threshold: Confidence
    note: str | None
    created_at: str
    evaluated_at: str | None
    decided_at: str | None
    author: str | None = None
    team: str | None = None


class FactStateRecord(Struct, kw_only=True):
    """One recorded state of a fact (record time `recorded_at`)."""

    status: FactStatus
    valid_to: str | None
    confidence: Confidence
    recorded_at: str


class FactRecord(Struct, kw_only=True, tag="fact", tag_field="kind"):
    """A fact with every state it was recorded in, oldest first (`states[0]` is its proposal, as a candidate).

    Its current status, valid_to and confidence are its last state's. `sources`
    are entries of the file; the entity ids, entities of the file (None: not
    linked, or linked to one the exporter does not see).
    """

    id: int
    batch_id: int
    subject: str
    predicate: str
    object: str
    subject_entity_id: int | None
    object_entity_id: int | None
    valid_from: str
    recorded_at: str
    changed_at: str
    aspects: list[str]
    finding: Finding | None
    reason: str | None
    sources: list[int]
    states: Annotated[list[FactStateRecord], Meta(min_length=1)]

    def __post_init__(self) -> None:
        _check_part("subject", self.subject, SUBJECT_MAX_BYTES)
        _check_part("object", self.object, OBJECT_MAX_BYTES)
        if not PREDICATE_RE.match(self.predicate) or len(self.predicate) > PREDICATE_MAX_BYTES:
            raise ValueError(f"predicate: {self.predicate!r} is not a snake_case predicate name")


class FactLinkRecord(Struct, kw_only=True, tag="fact_link", tag_field="kind"):
    """Fact `id` supersedes `supersedes_fact_id`, and its finding names `finding_fact_id` (after every fact: either may be a later one)."""

    id: int
    supersedes_fact_id: int | None
    finding_fact_id: int | None


Record = Union[
    TenantRecord, UserRecord, TeamRecord, MemberRecord, ConversationRecord, EntryRecord, RevisionRecord,
    RelationRecord, SalienceRecord, RetirementRecord, EntityRecord, EntityMergeRecord, MentionRecord,
    EntityRelationRecord, EntityEventRecord, PredicateRecord, FactBatchRecord, FactRecord, FactLinkRecord,
]
#: An `--all` export's people, first in each tenant's part (admin only).
PEOPLE_KINDS = ("user", "team", "member")
#: The export order: each kind refers only to kinds before it.
KINDS = ("conversation", "entry", "revision", "relation", "salience", "retirement", "entity", "entity_merge",
         "mention", "entity_relation", "entity_event", "predicate", "fact_batch", "fact", "fact_link")


class ExportPageParams(Params):
    """One page of a tenant's records of one `kind`, ids after `after`."""

    kind: Literal["conversation", "entry", "revision", "relation", "salience", "retirement", "entity",
                  "entity_merge", "mention", "entity_relation", "entity_event", "predicate", "fact_batch", "fact",
                  "fact_link"]
    after: int = 0
    limit: Annotated[int, Meta(ge=1, le=10_000)] = 5000


class ExportPageAdminParams(ExportPageParams, kw_only=True):
    """Admin: the same page of the named tenant's records (all of them, whoever wrote them), and its people."""

    kind: Literal["user", "team", "member", "conversation", "entry", "revision", "relation", "salience",
                  "retirement", "entity", "entity_merge", "mention", "entity_relation", "entity_event", "predicate",
                  "fact_batch", "fact", "fact_link"]
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

    digest: Annotated[str, Meta(pattern=pattern(r"^[0-9a-f]{64}\Z", "the file's sha256: 64 lowercase hex digits"))]
    lines: Annotated[int, Meta(ge=1)]
    first_line: Annotated[int, Meta(ge=1)]
    records: Annotated[list[Record], Meta(max_length=10_000)]
    source: str = "arbiter"
    #: Keep each record's author (an `--all` file, whose users come with it; the tenant's first user only).
    #: Otherwise the importer is the author of everything.
    authors: bool = False


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
    facts: int = 0
    #: Users this batch created (they have no token yet: the first user issues one with `user rotate`).
    new_users: list[str] = []
    teams: int = 0
    #: Entries whose team the importer is not in (or that does not exist here): imported private instead.
    private: int = 0
