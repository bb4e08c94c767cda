"""MCP tools for entities and salience: `entities`, `entity_context`, `relate`, `entity_merge`, `entity_rename`, `reinforce`."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from arbiter.entities.model import ENTITIES_PER_TOOL_CALL
from arbiter.mcp.tool import Args, EntryId, Session, View, count, day, tool
from arbiter.model import EntityName, EntityRelationType, EntityType

Name = Annotated[EntityName, Meta(description="An entity's name or one of its aliases, any case.")]


class EntityLine(View):
    name: str
    type: str
    aliases: list[str]
    mentions: int

    def text(self) -> str:
        aka = f" (aka {', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.name} [{self.type}] {self.mentions} mention{'s' * (self.mentions != 1)}{aka}"


def _line(e) -> EntityLine:
    return EntityLine(name=e.name, type=e.type, aliases=list(e.aliases), mentions=e.mentions)


class EntitiesArgs(Args):
    query: Annotated[str, Meta(max_length=128, description="Start of a name or alias (any case); empty lists all.")] = ""
    type: Annotated[EntityType | None, Meta(description="Only entities of this type.")] = None
    limit: Annotated[int, Meta(ge=1, le=ENTITIES_PER_TOOL_CALL,
                               description="At most this many, most mentioned first.")] = 30


class EntitiesView(View):
    entities: list[EntityLine]

    def text(self) -> str:
        return "\n".join(e.text() for e in self.entities) if self.entities else "No entities match."


@tool(EntitiesArgs, EntitiesView)
def entities(s: Session, a: EntitiesArgs) -> EntitiesView:
    """List the people, projects, tools and other named things this memory knows, most mentioned first.

    Entities come from the text of every entry (names, CamelCase words,
    acronyms, paths, @-mentions, known technical terms) and from the
    `entities` you pass to `remember`. Use the exact name shown with
    `entity_context` or `relate`.
    """
    return EntitiesView(entities=[_line(e) for e in s.daemon.entities(a.query, type=a.type, limit=a.limit)])


class EntityContextArgs(Args):
    name: Name
    limit: Annotated[int, Meta(ge=1, le=50, description="Entries to list.")] = 10


class MentioningView(View):
    id: int
    type: str
    title: str
    recorded_at: str

    def text(self) -> str:
        return f"#{self.id} [{self.type}] {self.title} ({day(self.recorded_at)})"


class RelationLine(View):
    source: str
    relation: str
    target: str
    weight: float

    def text(self) -> str:
        return f"{self.source} {self.relation} {self.target} (weight {self.weight:g})"


class EntityContextView(View):
    entity: EntityLine
    entries: list[MentioningView]
    relations: list[RelationLine]
    cluster: list[str]

    def text(self) -> str:
        lines = [self.entity.text(), "", "Relations:"]
        lines += [f"- {r.text()}" for r in self.relations] or ["(none)"]
        lines += ["", "Cluster (related entities): " + (", ".join(self.cluster) or "(none yet)"), "", "Entries:"]
        lines += [f"- {e.text()}" for e in self.entries] or ["(none)"]
        return "\n".join(lines)


@tool(EntityContextArgs, EntityContextView)
def entity_context(s: Session, a: EntityContextArgs) -> EntityContextView:
    """Everything memory holds about one entity: the entries that mention it (newest first), its
    typed relations to other entities, and the other entities of its cluster (things that keep
    coming up together). Use it to brief yourself on a person, project or tool before acting on it.
    """
    x = s.daemon.entity_show(a.name, limit=a.limit)
    cluster = [e.name for e in x.cluster.entities if e.id != x.entity.id] if x.cluster else []
    return EntityContextView(
        entity=_line(x.entity),
        entries=[MentioningView(id=e.id, type=e.type, title=e.title, recorded_at=e.recorded_at) for e in x.entries],
        relations=[RelationLine(source=r.source.name, relation=r.relation, target=r.target.name, weight=r.weight)
                   for r in x.relations],
        cluster=cluster,
    )


class RelateArgs(Args):
    source: Name
    relation: Annotated[EntityRelationType, Meta(description="How source relates to target.")]
    target: Name
    weight: Annotated[float, Meta(gt=0, le=100, description="Added to the relation's weight if it exists.")] = 1.0


@tool(RelateArgs, RelationLine, writes=True)
def relate(s: Session, a: RelateArgs) -> RelationLine:
    """Record (or strengthen) a typed relation between two known entities, e.g. Alice works_on Apollo,
    Apollo depends_on PostgreSQL. Both must already exist (see `entities`). Relations between
    entries are `link`, not this.
    """
    r = s.daemon.entity_relate(a.source, a.relation, a.target, weight=a.weight)
    s.wrote = False  # entity relations appear in no resource (the briefing names entities, not their relations)
    return RelationLine(source=r.source.name, relation=r.relation, target=r.target.name, weight=r.weight)


class SalienceView(View):
    id: int
    salience: float
    reinforcements: int
    permanent: bool

    def text(self) -> str:
        kind = "permanent; " if self.permanent else ""
        return f"#{self.id} salience {self.salience:.2f} ({kind}{count(self.reinforcements, 'reinforcement')})"


class ReinforceArgs(Args):
    id: EntryId


@tool(ReinforceArgs, SalienceView, writes=True)
def reinforce(s: Session, a: ReinforceArgs) -> SalienceView:
    """Mark an entry as important: raises its salience (+0.15 each time, up to +0.6), so it is kept
    longer (it does not change recall's order). Use it when an entry proved useful or the user says it matters.
    """
    x = s.daemon.reinforce(a.id)
    s.wrote = False  # salience shows in no resource: the entry reads the same, the briefing does not rank by it
    return SalienceView(id=x.id, salience=x.salience, reinforcements=x.reinforcements, permanent=x.permanent)



class MergeArgs(Args):
    keep: Annotated[Name, Meta(description="The entity to keep (its name stays the name).")]
    other: Annotated[Name, Meta(description="The entity folded into it: its names become aliases of `keep`.")]


class EntityChanged(View):
    verb: str
    entity: EntityLine

    def text(self) -> str:
        return f"{self.verb}: {self.entity.text()}"


@tool(MergeArgs, EntityChanged, writes=True)
def entity_merge(s: Session, a: MergeArgs) -> EntityChanged:
    """Fold two entities that are one thing into one: `other`'s name and aliases become aliases of
    `keep`, and its mentions and relations move to it. Use it when `remember` says a name "may be the
    same as" another (Postgres / PostgreSQL, Bob / Robert Smith) and you know they are the same.
    Never merge things that are merely related (a project and its repository): `relate` them.
    """
    e = s.daemon.entity_merge(a.keep, a.other)
    s.listed = False  # entries and their list read the same; the briefing's entity names may not
    return EntityChanged(verb=f"Merged {a.other!r} into {e.name!r}", entity=_line(e))


class RenameArgs(Args):
    name: Name
    new_name: Annotated[EntityName, Meta(description="The new name; the old one stays an alias.")]


@tool(RenameArgs, EntityChanged, writes=True)
def entity_rename(s: Session, a: RenameArgs) -> EntityChanged:
    """Give an entity its proper name (a misspelling, a nickname that became the main name, a project
    renamed); the old name stays an alias, so entries that use it still find it. A name another
    entity already answers to is refused: if they are one thing, `entity_merge` them.
    """
    e = s.daemon.entity_rename(a.name, a.new_name)
    s.listed = False
    return EntityChanged(verb=f"Renamed {a.name!r}", entity=_line(e))
