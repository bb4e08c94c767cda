"""Intent-weighted graph recall: from the lexical ranking's top hits, walk associations and relations.

Mnemon's read path without vectors: the query's intent (WHY, WHEN, ENTITY,
GENERAL) weights each edge kind; entries reached from a seed score
`seed score x kind weight x edge weight` (spreading activation). A reached
entry the lexical passes also ranked rises by at most `LIFT`; one they did
not rank enters at its reached score, which is below the hit it came from.
`explain` shows how each
reached hit arrived: `graph_seed` (the seed's id), `graph_<kind>` (the edge's
weight) and `graph_hop`.
"""

from __future__ import annotations

import re

import apsw

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
#: How far a reached lexical candidate rises: x(1 + LIFT x reached/own score), at most x(1 + LIFT).
#: Measured on LoCoMo dev (docs/retrieval.md): 0.05 keeps R@1, 0.15 and 0.3 trade it for R@10.
LIFT = 0.05

_WHY = re.compile(r"\b(why|reason|reasons|because|cause|caused|causes|led to|result of|motivat\w*)\b", re.I)
_WHEN = re.compile(r"\b(when|what time|what date|which day|which year|how long ago|before|after|since|until|"
                   r"first|last|earlier|later|ago|date)\b", re.I)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")


def intent(conn: apsw.Connection, v, text: str) -> Intent:
    """WHY and WHEN from cue words and question form; ENTITY when the query names a known entity."""
    if _WHY.search(text):
        return "why"
    if _WHEN.search(text):
        return "when"
    from arbiter.entities import core as entities

    for name in _NAME.findall(text):
        found = entities.lookup(conn, v.tenant_id, name, v)
        if found is not None and entities.visible(conn, v, found[0]):
            return "entity"
    return "general"


def neighbours(conn: apsw.Connection, v, entry_id: int) -> list[tuple[int, str, float]]:
    """(other id, kind, edge weight) over associations (to entries `v` sees) and relations, both directions."""
    tenant_id = v.tenant_id
    out = [(a.other_id, a.kind, a.weight) for a in core.of(conn, v, entry_id)]
    rows = conn.execute(
        "SELECT CASE WHEN source_id = ?1 THEN target_id ELSE source_id END, relation FROM relations "
        "WHERE tenant_id = ?2 AND (source_id = ?1 OR target_id = ?1)",
        (entry_id, tenant_id),
    )
    out += [(other, RELATION_KINDS.get(rel, "similarity"), 1.0) for other, rel in rows]
    return out


def reach(conn: apsw.Connection, v, seeds: list[tuple[int, float]], weights: dict[str, float]
          ) -> dict[int, tuple[float, dict]]:
    """What one hop from the seeds reaches: id -> (score, explain parts), seeds left out.

    A reached entry scores `seed score x kind weight x edge weight`, its best
    path kept: activation spreads from a hit and never exceeds it.
    """
    ids = {i for i, _ in seeds}
    best: dict[int, tuple[float, dict]] = {}
    for seed, seed_score in seeds:
        for other, kind, w in neighbours(conn, v, seed):
            if other in ids:
                continue
            value = seed_score * weights.get(kind, 0.0) * w
            if value > best.get(other, (0.0, {}))[0]:
                best[other] = (value, {"graph_seed": float(seed), f"graph_{kind}": w, "graph_hop": 1.0})
    return best
