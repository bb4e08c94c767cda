"""Duplicates and near copies as a person meets them: titles count, a final full stop does not hide a copy."""

from __future__ import annotations

import pytest

from arbiter import duplicates
from arbiter.model import RememberParams, UpdateParams
from arbiter.store import entries, users
from tests.unit.conftest import execute

pytestmark = pytest.mark.both_engines

NOW = 1795168800 * 1_000_000


def remember(db, tenant, title: str, content: str, **kw):
    return execute(db, tenant, "remember", {"type": "project", "title": title, "content": content, **kw}, now=NOW)


def test_the_same_text_under_another_title_is_not_a_duplicate(db, tenant):
    rota = remember(db, tenant, "Rota", "...")
    viewer = users.first_viewer(db, tenant)
    assert duplicates.duplicate_of(db, viewer, "project", "Deploy plan", "...") is None
    assert duplicates.duplicate_of(db, viewer, "project", "  rota ", " ... ") == rota.id


def test_a_bulk_writes_entry_under_another_title_is_not_a_duplicate(db, tenant):
    first = execute(db, tenant, "remember_many", {"entries": [{"type": "project", "title": "Rota", "content": "alice, then bob"}]},
                    now=NOW).ids[0]
    viewer = users.first_viewer(db, tenant)
    assert duplicates.unindexed(db, viewer)  # its band keys wait for the idle writer; its fingerprint does not
    assert duplicates.duplicate_of(db, viewer, "project", "On call", "alice, then bob") is None
    assert duplicates.duplicate_of(db, viewer, "project", "Rota", "Alice, then Bob") == first


def test_near_copies_that_differ_by_a_final_full_stop_are_similar(db, tenant):
    short = remember(db, tenant, "Ship v1", "Target: Friday")
    assert remember(db, tenant, "Ship v1 again", "Target: Friday.").similar == [short.id]
    longer = remember(db, tenant, "Deploys", "We deploy on Fridays after the standup")
    assert remember(db, tenant, "Deploys again", "We deploy on Fridays after the standup.").similar == [longer.id]


def test_another_title_over_the_same_text_is_pointed_out_as_similar(db, tenant):
    first = remember(db, tenant, "Ship v1", "Target: Friday")
    viewer = users.first_viewer(db, tenant)
    assert duplicates.similar(db, viewer, "Target: Friday", exclude=None) == [first.id]


def test_a_change_of_text_moves_every_key_and_a_purge_takes_them(db, tenant):
    """The store's triggers drop the old text's keys; the sketch deriver (`add`) writes the new text's, the
    fingerprint among them where a trigger cannot hash (PostgreSQL)."""
    v = users.first_viewer(db, tenant)
    old = "The staging database is rebuilt every night at two from the production snapshot"
    new = "Deploys happen on Fridays after the standup, never on a Monday morning"
    with db:
        eid = entries.remember(db, v, RememberParams(type="project", title="Note", content=old), now=NOW)
        duplicates.add(db, tenant, eid, old)
    assert duplicates.similar(db, v, old + ".") == [eid]  # its word key
    with db:
        entries.update(db, v, UpdateParams(id=eid, content=new), now=NOW + 1)
    assert duplicates.duplicate_of(db, v, "project", "Note", old) is None
    assert duplicates.similar(db, v, old + ".") == []
    with db:
        duplicates.add(db, tenant, eid, new)
    assert duplicates.duplicate_of(db, v, "project", "note", new.upper()) == eid
    assert duplicates.similar(db, v, new + ".") == [eid]
    with db:
        entries.purge(db, v, eid)
    assert db.execute("SELECT count(*) FROM entry_sketches WHERE entry_id = ?", (eid,)).fetchone()[0] == 0


def test_a_bulk_write_past_what_remember_compares_is_counted(db, tenant):
    v = users.first_viewer(db, tenant)
    with db:
        entries.remember_many(db, v, [RememberParams(type="context", title=f"n{i}", content=f"filler {i}")
                                      for i in range(duplicates.PENDING_COMPARED + 2)], now=NOW)
    assert len(duplicates.unindexed(db, v)) == duplicates.PENDING_COMPARED
    assert duplicates.not_compared(db, v) == 2
