"""The association graph's verbs: read an entry's associations, rebuild the stored ones."""

from __future__ import annotations

import msgspec

from arbiter import derive
from arbiter.associations import core
from arbiter.associations.model import (
    Associations, AssociationsParams, AssociationsRebuilt, LinkCandidates, LinkCandidatesParams,
)
from arbiter.model import Empty
from arbiter.store import entries
from arbiter.verb import Context, Verb


def associations(ctx: Context, p: AssociationsParams) -> Associations:
    """What Arbiter derived around an entry (temporal, entity, similarity), with the evidence for each."""
    entries.get(ctx.conn, ctx.viewer, p.id)  # not_found for a missing, retired or foreign id
    found = core.of(ctx.conn, ctx.viewer, p.id, p.kind)[: p.limit]  # only edges to entries the caller sees
    others = {e.id: e for e in entries.get_any(ctx.conn, ctx.viewer, sorted({a.other_id for a in found}))}
    return Associations(id=p.id, associations=[
        msgspec.structs.replace(a, other_type=others[a.other_id].type, other_title=others[a.other_id].title)
        if a.other_id in others else a for a in found])


def associations_rebuild(ctx: Context, p: Empty) -> AssociationsRebuilt:
    """Derive the tenant's stored associations again from its entries alone (what `maintain --rebuild-associations` runs)."""
    return AssociationsRebuilt(edges=core.rebuild(ctx.conn, ctx.tenant_id, now=ctx.now, v=ctx.viewer))


def link_candidates(ctx: Context, p: LinkCandidatesParams) -> LinkCandidates:
    """The links worth making from an entry (causal, similar), found as `remember` finds them when asked.

    For a write that skipped them (`candidates` off: most of a write's time) and a caller that wants them
    afterwards. Finding them stores the entry's similarity edges, as `remember` does (idempotent).
    """
    entries.get(ctx.conn, ctx.viewer, p.id)  # not_found for a missing, retired or foreign id
    return LinkCandidates(id=p.id, candidates=derive.link_candidates(ctx.conn, ctx.viewer, p.id, now=ctx.now))


VERBS: dict[str, Verb] = {
    "link_candidates": Verb(LinkCandidatesParams, link_candidates, writes=True, small=True),
    "associations": Verb(AssociationsParams, associations),
    "associations_rebuild": Verb(Empty, associations_rebuild, writes=True),
}
