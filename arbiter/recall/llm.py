"""The optional LLM layers over lexical recall: query expansion, rerank, cascade.

They work on the pipeline's fused candidate list (`search`), between stage 8
and rendering, so reordered hits still get excerpts and `explain` parts. Each
layer may reorder or widen the list; none can lose it. Any advisor failure
leaves the ranking as the previous layer made it and adds a `note` naming what
failed. The whole recall has one deadline (`deadline_ms`).
"""

from __future__ import annotations

import time

import apsw
import msgspec

from arbiter.consult import consult, skipped
from arbiter._time import parse_time
from arbiter.model import RecallParams, RecallResult
from arbiter.recall import Candidate, Ranking, _sql, fuse, recall, render, search
from arbiter.recall.hits import unranked
from arbiter.store import entries

RERANK_DEPTH = 25  # coarse pass: candidates shown to the fast model
FINE_DEPTH = 8  # cascade: candidates shown to the strong model
COARSE_EXCERPT = 400  # bytes of content per candidate in the coarse pass
FINE_EXCERPT = 1500
CONTEXT_EXCERPT = 200  # bytes of the turn a candidate follows
QUERY_WEIGHT, EXPANSION_WEIGHT = 1.0, 0.7
NO_KEY = skipped("LLM layers")


def wants_llm(p: RecallParams) -> bool:
    return bool(p.expand or p.rerank or p.rerank_fine)


def _model(choice: bool | str, default: str) -> str:
    return default if choice is True else choice


def cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes on a character boundary (an ellipsis marks the cut)."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore") + "…"


def shown(
    conn: apsw.Connection, v, ids: list[int], excerpt: int, *, known_at: int | None = None,
    context: bool = False, as_of: int | None = None,
):
    """The advisor's view of entries: `(type · date · superseded)`, who said it, and title + content cut to `excerpt` bytes.

    With `known_at`, the texts as recorded then (what a `known_at` recall
    ranked). With `context`, each conversation turn also shows the turn
    before it that `v` sees (at `as_of`), cut to `CONTEXT_EXCERPT` bytes; a
    `known_at` view shows none, as recall lends no reply score there: the
    turn before may have been recorded later.
    """
    found = entries.get_any(conn, v, ids, known_at=known_at)
    follows: dict[int, str] = {}
    if context and known_at is None:
        before = {i: prev for i, (prev, _, _) in _sql.neighbours(conn, v, ids, as_of, after=False).items()}
        said = {e.id: e for e in entries.get_any(conn, v, list(set(before.values())))}
        follows = {i: cut(_said(said[prev]), CONTEXT_EXCERPT) for i, prev in before.items() if prev in said}
    return [
        view(e.id, e.type, e.valid_from[:10], bool(e.superseded_by), e.title, e.content, e.speaker, excerpt,
             follows=follows.get(e.id))
        for e in found
    ]


def view(
    eid: int, etype: str, date: str, superseded: bool, title: str, content: str, speaker: str | None, excerpt: int,
    *, follows: str | None = None,
):
    """One entry as the advisor is shown it (`shown`'s rows, or an entry not yet written): title + content cut to
    `excerpt` bytes."""
    from arbiter.advisor import Candidate as Shown

    return Shown(id=eid, type=etype, date=date, superseded=superseded, text=cut(f"{title}\n{content}", excerpt),
                 speaker=speaker, follows=follows)


def _said(e) -> str:
    """A turn as one line: "Speaker: content" (the content alone when no speaker is recorded)."""
    text = " ".join(e.content.split())
    return f"{e.speaker}: {text}" if e.speaker else text


def _reorder(candidates: list[Candidate], depth: int, order: list[int], part: str) -> list[Candidate]:
    """Put the head in the advisor's order (it returns a permutation of the head); the tail keeps its order."""
    head = {c.id: c for c in candidates[:depth]}
    reordered = [head[i] for i in order if i in head]
    for rank, c in enumerate(reordered, 1):
        c.parts[part] = float(rank)
    return reordered + candidates[depth:]


def recall_with_llm(conn: apsw.Connection, v, p: RecallParams, advisor) -> RecallResult:
    """The lexical pipeline, then the LLM layers `p` asks for, within `p.deadline_ms`."""
    deadline = time.monotonic() + p.deadline_ms / 1000
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    if advisor is None:
        return msgspec.structs.replace(recall(conn, v, p), note=NO_KEY)
    depth = max(p.limit, RERANK_DEPTH)
    ranking = search(conn, v, p, depth=depth)
    if ranking is None:
        return unranked(conn, v, p)
    notes: list[str] = []
    searched: list[str] = []
    candidates = ranking.candidates

    if p.expand:
        expansions = consult(advisor, notes, "expand", lambda advisor: advisor.expansions(
            p.query, model=_model(p.expand, advisor.fast_model), deadline=deadline))
        if expansions is not None:
            passes = [("query", QUERY_WEIGHT, candidates)]
            for i, text in enumerate(expansions, 1):
                extra = search(conn, v, p, text=text, depth=depth)
                if extra is not None:
                    passes.append((f"expansion{i}", EXPANSION_WEIGHT, extra.candidates))
            candidates, searched = fuse(passes), expansions

    for choice, default, head, excerpt, name in (
        (p.rerank, advisor.fast_model, RERANK_DEPTH, COARSE_EXCERPT, "rerank"),
        # The cascade reorders only its head: the tail keeps its order, so
        # recall at depths past FINE_DEPTH never drops below the coarse pass.
        (p.rerank_fine, advisor.strong_model, FINE_DEPTH, FINE_EXCERPT, "rerank_fine"),
    ):
        if not choice or len(candidates) < 2:
            continue
        shown_head = shown(conn, v, [c.id for c in candidates[:head]], excerpt, known_at=known_at, context=True,
                           as_of=as_of)
        order = consult(advisor, notes, name, lambda advisor: advisor.rerank(
            p.query, shown_head, model=_model(choice, default), deadline=deadline))
        if order is not None:
            candidates = _reorder(candidates, head, order, name)

    result = render(conn, v, Ranking(ranking.query, candidates, ranking.expression), p)
    return msgspec.structs.replace(result, note="; ".join(notes) or None, searched=searched)
