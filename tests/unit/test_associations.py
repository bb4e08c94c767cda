"""The association graph's invariant: rebuilding from the entries gives exactly the edges incremental derivation gave."""

from __future__ import annotations

import apsw
from hypothesis import given, settings, strategies as st

from arbiter import associations
from arbiter.associations import core
from arbiter.model import RememberParams
from arbiter.recall.query import STOPWORDS, tokenizer
from arbiter.store import entries, open_database, tenants, users

NOW = 1_800_000_000 * 1_000_000  # 2027: every valid_from below is in its past

VOCABULARY = ("billing invoice payment retries backoff finance overdue ledger refund customer card "
              "gateway webhook timeout deploy rollback").split()
texts = st.lists(st.sampled_from(VOCABULARY), min_size=4, max_size=12).map(" ".join)
writes = st.lists(st.tuples(texts, st.sampled_from([1, 2, 3, 4, 5])), min_size=2, max_size=14)


def stored(db) -> set[tuple]:
    return set(db.execute("SELECT tenant_id, a, b, weight FROM associations"))


@settings(max_examples=40, deadline=None)
@given(batch=writes, order=st.randoms(use_true_random=False))
def test_rebuild_equals_incremental_derivation(tmp_path_factory, batch, order):
    db = open_database(tmp_path_factory.mktemp("a") / "a.db", synchronous="NORMAL")
    with db:
        tenant, _ = tenants.create_tenant(db, "t", now=1)
        other, _ = tenants.create_tenant(db, "u", now=1)
    order.shuffle(batch)
    for i, (text, hour) in enumerate(batch):
        with db:
            # The same text in a second tenant: derivation must never pair across tenants.
            for t in (tenant, other):
                eid = entries.remember(db, users.first_viewer(db, t), RememberParams(type="context", title=text[:20], content=text,
                                                             valid_from=hour * 3600), now=NOW + i)
                associations.derive(db, t, eid, now=NOW + i)
    incremental = stored(db)
    assert all(t in (tenant, other) for t, *_ in incremental)
    owner = dict(db.execute("SELECT id, tenant_id FROM entries"))
    assert all(owner[a] == owner[b] == t for t, a, b, _ in incremental)
    with db:
        associations.rebuild(db, tenant, now=NOW + 99)
        associations.rebuild(db, other, now=NOW + 99)
    assert stored(db) == incremental


def test_catch_up_derives_what_bulk_writes_left(tmp_path):
    db = open_database(tmp_path / "a.db")
    with db:
        tenant, _ = tenants.create_tenant(db, "t", now=1)
        text = "billing invoice payment retries backoff finance overdue ledger"
        entries.remember_many(db, users.first_viewer(db, tenant), [RememberParams(type="context", title="x", content=text)] * 3, now=2)
    assert core.pending(db) == 3 and stored(db) == set()
    with db:
        assert associations.catch_up(db, now=3, limit=2) == 2
        assert associations.catch_up(db, now=3) == 1
        assert associations.catch_up(db, now=3) == 0
    assert core.pending(db) == 0
    assert {(a, b) for _, a, b, _ in stored(db)} == {(1, 2), (1, 3), (2, 3)}


def test_causal_markers():
    assert core.has_causal_marker("We chose SQLite because of Redis")
    assert core.has_causal_marker("The outage led to a rollback")
    assert not core.has_causal_marker("Becausewhy is not a word; neither is leaded")
    assert core.has_causal_marker("THAT'S WHY we paused; Due To the freeze")
    assert not core.has_causal_marker("a becausey thusly text, leads toward nothing")


PIECES = [*"aeiouAEIOU Thé\u0301ß'-.,0123456789İǅ東", "the ", "The ", "and ", "running ", "café ", "x86_64 "]


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_words_equal_the_token_by_token_path(text):
    """The two-list tokenization gives exactly what reading each token with its offsets gives."""
    conn = apsw.Connection(":memory:")
    by_token = tokenizer(conn)
    assert core.Words(conn)(text) == frozenset(
        stem for surface, stem in by_token(text) if surface not in STOPWORDS and not stem.isdigit()
    )
    conn.close()
