"""MCP tools for threads, neighbourhoods, topics and the briefing."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from arbiter._time import parse_time
from arbiter.mcp import session_note
from arbiter.errors import InvalidParams
from arbiter.mcp._paging import DEFAULT_MAX_CHARS, FRAME_CHARS, Cursor, MaxChars, Page
from arbiter.mcp.entries import (Content, EntryView, Ref, Said, Source, TagList, Title, Type, Written, entry_view, ref,
                                 ref_fields)
from arbiter.mcp.tool import Args, AsOf, EntryId, KnownAt, NoArgs, Session, View, count, cut, fit, flat, tool
from arbiter.model import OPEN_THREADS_PER_TOOL_CALL, TextParams


class ReplyArgs(Args, TextParams):
    parent_id: Annotated[int, Meta(ge=1, description="The entry (or thread) to reply to.")]
    content: Content
    title: Annotated[Title | None, Meta(description="Defaults to 'Re: <parent title>'.")] = None
    type: Annotated[Type | None, Meta(description="Defaults to the parent's type.")] = None
    tags: Annotated[TagList | None, Meta(description="Defaults to the parent's tags.")] = None
    speaker: Said = None
    source: Source = None


@tool(ReplyArgs, Written, writes=True)
def reply(s: Session, a: ReplyArgs) -> Written:
    """Continue a thread: add an entry under an existing one.

    Prefer this over `remember` whenever the new information follows up on
    something already stored (a status update, an answer, a fix, a
    comment), above all on the open threads listed in the briefing, and
    whenever the entry is another author's: never update it, reply. Type,
    title, tags and conversation default to the parent's.
    """
    e = s.daemon.reply(a.parent_id, a.content, title=a.title, type=a.type, tags=a.tags, speaker=a.speaker,
                       source=a.source)
    s.changed(e.id, a.parent_id)
    return Written(verb=f"Replied under #{a.parent_id}:", entry=ref(e), conversation_id=e.conversation_id)


class ThreadArgs(Args):
    id: EntryId
    as_of: AsOf = None
    known_at: KnownAt = None
    max_chars: MaxChars = DEFAULT_MAX_CHARS
    cursor: Cursor = None


class Reply(Ref, kw_only=True):
    parent_id: int
    depth: int
    excerpt: str


class ThreadView(Page):
    """A page of a thread: its root in full on the first page, then replies oldest first."""

    root_id: int
    replies: list[Reply]
    root: EntryView | None = None
    #: What was cut to fit `max_chars`, and how to read it whole.
    note: str | None = None

    def text(self) -> str:
        return "\n".join(self._lines) + self.footer()


def _reply_lines(r: Reply) -> list[str]:
    return [f"{'  ' * (r.depth - 1)}- {Ref.text(r)} reply to #{r.parent_id}", f"{'  ' * r.depth}{r.excerpt}"]


@tool(ThreadArgs, ThreadView)
def thread(s: Session, a: ThreadArgs) -> ThreadView:
    """Read a whole thread (root and replies, oldest first) from any entry in it. Read it before replying.

    A long thread comes in pages that fit `max_chars`: page with `cursor` while `more` is true.
    """
    t = s.daemon.thread(a.id, as_of=a.as_of, known_at=a.known_at)
    replies = [Reply(**ref_fields(r), parent_id=r.parent_id,
                     depth=t.depth[r.id], excerpt=flat(r.content, 240)) for r in t.replies]
    after = _thread_cursor(a.cursor)
    start = 0 if after is None else next(
        (i for i, r in enumerate(replies) if (parse_time(r.recorded_at), r.id) > after), len(replies))
    if a.cursor is not None and start >= len(replies):
        raise InvalidParams.at("cursor", "past the thread's end (it lost replies since): read it again without cursor")
    out = ThreadView(root_id=t.root.id, replies=[], more=False, next_cursor=None)
    budget, lines = a.max_chars - FRAME_CHARS, []
    if a.cursor is None:  # the first page: the root, cut to fit if it must be
        out.root = entry_view(t.root)
        room = budget // 2 if replies else budget  # with replies, the root takes at most half the page
        over = len("Root: " + out.root.text()) - room
        if over > 0:
            whole = len(out.root.content)
            out.root.content = cut(out.root.content, whole - over)
            out.note = (f"the root's content is cut to {len(out.root.content)} of {whole} characters: "
                        f"`get` {t.root.id} reads it whole")
        lines = ["Root: " + out.root.text(), *([f"note: {out.note}"] if out.note else []), ""]
    blocks = [_reply_lines(r) for r in replies[start:]]
    shown = fit(blocks, budget - sum(len(line) + 1 for line in lines), at_least=0 if a.cursor is None else 1)
    out.replies = replies[start:start + shown]
    if start or shown < len(replies):
        lines.append(f"Replies {start + 1}-{start + shown} of {len(replies)}:" if shown else
                     f"{count(len(replies), 'reply', 'replies')} (on the next page):")
    else:
        lines.append(f"{count(len(replies), 'reply', 'replies')}:")
    out._lines = lines + [line for block in blocks[:shown] for line in block]
    out.more = start + shown < len(replies)
    if out.more:  # where this page ended, in the thread's order: replies retired before it shift nothing
        last = out.replies[-1] if out.replies else None
        out.next_cursor = f"{parse_time(last.recorded_at)}.{last.id}" if last else "0.0"
    return out


def _thread_cursor(cursor: str | None) -> tuple[int, int] | None:
    """The (record time, id) of the last reply the previous page showed, from its `next_cursor`."""
    if cursor is None:
        return None
    at, dot, after = cursor.partition(".")
    if not (dot and at.isdigit() and after.isdigit()):
        raise InvalidParams.at("cursor", "not a cursor this tool returned")
    return int(at), int(after)


class AroundArgs(Args):
    id: EntryId
    k: Annotated[int, Meta(ge=1, le=20, description="Entries per list.")] = 5


class Neighbour(Ref, kw_only=True):
    shared_tags: list[str]


class Related(View):
    relation: str
    direction: Literal["out", "in"]
    entry: Ref
    qualifier: str | None = None


class AroundView(View):
    entry: EntryView
    parent: Ref | None
    children: list[Ref]
    siblings: list[Ref]
    shared_tags: list[Neighbour]
    references: list[Ref]
    mentioned_by: list[Ref]
    relations: list[Related]

    def text(self) -> str:
        parts = [self.entry.text(), "", "Parent: " + (self.parent.text() if self.parent else "none (a thread root)")]
        for title, items in (("Children (replies):", self.children), ("Siblings:", self.siblings),
                             ("References (#ID in its text):", self.references), ("Mentioned by:", self.mentioned_by)):
            parts.append(_listing(title, items))
        parts.append("Sharing tags:" + "".join(
            f"\n- {Ref.text(n)} shares {', '.join(n.shared_tags)}" for n in self.shared_tags) + (
            "" if self.shared_tags else "\n(none)"))
        parts.append("Relations:" + "".join(
            f"\n- this {_label(r)} {r.entry.text()}" if r.direction == "out" else f"\n- {r.entry.text()} {_label(r)} this"
            for r in self.relations) + ("" if self.relations else "\n(none)"))
        return "\n".join(parts)


def _label(r: Related) -> str:
    return f"{r.relation} ({r.qualifier})" if r.qualifier else r.relation


def _listing(title: str, items: list[Ref]) -> str:
    return "\n".join([title, *(f"- {i.text()}" for i in items)] if items else [title, "(none)"])


@tool(AroundArgs, AroundView)
def around(s: Session, a: AroundArgs) -> AroundView:
    """An entry's neighbourhood in one call: parent, children, siblings, entries sharing the most
    tags, #ID references both ways and explicit relations. Use it before replying to, superseding or
    forgetting an entry."""
    x = s.daemon.around(a.id, k=a.k)
    return AroundView(
        entry=entry_view(x.entry), parent=ref(x.parent) if x.parent else None,
        children=[ref(e) for e in x.children], siblings=[ref(e) for e in x.siblings],
        shared_tags=[Neighbour(**ref_fields(n.entry),
                               shared_tags=n.shared_tags) for n in x.shared_tags],
        references=[ref(e) for e in x.references], mentioned_by=[ref(e) for e in x.mentioned_by],
        relations=[Related(relation=r.relation, direction=r.direction, entry=ref(r.entry), qualifier=r.qualifier)
                   for r in x.relations],
    )


class IdArgs(Args):
    id: EntryId


class Backlink(View):
    kind: Literal["reply", "mention", "relation"]
    relation: str | None
    entry: Ref


class BacklinksView(View):
    id: int
    links: list[Backlink]

    def text(self) -> str:
        lines = [f"{count(len(self.links), 'backlink')} to #{self.id}:"]
        for b in self.links:
            kind = f"relation {b.relation}" if b.kind == "relation" else b.kind
            lines.append(f"- {kind}: {b.entry.text()}")
        return "\n".join(lines)


@tool(IdArgs, BacklinksView)
def backlinks(s: Session, a: IdArgs) -> BacklinksView:
    """What points at an entry: replies, entries mentioning #ID, incoming relations. Check it before
    forgetting or superseding an entry."""
    b = s.daemon.backlinks(a.id)
    return BacklinksView(id=a.id, links=[Backlink(kind=x.kind, relation=x.relation, entry=ref(x.entry)) for x in b.links])


class DensityView(View):
    id: int
    in_degree: int
    out_degree: int
    relations: list[str]
    reach_2hop: int

    def text(self) -> str:
        kinds = ", ".join(self.relations) or "none"
        return (f"#{self.id}: {self.in_degree} incoming, {self.out_degree} outgoing ({kinds}); "
                f"{self.reach_2hop} entries within 2 hops")


@tool(IdArgs, DensityView)
def density(s: Session, a: IdArgs) -> DensityView:
    """How connected an entry is: incoming and outgoing relations, their kinds, entries within two
    hops. A dense entry is central: change it with care."""
    d = s.daemon.density(a.id)
    return DensityView(id=d.id, in_degree=d.in_degree, out_degree=d.out_degree, relations=d.relations,
                       reach_2hop=d.reach_2hop)


class TopicArgs(Args):
    tag: Annotated[str, Meta(min_length=1, max_length=64, description=(
        "Any tag of the topic (see the briefing's topic map)."))]
    limit: Annotated[int, Meta(ge=1, le=50, description="Recent entries of the topic to list.")] = 10


class Recent(Ref, kw_only=True):
    excerpt: str


class TopicView(View):
    name: str
    description: str
    tags: list[str]
    size: int
    recent: list[Recent]

    def text(self) -> str:
        lines = [f"Topic {self.name!r} ({count(self.size, 'entry', 'entries')}): {self.description}", f"Tags: {', '.join(self.tags)}",
                 "Most recent:"]
        for r in self.recent:
            lines += [f"- {Ref.text(r)}", f"  {r.excerpt}"]
        return "\n".join(lines)


@tool(TopicArgs, TopicView)
def topic_cluster(s: Session, a: TopicArgs) -> TopicView:
    """The topic a tag belongs to and its most recent entries. Read up on a topic before writing into it."""
    r = s.daemon.topic_cluster(a.tag, limit=a.limit)
    c = r.cluster
    return TopicView(name=c.name, description=c.description, tags=c.tags, size=c.entries, recent=[
        Recent(**ref_fields(e), excerpt=flat(e.content, 240))
        for e in r.entries])


class BriefingView(View):
    briefing: str
    conversation_id: int | None

    def text(self) -> str:
        return self.briefing + session_note(self.conversation_id)  # as the instructions end


@tool(NoArgs, BriefingView)
def get_memory_briefing(s: Session, a: NoArgs) -> BriefingView:
    """The map of this memory (the same briefing as at session start): totals, tag conventions,
    guidance, named topics, open threads, recent activity. Call it again after many writes or when
    unsure what the memory holds."""
    return BriefingView(briefing=s.daemon.briefing().text, conversation_id=s.conversation_id)


class OpenThreadsArgs(Args):
    limit: Annotated[int, Meta(ge=1, le=OPEN_THREADS_PER_TOOL_CALL,
                               description="At most this many threads, most recent activity first.")] = 15


class OpenThread(View):
    """An open thread: an active root with active replies."""

    root: Ref
    replies: int
    last_activity: str
    last_reply: Ref
    #: Who wrote the root, and the team the thread is shared with (absent: private).
    author: str | None = None
    team: str | None = None

    def text(self) -> str:
        shared = f", shared with {self.team}" if self.team else ""
        by = f" by {self.author}" if self.author else ""
        return (f"- {self.root.text()}{by}{shared}: {count(self.replies, 'reply', 'replies')}, last "
                f"{self.last_activity[:16].replace('T', ' ')}: #{self.last_reply.id} {self.last_reply.title}")


class OpenThreadsView(View):
    threads: list[OpenThread]
    #: More open threads exist beyond `limit`.
    more: bool = False

    def text(self) -> str:
        if not self.threads:
            return "No open threads (no entry has an active reply)."
        lines = [f"{count(len(self.threads), 'open thread')}, most recent activity first:",
                 *(t.text() for t in self.threads)]
        if self.more:
            lines.append("more: older open threads exist (raise limit)")
        return "\n".join(lines)


@tool(OpenThreadsArgs, OpenThreadsView)
def open_threads(s: Session, a: OpenThreadsArgs) -> OpenThreadsView:
    """The threads still going on (an entry with active replies), most recent activity first,
    teammates' shared threads included: the briefing's open threads, in full.

    Before starting a new entry on a subject, look here: a follow-up belongs in its thread,
    as a `reply` to the root (read it with `thread` first).
    """
    found = s.daemon.open_threads(a.limit + 1).threads
    return OpenThreadsView(threads=[
        OpenThread(root=ref(t.root), replies=t.replies, last_activity=t.last_activity, last_reply=ref(t.last_reply),
                   author=t.author, team=t.team) for t in found[:a.limit]], more=len(found) > a.limit)


class ExpandArgs(Args):
    id: EntryId
    depth: Annotated[int, Meta(ge=1, le=2, description="Hops to walk: 1 (its links) or 2 (their links too).")] = 1
    limit: Annotated[int, Meta(ge=1, le=50, description="At most this many entries in the subgraph.")] = 30
    as_of: AsOf = None
    known_at: KnownAt = None


class Node(Ref, kw_only=True):
    #: Hops from the entry asked about (0: the entry itself).
    hops: int


class Edge(View):
    """An explicit relation (`link`), or with `kind` one Arbiter derived (temporal, entity, similarity)."""

    source_id: int
    relation: str
    target_id: int
    kind: str | None = None
    weight: float | None = None

    def text(self) -> str:
        if self.kind:
            return f"#{self.source_id} ~ #{self.target_id} ({self.kind}/{self.relation}, {self.weight:.2f})"
        return f"#{self.source_id} {self.relation} #{self.target_id}"


class ExpandView(View):
    id: int
    nodes: list[Node]
    edges: list[Edge]
    #: The entry limit cut the walk short.
    truncated: bool = False

    def text(self) -> str:
        lines = [f"Subgraph around #{self.id} ({count(len(self.nodes), 'entry', 'entries')}):"]
        lines += [f"- {Ref.text(n)}" + (f" (hop {n.hops})" if n.hops else " (start)") for n in self.nodes]
        lines.append("Edges:" if self.edges else "Edges: none (no relation or association touches it)")
        lines += [f"- {e.text()}" for e in self.edges]
        if self.truncated:
            lines.append("truncated: more entries are linked; raise limit, or expand from one of the entries above")
        return "\n".join(lines)


@tool(ExpandArgs, ExpandView)
def expand(s: Session, a: ExpandArgs) -> ExpandView:
    """Walk the graph out from an entry, one or two hops: the entries linked to it by relations
    (supersedes, supports, causes, ...) and by what Arbiter associated with it (close in time, same
    names, similar text), with every edge among them. Use it to trace a chain of decisions or causes
    past the direct neighbours. For one entry's immediate surroundings (thread, tags, #ID mentions)
    `around` says more; for derived links with their evidence, `associations`.
    """
    g = s.daemon.expand(a.id, depth=a.depth, limit=a.limit, as_of=a.as_of, known_at=a.known_at)
    nodes = sorted(g.nodes, key=lambda e: (g.depth.get(e.id, 0), e.id))
    return ExpandView(
        id=a.id, nodes=[Node(**ref_fields(e), hops=g.depth.get(e.id, 0)) for e in nodes],
        edges=[Edge(source_id=r.source_id, relation=r.relation, target_id=r.target_id) for r in g.edges]
        + [Edge(source_id=x.source_id, relation=x.sub_type, target_id=x.target_id, kind=x.kind, weight=x.weight)
           for x in g.associations],
        truncated=g.truncated,
    )


class TopicLine(View):
    name: str
    description: str
    tags: list[str]
    entries: int

    def text(self) -> str:
        return f"- {self.name} ({count(self.entries, 'entry', 'entries')}): {self.description} [tags: {', '.join(self.tags)}]"


class TopicsView(View):
    topics: list[TopicLine]

    def text(self) -> str:
        if not self.topics:
            return "No topics yet (topics form from tags that recur together)."
        return "\n".join([f"{count(len(self.topics), 'topic')}, largest first:", *(t.text() for t in self.topics)])


@tool(NoArgs, TopicsView)
def topic_clusters(s: Session, a: NoArgs) -> TopicsView:
    """Every topic of this memory (groups of tags that recur together), largest first, with their tags:
    the briefing's topic map without its cut. Read one topic's entries with `topic_cluster` and one
    of its tags."""
    found = s.daemon.topic_clusters().clusters
    return TopicsView(topics=[TopicLine(name=c.name, description=c.description, tags=c.tags, entries=c.entries)
                              for c in found])
