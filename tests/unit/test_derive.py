"""The derive queue: its idle steps, and several writers sharing one PostgreSQL database."""

from __future__ import annotations

import pytest

from arbiter import derive, duplicates
from arbiter._time import US
from arbiter.associations import core as associations
from arbiter.entities import core as entity_core
from arbiter.entities.link import extracted_in
from arbiter.model import RememberParams
from arbiter.store import connect, engine, entries, open_database, tenants, users

T0 = 1_800_000_000 * US


def test_two_writers_split_the_queue_rather_than_wait_or_repeat(pg_url):
    """A step takes the rows no other transaction holds: a second daemon's idle writer, stepping while the first
    has not committed, goes on with the next rows at once (a lock wait would fail it, `lock_timeout`)."""
    a, b = open_database(pg_url), connect(pg_url)
    try:
        with a:
            tid, _ = tenants.create_tenant(a, "alice", now=T0)
            n = derive.DERIVERS["sketch"].step + 20
            entries.remember_many(a, users.first_viewer(a, tid), [
                RememberParams(type="context", title=f"t{i}", content=f"note number {i}") for i in range(n)], now=T0)
        a.execute("SET lock_timeout = '5s'")
        b.execute("SET lock_timeout = '5s'")
        while derive.pending(a, names=("entities",)):
            with a:
                derive.step(a, now=T0, urgent=True)
        with a:
            assert derive.step(a, now=T0, urgent=True)  # the first `step` sketch rows, not committed yet
            with b:
                assert derive.step(b, now=T0, urgent=True)  # the rows the first writer does not hold, at once
                assert derive.step(b, now=T0, urgent=True) is False  # and none of the first writer's
            assert 0 < n - derive.pending(b, names=("sketch",)) < 20
        while derive.pending(a, names=("sketch",)):
            with a:
                derive.step(a, now=T0, urgent=True)
        # Each entry's word key beside the fingerprint the store wrote with it: all sketched, none twice (a key
        # is its primary key's).
        assert a.execute("SELECT count(*) FROM (SELECT entry_id FROM entry_sketches GROUP BY entry_id "
                         "HAVING count(*) = 2) x").fetchone()[0] == n
    finally:
        a.close()
        b.close()


# ---- a step's entries derived together ------------------------------------------------------------------------

_PEOPLE = ["Dana", "Okafor", "Lindqvist", "Marisol", "Tobias"]


def _notes(n: int) -> list[RememberParams]:
    """Notes naming people mid-sentence and at a sentence's start, a word capitalised only for emphasis, dictionary
    and multi-word names, and every fourth a near copy of the one three before it: every deriver has work."""
    out: list[RememberParams] = []
    for i in range(n):
        if i % 4 == 3:
            before = out[-3]
            out.append(RememberParams(type="context", title=before.title, content=before.content + " again"))
            continue
        who, other = _PEOPLE[i % 5], _PEOPLE[(i * 3 + 1) % 5]
        out.append(RememberParams(type="context", title=f"sync {i}", content=(
            f"{who} reviewed the Growth plan with {other} on ticket {i}. {other} wants the growth numbers "
            f"in PostgreSQL before the Helena Duarte review; the staging cluster {i % 7} needs a new disk "
            f"and the migration runbook {i % 3} needs an owner")))
    return out


def _derived(conn, tenant_id: int) -> dict[str, list]:
    """The tenant's derived rows, with entries as their ordinal in the tenant and entities and names by name."""
    order = {r[0]: i for i, r in enumerate(conn.execute("SELECT id FROM entries WHERE tenant_id = ? ORDER BY id",
                                                         (tenant_id,)))}
    names = dict(conn.execute("SELECT id, name FROM entity_names WHERE tenant_id = ?", (tenant_id,)).fetchall())
    return {
        "entities": sorted(conn.execute("SELECT name, type, merged_into IS NULL FROM entities WHERE tenant_id = ?",
                                        (tenant_id,)).fetchall()),
        "names": sorted(conn.execute("SELECT x.name, n.name, n.is_alias, n.grams FROM entity_names n JOIN entities x "
                                     "ON x.tenant_id = n.tenant_id AND x.id = n.entity_id WHERE n.tenant_id = ?",
                                     (tenant_id,)).fetchall()),
        "links": sorted((order[e], x, how, names.get(n)) for e, x, how, n in conn.execute(
            "SELECT l.entry_id, x.name, l.how, l.name_id FROM entry_entities l JOIN entities x "
            "ON x.tenant_id = l.tenant_id AND x.id = l.entity_id WHERE l.tenant_id = ?", (tenant_id,))),
        "keys": sorted((order[e], k) for k, e in conn.execute(
            "SELECT key, entry_id FROM entry_sketches WHERE tenant_id = ?", (tenant_id,))),
        "edges": sorted((order[a], order[b], w) for a, b, w in conn.execute(
            "SELECT a, b, weight FROM associations WHERE tenant_id = ?", (tenant_id,))),
    }


@pytest.mark.both_engines
def test_a_step_derives_what_each_entry_derives_alone(db):
    """The idle writer's step reads and writes for all its entries at once; what it derives is what deriving each
    entry alone, in order, derives (one linker for the batch, as the step had), in a tenant written alike."""
    batch, alone = (tenants.create_tenant(db, name, now=T0)[0] for name in ("batch", "alone"))
    notes = _notes(40)
    for tenant_id in (batch, alone):
        with db:
            entries.remember_many(db, users.first_viewer(db, tenant_id), notes, now=T0)
    with db:
        while derive.step(db, now=T0, urgent=True, tenant_id=batch) or derive.step(db, now=T0, urgent=False,
                                                                                   tenant_id=batch):
            pass
    with db:
        ids = [r[0] for r in db.execute("SELECT id FROM entries WHERE tenant_id = ? ORDER BY id", (alone,))]
        viewer = users.viewer(db, alone, users.first_viewer(db, alone).user_id, "")
        linker = entity_core.Linker(db, alone, T0, viewer)
        for entry_id in ids:
            title, content = db.execute("SELECT title, content FROM entries WHERE tenant_id = ? AND id = ?",
                                        (alone, entry_id)).fetchone()
            linker.link(entry_id, extracted_in(title, content))
            duplicates.add(db, alone, entry_id, content)
        for entry_id in ids:
            associations.derive(db, alone, entry_id, now=T0, candidates=False)
    got, want = _derived(db, batch), _derived(db, alone)
    assert got == want
    # Not trivially: every deriver wrote (names from the evidence, their earlier entries linked, near copies' edges).
    assert {"Dana", "Okafor", "Helena Duarte", "PostgreSQL"} <= {name for name, _, _ in got["entities"]}
    assert "Growth" not in {name for name, _, _ in got["entities"]}
    assert len(got["links"]) > 100 and got["keys"] and got["edges"]


def test_a_step_sends_a_few_statements_for_all_its_entries(pg_url):
    """On PostgreSQL, each deriver's step reads its entries' names, evidence, texts and probes' texts, and writes
    their links, keys and edges, in statements for the whole step: entry by entry, they were a few round trips
    each. (Each capitalised word still has its full-text probe, and each entry its similarity probe.)"""
    db = open_database(pg_url)
    try:
        tenant_id = tenants.create_tenant(db, "alice", now=T0)[0]
        n = 60
        with db:
            entries.remember_many(db, users.first_viewer(db, tenant_id), _notes(n), now=T0)
        sent: list[str] = []
        db.trace = sent.append
        per_entry = {}
        for name in derive.DERIVERS:
            sent.clear()
            waiting = derive.pending(db, tenant_id, names=(name,))
            with db:
                assert derive.step(db, now=T0, urgent=derive.DERIVERS[name].urgent, tenant_id=tenant_id)
            per_entry[name] = len(sent) / (waiting - derive.pending(db, tenant_id, names=(name,)))
    finally:
        db.close()
    # A handful of names, each resolved once, and each entry's similarity probe; the rest is the step's own few
    # statements. Entry by entry: 3.4, 1.1 and 5.1 statements an entry.
    assert per_entry["entities"] < 1 and per_entry["sketch"] < 0.2 and per_entry["associations"] < 1.3, per_entry
