"""Wire types of the association graph: edges Arbiter derives, and the candidates `remember` hands back."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from arbiter.model import Association, AssociationKind, Id, LinkCandidate, Params



class Associations(Struct, kw_only=True):
    id: int
    associations: list[Association]


class AssociationsParams(Params):
    id: Id
    kind: AssociationKind | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 50


class AssociationsRebuilt(Struct, kw_only=True):
    edges: int


class LinkCandidatesParams(Params):
    id: Id


class LinkCandidates(Struct, kw_only=True):
    """The links worth making from an entry, left to the caller: what `remember` returns when asked (`candidates`)."""

    id: int
    candidates: list[LinkCandidate]
