"""MCP tools for threads, neighbourhoods, topics and the briefing."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from arbiter.mcp import session_note
from arbiter.mcp.entries import (Content, EntryView, Ref, Said, Source, TagList, Title, Type, Written, entry_view, ref,
                                  ref_fields)
from arbiter.mcp.tool import Args, AsOf, EntryId, KnownAt, Session, View, count, flat, tool
from arbiter.model import TextParams


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
    e = s.call("reply", a.parent_id, a.content, title=a.title, type=a.type, tags=a.tags, speaker=a.speaker,
               source=a.source)
    s.changed(e.id, a.parent_id)
    return Written(verb=f"Replied under #{a.parent_id}:", entry=ref(e), conversation_id=e.conversation_id)


class ThreadArgs(Args):
    id: EntryId
    as_of: AsOf = None
    known_at: KnownAt = None


class Reply(Ref, kw_only=True):
    parent_id: int
    depth: int
    excerpt: str


class ThreadView(View):
    root: EntryView
    replies: list[Reply]

    def text(self) -> str:
        lines = ["Root: " + self.root.text(), "", f"{count(len(self.replies), 'reply', 'replies')}:"]
        for r in self.replies:
            lines += [f"{'  ' * (r.depth - 1)}- {Ref.text(r)} reply to #{r.parent_id}", f"{'  ' * r.depth}{r.excerpt}"]
        return "\n".join(lines)


@tool(ThreadArgs, ThreadView)
def thread(s: Session, a: ThreadArgs) -> ThreadView:
    """Read a whole thread (root and replies, oldest first) from any entry in it. Read it before replying."""
    t = s.call("thread", a.id, as_of=a.as_of, known_at=a.known_at)
    replies = [Reply(**ref_fields(r), parent_id=r.parent_id,
                     depth=t.depth[r.id], excerpt=flat(r.content, 240)) for r in t.replies]
    return ThreadView(root=entry_view(t.root), replies=replies)


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
    x = s.call("around", a.id, k=a.k)
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
    b = s.call("backlinks", a.id)
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
    d = s.call("density", a.id)
    return DensityView(id=d.id, in_degree=d.in_degree, out_degree=d.out_degree, relations=d.relations,
                       reach_2hop=d.reach_2hop)


class TopicArgs(Args):
    tag: Annotated[str, Meta(min_length=1, max_length=64, description=(
        "Any tag of the topic (see the briefing's topic map)."))]
    limit: Annotated[int, Meta(ge=1, le=50)] = 10


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
    r = s.call("topic_cluster", a.tag, limit=a.limit)
    c = r.cluster
    return TopicView(name=c.name, description=c.description, tags=c.tags, size=c.entries, recent=[
        Recent(**ref_fields(e), excerpt=flat(e.content, 240))
        for e in r.entries])


class NoArgs(Args):
    pass


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
    return BriefingView(briefing=s.call("briefing").text, conversation_id=s.conversation_id)
