"""The facts verbs: propose, read, audit and decide patch batches, predicates, aspects.

Every verb that can change what is true goes through `gate.apply`; the
boundary test (tests/integration/test_facts_boundary.py) sweeps every verb
the daemon serves to prove no other path makes a fact active.
"""

from __future__ import annotations

from arbiter.facts import aspects as aspects_mod, extract, gate, store
from arbiter.facts.propose import propose
from arbiter.facts.model import (
    AspectList,
    AspectScore,
    AspectsParams,
    BatchIdParams,
    BatchList,
    BatchListParams,
    ExtractParams,
    FactHistory,
    FactList,
    FactsParams,
    PredicateDeclareParams,
    PredicateList,
    ProposeParams,
    normalize_predicate,
)
from arbiter.model import Empty, IdParams
from arbiter.verb import Context, Verb, _as_of, _known_at


def facts_propose(ctx: Context, p: ProposeParams):
    """Propose a batch of candidate facts (invisible to reads until applied); with `apply`, evaluate and apply it now through the same gate.

    The batch and its facts are private to the proposer, or shared with `team`;
    sources must be entries the proposer sees.
    """
    return propose(ctx, p.facts, origin=p.origin, threshold=p.threshold, note=p.note, apply=p.apply, team=p.team)


def facts(ctx: Context, p: FactsParams):
    """Facts: active and true now by default; `as_of` for valid time, `known_at` for what was recorded then; `status` candidate/rejected for audits."""
    return FactList(facts=store.read(
        ctx.conn, ctx.viewer, subject=p.subject, predicate=p.predicate, status=p.status,
        as_of=_as_of(p.as_of), known_at=_known_at(p.known_at), limit=p.limit,
    ))


def fact_history(ctx: Context, p: IdParams):
    """A fact's supersession lineage, both ways, oldest first, with every recorded state of those facts."""
    chain, revisions = store.lineage(ctx.conn, ctx.viewer, p.id)
    return FactHistory(facts=chain, revisions=revisions)


def batch_list(ctx: Context, p: BatchListParams):
    """Patch batches, newest first, with their facts counted by status."""
    return BatchList(batches=store.batches(ctx.conn, ctx.viewer, status=p.status, limit=p.limit))


def batch_show(ctx: Context, p: BatchIdParams):
    """A batch and its facts with the gate's findings and reasons."""
    return store.batch(ctx.conn, ctx.viewer, p.id)


def batch_evaluate(ctx: Context, p: BatchIdParams):
    """Record the gate's findings on a batch's candidates; changes nothing that is true."""
    before = gate.evaluate(ctx.conn, ctx.viewer, p.id, now=ctx.now)
    decided = before in ("applied", "rejected")
    note = f"batch {p.id} was already {before}: nothing to evaluate" if decided else None
    return store.batch(ctx.conn, ctx.viewer, p.id, note=note, changed=not decided)


def batch_apply(ctx: Context, p: BatchIdParams):
    """Evaluate a batch against active truth as it stands and apply it in one transaction; a second apply changes nothing and says so."""
    changed = gate.apply(ctx.conn, ctx.viewer, p.id, now=ctx.now)
    note = None if changed else f"batch {p.id} was already applied: nothing changed"
    return store.batch(ctx.conn, ctx.viewer, p.id, note=note, changed=changed)


def batch_reject(ctx: Context, p: BatchIdParams):
    """Reject a proposed or evaluated batch: its candidates are rejected for good."""
    changed = gate.reject(ctx.conn, ctx.viewer, p.id, now=ctx.now)
    note = None if changed else f"batch {p.id} was already rejected: nothing changed"
    return store.batch(ctx.conn, ctx.viewer, p.id, note=note, changed=changed)


def predicates(ctx: Context, p: Empty):
    """The predicate registry: built-in and declared predicates, functional or multi-valued, with their current facts."""
    return PredicateList(predicates=store.predicates(ctx.conn, ctx.viewer))


def predicate_declare(ctx: Context, p: PredicateDeclareParams):
    """Declare a predicate (normalised to snake_case) once: functional (one active object per subject) or multi-valued."""
    return store.declare(ctx.conn, ctx.viewer, p.name, p.functional, now=ctx.now)


def aspects(ctx: Context, p: AspectsParams):
    """The 14 aspects' 0-100 scores over the facts the caller sees: precomputed at apply (one user's tenant), or
    computed now (a tenant of several users, or a `subject`/`predicate` scope)."""
    scoped = p.subject is not None or p.predicate is not None
    if scoped or not aspects_mod.whole(ctx.viewer):
        subject_key = None if p.subject is None else store.key(p.subject)
        predicate = None if p.predicate is None else normalize_predicate(p.predicate)
        rows = {}
        for slug in aspects_mod.SLUGS:
            n, ents, preds, conf = aspects_mod.dimensions(
                ctx.conn, ctx.viewer, slug, subject_key=subject_key, predicate=predicate
            )
            rows[slug] = (aspects_mod.score(n, ents, preds, conf), n, ents, preds, conf)
        scope = " ".join(x for x in (p.subject and f"subject={p.subject}", p.predicate and f"predicate={p.predicate}") if x) or "all"
    else:
        rows = aspects_mod.stored(ctx.conn, ctx.tenant_id)  # the caller sees the whole tenant
        scope = "all"
    out = []
    for a in aspects_mod.ASPECTS:
        sc, n, ents, preds, conf = rows.get(a.slug, (0, 0, 0, 0, 0.0))
        out.append(AspectScore(
            slug=a.slug, name=a.name, category=a.category, score=sc, facts=n, entities=ents, predicates=preds,
            confidence=round(conf, 3),
        ))
    return AspectList(aspects=out, scope=scope)


VERBS: dict[str, Verb] = {
    "facts_propose": Verb(ProposeParams, facts_propose, writes=True),
    "facts": Verb(FactsParams, facts),
    "fact_history": Verb(IdParams, fact_history),
    "batch_list": Verb(BatchListParams, batch_list),
    "batch_show": Verb(BatchIdParams, batch_show),
    "batch_evaluate": Verb(BatchIdParams, batch_evaluate, writes=True),
    "batch_apply": Verb(BatchIdParams, batch_apply, writes=True),
    "batch_reject": Verb(BatchIdParams, batch_reject, writes=True),
    "predicates": Verb(Empty, predicates),
    "predicate_declare": Verb(PredicateDeclareParams, predicate_declare, writes=True),
    "aspects": Verb(AspectsParams, aspects),
}


def fact_extract(ctx: Context, p):
    """Ask the advisor (ANTHROPIC_API_KEY) for the facts these entries state; they are proposed as a batch (origin extractor) and, with `apply`, applied through the gate."""
    return extract.run(ctx, p)


VERBS["fact_extract"] = Verb(ExtractParams, fact_extract, writes=True, prepare=extract.prepare)
