"""Every wire type: verb params and results, as msgspec Structs.

Limits are checked here, at decode time, so a bad request never reaches the
store. New fields get defaults; existing field types never change.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal


import msgspec
from msgspec import Meta, Struct

from arbiter.errors import FieldError, InvalidParams
from arbiter.validation import pattern

EntryType = Literal["user", "feedback", "project", "reference", "learning", "context"]
RelationType = Literal["relates_to", "refines", "contradicts", "supersedes", "supports", "causes"]
ENTRY_TYPES: tuple[str, ...] = EntryType.__args__
RELATION_TYPES: tuple[str, ...] = RelationType.__args__
#: Mnemon's causal sub-types, taken only by `causes` (none: a direct cause).
RelationQualifier = Literal["enables", "prevents"]

#: RFC 3339 text or epoch seconds.
Time = int | float | str
#: A row id: SQLite's INTEGER is 64-bit signed, so a larger number names nothing.
Id = Annotated[int, Meta(ge=1, le=2**63 - 1)]
Tag = Annotated[str, Meta(
    min_length=1, max_length=64,
    pattern=pattern(r"^[^\s\x00-\x1f]+\Z", "a tag cannot contain spaces or control characters"),
)]
#: One line: a title shows in every listing, so it may not break one.
ONE_LINE = pattern(r"^[^\x00-\x1f\x7f]*\Z", "a title is one line, without newlines or control characters")
Title = Annotated[str, Meta(pattern=ONE_LINE)]
ConversationTitle = Annotated[str, Meta(min_length=1, max_length=200, pattern=ONE_LINE)]
Tags = Annotated[list[Tag], Meta(max_length=32)]
#: Who said or wrote an entry: a name ("Caroline") or a role ("user", "assistant").
Speaker = Annotated[str, Meta(min_length=1, max_length=100, pattern=pattern(
    r"^[^\x00-\x1f\x7f]+\Z", "a speaker is a name on one line, without control characters"))]
#: `update`'s speaker: the right one, or "" to remove it.
SpeakerEdit = Annotated[str, Meta(max_length=100, pattern=pattern(
    r"^(?:[^\x00-\x1f\x7f]+)?\Z", "a speaker is a name on one line, without control characters, or \"\" for none"))]
Limit = Annotated[int, Meta(ge=1, le=1000)]

TITLE_MAX_BYTES = 200
CONTENT_MAX_BYTES = 64 * 1024
SOURCE_MAX_BYTES = 200
NAME_MAX = 64


class Params(Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every verb's params: unknown fields are errors, not silently dropped."""


def _check_bytes(field: str, value: str | None, limit: int, *, required: bool = False) -> None:
    # The limits are in UTF-8 bytes (what the row costs), which msgspec's
    # length constraints (characters) cannot express.
    if value is None:
        return
    if required and not value.strip():
        raise FieldError(field, "must not be empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise FieldError(field, f"{size} bytes is over the limit of {limit}")


_ONE_LINE = re.compile(ONE_LINE)


def _check_source(value: str | None) -> None:
    """A source shows on a line of its own (`source: standup` in `get`), so it may not break one."""
    _check_bytes("source", value, SOURCE_MAX_BYTES)
    if value is not None and not _ONE_LINE.match(value):
        raise ValueError("source: a source is one line, without newlines or control characters")


def _not_blank(field: str, value: str | None) -> None:
    if value is not None and not value.strip():  # a listing would show a blank line for it
        raise ValueError(f"{field}: must not be empty")


#: One rule for an entry's text: no control characters, except the whitespace ones in content (tab, line feed,
#: vertical tab, form feed, carriage return: real text, pasted from chats and PDFs, holds them).
#: The control characters an entry's content may not hold (it may hold whitespace: tabs, line breaks).
CONTENT_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _check_content(value: str | None) -> None:
    _check_bytes("content", value, CONTENT_MAX_BYTES, required=True)
    if value is not None and (bad := CONTENT_CONTROL.search(value)):
        raise FieldError("content", f"control character U+{ord(bad[0]):04X} at character {bad.start() + 1}: an entry's "
                         "title and content hold no control characters (content alone may hold line breaks, tabs "
                         "and other whitespace)")


def check_content(value: str) -> None:
    """Raise `InvalidParams` as the daemon would for this content, before it is sent.

    Text over the frame limit (4 MiB) never reaches the daemon's own check, whose words would be lost to a
    frame error: the CLI checks first, with the same words (the MCP server's arguments are `TextParams`).
    """
    try:
        _check_content(value)
    except FieldError as e:
        raise InvalidParams.at(e.field, e.reason) from None


class TextParams(Params):
    """Params carrying an entry's text: title, content and source limits, in UTF-8 bytes."""

    def __post_init__(self) -> None:
        _check_bytes("title", getattr(self, "title", None), TITLE_MAX_BYTES, required=True)
        _check_content(getattr(self, "content", None))
        _check_source(getattr(self, "source", None))


def _no_empty_source(p: RememberParams | ReplyParams) -> None:
    """A new entry's "" source is no source, as `update`'s "" removes one: never stored as an empty line."""
    if p.source == "":
        p.source = None


class Empty(Params):
    """No params."""


EntityType = Literal["person", "organisation", "project", "concept", "location", "tool", "event", "other"]
#: The closed set of relations between entities (MemoryGraph's); entry relations are `RelationType`.
EntityRelationType = Literal[
    "related_to", "works_on", "part_of", "depends_on", "created_by", "uses", "knows", "similar_to", "caused_by",
    "followed_by",
]
#: An entity name: 1–128 characters, no control characters, not blank at either end.
EntityName = Annotated[
    str, Meta(min_length=1, max_length=128, pattern=pattern(
        r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?\Z",
        "an entity name has no control characters and no space at either end",
    ))
]


class NamedEntity(Struct, forbid_unknown_fields=True, kw_only=True):
    """An entity the caller names, with its type if known."""

    name: EntityName
    type: EntityType | None = None


#: What `remember`'s `entities` takes: a name, or `{name, type}`.
EntityArg = EntityName | NamedEntity


class RememberParams(TextParams):
    """Write one entry. `supersedes_ids` retires each listed entry in the same transaction."""

    type: EntryType
    title: Title
    content: str
    tags: Tags = []
    source: str | None = None
    conversation_id: Id | None = None
    #: Start a conversation with this title and write into it, in the write's own transaction: a refused
    #: write or a duplicate starts none. The result's `conversation_id` names it. Not with `conversation_id`.
    new_conversation: ConversationTitle | None = None
    parent_id: Id | None = None
    supersedes_ids: Annotated[list[Id], Meta(max_length=64)] = []
    valid_from: Time | None = None
    speaker: Speaker | None = None
    #: Share with this team (one the caller belongs to) at once; default private to the caller.
    team: Name | None = None
    auto_tag: bool = False
    auto_supersede: bool = False
    #: Entities the entry is about, beside those extraction finds in its text.
    entities: Annotated[list[EntityArg], Meta(max_length=64)] = []
    #: Initial salience (default 0.5); a permanent entry never falls below 0.8 nor retires by salience.
    salience: Annotated[float, Meta(ge=0, le=1)] | None = None
    permanent: bool = False
    #: Write even if an active entry of the same type has this content (up to case and whitespace).
    allow_duplicate: bool = False
    #: With an LLM key on the daemon, the advisor may add entities the lexical extraction missed.
    extract_entities: bool = False
    #: With an LLM key on the daemon, the advisor judges the link `candidates` and the ones it confirms are linked.
    auto_link: bool = False
    #: Return link `candidates` (causal, similar) for the caller to judge. Off, the write skips finding them and
    #: the entry's similarity edges are derived on the idle writer moments later; `auto_link` implies it.
    candidates: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _not_blank("new_conversation", self.new_conversation)
        if self.new_conversation is not None and self.conversation_id is not None:
            raise ValueError("new_conversation: not with conversation_id")
        _no_empty_source(self)


#: `remember`'s flags a bulk write refuses rather than silently ignores: the LLM layers call a model per
#: entry, and link candidates are an answer for one caller about one entry.
REMEMBER_ONLY = ("auto_tag", "auto_supersede", "extract_entities", "auto_link", "candidates")


class RememberManyParams(Params):
    """Write many entries in one transaction (all or nothing)."""

    entries: Annotated[list[RememberParams], Meta(min_length=1, max_length=10_000)]
    #: Start a conversation with this title and write every entry into it, in the same transaction (none is
    #: started if the batch is refused); the result's `conversation_id` names it. Not with an entry's own
    #: `conversation_id` or `new_conversation`.
    new_conversation: ConversationTitle | None = None

    def __post_init__(self) -> None:
        for i, e in enumerate(self.entries):
            for flag in REMEMBER_ONLY:
                if getattr(e, flag):
                    raise ValueError(f"entries[{i}].{flag}: not supported in remember_many; use remember")
            if e.new_conversation is not None:
                raise ValueError(f"entries[{i}].new_conversation: give it once, for the whole batch")
            if self.new_conversation is not None and e.conversation_id is not None:
                raise ValueError(f"entries[{i}].conversation_id: not with the batch's new_conversation")
        _not_blank("new_conversation", self.new_conversation)


class IdParams(Params):
    id: Id


class GetParams(Params):
    """One entry. `as_of` picks the valid-time instant, `known_at` the record-time one (both may combine)."""

    id: Id
    as_of: Time | None = None
    known_at: Time | None = None


class HistoryParams(Params):
    """An entry's recorded states and its supersession chain, as the store held them at `known_at` (default now)."""

    id: Id
    known_at: Time | None = None


class ListParams(Params):
    """Browse: `types`, `tag` and `conversation_id` are hard filters; newest first."""

    types: list[EntryType] = []
    tag: Tag | None = None
    conversation_id: Id | None = None
    as_of: Time | None = None
    known_at: Time | None = None
    limit: Limit = 50
    before_id: Id | None = None


class UpdateParams(TextParams):
    """Correct an active entry in place; omitted fields keep their value."""

    id: Id
    type: EntryType | None = None
    title: Title | None = None
    content: str | None = None
    tags: Tags | None = None
    source: str | None = None
    #: Who said it, corrected ("" removes it); past states keep the speaker they had.
    speaker: SpeakerEdit | None = None


class LinkParams(Params):
    source_id: Id
    relation: RelationType
    target_id: Id
    #: Only on `causes`: `enables` (an enabling condition) or `prevents` (a preventing factor); none is a
    #: direct cause. `unlink` ignores it (one relation of a type joins two entries).
    qualifier: RelationQualifier | None = None


class ExpandParams(Params):
    id: Id
    depth: Annotated[int, Meta(ge=1, le=2)] = 1
    limit: Annotated[int, Meta(ge=1, le=50)] = 50
    as_of: Time | None = None
    known_at: Time | None = None


#: Recall pipeline stages that `RecallParams.disable` can switch off (to measure them).
RecallStage = Literal[
    "stopwords", "weights", "boosts", "intent", "decay", "voice", "quantity", "number_words", "common", "tenant_fill",
    "select", "facts", "entities", "clusters", "salience", "budget", "replies", "threads", "speaker", "framing", "dates",
    "followups", "when", "episodes", "antecedents", "parties", "names",
]
RECALL_STAGES: tuple[str, ...] = RecallStage.__args__


class RecallParams(Params):
    """Search. With an empty query it browses (filters become hard filters).

    A query with text but no searchable word ("🚀", "*") finds nothing and
    says so in the result's `note`; it never browses. A trailing `*` on a
    word searches a prefix (`depl*`: deploy, deployment). In search mode `types` and `tag` are soft boosts; `conversation_id` runs a
    conversation pass fused with a tenant-wide pass. `as_of` ranks the set as it
    stood then, and is the reference instant for age decay. `intent="off"`
    stops question cues from boosting types; `decay=true` favours recent
    entries (off by default: a note does not grow less true with age, and
    what has stopped being true retires through supersession and validity).
    `disable` switches named pipeline stages off, for measuring them.
    `known_at` searches the memory as it was recorded then: past text and
    validity, none of what was written later.
    """

    query: Annotated[str, Meta(max_length=4096)] = ""
    conversation_id: Id | None = None
    types: list[EntryType] = []
    tag: Tag | None = None
    as_of: Time | None = None
    known_at: Time | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 10
    explain: bool = False
    intent: Literal["on", "off"] = "on"
    decay: bool = False
    half_life_days: Annotated[float, Meta(gt=0, le=36500)] = 90.0
    floor: Annotated[float, Meta(ge=0, le=1)] = 0.5
    disable: Annotated[list[RecallStage], Meta(max_length=16)] = []
    #: Hits, from the top, that carry an excerpt (each costs a scan of the entry's text).
    excerpts: Annotated[int, Meta(ge=0, le=200)] = 3
    # LLM layers (need ANTHROPIC_API_KEY on the daemon): true picks the
    # daemon's default model, a string names one. Any failure falls back to
    # the lexical ranking with a `note`.
    expand: bool | Annotated[str, Meta(min_length=1, max_length=100)] = False
    rerank: bool | Annotated[str, Meta(min_length=1, max_length=100)] = False
    rerank_fine: bool | Annotated[str, Meta(min_length=1, max_length=100)] = False
    deadline_ms: Annotated[int, Meta(ge=100, le=120_000)] = 15_000
    #: Intent-weighted graph recall: walk associations and relations from the
    #: top hits and fuse what they reach (docs/retrieval.md has its numbers).
    graph: bool = False


class ConversationCreateParams(Params):
    title: ConversationTitle

    def __post_init__(self) -> None:
        _not_blank("title", self.title)


class ConversationListParams(Params):
    limit: Limit = 100


#: A tenant's, a user's or a team's name (it names a token file, so no slashes).
Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX, pattern=pattern(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z", "a name is letters, digits, '.', '_' or '-', starting with a letter or digit"
))]


class TenantCreateParams(Params):
    name: Name


class NameParams(Params):
    """A user or a team, by name."""

    name: Name


class MemberParams(Params):
    """A user joining or leaving a team."""

    team: Name
    user: Name


class ShareParams(Params):
    """Share a thread with a team, by its root: every entry in it the caller sees follows, whoever wrote it."""

    id: Id
    team: Name


# ---- results ---------------------------------------------------------------


class Entry(Struct, kw_only=True):
    """One memory entry as the wire shows it. Times are RFC 3339 UTC.

    `recorded_at` is when the entry was first written; `revised_at`, when the
    state shown was recorded (null: it is the state first written).
    """

    id: int
    type: str
    title: str
    content: str
    tags: list[str]
    source: str | None
    conversation_id: int | None
    parent_id: int | None
    content_hash: str
    recorded_at: str
    valid_from: str
    valid_to: str | None
    superseded_by: list[int] = []
    revised_at: str | None = None
    speaker: str | None = None
    #: The user who wrote it, and the team it is shared with (null: private to its author).
    author: str | None = None
    team: str | None = None


class EntityRef(Struct, kw_only=True):
    id: int
    name: str
    type: str


class Mention(Struct, kw_only=True):
    """An entity an entry mentions, as `remember` resolved it.

    `created`: the name was new. `possibly_same_as`: existing entities whose
    names are similar (trigram similarity 0.6–0.85) but not enough to merge
    without asking; `arbiter entity merge` folds them if they are one.
    """

    id: int
    name: str
    type: str
    created: bool
    possibly_same_as: list[EntityRef] = []


class LinkCandidate(Struct, kw_only=True):
    """A link `remember` suggests and leaves to the caller: confirm it with `link`, or ignore it.

    `source_id -> target_id` is the suggested direction (for causal: cause ->
    effect); `relation` is the relation `link` would take.
    """

    id: int
    kind: Literal["causal", "similar"]
    source_id: int
    target_id: int
    relation: str
    score: float
    reason: str



class Remembered(Entry, kw_only=True):
    """What `remember` returns: the entry as stored, plus a `note` when an LLM layer failed or acted.

    `entities`: what the entry mentions (given and extracted), resolved.
    `duplicate_of`: nothing was written, this is the existing entry.
    """

    note: str | None = None
    entities: list[Mention] = []
    #: Set when nothing was written: the active entry that already says this (the result is that entry).
    duplicate_of: int | None = None
    #: Active entries whose text is nearly the same (word-set Jaccard ≥ 0.7): link or supersede them.
    similar: list[int] = []
    #: Links worth making that Arbiter leaves to the caller (causal, similar): confirm with `link`.
    candidates: list[LinkCandidate] = []
    #: `auto_link`: the relations made from the candidates the advisor confirmed.
    linked: list[Relation] = []


class EntryList(Struct, kw_only=True):
    entries: list[Entry]


class RememberManyResult(Struct, kw_only=True):
    #: In the order given; an item identical to an entry already there holds that entry's id.
    ids: list[int]
    #: The conversation `new_conversation` started.
    conversation_id: int | None = None
    #: The positions (from 0) of the items not written: identical to an entry already there, or earlier in the batch.
    duplicates: list[int] = []


class ForgetResult(Struct, kw_only=True):
    """`also`: the caller's own replies below it, retired with it (a teammate's never are)."""

    id: int
    forgotten: bool
    also: list[int] = []


class RestoreResult(Struct, kw_only=True):
    id: int
    restored: bool


class PurgeResult(Struct, kw_only=True):
    """`also`: the caller's own replies below it, purged with it; a teammate's lose their parent and stay."""

    id: int
    purged: bool
    also: list[int] = []


class Relation(Struct, kw_only=True):
    id: int
    source_id: int
    relation: str
    target_id: int
    created_at: str
    #: `causes` only: `enables` or `prevents` (null: a direct cause).
    qualifier: str | None = None


class UnlinkResult(Struct, kw_only=True):
    removed: bool


#: What a recorded change did: the first write, a correction, a retirement
#: (`forget`), a retirement by a `supersedes` link, a reopening (`restore`).
Change = Literal["remembered", "updated", "retired", "superseded", "restored"]


class Revision(Struct, kw_only=True):
    """One recorded state of an entry: the store held `entry` over [recorded_from, recorded_to).

    `recorded_to` is null for the state still current (at `known_at`, if given).
    `change` is what began this state; `fields` names the fields that differ
    from the state before (empty for the first).
    """

    id: int
    recorded_from: str
    recorded_to: str | None
    change: Change
    fields: list[str]
    entry: Entry


class History(Struct, kw_only=True):
    """The supersession chain through an entry, oldest first, the edges joining it, and every recorded state of each.

    `revisions` are grouped by entry (in chain order), oldest first.
    """

    entries: list[Entry]
    relations: list[Relation]
    revisions: list[Revision] = []


#: Derived edge kinds (Mnemon's four graphs, arbiter/associations). `causal` is
#: never automatic: only a candidate, which a caller confirms with `link ... causes`.
AssociationKind = Literal["temporal", "entity", "similarity"]


class Association(Struct, kw_only=True):
    """One derived edge from the entry asked about to `other`.

    `sub_type`: backbone or proximity (temporal), the entity's name (entity),
    auto (similarity). `evidence` says in words what made it: the hours apart,
    the shared entity, the overlap.
    """

    other_id: int
    kind: AssociationKind
    sub_type: str
    weight: float
    evidence: str
    #: The other entry's type and title (filled in by the `associations` verb), so a reader need not `get` it.
    other_type: str = ""
    other_title: str = ""



class AssociationEdge(Struct, kw_only=True):
    """A derived edge in a subgraph (undirected; `source_id` is the end the walk came from)."""

    source_id: int
    target_id: int
    kind: AssociationKind
    sub_type: str
    weight: float


class Graph(Struct, kw_only=True):
    """A BFS subgraph: `depth` is each node's hop distance from the start."""

    nodes: list[Entry]
    depth: dict[int, int]
    edges: list[Relation]
    truncated: bool
    #: Derived edges (arbiter/associations), next to the asserted ones in `edges`.
    associations: list[AssociationEdge] = []


class Density(Struct, kw_only=True):
    id: int
    in_degree: int
    out_degree: int
    relations: list[str]
    reach_2hop: int
    #: Derived edges by kind (temporal, entity, similarity).
    associations: dict[str, int] = {}
    #: Links no relation holds (the degrees count relations): its replies, the entries that mention it as `#ID`,
    #: and the entries it mentions.
    replies: int = 0
    mentioned_by: int = 0
    mentions: int = 0


class Hit(Struct, kw_only=True):
    """One recall result. `scope` is "conversation" for an entry of the conversation recalled in.

    `superseded`: a newer entry supersedes this one (as of now, even in an
    `as_of` recall). `excerpt`: the best-matching passage, for the top
    `excerpts` hits.
    `parts` (with `explain`): each pipeline stage's factor or term, the pass
    ranks and the fused score.
    """

    id: int
    type: str
    title: str
    source: str | None
    tags: list[str]
    conversation_id: int | None
    valid_from: str
    valid_to: str | None
    superseded: bool
    score: float
    scope: str
    excerpt: str | None = None
    #: When this entry was written (record time; `valid_from` is when it holds).
    recorded_at: str | None = None
    parts: dict[str, float] | None = None
    kind: Literal["entry"] = "entry"


class FactHit(Struct, kw_only=True):
    """An active fact recall found, beside the entry hits (`kind` "fact"); `sources` are the entries it was drawn from.

    `score` is BM25 over its subject, predicate and object times its
    confidence; `parts` (with `explain`) shows both.
    """

    kind: Literal["fact"] = "fact"
    id: int
    subject: str
    predicate: str
    object: str
    confidence: float
    valid_from: str
    valid_to: str | None
    sources: list[int]
    score: float
    parts: dict[str, float] | None = None


class RecallResult(Struct, kw_only=True):
    """Ranked hits; with `explain`, `expression` is the FTS5 query the conversation (or only) pass ran.

    `facts`: active facts matching the query (facts behind the evaluation
    gate), ranked by the same query analysis; off with `disable=["facts"]`.
    `note` says what the hits are not: a query with no searchable word, an LLM layer that failed.
    """

    hits: list[Hit]
    note: str | None = None
    searched: list[str] = []
    expression: str | None = None
    facts: list[FactHit] = []


class Conversation(Struct, kw_only=True):
    id: int
    title: str
    created_at: str


class ConversationList(Struct, kw_only=True):
    conversations: list[Conversation]


class TenantCreated(Struct, kw_only=True):
    name: str
    token: str


class UserCreated(Struct, kw_only=True):
    name: str
    token: str


class UserInfo(Struct, kw_only=True):
    name: str
    created_at: str
    teams: list[str] = []


class UserList(Struct, kw_only=True):
    users: list[UserInfo]


class TeamInfo(Struct, kw_only=True):
    name: str
    created_at: str
    members: list[str] = []


class TeamList(Struct, kw_only=True):
    teams: list[TeamInfo]


class Membership(Struct, kw_only=True):
    """A join or leave: `changed` is false when it was already so (joining twice is a no-op)."""

    team: str
    user: str
    member: bool
    changed: bool


class Shared(Struct, kw_only=True):
    """A thread's new visibility: `team` null is private to each entry's author; `ids` the entries that moved."""

    root_id: int
    team: str | None
    ids: list[int]


class Whoami(Struct, kw_only=True):
    tenant: str
    user: str
    teams: list[str]


class Tenant(Struct, kw_only=True):
    name: str
    created_at: str


class TenantList(Struct, kw_only=True):
    tenants: list[Tenant]
    #: Size of the whole database file: admin-only, since it moves with every tenant's writes.
    db_bytes: int = 0


class Pong(Struct, kw_only=True):
    version: str
    #: Fingerprint of the code the daemon runs (`arbiter._code`); "" from daemons older than the field.
    code: str = ""


class Status(Struct, kw_only=True):
    """Counts of what the caller sees (so two users of one tenant get different figures)."""

    version: str
    tenant: str
    user: str = ""
    teams: list[str] = []
    schema_version: int
    entries_active: int
    entries_retired: int
    relations: int
    conversations: int
    last_write: str | None
    entities: int = 0
    entity_clusters: int = 0
    #: Mean salience of active entries at the last maintenance (None before the first).
    average_salience: float | None = None
    last_maintenance: "MaintenanceReport | None" = None


class SalienceInfo(Struct, kw_only=True):
    """An entry's salience now and its inputs (`reinforce` returns it)."""

    id: int
    salience: float
    initial: float
    permanent: bool
    access_count: int
    last_access: str | None
    reinforcements: int


class EntryDetail(Entry, kw_only=True):
    """What `get` returns: the entry, and its salience now.

    Salience is not versioned: it is the value now, whatever `as_of` or `known_at` ask.
    """

    salience: SalienceInfo


class MaintainParams(Params):
    """Run maintenance now. `min_salience`: retire non-permanent entries below it (0 retires nothing)."""

    min_salience: Annotated[float, Meta(ge=0, le=1)] = 0.01


class MaintenanceReport(Struct, kw_only=True):
    """What a maintenance run did for one tenant.

    `retired`: entries retired for low salience (each with its reason
    recorded; `restore` brings one back). `fts_merged`: index pages merged
    (the daemon's idle compaction usually leaves none). `wal_checkpointed`:
    the WAL was copied back into the database file; None on PostgreSQL,
    whose WAL is the server's.
    """

    at: str
    trigger: Literal["verb", "idle"]
    salience_computed: int
    average_salience: float | None
    min_salience: float
    retired: list[int]
    entity_clusters: int
    access_log_pruned: int
    fts_merged: bool
    wal_checkpointed: bool | None
    duration_ms: float


# ---- framing -----------------------------------------------------------------


class Request(Struct, kw_only=True):
    """A JSON-RPC 2.0 request. `token` (an Arbiter extension) names the tenant."""

    jsonrpc: Literal["2.0"]
    method: str
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")
    token: str | None = None


class WireError(Struct, kw_only=True):
    code: int
    message: str
    data: dict | None = None


class Response(Struct, kw_only=True):
    """A JSON-RPC 2.0 response as the client decodes it (`result` stays raw until typed)."""

    jsonrpc: str = "2.0"
    id: int | str | None = None
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: WireError | None = None


# ---- threads, graph projection, topic clusters, briefing ---------------------


class ReplyParams(TextParams):
    """Reply in an entry's thread. Omitted `type`, `title` and `tags` come from the parent; so does its conversation."""

    parent_id: Id
    content: str
    title: Title | None = None
    type: EntryType | None = None
    tags: Tags | None = None
    source: str | None = None
    speaker: Speaker | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _no_empty_source(self)


class ThreadParams(Params):
    """Read the thread an entry belongs to (`id` may be the root or any reply)."""

    id: Id
    as_of: Time | None = None
    known_at: Time | None = None


class OpenThreadsParams(Params):
    limit: Annotated[int, Meta(ge=1, le=200)] = 20


#: The most threads one call of the MCP `open_threads` tool lists (the briefing says so where it cuts its list).
OPEN_THREADS_PER_TOOL_CALL = 100


class AroundParams(Params):
    """`k` caps each list (children, siblings, shared-tag neighbours...)."""

    id: Id
    k: Annotated[int, Meta(ge=1, le=50)] = 5


class TagCooccurrenceParams(Params):
    """With `tag`: the tags that appear with it. Without: the tenant's strongest pairs."""

    tag: Tag | None = None
    limit: Limit = 50


class TopicClusterParams(Params):
    tag: Tag
    limit: Annotated[int, Meta(ge=1, le=200)] = 10


class BriefingParams(Params):
    max_bytes: Annotated[int, Meta(ge=2048, le=65536)] = 8192


class EntryRef(Struct, kw_only=True):
    """An entry without its content, for listings."""

    id: int
    type: str
    title: str
    tags: list[str]
    recorded_at: str
    valid_to: str | None
    valid_from: str | None = None


class Thread(Struct, kw_only=True):
    """A root (whatever its state) and its replies visible now (or at `as_of`), oldest first.

    `depth` is each reply's distance from the root (1 = a direct reply).
    """

    root: Entry
    replies: list[Entry]
    depth: dict[int, int]


class ThreadSummary(Struct, kw_only=True):
    """An open thread: an active root with active replies; `last_activity` is its newest write."""

    root: EntryRef
    replies: int
    last_activity: str
    last_reply: EntryRef
    #: Who wrote the root, and the team the thread is shared with (null: private).
    author: str | None = None
    team: str | None = None


class OpenThreads(Struct, kw_only=True):
    threads: list[ThreadSummary]


class Backlink(Struct, kw_only=True):
    """One way an entry is pointed at: `reply` (a child), `mention` (`#ID` in its text) or `relation`."""

    kind: Literal["reply", "mention", "relation"]
    entry: Entry
    relation: str | None = None


class Backlinks(Struct, kw_only=True):
    id: int
    links: list[Backlink]


class TagNeighbor(Struct, kw_only=True):
    entry: Entry
    shared_tags: list[str]


class RelatedEntry(Struct, kw_only=True):
    """An entry at the other end of a relation; `direction` "out" means `entry` is the target."""

    relation: str
    direction: Literal["out", "in"]
    entry: Entry
    qualifier: str | None = None


class Around(Struct, kw_only=True):
    """An entry's neighbourhood: thread, shared tags, `#ID` references and relations."""

    entry: Entry
    parent: Entry | None
    children: list[Entry]
    siblings: list[Entry]
    shared_tags: list[TagNeighbor]
    references: list[Entry]
    mentioned_by: list[Entry]
    relations: list[RelatedEntry]
    #: Derived edges, labelled by kind with their evidence (at most `k` a kind).
    associations: list[Association] = []


class TagCount(Struct, kw_only=True):
    tag: str
    count: int


class TagPair(Struct, kw_only=True):
    a: str
    b: str
    count: int


class TagCooccurrence(Struct, kw_only=True):
    """Counts over active entries: `tags` by use, `pairs` by how often two tags share an entry."""

    tags: list[TagCount]
    pairs: list[TagPair]


class TopicCluster(Struct, kw_only=True):
    """A community of co-occurring tags. `key` is the sha256 (hex) of its sorted tags.

    `named_by`: "advisor" (just named), "cache", or "fallback" (the top three
    tags; `note` says why).
    """

    key: str
    name: str
    description: str
    named_by: Literal["advisor", "cache", "fallback"]
    tags: list[str]
    entries: int
    weight: int
    note: str | None = None


class TopicClusters(Struct, kw_only=True):
    clusters: list[TopicCluster]


class TopicClusterResult(Struct, kw_only=True):
    """A tag's cluster and its most recent active entries (those with any of its tags)."""

    cluster: TopicCluster
    entries: list[Entry]


class Briefing(Struct, kw_only=True):
    """The session briefing: markdown `text` of `bytes` UTF-8 bytes; `cut` names what was dropped to fit."""

    text: str
    bytes: int
    cut: list[str]
    clusters: list[TopicCluster]
    open_threads: list[ThreadSummary]
