"""The validity-window invariant: `list(as_of=T)` is exactly a replay of the event log up to T.

Random sequences of remember / forget / remember-with-supersedes run through the
store at controlled, non-decreasing instants (ties included: two events in the
same microsecond); then, for instants around every event, the store's answer
must equal a brute-force replay of the events at or before T.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from arbiter._time import US, format_time
from arbiter.errors import NotFound
from arbiter.model import ListParams, RememberParams
from arbiter.store import entries, open_database, tenants

T0 = 1795168800 * US

# Steps between events: the same instant, one microsecond, a millisecond, a second.
STEPS = st.sampled_from([0, 1, 2, 1000, US])


@st.composite
def event_logs(draw):
    events: list[tuple[int, str, tuple[int, ...]]] = []  # (instant, kind, ordinals of earlier entries)
    t, made = T0, 0
    for _ in range(draw(st.integers(1, 30))):
        t += draw(STEPS)
        kind = draw(st.sampled_from(["remember", "forget", "supersede"] if made else ["remember"]))
        if kind == "remember":
            events.append((t, kind, ()))
            made += 1
        elif kind == "forget":
            events.append((t, kind, (draw(st.integers(0, made - 1)),)))
        else:
            olds = draw(st.lists(st.integers(0, made - 1), min_size=1, max_size=3))
            events.append((t, kind, tuple(olds)))
            made += 1
    instants = sorted({when + d for when, _, _ in events for d in (-1, 0, 1)})
    probes = draw(st.lists(st.sampled_from(instants), min_size=1, max_size=10, unique=True))
    return events, probes


def replay(events, until: int | None) -> set[int]:
    """Brute force: the set of entry ordinals alive after every event at or before `until`."""
    alive: set[int] = set()
    made = 0
    for when, kind, olds in events:
        if until is not None and when > until:
            break
        if kind == "forget":
            alive.discard(olds[0])
        else:
            alive.difference_update(olds)
            alive.add(made)
            made += 1
    return alive


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    conn = open_database(tmp_path_factory.mktemp("prop") / "arbiter.db")
    yield conn
    conn.close()


_tenant_names = (f"t{i}" for i in itertools.count())


@settings(max_examples=120, deadline=None)
@given(log=event_logs())
def test_list_as_of_equals_replay(db, log):
    events, probes = log
    with db:  # a fresh tenant per example: nothing leaks between examples
        tenant, _ = tenants.create_tenant(db, next(_tenant_names), now=T0)
    ids: list[int] = []
    for when, kind, olds in events:
        with db:
            if kind == "forget":
                entries.forget(db, tenant, ids[olds[0]], now=when)
                continue
            params = RememberParams(
                type="project",
                title=f"entry {len(ids)}",
                content="body",
                supersedes_ids=[ids[o] for o in olds],
                valid_from=format_time(when),
            )
            ids.append(entries.remember(db, tenant, params, now=when))

    def store_at(as_of: int | None) -> set[int]:
        with db:
            listed = entries.list_entries(
                db, tenant, ListParams(as_of=None if as_of is None else format_time(as_of), limit=1000)
            )
        return {e.id for e in listed}

    for probe in probes:
        expected = {ids[o] for o in replay(events, probe)}
        assert store_at(probe) == expected, f"as_of={format_time(probe)}"
        for eid in ids:  # get(as_of) agrees with list(as_of), entry by entry
            try:
                entries.get(db, tenant, eid, as_of=probe)
                visible = True
            except NotFound:
                visible = False
            assert visible == (eid in expected)
    assert store_at(None) == {ids[o] for o in replay(events, None)}
