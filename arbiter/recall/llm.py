"""The optional LLM layers over lexical recall: query expansion, rerank, cascade.

Each layer takes the lexical result and may reorder or widen it; none can
lose it. Any advisor failure leaves the ranking as the previous layer made it
and adds a `note` naming what failed. The whole recall has one deadline.
"""

from __future__ import annotations

import time
from typing import Callable

import apsw
import msgspec

from arbiter.model import Hit, RecallParams, RecallResult
from arbiter.store import entries

RERANK_DEPTH = 25  # coarse pass: candidates shown to the fast model
FINE_DEPTH = 8  # cascade: candidates shown to the strong model
COARSE_EXCERPT = 400  # bytes of content per candidate in the coarse pass
FINE_EXCERPT = 1500
EXPAND_WEIGHTS = (1.0, 0.7)  # original query, each paraphrase
RRF_K = 60

Lexical = Callable[[RecallParams], RecallResult]


def wants_llm(p: RecallParams) -> bool:
    return bool(p.expand or p.rerank or p.rerank_fine)


def _model(choice: bool | str, default: str) -> str:
    return default if choice is True else choice


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore") + "…"


def fuse(runs: list[tuple[list[Hit], float]], k: int = RRF_K) -> list[Hit]:
    """Weighted reciprocal-rank fusion of several ranked hit lists (first occurrence wins)."""
    scores: dict[int, float] = {}
    first: dict[int, Hit] = {}
    for hits, weight in runs:
        for rank, hit in enumerate(hits, 1):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (k + rank)
            first.setdefault(hit.id, hit)
    order = sorted(scores, key=lambda i: -scores[i])
    return [msgspec.structs.replace(first[i], score=scores[i]) for i in order]


def _candidates(conn: apsw.Connection, tenant_id: int, hits: list[Hit], excerpt: int):
    from arbiter.advisor import Candidate

    content = {e.id: e.content for e in entries.get_any(conn, tenant_id, [h.id for h in hits])}
    return [
        Candidate(
            id=h.id,
            type=h.type,
            date=h.valid_from[:10],
            superseded=h.superseded,
            text=_cut(f"{h.title}\n{content.get(h.id, '')}", excerpt),
        )
        for h in hits
    ]


def _reorder(hits: list[Hit], order: list[int]) -> list[Hit]:
    by_id = {h.id: h for h in hits}
    return [by_id[i] for i in order if i in by_id]


def recall_with_llm(
    conn: apsw.Connection, tenant_id: int, p: RecallParams, advisor, lexical: Lexical
) -> RecallResult:
    """Run the lexical pipeline, then the LLM layers `p` asks for, within `p.deadline_ms`."""
    from arbiter.advisor import AdvisorError

    deadline = time.monotonic() + p.deadline_ms / 1000
    depth = max(p.limit, RERANK_DEPTH)
    base = lexical(msgspec.structs.replace(p, limit=depth))
    hits, notes, searched = base.hits, [base.note] if base.note else [], []
    if advisor is None:
        return msgspec.structs.replace(
            base, hits=hits[: p.limit], note="; ".join(notes + ["LLM layers skipped: no ANTHROPIC_API_KEY on the daemon"])
        )

    if p.expand and p.query.strip():
        try:
            paraphrases = advisor.paraphrase(p.query, model=_model(p.expand, advisor.fast_model), deadline=deadline)
        except AdvisorError as e:
            notes.append(f"expand failed ({e.reason})")
        else:
            runs = [(hits, EXPAND_WEIGHTS[0])]
            for text in paraphrases:
                runs.append((lexical(msgspec.structs.replace(p, query=text, limit=depth)).hits, EXPAND_WEIGHTS[1]))
            hits, searched = fuse(runs), paraphrases

    if p.rerank and len(hits) > 1:
        head = hits[:RERANK_DEPTH]
        try:
            order = advisor.rerank(
                p.query, _candidates(conn, tenant_id, head, COARSE_EXCERPT),
                model=_model(p.rerank, advisor.fast_model), deadline=deadline,
            )
        except AdvisorError as e:
            notes.append(f"rerank failed ({e.reason})")
        else:
            hits = _reorder(head, order) + hits[RERANK_DEPTH:]

    if p.rerank_fine and len(hits) > 1:
        # Only the head is reordered: the tail keeps its order, so recall at
        # depths past FINE_DEPTH can never drop below the single-stage result.
        head = hits[:FINE_DEPTH]
        try:
            order = advisor.rerank(
                p.query, _candidates(conn, tenant_id, head, FINE_EXCERPT),
                model=_model(p.rerank_fine, advisor.strong_model), deadline=deadline,
            )
        except AdvisorError as e:
            notes.append(f"rerank_fine failed ({e.reason})")
        else:
            hits = _reorder(head, order) + hits[FINE_DEPTH:]

    return msgspec.structs.replace(
        base, hits=hits[: p.limit], note="; ".join(notes) or None, searched=searched
    )
