"""Duplicates and near copies as a person meets them: titles count, a final full stop does not hide a copy."""

from __future__ import annotations

from arbiter import duplicates
from arbiter.store import users
from tests.unit.conftest import execute

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
