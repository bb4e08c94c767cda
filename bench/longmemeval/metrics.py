"""Retrieval metrics over ranked entry ids. Pure functions: no I/O, no client."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

import msgspec

#: Depth of every ranked list the harness asks for and scores.
K = 10


#: Which questions are scored. "official" is LongMemEval's own average
#: (`run_retrieval.py`): every question but the abstention (`_abs`) ones; one
#: with no flagged (`has_answer`) turn has no correct unit and scores 0 on
#: every metric. A question with no ground truth at all (no answer session; a
#: LoCoMo question whose evidence names no turn) is counted, not scored.
#: "fallback" scores those with no flagged turn with every turn of the answer
#: sessions as ground truth, abstention included (round 1's protocol).
TRUTH_MODES = ("official", "fallback")


class Outcome(msgspec.Struct, kw_only=True):
    """One question's recall under one variant: what came back, what should have, how long it took.

    `truth_from` says where the ground truth came from ("turns" flagged,
    "sessions" as a fallback, "evidence" for LoCoMo, "none").
    """

    question_id: str
    question_type: str
    ranked: list[int]
    truth: list[int]
    answer_sessions: list[int]
    latency_ms: float
    note: str | None = None
    abstention: bool = False
    truth_from: str = "turns"


def scored(o: Outcome, truth: str = "official") -> bool:
    """Whether `o` counts under the truth mode (see TRUTH_MODES)."""
    if not o.truth:
        return False  # no answer session at all: nothing to score against, in either mode
    if truth == "fallback":
        return True
    return not o.abstention


class Latency(msgspec.Struct):
    """Percentiles of recall round trips in milliseconds (None with no queries)."""

    p50: float | None
    p95: float | None
    p99: float | None


class Scores(msgspec.Struct, kw_only=True):
    """Scores over the questions that have ground truth; None when there are none.

    `n` counts scored questions, `no_truth` the queried questions left out for
    lack of ground truth, `notes` the recalls that came back with a note (an
    LLM stage that fell back to the lexical order says so there).
    """

    n: int
    no_truth: int
    r_at_1: float | None = msgspec.field(name="r@1")
    r_at_5: float | None = msgspec.field(name="r@5")
    r_at_10: float | None = msgspec.field(name="r@10")
    mrr: float | None
    ndcg_at_10: float | None = msgspec.field(name="ndcg@10")
    #: A turn of an answer session among the top 5 turns. Not LongMemEval's session recall, which ranks
    #: sessions (turn rankings widened to 5 distinct sessions): `python -m bench.longmemeval official` has that.
    answer_session_turn_at_5: float | None = msgspec.field(name="answer_session_turn@5")
    latency_ms: Latency
    notes: int = 0


class VariantScores(Scores, kw_only=True):
    """Scores for one variant, overall and per question type."""

    by_type: dict[str, Scores] = {}


def hit_at(ranked: Sequence[int], relevant: Collection[int], k: int) -> bool:
    """Whether any relevant id is among the first k."""
    return any(i in relevant for i in ranked[:k])


def first_rank(ranked: Sequence[int], relevant: Collection[int]) -> int | None:
    """The rank (from 1) of the first relevant id, None if none is ranked."""
    return next((rank for rank, i in enumerate(ranked, 1) if i in relevant), None)


def reciprocal_rank(ranked: Sequence[int], relevant: Collection[int]) -> float:
    """1 / the rank of the first relevant id, 0 if none is ranked."""
    rank = first_rank(ranked, relevant)
    return 0.0 if rank is None else 1.0 / rank


def recall_all_at(ranked: Sequence[int], relevant: Collection[int], k: int) -> bool:
    """Whether every relevant id is among the first k (vacuously true with none, as the official code has it)."""
    top = set(ranked[:k])
    return all(i in top for i in relevant)


def _discount(rank: int) -> float:
    # LongMemEval's eval_utils.dcg: rank 1 undiscounted, rank r >= 2 divided
    # by log2(r), so ranks 1 and 2 weigh the same (the textbook form divides
    # rank r by log2(r + 1)).
    return 1.0 if rank == 1 else 1.0 / math.log2(rank)


def ndcg_at(ranked: Sequence[int], relevant: Collection[int], k: int) -> float:
    """NDCG@k with binary relevance, LongMemEval's discount; an id ranked twice earns credit once."""
    if not relevant:
        return 0.0
    seen: set[int] = set()
    dcg = 0.0
    for rank, i in enumerate(ranked[:k], 1):
        if i in relevant and i not in seen:
            seen.add(i)
            dcg += _discount(rank)
    ideal = sum(_discount(rank) for rank in range(1, min(len(set(relevant)), k) + 1))
    return dcg / ideal


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def scores(outcomes: Iterable[Outcome], *, truth: str = "official") -> Scores:
    """Average each metric over the outcomes the truth mode scores; latency over all of them."""
    outcomes = list(outcomes)
    graded = [o for o in outcomes if scored(o, truth)]
    # Officially, a question with no flagged turn has no correct unit: a miss, whatever is ranked.
    sets = [(o.ranked, set(o.truth) if truth == "fallback" or o.truth_from != "sessions" else set(),
             set(o.answer_sessions) if truth == "fallback" or o.truth_from != "sessions" else set())
            for o in graded]
    latencies = [o.latency_ms for o in outcomes]
    return Scores(
        n=len(graded),
        no_truth=len(outcomes) - len(graded),
        r_at_1=_mean([float(hit_at(r, t, 1)) for r, t, _ in sets]),
        r_at_5=_mean([float(hit_at(r, t, 5)) for r, t, _ in sets]),
        r_at_10=_mean([float(hit_at(r, t, 10)) for r, t, _ in sets]),
        mrr=_mean([reciprocal_rank(r[:K], t) for r, t, _ in sets]),
        ndcg_at_10=_mean([ndcg_at(r, t, 10) for r, t, _ in sets]),
        answer_session_turn_at_5=_mean([float(hit_at(r, s, 5)) for r, _, s in sets]),
        latency_ms=Latency(*(round(percentile(latencies, q), 2) if latencies else None for q in (50, 95, 99))),
        notes=sum(o.note is not None for o in outcomes),
    )


def variant_scores(outcomes: Iterable[Outcome], *, truth: str = "official") -> VariantScores:
    """`scores` overall and for each question type (types in name order)."""
    outcomes = list(outcomes)
    by_type: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_type.setdefault(o.question_type, []).append(o)
    overall = scores(outcomes, truth=truth)
    return VariantScores(
        **{f: getattr(overall, f) for f in Scores.__struct_fields__},
        by_type={t: scores(by_type[t], truth=truth) for t in sorted(by_type)},
    )
