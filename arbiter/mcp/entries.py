"""MCP tools for entries: write (one or many), read, search, browse, correct, retire, relate, trace."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

from arbiter.errors import InvalidParams
from arbiter.mcp._paging import (
    DEFAULT_MAX_CHARS, FRAME_CHARS, Cursor, MaxChars, Page, fit_page, page_offset, shown_before, shown_cursor,
)
from arbiter.mcp.tool import Args, AsOf, EntryId, KnownAt, Session, View, count, day, fit, flat, tool
from arbiter.model import EntityName, EntryType, Name, RelationQualifier, RelationType, Speaker, SpeakerEdit, Tags, TextParams, Time

Type = Annotated[EntryType, Meta(description=(
    "user: about the person; feedback: how they want you to work; project: work, tickets, decisions; "
    "reference: how-tos, runbooks, facts to look up; learning: lessons; context: session summaries."))]
Title = Annotated[str, Meta(description="One specific line, at most 200 bytes.")]
Content = Annotated[str, Meta(description="The memory itself (at most 64 KiB). Mention related entries as #ID.")]
TagList = Annotated[Tags, Meta(description="Up to 32 tags without spaces. Reuse the briefing's tag vocabulary.")]
Supersedes = Annotated[list[Annotated[int, Meta(ge=1)]], Meta(max_length=64, description=(
    "Entries this one replaces: they retire (still readable with `history` and `as_of`)."))]
Source = Annotated[str | None, Meta(description="Where this came from (URL, file, person).")]
ValidFrom = Annotated[Time | None, Meta(description=(
    "When this became true (RFC 3339 or epoch seconds); defaults to now. Never in the future: a plan for later "
    "is written now, its date in the content."))]
Said = Annotated[Speaker | None, Meta(description=(
    "Who said or wrote it: a person's name ('Caroline') or 'user' / 'assistant'. Recall favours the entries of "
    "a speaker the query names."))]
Everywhere = Annotated[bool, Meta(description=(
    "Write outside this session's conversation: for what holds beyond it (preferences, conventions). "
    "Entries of a conversation are searched first in that conversation and ranked lower elsewhere."))]
EXCERPT_CHARS = 400


# ---- views -------------------------------------------------------------------------


class Ref(View, kw_only=True):
    """An entry without its content: both time axes and whether it still holds.

    Valid time: `valid_from`/`valid_to` (when it held). Record time:
    `recorded_at` (first written) and `revised_at` (when the state shown was
    recorded; null while it is the state first written).
    """

    id: int
    type: str
    title: str
    tags: list[str] = []
    valid_from: str | None
    valid_to: str | None = None
    recorded_at: str | None
    revised_at: str | None = None
    superseded: bool = False

    def text(self) -> str:
        """`#42 [project] Title (2026-11-20; superseded; tags: a, b)`."""
        marks = [day(self.valid_from or self.recorded_at)]
        if self.superseded:
            marks.append("superseded")
        elif self.valid_to:
            marks.append("retired")
        if self.tags:
            marks.append("tags: " + ", ".join(self.tags))
        return f"#{self.id} [{self.type}] {self.title} ({'; '.join(m for m in marks if m)})"


def ref_fields(e) -> dict:
    """The Ref fields of any entry-shaped result (Entry, Hit, EntryRef), for a View that extends Ref."""
    superseded = getattr(e, "superseded", None)
    if superseded is None:
        superseded = bool(getattr(e, "superseded_by", None))
    return dict(
        id=e.id, type=e.type, title=e.title, tags=list(e.tags), valid_from=getattr(e, "valid_from", None),
        valid_to=e.valid_to, recorded_at=getattr(e, "recorded_at", None), revised_at=getattr(e, "revised_at", None),
        superseded=superseded,
    )


def ref(e) -> Ref:
    """A Ref of any entry-shaped result (Entry, Hit, EntryRef)."""
    return Ref(**ref_fields(e))


class EntryView(Ref, kw_only=True):
    """One entry in full."""

    content: str
    source: str | None
    conversation_id: int | None
    parent_id: int | None
    superseded_by: list[int]
    #: Who said or wrote it (a name, or "user" / "assistant").
    speaker: str | None = None

    def text(self) -> str:
        lines = [Ref.text(self)]
        if self.parent_id:
            lines.append(f"reply to #{self.parent_id}")
        if self.superseded_by:
            lines.append("superseded by " + ", ".join(f"#{i}" for i in self.superseded_by))
        if self.valid_to and not self.superseded_by:
            lines.append(f"retired {self.valid_to}")
        revised = f", revised {self.revised_at}" if self.revised_at else ""
        lines.append(f"recorded {self.recorded_at}{revised}; valid from {self.valid_from}")
        if self.source:
            lines.append(f"source: {self.source}")
        if self.speaker:
            lines.append(f"speaker: {self.speaker}")
        if self.conversation_id:
            lines.append(f"conversation {self.conversation_id}")
        return "\n".join([*lines, "", self.content])


def entry_view(e) -> EntryView:
    return EntryView(
        **ref_fields(e), content=e.content, source=e.source,
        conversation_id=e.conversation_id, parent_id=e.parent_id, superseded_by=list(e.superseded_by),
        speaker=e.speaker,
    )


class Suggestion(View):
    """A link Arbiter found worth making and leaves to you: `link source_id relation target_id`, or ignore it."""

    kind: Literal["causal", "similar"]
    source_id: int
    relation: str
    target_id: int
    reason: str


def suggestions(candidates) -> list[Suggestion]:
    """The daemon's link candidates as the tools show them."""
    return [Suggestion(kind=c.kind, source_id=c.source_id, relation=c.relation, target_id=c.target_id,
                       reason=c.reason) for c in candidates]


class SameAs(Struct, kw_only=True):
    """An entity `remember` resolved, and existing entities with names close to its own (not merged unasked)."""

    name: str
    others: list[str]


class Written(View, dict=True):
    """An entry as a write left it (`merge_as`: how this session calls `entity_merge`, kept out of the structure)."""

    merge_as = "`entity_merge`"

    verb: str
    entry: Ref
    retired: list[int] = []
    conversation_id: int | None = None
    note: str | None = None
    #: `remember`: the entities it mentions; the existing entry it duplicates (nothing written); near-duplicates.
    entities: list[str] = []
    duplicate_of: int | None = None
    similar: list[int] = []
    suggested_links: list[Suggestion] = []
    #: `auto_link`: the links made, as "#source relation #target".
    linked: list[str] = []
    #: Entities it mentions whose names are close to another's: one thing under two names? (`entity_merge`)
    possibly_same: list[SameAs] = []
    #: `remember`: the call that finds links worth making from the new entry (left out of the write: its slow part).
    follow_up: str | None = None

    def text(self) -> str:
        out = f"{self.verb} {self.entry.text()}"
        if self.retired:
            out += "; retired " + ", ".join(f"#{i}" for i in self.retired)
        if self.conversation_id:
            out += f"; conversation {self.conversation_id}"
        if self.entities:
            out += "\nentities: " + ", ".join(self.entities)
        for x in self.possibly_same:
            out += (f"\nentity {x.name!r} may be the same as " + ", ".join(repr(n) for n in x.others)
                    + f": if it is, {self.merge_as} them")
        if self.similar:
            out += ("\nnearly the same as " + ", ".join(f"#{i}" for i in self.similar)
                    + ": reply to, link or supersede it rather than keep both")
        out += f"\nnote: {self.note}" if self.note else ""
        if self.linked:
            out += "\nLinked (judged by Arbiter's model): " + ", ".join(self.linked)
        if self.suggested_links:
            out += ("\nPossible links (judge each: if it is true, call `link` with it; otherwise ignore it):"
                    + "".join(f"\n- link {c.source_id} {c.relation} {c.target_id}: {c.reason}"
                              for c in self.suggested_links))
        if self.follow_up:
            out += f"\n{self.follow_up}"
        return out


class Hit(Ref, kw_only=True):
    """A recall hit: whether it came from the conversation searched first, an excerpt. Hits come best first.

    No score: the daemon's fused score has no scale a model could read across calls (a browse's hits have none,
    a conversation's pass and the tenant's differ), so the order says it.
    """

    scope: Literal["conversation", "tenant"]
    conversation_id: int | None = None
    excerpt: str | None = None


class RecalledFact(Struct, kw_only=True):
    """An active fact matching the query (facts behind the evaluation gate); `source_ids` are its entries."""

    id: int
    subject: str
    predicate: str
    object: str
    confidence: float
    valid_from: str
    source_ids: list[int]


class Recalled(Page):
    query: str
    conversation_id: int | None
    hits: list[Hit]
    note: str | None = None
    facts: list[RecalledFact] = []

    def text(self) -> str:
        where = f" (conversation #{self.conversation_id} first)" if self.conversation_id else ""
        lines = []
        if self.facts:
            lines.append("Facts (true now):")
            lines += [_fact_line(f) for f in self.facts]
        lines.append(f"{count(len(self.hits), 'hit')} for {self.query!r}{where}:")
        lines += self._lines  # as `fit_page` rendered them
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines) + self.footer()


def _fact_line(f: RecalledFact) -> str:
    sources = ", from " + ", ".join(f"#{i}" for i in f.source_ids) if f.source_ids else ""
    return f"- fact #{f.id} {f.subject} {f.predicate} {f.object} ({f.confidence:g}, since {f.valid_from[:10]}{sources})"


def _hit_lines(h: Hit) -> list[str]:
    lines = [f"- {Ref.text(h)}"]
    if h.excerpt:
        lines.append("  " + h.excerpt)
    return lines


class Listed(Page):
    entries: list[Hit]

    def text(self) -> str:
        lines = [f"{count(len(self.entries), 'entry', 'entries')}, newest first:", *self._lines]
        if not self.entries:
            lines.append("(none)")
        return "\n".join(lines) + self.footer()


# ---- writing -------------------------------------------------------------------------


class RememberArgs(Args, TextParams):
    type: Type
    title: Title
    content: Content
    tags: TagList = []
    supersedes_ids: Supersedes = []
    source: Source = None
    valid_from: ValidFrom = None
    speaker: Said = None
    everywhere: Everywhere = False
    entities: Annotated[list[EntityName], Meta(max_length=64, description=(
        "People, projects, tools... this entry is about, beyond those named in its text (found automatically)."
    ))] = []
    permanent: Annotated[bool, Meta(description="Never let this entry fade or be retired for low salience.")] = False
    allow_duplicate: Annotated[bool, Meta(description=(
        "Write even if an active entry of this type already has exactly this content."
    ))] = False
    team: Annotated[Name | None, Meta(description=(
        "Share it at once with this team (one you are in); default: private to you. A reply needs none: "
        "it is seen by whoever sees its thread."
    ))] = None
    auto_link: Annotated[bool, Meta(description=(
        "Let Arbiter's own model judge the links it suggests and make the ones it confirms (needs an LLM key on "
        "the daemon; the result says what was linked, or why nothing was). Leave false to judge them yourself."
    ))] = False


def _scope(s: Session, everywhere: bool) -> dict:
    return {} if everywhere else s.write_scope()


@tool(RememberArgs, Written, writes=True)
def remember(s: Session, a: RememberArgs) -> Written:
    """Store a NEW memory entry.

    Read before you write: `recall` the key words first (and check the
    briefing's topic map and open threads). If the memory already holds
    this subject, do not duplicate it: use `reply` to add to its thread.
    To replace a fact that changed, remember the new one with
    `supersedes_ids` (the old one retires and stays in history). Reuse
    existing tags. Several entries at once: `remember_many`.
    """
    e = s.daemon.remember(type=a.type, title=a.title, content=a.content, tags=a.tags, source=a.source,
                          supersedes_ids=a.supersedes_ids, valid_from=a.valid_from, speaker=a.speaker,
                          **_scope(s, a.everywhere), entities=a.entities, permanent=a.permanent,
                          allow_duplicate=a.allow_duplicate, team=a.team, auto_link=a.auto_link,
                          # Finding link candidates was most of a write's time (~10 ms of 14): the model asks for them
                          # when it wants them (`suggest_links`), as the answer tells it.
                          candidates=False)
    if e.duplicate_of is not None:
        s.wrote = False
        return Written(verb="Already remembered as", entry=ref(e), conversation_id=e.conversation_id,
                       entities=[m.name for m in e.entities], duplicate_of=e.duplicate_of)
    conversation = None if a.everywhere else e.conversation_id
    s.started(conversation)
    s.changed(e.id, *a.supersedes_ids, *(r.source_id if r.target_id == e.id else r.target_id for r in e.linked))
    made = {(r.source_id, r.relation, r.target_id) for r in e.linked}
    suggested = [c for c in suggestions(e.candidates) if (c.source_id, c.relation, c.target_id) not in made]
    same = [SameAs(name=m.name, others=[o.name for o in m.possibly_same_as]) for m in e.entities if m.possibly_same_as]
    out = Written(verb="Remembered", entry=ref(e), retired=a.supersedes_ids, conversation_id=conversation,
                   note=e.note, entities=[m.name for m in e.entities], similar=e.similar, possibly_same=same,
                   suggested_links=suggested, linked=[f"#{r.source_id} {r.relation} #{r.target_id}" for r in e.linked],
                   follow_up=None if a.auto_link else f"links worth making from it: {s.named('suggest_links')} "
                                                      f"with id {e.id}")
    out.merge_as = s.named("entity_merge")
    return out


class Item(TextParams):
    type: Type
    title: Title
    content: Content
    tags: TagList = []
    supersedes_ids: Supersedes = []
    source: Source = None
    valid_from: ValidFrom = None
    speaker: Said = None


class RememberManyArgs(Args):
    entries: Annotated[list[Item], Meta(min_length=1, max_length=10_000, description=(
        "The entries, in order: one transaction, all or nothing."))]
    everywhere: Everywhere = False


class WrittenMany(View):
    ids: list[int]
    conversation_id: int | None

    def text(self) -> str:
        span = f"#{self.ids[0]}" if len(self.ids) == 1 else f"#{self.ids[0]} … #{self.ids[-1]}"
        where = f" in conversation {self.conversation_id}" if self.conversation_id else ""
        return f"Remembered {count(len(self.ids), 'entry', 'entries')}{where}: {span}"


@tool(RememberManyArgs, WrittenMany, writes=True)
def remember_many(s: Session, a: RememberManyArgs) -> WrittenMany:
    """Store many NEW entries in one call (imports, a batch of notes, a session's findings).

    All are written or none; returns their ids in order. Far faster than
    one `remember` per entry. Each entry takes `remember`'s type, title,
    content, tags, supersedes_ids, source, valid_from and speaker; unlike
    `remember`, a batch is not checked for duplicates: `recall` first.
    """
    scope = _scope(s, a.everywhere)
    items = [{**_fields(i), "conversation_id": scope.get("conversation_id")} for i in a.entries]
    done = s.daemon.remember_batch(items, new_conversation=scope.get("new_conversation"))
    conversation = scope.get("conversation_id") or done.conversation_id
    s.started(conversation)
    s.changed(*done.ids, *(i for item in a.entries for i in item.supersedes_ids))
    return WrittenMany(ids=done.ids, conversation_id=conversation)


def _fields(item: Item) -> dict:
    return {f: getattr(item, f) for f in item.__struct_fields__ if getattr(item, f) is not None}


class UpdateArgs(Args, TextParams):
    id: EntryId
    type: Type | None = None
    title: Title | None = None
    content: Content | None = None
    tags: TagList | None = None
    source: Source = None
    speaker: Annotated[SpeakerEdit | None, Meta(description=(
        "Who said or wrote it, corrected: a person's name or 'user' / 'assistant'; '' removes it."))] = None


@tool(UpdateArgs, Written, writes=True)
def update(s: Session, a: UpdateArgs) -> Written:
    """Correct a mistake in an entry in place (a typo, a wrong tag); omitted fields keep their value.

    Only for your own recent slip. Never update another author's memory:
    reply to it instead. When a fact has changed (it was true, now it is
    not), do not update: remember the new fact with `supersedes_ids`, so
    the old one stays readable in history.
    """
    named = ("type", "title", "content", "tags", "source", "speaker")
    fields = {f: getattr(a, f) for f in named if getattr(a, f) is not None}
    if not fields:
        raise InvalidParams.at("arguments", f"give at least one of {', '.join(named)}")
    e = s.daemon.update(a.id, **fields)
    s.changed(e.id)
    return Written(verb="Updated", entry=ref(e))


class IdArgs(Args):
    id: EntryId


class Forgot(View):
    id: int
    forgotten: bool
    #: Your replies below it, retired with it.
    also: list[int] = []

    def text(self) -> str:
        if not self.forgotten:
            return f"#{self.id} was already retired."
        also = ", and your replies under it: " + ", ".join(f"#{i}" for i in self.also) if self.also else ""
        return f"Retired #{self.id}{also}."


@tool(IdArgs, Forgot, writes=True)
def forget(s: Session, a: IdArgs) -> Forgot:
    """Retire an entry you wrote that is wrong or no longer true: it leaves searches but stays in history.

    Your own replies below it retire with it (listed in `also`); a
    teammate's stay. Another author's entry is refused: reply to it. When a
    newer entry replaces it, use `remember` with `supersedes_ids` instead,
    so the replacement is recorded.
    """
    done = s.daemon.forget_with_replies(a.id)
    s.wrote = done.forgotten
    s.changed(a.id, *done.also)
    return Forgot(id=a.id, forgotten=done.forgotten, also=done.also)


class Restored(View):
    id: int
    restored: bool

    def text(self) -> str:
        return f"Restored #{self.id}: it holds again." if self.restored else f"#{self.id} was not retired."


@tool(IdArgs, Restored, writes=True)
def restore(s: Session, a: IdArgs) -> Restored:
    """Bring back an entry retired by mistake (with `forget`): it holds again, as if never retired.

    Only this entry: replies `forget` retired with it (its `also`) stay
    retired until each is restored. An entry retired because a newer one supersedes it stays retired while
    that link stands (the error names it): the newer entry is the current
    fact. Only if the replacement itself was the mistake, `unlink` it first.
    """
    done = s.daemon.restore(a.id)
    s.wrote = done
    s.changed(a.id)
    return Restored(id=a.id, restored=done)


# ---- relations -------------------------------------------------------------------------


class LinkArgs(Args):
    source_id: EntryId
    relation: Annotated[RelationType, Meta(description=(
        "supersedes: source replaces target (target retires); contradicts: they disagree, both stay; "
        "refines: source details target; supports: source is evidence for target; relates_to: same subject; "
        "causes: source is a cause of target (confirm a causal link `remember` suggested)."))]
    target_id: EntryId
    qualifier: Annotated[RelationQualifier | None, Meta(description=(
        "Only with causes: enables (source made target possible) or prevents (source kept target from "
        "happening, or held it back); leave it out for a direct cause."))] = None


class RelationView(View):
    id: int
    source_id: int
    relation: str
    target_id: int
    created_at: str
    qualifier: str | None = None

    def text(self) -> str:
        label = f"{self.relation} ({self.qualifier})" if self.qualifier else self.relation
        return f"#{self.source_id} {label} #{self.target_id} (relation {self.id}, {day(self.created_at)})"


@tool(LinkArgs, RelationView, writes=True)
def link(s: Session, a: LinkArgs) -> RelationView:
    """Relate two existing entries: SOURCE relation TARGET.

    Link whenever you extend or correct something already stored, after
    `recall`/`get` has confirmed both ids. `supersedes` retires the target.
    """
    r = s.daemon.link(a.source_id, a.relation, a.target_id, qualifier=a.qualifier)
    s.changed(a.source_id, a.target_id)
    return RelationView(id=r.id, source_id=r.source_id, relation=r.relation, target_id=r.target_id,
                        created_at=r.created_at, qualifier=r.qualifier)


class Unlinked(View):
    source_id: int
    relation: str
    target_id: int
    removed: bool

    def text(self) -> str:
        return f"Removed #{self.source_id} {self.relation} #{self.target_id}."


class UnlinkArgs(Args):
    source_id: EntryId
    relation: Annotated[RelationType, Meta(description="The relation to remove, as `link` made it.")]
    target_id: EntryId


@tool(UnlinkArgs, Unlinked, writes=True)
def unlink(s: Session, a: UnlinkArgs) -> Unlinked:
    """Remove a relation added by mistake. What it already did stays: a target it retired stays retired."""
    removed = s.daemon.unlink(a.source_id, a.relation, a.target_id)
    s.changed(a.source_id, a.target_id)
    return Unlinked(source_id=a.source_id, relation=a.relation, target_id=a.target_id, removed=removed)


# ---- reading -------------------------------------------------------------------------


class GetArgs(Args):
    id: EntryId
    as_of: AsOf = None
    known_at: KnownAt = None


@tool(GetArgs, EntryView)
def get(s: Session, a: GetArgs) -> EntryView:
    """Read one entry in full: content, tags, both time axes, thread parent, what superseded it."""
    return entry_view(s.daemon.get(a.id, as_of=a.as_of, known_at=a.known_at))


class RevisionView(View):
    """One recorded state of an entry: held over [recorded_from, recorded_to); `change` began it."""

    id: int
    recorded_from: str
    recorded_to: str | None
    change: str
    fields: list[str]
    title: str
    excerpt: str

    def text(self) -> str:
        changed = f" ({', '.join(self.fields)})" if self.fields else ""
        until = f" until {self.recorded_to}" if self.recorded_to else " (current)"
        return f"#{self.id} {self.change}{changed} at {self.recorded_from}{until}: {self.title}: {self.excerpt}"


class HistoryArgs(Args):
    id: EntryId
    known_at: KnownAt = None
    max_chars: MaxChars = DEFAULT_MAX_CHARS
    cursor: Cursor = None


class HistoryView(Page):
    """A page of an entry's history: the chain's entries, the relations joining them, then recorded states."""

    entries: list[Ref]
    relations: list[RelationView]
    revisions: list[RevisionView]
    #: How many entries, relations and recorded states the whole history holds (a page shows a stretch of them).
    total: int

    def text(self) -> str:
        return "\n".join(self._lines) + self.footer()


@tool(HistoryArgs, HistoryView)
def history(s: Session, a: HistoryArgs) -> HistoryView:
    """The supersession chain through an entry, both ways, oldest first (what it replaced and what
    replaced it), and every recorded state of each: what was written, corrected, retired, restored, when.

    A long history comes in pages that fit `max_chars`: page with `cursor` while `more` is true.
    """
    h = s.daemon.history(a.id, known_at=a.known_at)
    items: list = [ref(e) for e in h.entries]
    items += [RelationView(id=r.id, source_id=r.source_id, relation=r.relation, target_id=r.target_id,
                           created_at=r.created_at, qualifier=r.qualifier) for r in h.relations]
    items += [RevisionView(id=r.entry.id, recorded_from=r.recorded_from, recorded_to=r.recorded_to, change=r.change,
                           fields=r.fields, title=r.entry.title, excerpt=flat(r.entry.content, 160)) for r in h.revisions]
    # Not a position: an entry that joins the chain between pages (a new supersede) would shift the rest by one.
    scope = ("history", a.id)
    seen = shown_before(s, a.cursor, scope, again="read it again")
    rest = [x for x in items if _history_key(x) not in seen]
    if a.cursor is not None and not rest:  # as thread's: a purge may have shortened the chain since
        raise InvalidParams.at("cursor", "past the history's end: read it again without cursor")
    start = len(items) - len(rest)
    blocks, kind = [], None
    for x in rest:
        block = []
        if type(x) is not kind:  # each kind's heading, where its first line on this page is
            kind = type(x)
            block.append({Ref: f"{count(len(h.entries), 'entry', 'entries')} in the chain, oldest first:",
                          RelationView: "Relations along the chain:",
                          RevisionView: "Recorded states, oldest first:"}[kind])
        block.append(f"{'  ' if kind is RelationView else '- '}{x.text()}")
        blocks.append(block)
    shown = fit(blocks, a.max_chars - FRAME_CHARS)
    page = rest[:shown]
    more = shown < len(rest)
    out = HistoryView(entries=[x for x in page if type(x) is Ref], total=len(items),
                      relations=[x for x in page if type(x) is RelationView],
                      revisions=[x for x in page if type(x) is RevisionView], more=more,
                      next_cursor=shown_cursor(s, scope, seen | {_history_key(x) for x in page}) if more else None)
    head = [f"(items {start + 1}-{start + shown} of {len(items)})"] if start or more else []
    out._lines = head + [line for block in blocks[:shown] for line in block]
    return out


def _history_key(item) -> tuple:
    """What names one line of a history across pages: an entry, a relation, or an entry's state by its start."""
    if type(item) is RevisionView:
        return ("state", item.id, item.recorded_from)
    return ("relation" if type(item) is RelationView else "entry", item.id)


class RecallArgs(Args):
    query: Annotated[str, Meta(max_length=4096, description=(
        "The question as it stands, or key words. Keep who it is about ('the user', 'the assistant', a name), "
        "what it asks for ('how many', 'when') and any date it names: they steer the ranking."))]
    conversation_id: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description=(
        "Search this conversation first, then the rest. Defaults to this session's conversation."))] = None
    everywhere: Annotated[bool, Meta(description="Rank the whole memory alike, no conversation first.")] = False
    types: Annotated[list[EntryType], Meta(description="Prefer these entry types.")] = []
    tag: Annotated[str | None, Meta(description="Prefer entries with this tag.")] = None
    limit: Annotated[int, Meta(ge=1, le=50, description="Hits per page.")] = 10
    max_chars: MaxChars = DEFAULT_MAX_CHARS
    cursor: Cursor = None
    as_of: AsOf = None
    known_at: KnownAt = None
    graph: Annotated[bool, Meta(description=(
        "Also follow the memory's associations from the top hits (causes for why-questions, neighbours in time "
        "for when-questions, shared names for who/what). Slower; use when plain recall missed the context."))] = False


#: The daemon ranks at most this many hits for one query; pages stop there.
RECALL_DEPTH = 200


@tool(RecallArgs, Recalled)
def recall(s: Session, a: RecallArgs) -> Recalled:
    """Search memory by words. Call it BEFORE writing anything that may already be stored, and
    whenever the answer may be in memory.

    Each hit has an excerpt around the matched words, its type, tags, dates
    and whether it was superseded; read one in full with `get`. Active facts
    that match come first, under `facts`: they are what is true now. This
    session's conversation is searched first (`everywhere` for the whole
    memory alike). Page with `cursor` while `more` is true.

    Ask the question as it stands ("What did the user buy for the user's
    sister?"): who it is about picks whose words rank first (the user's own,
    the assistant's, a named person's), "how many" favours text with a
    figure, "when" text that says when, and a date it names ("on March 3",
    "in June") entries from then. Stripped to bare key words it loses
    those. Matching is by words, not meaning. When the hits miss, search
    again with the words a stored answer would use rather than synonyms of
    the question: for "what does Ann do with her family?", try "Ann kids
    camping museum".
    """
    scope = ("recall", a.query)
    seen = shown_before(s, a.cursor, scope, again="search again")
    conversation = None if a.everywhere else (a.conversation_id or s.conversation_id)
    want = min(RECALL_DEPTH, len(seen) + a.limit + 1)
    res = s.daemon.recall(a.query, conversation_id=conversation, types=a.types or None, tag=a.tag,
                          as_of=a.as_of, known_at=a.known_at, limit=want, excerpts=want, graph=a.graph)
    if conversation is not None and not a.query.strip() and len(res.hits) < want:
        # An empty query browses, and a browse keeps to the conversation it is given; here, as a search does,
        # the conversation comes first and the newest of the whole memory after it.
        rest = s.daemon.recall(a.query, types=a.types or None, tag=a.tag, as_of=a.as_of, known_at=a.known_at,
                               limit=want, excerpts=want)
        first = {h.id for h in res.hits}
        res.hits += [h for h in rest.hits if h.id not in first][: want - len(res.hits)]
    unseen = [h for h in res.hits if h.id not in seen]
    page = [_hit(h) for h in unseen[:a.limit]]
    facts = [RecalledFact(id=f.id, subject=f.subject, predicate=f.predicate, object=f.object, confidence=f.confidence,
                          valid_from=f.valid_from, source_ids=f.sources) for f in res.facts] if a.cursor is None else []
    out = Recalled(query=a.query, conversation_id=conversation, hits=page, note=res.note, more=False,
                   next_cursor=None, facts=facts)
    # The lines around the hits count too: the heading and footer, the facts under their heading, the note.
    facts_chars = 18 + sum(len(_fact_line(f)) + 1 for f in facts) if facts else 0
    note_chars = len(res.note) + 7 if res.note else 0
    shown = fit_page(out, map(_hit_lines, page), len(a.query) + 80 + facts_chars + note_chars, a.max_chars)
    out.hits = page[:shown]
    out.more = len(unseen) > shown
    out.next_cursor = shown_cursor(s, scope, seen | {h.id for h in out.hits}) if out.more else None
    return out


def _hit(h) -> Hit:
    # Field by field rather than through ref_fields: this runs ten times per recall, on its hot path.
    excerpt = h.excerpt
    if excerpt and (len(excerpt) > EXCERPT_CHARS or "\n" in excerpt):  # the daemon's are one line already
        excerpt = flat(excerpt, EXCERPT_CHARS)
    return Hit(id=h.id, type=h.type, title=h.title, tags=h.tags, valid_from=h.valid_from, valid_to=h.valid_to,
               recorded_at=h.recorded_at, superseded=h.superseded, scope=h.scope,
               conversation_id=h.conversation_id, excerpt=excerpt or None)


class ListArgs(Args):
    types: Annotated[list[EntryType], Meta(description="Only these types.")] = []
    tag: Annotated[str | None, Meta(description="Only entries with this tag.")] = None
    conversation_id: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="Only this conversation's entries.")] = None
    limit: Annotated[int, Meta(ge=1, le=100, description="Entries per page.")] = 20
    max_chars: MaxChars = DEFAULT_MAX_CHARS
    cursor: Cursor = None
    as_of: AsOf = None
    known_at: KnownAt = None


@tool(ListArgs, Listed, name="list")
def list_(s: Session, a: ListArgs) -> Listed:
    """Browse entries newest first with hard filters (types, tag, conversation), each with its opening
    lines. Page with `cursor` while `more` is true. For a topic, prefer `topic_cluster`; to search, `recall`."""
    before = page_offset(a.cursor) or None
    items = s.daemon.list(types=a.types or None, tag=a.tag, conversation_id=a.conversation_id, as_of=a.as_of,
                          known_at=a.known_at, limit=a.limit + 1, before_id=before)
    page = [Hit(**ref_fields(e), scope="tenant",
                conversation_id=e.conversation_id, excerpt=flat(e.content, 200)) for e in items[:a.limit]]
    out = Listed(entries=page, more=False, next_cursor=None)
    shown = fit_page(out, map(_hit_lines, page), 40, a.max_chars)
    out.entries = page[:shown]
    out.more = len(items) > shown
    out.next_cursor = str(page[shown - 1].id) if out.more else None
    return out


# ---- the session's conversation ----------------------------------------------------------


class ConversationArgs(Args):
    id: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description="Resume this conversation.")] = None
    title: Annotated[Annotated[str, Meta(min_length=1, max_length=200)] | None, Meta(
        description="Start a new one with this title.")] = None


class ConversationView(View):
    id: int | None
    title: str | None
    created_at: str | None

    def text(self) -> str:
        if self.id is None:
            return "This session has no conversation yet: the first write starts one."
        return f"This session's conversation: #{self.id} {self.title!r} (since {self.created_at})."


@tool(ConversationArgs, ConversationView, writes=True)
def conversation(s: Session, a: ConversationArgs) -> ConversationView:
    """This session's conversation: the scope your writes go to and that `recall` searches first.

    With `title`, start a new one; with `id`, resume an earlier one (its
    entries come first again; `conversations` lists them); with neither,
    say which one is current.
    """
    if a.id is not None and a.title is not None:
        raise InvalidParams.at("arguments", "give id (resume) or title (start), not both")
    if a.title is not None:
        c = s.daemon.conversation_create(a.title)
        s.conversation_id = c.id
        return ConversationView(id=c.id, title=c.title, created_at=c.created_at)
    s.wrote = False  # resuming or asking changes nothing
    wanted = a.id if a.id is not None else s.conversation_id
    if wanted is None:
        return ConversationView(id=None, title=None, created_at=None)
    c = s.daemon.conversation_get(wanted)
    s.conversation_id = c.id
    return ConversationView(id=c.id, title=c.title, created_at=c.created_at)


class ConversationsArgs(Args):
    limit: Annotated[int, Meta(ge=1, le=100, description="At most this many, newest first.")] = 20


class ConversationLine(Struct, kw_only=True):
    id: int
    title: str
    created_at: str


class ConversationsView(View):
    conversations: list[ConversationLine]
    #: Older conversations exist beyond `limit`.
    more: bool
    current: int | None = None

    def text(self) -> str:
        lines = [f"{count(len(self.conversations), 'conversation')}, newest first:"]
        lines += [f"- #{c.id} {c.title!r} (since {c.created_at[:16].replace('T', ' ')})"
                  + (" (this session's)" if c.id == self.current else "") for c in self.conversations]
        if not self.conversations:
            lines.append("(none)")
        if self.more:
            lines.append("more: older ones exist (raise limit)")
        return "\n".join(lines)


@tool(ConversationsArgs, ConversationsView)
def conversations(s: Session, a: ConversationsArgs) -> ConversationsView:
    """The conversations you can resume, newest first: to continue an earlier session's work,
    find it here and pass its id to `conversation`."""
    found = s.daemon.conversation_list(a.limit + 1)
    return ConversationsView(
        conversations=[ConversationLine(id=c.id, title=c.title, created_at=c.created_at) for c in found[:a.limit]],
        more=len(found) > a.limit, current=s.conversation_id)
