"""Intent-weighted graph recall: from the lexical ranking's top hits, walk associations and relations.

Mnemon's read path without vectors: the query's intent (WHY, WHEN, ENTITY,
GENERAL) weights each edge kind; entries reached from a seed score
`seed weight x kind weight x edge weight`, and the reached list is fused with
the lexical ranking by reciprocal rank, so a reached entry the lexical passes
also found rises and one they missed can enter. `explain` shows how each
reached hit arrived: `graph_seed` (the seed's id), `graph_<kind>` (the edge's
weight) and `graph_hop`.
"""

from __future__ import annotations

import re

import apsw

from arbiter._time import parse_time
from arbiter.associations import core

Intent = str  # "why" | "when" | "entity" | "general"

#: Mnemon's table, the starting point the issue names: causal, temporal, entity, similarity.
KIND_WEIGHTS: dict[Intent, dict[str, float]] = {
    "why": {"causal": 0.70, "temporal": 0.20, "entity": 0.05, "similarity": 0.05},
    "when": {"causal": 0.15, "temporal": 0.65, "entity": 0.10, "similarity": 0.10},
    "entity": {"causal": 0.10, "temporal": 0.05, "entity": 0.55, "similarity": 0.30},
    "general": {"causal": 0.25, "temporal": 0.25, "entity": 0.25, "similarity": 0.25},
}
#: Relations a caller asserted, as the kind of association they are closest to.
RELATION_KINDS = {"causes": "causal", "supports": "causal", "supersedes": "temporal", "refines": "similarity",
                  "relates_to": "similarity", "contradicts": "similarity"}
SEEDS = 5
#: The reached list's weight in the fusion (the lexical ranking's is 1).
GRAPH_WEIGHT = 0.5

_WHY = re.compile(r"\b(why|reason|reasons|because|cause|caused|causes|led to|result of|motivat\w*)\b", re.I)
_WHEN = re.compile(r"\b(when|what time|what date|which day|which year|how long ago|before|after|since|until|"
                   r"first|last|earlier|later|ago|date)\b", re.I)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")


def intent(conn: apsw.Connection, tenant_id: int, text: str) -> Intent:
    """WHY and WHEN from cue words and question form; ENTITY when the query names a known entity."""
    if _WHY.search(text):
        return "why"
    if _WHEN.search(text):
        return "when"
    from arbiter import entities

    for name in _NAME.findall(text):
        if entities.lookup(conn, tenant_id, name) is not None:
            return "entity"
    return "general"


def neighbours(conn: apsw.Connection, tenant_id: int, entry_id: int) -> list[tuple[int, str, float]]:
    """(other id, kind, edge weight) over associations and relations, both directions."""
    out = [(a.other_id, a.kind, a.weight) for a in core.of(conn, tenant_id, entry_id)]
    rows = conn.execute(
        "SELECT CASE WHEN source_id = ?1 THEN target_id ELSE source_id END, relation FROM relations "
        "WHERE tenant_id = ?2 AND (source_id = ?1 OR target_id = ?1)",
        (entry_id, tenant_id),
    )
    out += [(other, RELATION_KINDS.get(rel, "similarity"), 1.0) for other, rel in rows]
    return out


def reach(conn: apsw.Connection, tenant_id: int, seeds: list[int], weights: dict[str, float]) -> list[tuple[int, float, dict]]:
    """Entries one hop from the seeds, best first: (id, score, explain parts). Seeds themselves are left out."""
    best: dict[int, tuple[float, dict]] = {}
    for rank, seed in enumerate(seeds, 1):
        seed_weight = 1.0 / rank
        for other, kind, w in neighbours(conn, tenant_id, seed):
            if other in seeds:
                continue
            value = seed_weight * weights.get(kind, 0.0) * w
            if value > best.get(other, (0.0, {}))[0]:
                best[other] = (value, {"graph_seed": float(seed), f"graph_{kind}": w, "graph_hop": 1.0})
    return sorted(((i, v, parts) for i, (v, parts) in best.items()), key=lambda t: (-t[1], t[0]))


def walk(conn: apsw.Connection, tenant_id: int, ranking, p):
    """The ranking with what the walk reaches from its top `SEEDS` fused in (a new `Ranking`)."""
    from arbiter.recall import Candidate, Ranking, _sql, fuse

    lexical = ranking.candidates
    if not lexical:
        return ranking
    weights = KIND_WEIGHTS[intent(conn, tenant_id, p.query)]
    reached = reach(conn, tenant_id, [c.id for c in lexical[:SEEDS]], weights)
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    rows = _sql.candidates(conn, tenant_id, [i for i, _, _ in reached], as_of)
    found = []
    for i, value, parts in reached:
        if i in rows:
            etype, conv, valid_from, *_ = rows[i]
            found.append(Candidate(i, etype, conv, valid_from, value, dict(parts)))
    if not found:
        return ranking
    own = {c.id: c for c in lexical}
    for c in found:  # an entry both lists hold keeps its lexical parts and gains the path
        if c.id in own:
            own[c.id].parts.update(c.parts)
    graph = [own.get(c.id, c) for c in found]
    return Ranking(query=ranking.query, candidates=fuse([("lexical", 1.0, lexical), ("graph", GRAPH_WEIGHT, graph)]),
                   expression=ranking.expression)

