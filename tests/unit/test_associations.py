"""The association graph's invariant: rebuilding from the entries gives exactly the edges incremental derivation gave."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import given, settings, strategies as st

from arbiter import associations, derive
from arbiter.associations import core
from arbiter.model import RememberParams, UpdateParams
from arbiter.recall.query import STOPWORDS, tokenizer
from arbiter.store import entries, tenants, users
from tests.conftest import new_sqlite

NOW = 1_800_000_000 * 1_000_000  # 2027: every valid_from below is in its past

pytestmark = pytest.mark.both_engines

VOCABULARY = ("billing invoice payment retries backoff finance overdue ledger refund customer card "
              "gateway webhook timeout deploy rollback").split()
texts = st.lists(st.sampled_from(VOCABULARY), min_size=4, max_size=12).map(" ".join)
writes = st.lists(st.tuples(texts, st.sampled_from([1, 2, 3, 4, 5])), min_size=2, max_size=14)


def stored(db) -> set[tuple]:
    return set(db.execute("SELECT tenant_id, a, b, weight FROM associations"))


@settings(max_examples=40, deadline=None)
@given(batch=writes, order=st.randoms(use_true_random=False))
def test_rebuild_equals_incremental_derivation(tmp_path_factory, batch, order):
    # A SQLite file of its own per example (the similarity edges it compares need full text: PROBE).
    db = new_sqlite(tmp_path_factory.mktemp("a") / "a.db", synchronous="NORMAL")
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


def test_the_idle_writer_derives_what_bulk_writes_left(db, tenant):
    with db:
        text = "billing invoice payment retries backoff finance overdue ledger"
        entries.remember_many(db, users.first_viewer(db, tenant), [RememberParams(type="context", title="x", content=text, allow_duplicate=True)] * 3, now=2)
    assert derive.pending(db, names=("associations",)) == 3 and stored(db) == set()
    with db:
        derive.drain(db, now=3, urgent=False)
    assert derive.pending(db) == 0
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


NEAR = ["billing invoice payment retries backoff finance overdue ledger",
        "billing invoice payment retries backoff finance overdue refund",
        "billing invoice payment retries backoff finance ledger refund"]


def _write(db, tenant, text, *, v=None, hour=1, derive=True):
    with db:
        eid = entries.remember(db, v or users.first_viewer(db, tenant),
                               RememberParams(type="context", title=text[:20], content=text, valid_from=hour * 3600),
                               now=NOW)
        if derive:
            associations.derive(db, tenant, eid, now=NOW)
    return eid


def test_rebuild_gives_the_edges_incremental_derivation_gave_near_duplicates(db, tenant):
    a, b, c = (_write(db, tenant, text) for text in NEAR)
    assert {(x, y) for _, x, y, _ in stored(db)} == {(a, b), (a, c), (b, c)}  # every pair shares 7 of 9 words
    # Three later entries closer to `second` than `first` is: its edge to `first` must survive a rebuild.
    base = "alpha bravo charlie delta echo foxtrot golf hotel"
    first = _write(db, tenant, base.replace("golf hotel", "india juliet"))  # 6 of 10 words shared with `base`
    second = _write(db, tenant, base)
    for word in ("kilo", "lima", "mike"):
        _write(db, tenant, base.replace("hotel", word))  # 7 of 9
    incremental = stored(db)
    assert (first, second) in {(x, y) for _, x, y, _ in incremental}
    with db:
        associations.rebuild(db, tenant, now=NOW + 1)
    assert stored(db) == incremental


def test_rebuild_drops_an_edge_the_entries_no_longer_support(db, tenant):
    a, b = (_write(db, tenant, text) for text in NEAR[:2])
    assert {(x, y) for _, x, y, _ in stored(db)} == {(a, b)}
    with db:
        entries.update(db, users.first_viewer(db, tenant),
                       UpdateParams(id=b, content="gateway webhook timeout deploy rollback customer card"), now=NOW + 1)
        associations.rebuild(db, tenant, now=NOW + 2)
    assert stored(db) == set()


def test_entries_naming_one_entity_are_associated_and_a_reason_suggests_its_cause(db, tenant):
    from arbiter.entities.core import Linker

    slow = _write(db, tenant, "the Falcon queue was slow all morning", hour=1, derive=False)
    _write(db, tenant, "lunch with the design team", hour=300, derive=False)
    why = _write(db, tenant, "we added retries to Falcon because the queue was slow", hour=600, derive=False)
    with db:
        for eid in (slow, why):
            Linker(db, tenant, NOW).link(eid, [("Falcon", "tool", "given")])
        v = users.first_viewer(db, tenant)
        found = core.of(db, v, why)
        candidates = associations.derive(db, tenant, why, now=NOW)
    assert [(a.other_id, a.kind, a.sub_type) for a in found] == [(slow, "entity", "Falcon")]  # days apart: no proximity
    assert [(c.kind, c.source_id, c.target_id) for c in candidates] == [("causal", slow, why)]


def test_proximity_reaches_24_hours_and_no_further(db, tenant):
    first = _write(db, tenant, "alpha", hour=100, derive=False)
    near = _write(db, tenant, "beta", hour=120, derive=False)
    _write(db, tenant, "gamma", hour=130, derive=False)
    with db:
        found = core.temporal(db, users.first_viewer(db, tenant), core._row(db, tenant, first))
    assert [(x.other_id, x.weight) for x in found if x.sub_type == "proximity"] == [(near, round(1 / 21, 4))]


def test_similar_candidates_are_only_entries_the_writer_sees(db, tenant):
    with db:
        ann, ben = (users.viewer(db, tenant, users.create_user(db, tenant, n, now=1)[0], n) for n in ("ann", "ben"))
    hidden = _write(db, tenant, NEAR[0], v=ann, derive=False)
    mine = _write(db, tenant, "billing invoice payment retries backoff customer refund webhook", v=ben, derive=False)
    with db:
        for_ben = associations.derive(db, tenant, mine, now=NOW, v=ben)
        for_ann = associations.derive(db, tenant, mine, now=NOW, v=ann)
    assert [c.id for c in for_ann if c.kind == "similar"] == [hidden]  # 5 of 11 words: a candidate, for who sees it
    assert [c.id for c in for_ben if c.kind == "similar"] == []
