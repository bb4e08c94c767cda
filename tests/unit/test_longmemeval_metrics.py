"""bench/longmemeval/metrics.py against hand-computed values."""

from __future__ import annotations

import math

import msgspec
import pytest

from hypothesis import given
from hypothesis import strategies as st

from bench.longmemeval.metrics import (
    Outcome,
    hit_at,
    ndcg_at,
    percentile,
    recall_all_at,
    reciprocal_rank,
    scores,
    variant_scores,
)


def approx(x: float):
    """Scores are rounded to 4 places."""
    return pytest.approx(x, abs=1e-4)


def test_hit_at() -> None:
    assert not hit_at([5, 3, 9], {9}, 2)
    assert hit_at([5, 3, 9], {9}, 3)
    assert not hit_at([], {1}, 10)
    assert not hit_at([1, 2], set(), 10)


def test_reciprocal_rank() -> None:
    assert reciprocal_rank([4, 7, 2], {2}) == pytest.approx(1 / 3)
    assert reciprocal_rank([4, 7, 2], {4, 2}) == 1.0
    assert reciprocal_rank([4, 7, 2], {8}) == 0.0


def test_ndcg() -> None:
    # LongMemEval's discount: rank 1 -> 1, rank r >= 2 -> 1/log2(r).
    # DCG = 1/log2(2) + 1/log2(3) = 1.63093; IDCG (2 relevant) = 1 + 1/log2(2) = 2
    assert ndcg_at([1, 2, 3], {2, 3}, 10) == pytest.approx(0.815465, abs=1e-6)
    # Rank 2 alone scores as much as rank 1 alone (the textbook form would give 0.631).
    assert ndcg_at([5, 2], {2}, 10) == 1.0
    assert ndcg_at([2, 3, 1], {2, 3}, 10) == pytest.approx(1.0)
    # Relevant beyond k earns nothing; the ideal is capped at k entries.
    assert ndcg_at([1, 2, 3], {3}, 2) == 0.0
    assert ndcg_at([7], set(range(20)) | {7}, 1) == 1.0
    # A repeated id is credited once, so NDCG stays within [0, 1].
    assert ndcg_at([2, 2], {2}, 10) == 1.0
    assert ndcg_at([1], set(), 10) == 0.0


def test_percentile_interpolates_like_numpy() -> None:
    values = [40.0, 10.0, 30.0, 20.0]
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 95) == pytest.approx(38.5)
    assert percentile(values, 99) == pytest.approx(39.7)
    assert percentile(values, 0) == 10.0
    assert percentile(values, 100) == 40.0
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def outcome(qid: str, qtype: str, ranked: list[int], truth: list[int], sessions: list[int], ms: float, **kw) -> Outcome:
    return Outcome(
        question_id=qid, question_type=qtype, ranked=ranked, truth=truth, answer_sessions=sessions, latency_ms=ms, **kw
    )


OUTCOMES = [
    # rank of first truth 2, answer session at 2
    outcome("a", "x", [10, 11, 12], [11], [11, 12], 10),
    # truth at rank 10, answer session at rank 6
    outcome("b", "x", list(range(20, 30)), [29], [25], 20),
    # truth at rank 1, one of two truth entries found
    outcome("c", "y", [40], [40, 41], [40, 41], 30),
    # no ground truth: queried (latency counts) but not scored
    outcome("d", "y", [], [], [], 40, note="n"),
]
# An abstention question (scored only with the fallback) and one with no flagged turn, whose truth is whole
# sessions: the official mean counts it as a miss (no correct unit), the fallback scores it against its sessions.
UNOFFICIAL = [
    outcome("e_abs", "y", [50], [50], [50], 50, abstention=True),
    outcome("f", "y", [61, 60], [60], [60], 60, truth_from="sessions"),
]


def test_truth_modes() -> None:
    official = scores(OUTCOMES + UNOFFICIAL)
    # LongMemEval's run_retrieval.py averages every non-abstention question: "f" ranks its session's turn
    # first and still scores 0, on every metric.
    assert (official.n, official.no_truth, official.r_at_1, official.r_at_10) == (4, 2, approx(1 / 4), approx(3 / 4))
    assert (official.mrr, official.answer_session_turn_at_5) == (approx((1 / 2 + 1 / 10 + 1) / 4), approx(2 / 4))
    fallback = scores(OUTCOMES + UNOFFICIAL, truth="fallback")
    assert (fallback.n, fallback.no_truth) == (5, 1)
    assert fallback.r_at_1 == approx(2 / 5)  # c and e_abs at rank 1
    assert fallback.r_at_5 == approx(4 / 5)


def official_ndcg(ranking: list[int], relevance: list[int], k: int) -> float:
    """LongMemEval's definition, written from eval_utils: rankings index a corpus of 0/1 relevances."""

    def dcg(rels: list[int]) -> float:
        rels = rels[:k]
        return (rels[0] + sum(r / math.log2(i) for i, r in enumerate(rels[1:], 2))) if rels else 0.0

    ideal = dcg(sorted(relevance, reverse=True))
    return dcg([relevance[i] for i in ranking[:k]]) / ideal if ideal else 0.0


@given(st.data())
def test_ndcg_matches_the_official_definition(data) -> None:
    n = data.draw(st.integers(1, 30))
    relevance = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    ranking = data.draw(st.permutations(range(n)))
    k = data.draw(st.sampled_from([1, 3, 5, 10, 30]))
    relevant = {i for i, r in enumerate(relevance) if r}
    assert ndcg_at(ranking, relevant, k) == pytest.approx(official_ndcg(ranking, relevance, k))
    top = set(ranking[:k])
    assert recall_all_at(ranking, relevant, k) == all(i in top for i in relevant)
    assert hit_at(ranking, relevant, k) == any(i in top for i in relevant)


def test_scores_by_hand() -> None:
    s = scores(OUTCOMES)
    assert (s.n, s.no_truth, s.notes) == (3, 1, 1)
    assert s.r_at_1 == approx(1 / 3)
    assert s.r_at_5 == approx(2 / 3)
    assert s.r_at_10 == approx(1.0)
    assert s.mrr == approx((1 / 2 + 1 / 10 + 1) / 3)
    ndcgs = [1.0, 1 / math.log2(10), 1 / 2]
    assert s.ndcg_at_10 == approx(sum(ndcgs) / 3)
    assert s.answer_session_turn_at_5 == approx(2 / 3)
    assert (s.latency_ms.p50, s.latency_ms.p95, s.latency_ms.p99) == (25.0, 38.5, 39.7)


def test_scores_by_type() -> None:
    v = variant_scores(OUTCOMES)
    assert list(v.by_type) == ["x", "y"]
    x, y = v.by_type["x"], v.by_type["y"]
    assert (x.n, x.no_truth, x.r_at_1, x.r_at_5, x.r_at_10) == (2, 0, 0.0, 0.5, 1.0)
    assert x.mrr == approx(0.3)
    assert x.latency_ms.p50 == 15.0
    assert (y.n, y.no_truth, y.r_at_1, y.mrr) == (1, 1, 1.0, 1.0)
    assert v.n == 3 and v.r_at_10 == 1.0


def test_no_scored_questions_give_none_not_zero() -> None:
    s = scores(OUTCOMES[3:])
    assert (s.n, s.r_at_1, s.mrr, s.ndcg_at_10) == (0, None, None, None)
    assert s.latency_ms.p50 == 40.0
    empty = scores([])
    assert empty.latency_ms.p50 is None


def test_wire_names_match_results_json() -> None:
    encoded = msgspec.json.decode(msgspec.json.encode(variant_scores(OUTCOMES)))
    assert {"n", "r@1", "r@5", "r@10", "mrr", "ndcg@10", "answer_session_turn@5", "latency_ms", "by_type"} <= encoded.keys()
    assert set(encoded["latency_ms"]) == {"p50", "p95", "p99"}
    assert {"n", "r@1", "r@5", "r@10"} <= encoded["by_type"]["x"].keys()
