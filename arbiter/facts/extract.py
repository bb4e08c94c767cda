"""`fact_extract`: the advisor reads entries and proposes what they state as a batch (origin `extractor`).

The model only proposes: its triples enter the gate as candidates like any
agent's, with the entries they came from as sources, and become true only
if the batch is applied (`apply` runs the same gate in the same call).
Triples that fail the wire limits, and aspect slugs that are not aspects,
are dropped and said so in the batch's `note`. Without an LLM key, nothing
is proposed and the result says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import msgspec

from arbiter.consult import consult
from arbiter.facts import aspects, store
from arbiter.facts.propose import propose
from arbiter.facts.model import ExtractParams, ExtractResult, FactProposal
from arbiter.recall import llm as llm_layers
from arbiter.store import relations
from arbiter.verb import Context, advisor_for

#: Seconds the advisor may take (prepare runs on a reader, never holding the writer).
DEADLINE_S = 30.0
#: Bytes of each entry shown to the model.
EXCERPT = 4000


@dataclass
class Extracted:
    """What `prepare` hands `run`: the params, the proposals and what to tell the caller."""

    params: ExtractParams
    proposals: list[FactProposal] = field(default_factory=list)


def prepare(ctx: Context, p: ExtractParams) -> Extracted:
    """Ask the advisor (on a reader, before the write); unknown entries are `not_found`, like elsewhere."""
    for i, eid in enumerate(p.entry_ids):
        relations.require_entries(ctx.conn, ctx.viewer, [eid], f"entry_ids[{i}]")
    out = Extracted(p)
    advisor = advisor_for(ctx)
    shown = [] if advisor is None else llm_layers.shown(ctx.conn, ctx.viewer, list(dict.fromkeys(p.entry_ids)),
                                                         EXCERPT, context=True)
    known = [x.name for x in store.predicates(ctx.conn, ctx.viewer)]
    found = consult(advisor, ctx.notes, "fact_extract", lambda advisor: advisor.extract_facts(
        shown, known, list(aspects.SLUGS), deadline=time.monotonic() + DEADLINE_S), leaves=": nothing proposed")
    if found is None:
        return out
    dropped = 0
    for f in found:
        try:
            out.proposals.append(msgspec.convert(
                {"subject": f.subject, "predicate": f.predicate, "object": f.object, "confidence": f.confidence,
                 "sources": [f.source], "aspects": f.aspects[:14]},
                FactProposal,
            ))
        except msgspec.ValidationError:
            dropped += 1
    if dropped:
        ctx.notes.append(f"{dropped} malformed triple{'s' if dropped > 1 else ''} from the advisor dropped")
    if not out.proposals and not dropped:
        ctx.notes.append("the advisor found no facts in these entries")
    return out


def run(ctx: Context, x: Extracted | ExtractParams):
    """Propose the advisor's triples as one batch (and apply it through the gate with `apply`)."""
    if isinstance(x, ExtractParams):  # never prepared (cannot happen through the daemon): nothing to propose
        x = Extracted(x)
    if not x.proposals:
        return ExtractResult(batch=None, note="; ".join(ctx.notes) or None)

    batch = propose(ctx, x.proposals, origin="extractor", threshold=x.params.threshold, note=None,
                    apply=x.params.apply, team=x.params.team)
    return ExtractResult(batch=batch, note=batch.note)
