"""LongMemEval's own retrieval protocol (`src/retrieval/run_retrieval.py`), run on Arbiter's recall.

    python -m bench.longmemeval official --dataset longmemeval_s.json.gz

What the official code does, and so what this does:

- A fresh index per question, holding only that question's haystack.
- The corpus is the user's turns only. At `session` granularity a unit is a
  session (its user turns joined by spaces); at `turn` granularity a unit is
  one user turn, id `<session>_<turn number from 1>`.
- A unit is correct when it is (a user turn with `has_answer` in) an answer
  session: the official code renames an answer session's unflagged turns,
  and an answer session none of whose user turns is flagged, to `noans`. A question whose evidence is only in assistant
  turns therefore has no correct unit and scores 0 (the official code keeps
  it in the mean); `_abs` questions are skipped.
- recall_any@k (a correct unit in the top k), recall_all@k (every correct
  unit in the top k), ndcg_any@k (binary relevance, rank 1 and rank 2 both
  undiscounted) for k in 1, 3, 5, 10, 30, 50; at turn granularity, also at
  session level: turns mapped to their sessions, k widened until the top
  holds k distinct sessions.

Where this departs, and why (bench/longmemeval/README.md says it too):

- The ranking is Arbiter's recall (graduated: the haystack is one
  conversation), through the library in this process rather than the
  socket: a daemon per question would measure start-up, not retrieval.
- Recall returns only units that match a query word (at most 200); the
  official BM25 ranks every unit. Units that match nothing follow, newest
  first (the official argsort leaves ties in an arbitrary order).
- Empty units (no user text) cannot be stored; they join that tail.
- The mean is also reported over the questions that have a correct unit
  ("scored"), which is what most published numbers appear to use.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from arbiter.model import CONTENT_MAX_BYTES, RecallParams, RememberParams
from arbiter.recall import recall
from arbiter.store import open_database
from arbiter.store.entries import remember_many
from arbiter.store.tenants import create_conversation, create_tenant
from arbiter.store.users import first_viewer
from bench.longmemeval.dataset import Question, cut_utf8, make_title, parse_date
from bench.longmemeval.metrics import hit_at, ndcg_at, percentile, recall_all_at
from bench.longmemeval.phrasing import phrase

KS = (1, 3, 5, 10, 30, 50)
GRANULARITIES = ("session", "turn")
#: The deepest ranking recall returns in one call.
DEPTH = 200


class Unit(msgspec.Struct, gc=False):
    """One retrievable unit of the official corpus.

    `session` is what the unit counts as at session level: an answer
    session's unflagged turns count as a session of their own ("noans"), as
    the official renaming makes them.
    """

    id: str
    session: str
    text: str
    timestamp: int
    correct: bool


def corpus(q: Question, granularity: str) -> list[Unit]:
    """The question's haystack as the official code indexes it (user turns only).

    The official code finds answer sessions by the "answer" in their ids;
    here by `answer_session_ids`, which names the same sessions in
    LongMemEval and lets a fixture use any ids.
    """
    out: list[Unit] = []
    gold = set(q.answer_session_ids)
    for sid, date, turns in zip(q.haystack_session_ids, q.haystack_dates, q.haystack_sessions):
        when = parse_date(date)
        users = [(i, t) for i, t in enumerate(turns) if t.role == "user"]
        if granularity == "session":
            right = sid in gold and any(t.has_answer for _, t in users)
            out.append(Unit(sid, sid, " ".join(t.content for _, t in users), when, right))
            continue
        for i, t in users:
            right = sid in gold and bool(t.has_answer)
            session = sid if right or sid not in gold else f"{sid}#noans"
            out.append(Unit(f"{sid}_{i + 1}", session, t.content, when, right))
    return out


class Metrics(msgspec.Struct):
    """One question's official metrics: {"session"|"turn": {"recall_any@5": 1.0, ...}}."""

    question_id: str
    question_type: str
    correct: int
    metrics: dict[str, dict[str, float]]
    latency_ms: float


def evaluate(ranking: Sequence[int], units: Sequence[Unit], granularity: str) -> dict[str, dict[str, float]]:
    """The official metrics for a ranking of unit positions (every position once)."""
    correct = {i for i, u in enumerate(units) if u.correct}
    out: dict[str, dict[str, float]] = {granularity: {}}
    for k in KS:
        out[granularity].update(_three(ranking, correct, k))
    if granularity == "turn":
        # A turn's session is its id less the turn number, after the renaming:
        # an answer session's unflagged turns form a "noans_" session of
        # their own, so the relevant turns stay exactly the flagged ones.
        sessions = [u.session for u in units]
        wanted = {sessions[i] for i in correct}
        out["session"] = {}
        for k in KS:
            depth = widen(ranking, sessions, k)
            top = {sessions[i] for i in ranking[:depth]}
            out["session"][f"recall_any@{k}"] = float(any(s in top for s in wanted))
            out["session"][f"recall_all@{k}"] = float(all(s in top for s in wanted))
            out["session"][f"ndcg_any@{k}"] = ndcg_at(ranking, correct, depth)
    return out


def widen(ranking: Sequence[int], sessions: Sequence[str], k: int) -> int:
    """How deep to read a turn ranking so it names k distinct sessions (or all there are)."""
    depth = k
    while depth <= len(ranking) and len({sessions[i] for i in ranking[:depth]}) < k:
        depth += 1
    return depth


def _three(ranking: Sequence[int], correct: set[int], k: int) -> dict[str, float]:
    return {
        f"recall_any@{k}": float(hit_at(ranking, correct, k)),
        f"recall_all@{k}": float(recall_all_at(ranking, correct, k)),
        f"ndcg_any@{k}": ndcg_at(ranking, correct, k),
    }


def rank(q: Question, units: list[Unit], *, phrasing: str, disable: Sequence[str] = ()) -> tuple[list[int], float]:
    """Arbiter's ranking of the units in a fresh database of their own; (positions, recall ms)."""
    home = Path(tempfile.mkdtemp(prefix="arbiter-official-"))
    try:
        conn = open_database(home / "arbiter.db", synchronous="NORMAL")
        now = int(time.time() * 1_000_000)
        with conn:
            tenant, _ = create_tenant(conn, "default", now=now)
            viewer = first_viewer(conn, tenant)
            conversation = create_conversation(conn, viewer, q.question_id, now=now).id
            stored = [i for i, u in enumerate(units) if u.text.strip()]
            ids = remember_many(
                conn,
                viewer,
                [
                    RememberParams(
                        type="context",
                        title=make_title(cut_utf8(units[i].text, CONTENT_MAX_BYTES)),
                        content=cut_utf8(units[i].text, CONTENT_MAX_BYTES),
                        conversation_id=conversation,
                        valid_from=units[i].timestamp,
                        speaker="user",  # the official corpus holds the user's words only
                    )
                    for i in stored
                ],
                now=now,
            )
        position = dict(zip(ids, stored))
        p = RecallParams(
            query=phrase(q.question, phrasing), conversation_id=conversation, limit=DEPTH, disable=list(disable)
        )
        started = time.perf_counter()
        with conn:
            hits = recall(conn, viewer, p).hits
        ms = (time.perf_counter() - started) * 1000
        conn.close()
    finally:
        shutil.rmtree(home)
    ranked = [position[h.id] for h in hits]
    seen = set(ranked)
    # Units that match no query word: newest first, as an unranked tail.
    tail = sorted((i for i in range(len(units)) if i not in seen), key=lambda i: (-units[i].timestamp, -i))
    return ranked + tail, ms


class Summary(msgspec.Struct):
    """Means over the questions the official code averages, and over those with a correct unit."""

    granularity: str
    phrasing: str
    questions: int
    scored: int
    official: dict[str, dict[str, float]]
    scored_only: dict[str, dict[str, float]]
    latency_ms_p50: float | None


def run(
    questions: Sequence[Question], granularity: str, *, phrasing: str = "as-written", progress=lambda n: None
) -> tuple[Summary, list[Metrics]]:
    """Every non-abstention question, each in a fresh index; official means."""
    per: list[Metrics] = []
    for q in questions:
        progress(1)
        if q.abstention:
            continue
        units = corpus(q, granularity)
        ranking, ms = rank(q, units, phrasing=phrasing)
        correct = sum(u.correct for u in units)
        per.append(Metrics(q.question_id, q.question_type, correct, evaluate(ranking, units, granularity), ms))
    return summarize(per, granularity, phrasing), per


def summarize(per: Sequence[Metrics], granularity: str, phrasing: str) -> Summary:
    """The official mean (every non-abstention question) and the mean over questions with a correct unit."""

    def mean(rows: Sequence[Metrics]) -> dict[str, dict[str, float]]:
        if not rows:
            return {}
        levels = rows[0].metrics.keys()
        return {
            level: {m: round(sum(r.metrics[level][m] for r in rows) / len(rows), 4) for m in rows[0].metrics[level]}
            for level in levels
        }

    scored = [r for r in per if r.correct]
    latencies = [r.latency_ms for r in per]
    return Summary(
        granularity=granularity,
        phrasing=phrasing,
        questions=len(per),
        scored=len(scored),
        official=mean(per),
        scored_only=mean(scored),
        latency_ms_p50=round(percentile(latencies, 50), 2) if latencies else None,
    )
