"""The development sets rank the same on both engines (issue 31), on a slice of them small enough for the suite.

The slice (tests/data/README.md): LoCoMo dev's conv-30 whole (its turns are the
LoCoMo set, its observations the notes set) and twelve LongMemEval-S dev
questions with cut haystacks (asked as written and in the third person).
Written into a SQLite file and into PostgreSQL through the store, each the way
bench.devsets writes its homes, and every question recalled on both as shipped
(bench/engine_parity.py, which runs the same on the whole sets). PostgreSQL's BM25 with its k1 off by 0.3
fails all three tests (overlaps 0.975-0.981); off by 0.05, the first and the third (LoCoMo's R@1 -2.5 points);
off by 1e-6, the third alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.engine_parity import BOUND, HOMES, run

DATA = Path(__file__).parents[1] / "data"

#: On the whole development sets every question's top 10 is the same ids in the same order on both engines
#: (docs/benchmarks.md): PostgreSQL computes FTS5's BM25 floats operation for operation and both break ties by
#: id, so the expected overlap is 1. The bound leaves room for a float tie at the tenth place falling the
#: other way in one list, and little more: one entry of one of the smallest set's 12 lists (LME) costs 0.008.
MIN_OVERLAP = 0.99


@pytest.fixture(scope="module")
def parity(pg_databases, tmp_path_factory):
    dbs = {key: pg_databases.create() for key in HOMES}
    try:
        yield {p.name: p for p in run(tmp_path_factory.mktemp("parity"), DATA / "longmemeval_slice.json.gz",
                                      DATA / "locomo_conv30.json.gz", dbs)}
    finally:
        for url in dbs.values():
            pg_databases.drop(url)


def test_each_set_recalls_equally_well_on_both_engines(parity) -> None:
    for p in parity.values():
        assert all(abs(d) <= BOUND for d in p.deltas()), (p.name, p.sqlite, p.postgresql)


def test_each_set_puts_the_same_entries_in_its_top_ten(parity) -> None:
    for p in parity.values():
        assert p.overlap >= MIN_OVERLAP, (p.name, p.overlap, p.differing[:3])


def test_the_same_hits_score_the_same(parity) -> None:
    # PostgreSQL's BM25 is FTS5's expression, operation for operation (store/pg/fulltext.py): a gap past float
    # noise means a statistic or a weight differs even where it moved no entry across another.
    for p in parity.values():
        assert p.same > 0 and p.score_gap <= 1e-9, (p.name, p.same, p.score_gap)
