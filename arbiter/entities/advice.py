"""`extract_entities`: the advisor may add names the lexical extraction missed (never required).

Runs in `remember`'s prepare step, on a reader before the write, so the
writer never waits on the network. The names the model gives are linked
with how='advisor' after the lexical ones, resolved like any other name.
Without an LLM key, or when the call fails, the entry keeps its lexical
entities and the result's `note` says why.
"""

from __future__ import annotations

import time

import msgspec

from arbiter.consult import consult
from arbiter.entities.link import named_in
from arbiter.entities.model import ENTITY_TYPES
from arbiter.model import NamedEntity, RememberParams
from arbiter.verb import Context, advisor_for

#: The advisor's share of `remember`'s prepare budget.
DEADLINE_S = 10.0


class Advised(RememberParams):
    """`RememberParams` plus the names the advisor found: made by `prepare`, never decoded from the wire."""

    advised: list[NamedEntity] = []


def prepare(ctx: Context, p: RememberParams) -> RememberParams:
    """Ask the advisor for the entities `p`'s lexical extraction misses; `p` unchanged (and a note) if it cannot."""
    found = list(dict.fromkeys(name for name, _, _ in named_in(p)))
    extra = consult(advisor_for(ctx), ctx.notes, "extract_entities", lambda advisor: advisor.entities(
        p.title, p.content, found, ENTITY_TYPES, deadline=time.monotonic() + DEADLINE_S))
    if not extra:
        return p
    ctx.notes.append("extract_entities: the advisor named " + ", ".join(name for name, _ in extra))
    return Advised(**msgspec.structs.asdict(p), advised=[NamedEntity(name=n, type=t) for n, t in extra])

