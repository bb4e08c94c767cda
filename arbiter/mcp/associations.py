"""MCP tools for the association graph: what Arbiter derived around an entry, and links worth making from it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from arbiter.mcp.entries import Suggestion, suggestions
from arbiter.mcp.tool import Args, EntryId, Session, View, tool
from arbiter.model import AssociationKind


class AssociationsArgs(Args):
    id: EntryId
    kind: Annotated[AssociationKind | None, Meta(description=(
        "temporal: next to it in time or in its conversation; entity: mentions the same name; "
        "similarity: says much the same. Omit for all."))] = None
    limit: Annotated[int, Meta(ge=1, le=100, description="At most this many.")] = 30


class EntryIdArgs(Args):
    id: EntryId


class AssociationView(View):
    other_id: int
    #: The other entry's type and title.
    type: str
    title: str
    kind: AssociationKind
    sub_type: str
    weight: float
    evidence: str

    def text(self) -> str:
        return (f"#{self.other_id} [{self.type}] {self.title}: {self.kind}/{self.sub_type} ({self.weight:.2f}): "
                f"{self.evidence}")


class AssociationsView(View):
    id: int
    associations: list[AssociationView]

    def text(self) -> str:
        if not self.associations:
            return f"#{self.id} has no associations."
        return "\n".join([f"Associations of #{self.id}:", *(a.text() for a in self.associations)])


@tool(AssociationsArgs, AssociationsView)
def associations(s: Session, a: AssociationsArgs) -> AssociationsView:
    """What Arbiter itself connected to an entry: entries close in time, entries naming the same
    things, entries saying much the same, each with the evidence.

    These are derived, not asserted: nothing is retired by them. When one is a
    real relation (a cause, a refinement, a replacement), say so with `link`.
    """
    found = s.daemon.associations(a.id, kind=a.kind, limit=a.limit)
    return AssociationsView(id=found.id, associations=[
        AssociationView(other_id=x.other_id, type=x.other_type, title=x.other_title, kind=x.kind, sub_type=x.sub_type,
                        weight=x.weight, evidence=x.evidence)
        for x in found.associations
    ])


class SuggestionsView(View):
    id: int
    suggested_links: list[Suggestion]

    def text(self) -> str:
        if not self.suggested_links:
            return f"No links to suggest from #{self.id}."
        return (f"Possible links from #{self.id} (judge each: if it is true, call `link` with it; otherwise ignore it):"
                + "".join(f"\n- link {c.source_id} {c.relation} {c.target_id}: {c.reason}" for c in self.suggested_links))


# Not a write tool: the verb stores the entry's derived edges (as the idle writer would have), nothing a
# resource or the model sees changes.
@tool(EntryIdArgs, SuggestionsView)
def suggest_links(s: Session, a: EntryIdArgs) -> SuggestionsView:
    """Links worth making from an entry, for you to judge: causes its text states, entries saying
    much the same. Make the true ones with `link`; ignore the rest."""
    found = s.daemon.link_candidates(a.id)
    return SuggestionsView(id=found.id, suggested_links=suggestions(found.candidates))
