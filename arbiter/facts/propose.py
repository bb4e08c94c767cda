"""Proposing facts: a batch of candidates with their aspects and entities, gated now or later.

Shared by `facts_propose` (the caller's facts) and `fact_extract` (the advisor's).
"""

from __future__ import annotations

from arbiter.facts import aspects as aspects_mod, gate, store
from arbiter.facts.model import FactProposal
from arbiter.store import users
from arbiter.verb import Context


def _stage(ctx: Context, proposals: list[FactProposal]) -> list[tuple[FactProposal, list[str], int | None, int | None]]:
    """Each proposal with its aspect slugs and the existing entities its parts name.

    Slugs: keyword patterns over the parts and their entities' types, united
    with the proposer's (unknown ones dropped, noted).
    """
    out, dropped = [], []
    named: dict[str, tuple[int, str] | None] = {}  # a batch names the same subject ("user") over and over

    def entity(text: str) -> tuple[int, str] | None:
        if text not in named:
            named[text] = store.entity_of(ctx.conn, ctx.viewer, text)
        return named[text]

    for p in proposals:
        subject, obj = entity(p.subject), entity(p.object)
        types = tuple(e[1] for e in (subject, obj) if e is not None)
        slugs, unknown = aspects_mod.merge(aspects_mod.classify(p.predicate, p.subject, p.object, types), p.aspects)
        dropped += unknown
        out.append((p, slugs, subject and subject[0], obj and obj[0]))
    if dropped:
        ctx.notes.append("unknown aspect slugs dropped: " + ", ".join(dict.fromkeys(dropped)))
    return out


def propose(ctx: Context, proposals: list[FactProposal], *, origin: str, threshold: float, note: str | None,
            apply: bool, team: str | None = None):
    """Stage `proposals` as a batch of candidates (private, or `team`'s), and with `apply` pass them through the gate now."""
    v = ctx.viewer
    scope = v.private_scope if team is None else users.member_scope(ctx.conn, v, team)
    batch_id = store.create_batch(ctx.conn, v, scope=scope, origin=origin, threshold=threshold, note=note, now=ctx.now)
    store.add_candidates(ctx.conn, v, batch_id, _stage(ctx, proposals), now=ctx.now)
    if apply:
        gate.apply(ctx.conn, v, batch_id, now=ctx.now)
    return store.batch(ctx.conn, v, batch_id, note="; ".join(ctx.notes) or None)
