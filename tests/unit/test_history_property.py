"""Both time axes at once: `list` and `get` at any (as_of, known_at) equal a brute-force replay of the event log.

Random sequences of remember (optionally superseding), update, forget,
restore and `supersedes` links run through the store at controlled,
non-decreasing record instants (ties included). A model replays the same log
with the documented rules: valid time is [valid_from, valid_to); a change is
recorded at its instant, or one microsecond after the entry's previous state
if that is later (so every record window is non-empty); a `supersedes` needs
an active source and target; `restore` is refused while a `supersedes` link
retires the entry. Then, for (as_of, known_at) pairs around every event, the
store's answers must equal the model's, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings, strategies as st

from arbiter._time import US, format_time
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.model import ListParams, RememberParams, UpdateParams
from arbiter.store import entries, relations, tenants, users

T0 = 1795168800 * US

# Steps between events: the same instant, one microsecond, a millisecond, a second.
STEPS = st.sampled_from([0, 1, 2, 1000, US])
# How far before its record instant an entry says it became valid.
BACKDATE = st.sampled_from([0, 1, 1000, 5 * US])


@dataclass
class State:
    title: str
    valid_from: int
    valid_to: int | None


@dataclass
class Model:
    """The replay: per entry ordinal, its recorded states [(stamp, State)], and the supersedes links."""

    states: list[list[tuple[int, State]]] = field(default_factory=list)
    links: set[tuple[int, int]] = field(default_factory=set)  # (source, target) ordinals

    def current(self, k: int) -> State:
        return self.states[k][-1][1]

    def record(self, k: int, when: int, state: State) -> None:
        stamp = max(when, self.states[k][-1][0] + 1)
        self.states[k].append((stamp, state))

    def retire(self, k: int, at: int, when: int) -> None:
        s = self.current(k)
        self.record(k, when, State(s.title, s.valid_from, max(s.valid_from, at)))

    def at(self, k: int, known_at: int | None) -> State | None:
        held = [s for stamp, s in self.states[k] if known_at is None or stamp <= known_at]
        return held[-1] if held else None

    def visible(self, as_of: int | None, known_at: int | None) -> dict[int, State]:
        out = {}
        for k in range(len(self.states)):
            s = self.at(k, known_at)
            if s is None:
                continue
            if as_of is None:
                ok = s.valid_to is None
            else:
                ok = s.valid_from <= as_of and (s.valid_to is None or as_of < s.valid_to)
            if ok:
                out[k] = s
        return out


@st.composite
def event_logs(draw):
    events = []
    t, made = T0, 0
    for _ in range(draw(st.integers(1, 25))):
        t += draw(STEPS)
        kinds = ["remember", "update", "forget", "restore", "link"] if made else ["remember"]
        kind = draw(st.sampled_from(kinds))
        if kind == "remember":
            olds = draw(st.lists(st.integers(0, made - 1), max_size=2, unique=True)) if made else []
            events.append((t, kind, (draw(BACKDATE), *olds)))
            made += 1
        elif kind == "link":
            events.append((t, kind, (draw(st.integers(0, made - 1)), draw(st.integers(0, made - 1)))))
        else:
            events.append((t, kind, (draw(st.integers(0, made - 1)),)))
    instants = sorted({when + d for when, _, _ in events for d in (-1, 0, 1)} | {T0 - 5 * US})
    probe = st.one_of(st.none(), st.sampled_from(instants))
    probes = draw(st.lists(st.tuples(probe, probe), min_size=1, max_size=8, unique=True))
    return events, probes


@pytest.fixture(scope="module")
def db(shared_db):
    """One store for every example (each writes a new tenant), on each engine."""
    return shared_db


_tenant_names = (f"h{i}" for i in itertools.count())


def apply(db, v: users.Viewer, model: Model, ids: list[int], when: int, kind: str, args: tuple) -> None:
    """Run one event on the store and on the model; an event the rules refuse must be refused by both."""
    # Ordinals count the remembers drawn; a refused one made nothing, so map them onto what exists.
    if kind == "remember":
        backdate, *drawn = args
        olds = list(dict.fromkeys(o % len(ids) for o in drawn)) if ids else []
        valid_from = when - backdate
        usable = all(model.current(o).valid_to is None for o in olds)
        params = RememberParams(
            type="project", title=f"entry {len(ids)}", content="body",
            supersedes_ids=[ids[o] for o in olds], valid_from=format_time(valid_from),
        )
        if not usable:
            with pytest.raises(InvalidParams), db:
                entries.remember(db, v, params, now=when)
            return
        with db:
            ids.append(entries.remember(db, v, params, now=when))
        model.states.append([(when, State(params.title, valid_from, None))])
        for o in olds:
            model.retire(o, valid_from, when)
            model.links.add((len(ids) - 1, o))
        return
    k = args[0] % len(ids)
    s = model.current(k)
    if kind == "update":
        if s.valid_to is not None:
            with pytest.raises(NotFound), db:
                entries.update(db, v, UpdateParams(id=ids[k], title="x"), now=when)
            return
        title = f"{s.title}'"
        with db:
            entries.update(db, v, UpdateParams(id=ids[k], title=title), now=when)
        model.record(k, when, State(title, s.valid_from, None))
    elif kind == "forget":
        with db:
            done = entries.forget(db, v, ids[k], now=when)
        assert done == (s.valid_to is None)
        if done:
            model.retire(k, when, when)
    elif kind == "restore":
        if s.valid_to is not None and any(target == k for _, target in model.links):
            with pytest.raises(Conflict), db:
                entries.restore(db, v, ids[k], now=when)
            return
        with db:
            done = entries.restore(db, v, ids[k], now=when)
        assert done == (s.valid_to is not None)
        if done:
            model.record(k, when, State(s.title, s.valid_from, None))
    else:  # link: args[0] supersedes args[1]
        target = args[1] % len(ids)
        if target == k or (k, target) in model.links:
            return  # self-loops and duplicates have their own tests
        if s.valid_to is not None or model.current(target).valid_to is not None:
            with pytest.raises(InvalidParams), db:
                relations.link(db, v, ids[k], "supersedes", ids[target], now=when)
            return
        with db:
            relations.link(db, v, ids[k], "supersedes", ids[target], now=when)
        model.retire(target, when, when)
        model.links.add((k, target))


@settings(max_examples=120, deadline=None)
@given(log=event_logs())
def test_list_and_get_at_any_as_of_and_known_at_equal_the_replay(db, log):
    events, probes = log
    with db:  # a fresh tenant per example: nothing leaks between examples
        tenant, _ = tenants.create_tenant(db, next(_tenant_names), now=T0)
        v = users.first_viewer(db, tenant)  # its one user: no membership changes, so read once
    model, ids = Model(), []
    for when, kind, args in events:
        apply(db, v, model, ids, when, kind, args)

    for as_of, known_at in probes:
        expected = model.visible(as_of, known_at)
        where = f"as_of={format_time(as_of)} known_at={format_time(known_at)}"
        with db:
            listed = entries.list_entries(db, v, ListParams(
                as_of=None if as_of is None else format_time(as_of),
                known_at=None if known_at is None else format_time(known_at),
                limit=1000,
            ))
        assert {e.id: e.title for e in listed} == {ids[k]: s.title for k, s in expected.items()}, where
        for k, eid in enumerate(ids):  # get agrees with list, entry by entry, state by state
            with db:
                try:
                    e = entries.get(db, v, eid, as_of=as_of, known_at=known_at)
                except NotFound:
                    e = None
            s = expected.get(k)
            assert (e is None) == (s is None), f"#{eid} {where}"
            if e is not None:
                assert (e.title, e.valid_from, e.valid_to) == (
                    s.title, format_time(s.valid_from), format_time(s.valid_to)
                ), f"#{eid} {where}"
