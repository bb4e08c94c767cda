"""Topic clusters on a real SQLite file and PostgreSQL; names through the real anthropic SDK and the fake Messages API.

The cache clock is the `now` argument (microseconds), so TTL expiry needs no sleeping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from arbiter._time import US
from arbiter.errors import NotFound
from arbiter.advisor import Advisor
from arbiter.graph import clusters
from arbiter.model import RememberParams
from arbiter.store import entries, tenants, users
from tests.fake_messages import FakeMessages

pytestmark = pytest.mark.both_engines
T0 = 1_800_000_000 * US
HOUR = 3600 * US

ENGINEERING = [["ticket", "p1", "area:api", "bug"], ["ticket", "p0", "area:db", "bug"], ["ticket", "p2", "area:api"],
               ["ticket", "p1", "area:db", "feature"], ["ticket", "p0", "area:api", "bug"]]
RUNBOOKS = [["runbook", "ops", "deploy"], ["runbook", "ops", "rollback"], ["runbook", "ops", "oncall"],
            ["runbook", "oncall", "deploy"]]


@pytest.fixture
def store(db):
    conn = db
    with conn:
        tid, _ = tenants.create_tenant(conn, "t", now=T0)
        for i, tags in enumerate(ENGINEERING + RUNBOOKS):
            entries.remember(conn, users.first_viewer(conn, tid), RememberParams(type="project", title=f"Entry {i} {tags[0]}",
                                                       content="body", tags=tags), now=T0)
    return conn, users.first_viewer(conn, tid)


@pytest.fixture
def advisor(fake_messages: FakeMessages) -> Iterator[Advisor]:  # noqa: F811
    with Advisor(api_key="test", base_url=fake_messages.base_url, max_retries=0, timeout_s=5.0) as adv:
        yield adv


def namer(request: dict) -> str:
    """Name a cluster after the first tag in the prompt."""
    first = re.search(r"Tags: ([^,\n]+)", request["messages"][0]["content"])[1]
    return json.dumps({"name": f"{first} topic", "description": f"Everything about {first}."})


def test_shapes_drop_small_clusters_and_come_largest_first(store):
    conn, v = store
    found = clusters.shapes(conn, v)
    assert [set(s.tags) for s in found] == [
        {"ticket", "p0", "p1", "p2", "area:api", "area:db", "bug", "feature"},
        {"runbook", "ops", "deploy", "rollback", "oncall"},
    ]
    assert [s.entries for s in found] == [5, 4]
    assert found[0].tags[0] == "ticket"  # most used first
    assert found[0].key == clusters.cluster_key(sorted(found[0].tags))


def test_names_come_from_the_advisor_then_the_cache(store, advisor, fake_messages):  # noqa: F811
    conn, v = store
    fake_messages.set_script(namer)
    found = clusters.shapes(conn, v)
    named, fresh = clusters.name(conn, v, found, advisor=advisor, now=T0)
    assert [(c.name, c.named_by) for c in named] == [("Ticket Topic", "advisor"), ("Runbook Topic", "advisor")]
    assert named[1].description == "Everything about runbook."
    assert len(fake_messages.requests) == 2  # one call per cluster
    prompts = sorted(r["messages"][0]["content"] for r in fake_messages.requests)
    assert "Entry 5 runbook" in prompts[0] and "Entry 0 ticket" in prompts[1]
    assert fake_messages.requests[0]["model"] == advisor.fast_model
    with conn:
        clusters.save_names(conn, v.tenant_id, fresh)

    named, fresh = clusters.name(conn, v, found, advisor=advisor, now=T0 + HOUR)
    assert [(c.name, c.named_by) for c in named] == [("Ticket Topic", "cache"), ("Runbook Topic", "cache")]
    assert fresh == [] and len(fake_messages.requests) == 2


def test_cached_names_expire_after_24_hours(store, advisor, fake_messages):  # noqa: F811
    conn, v = store
    fake_messages.set_script(namer)
    found = clusters.shapes(conn, v)
    with conn:
        clusters.save_names(conn, v.tenant_id, clusters.name(conn, v, found, advisor=advisor, now=T0)[1])
    named, _ = clusters.name(conn, v, found, advisor=advisor, now=T0 + 24 * HOUR - 1)
    assert {c.named_by for c in named} == {"cache"} and len(fake_messages.requests) == 2

    named, fresh = clusters.name(conn, v, found, advisor=advisor, now=T0 + 24 * HOUR)
    assert {c.named_by for c in named} == {"advisor"} and len(fake_messages.requests) == 4
    with conn:
        clusters.save_names(conn, v.tenant_id, fresh)
    assert {c.named_by for c in clusters.name(conn, v, found, advisor=advisor, now=T0 + 47 * HOUR)[0]} == {"cache"}


@pytest.mark.parametrize("failure", [500, "I'd call it Engineering.", '{"name": "Far Too Many Words Here", '
                                                                          '"description": "x"}'])
def test_a_failed_name_falls_back_and_is_not_cached(store, advisor, fake_messages, failure):  # noqa: F811
    conn, v = store
    fake_messages.set_script([failure, failure])
    found = clusters.shapes(conn, v)
    named, fresh = clusters.name(conn, v, found, advisor=advisor, now=T0)
    assert fresh == []
    assert [c.name for c in named] == ["/".join(s.tags[:3]) for s in found]
    assert all(c.named_by == "fallback" and c.note.startswith("naming failed") for c in named)
    assert clusters.cached_names(conn, v, [s.key for s in found], now=T0) == {}

    fake_messages.set_script(namer)  # the next briefing asks again
    named, fresh = clusters.name(conn, v, found, advisor=advisor, now=T0 + 1)
    assert {c.named_by for c in named} == {"advisor"} and len(fresh) == 2


def test_no_advisor_means_fallback_names_and_no_error(store):
    conn, v = store
    named, fresh = clusters.name(conn, v, clusters.shapes(conn, v), advisor=None, now=T0)
    assert [c.name for c in named] == ["ticket/area:api/bug", "runbook/ops/deploy"]
    assert fresh == [] and all(c.named_by == "fallback" for c in named)


def test_memo_follows_the_tag_graph(store):
    conn, v = store
    first = clusters.shapes(conn, v)
    assert clusters.shapes(conn, v) is first  # memoized
    with conn:
        entries.forget(conn, v, 6, now=T0 + 1)
        entries.forget(conn, v, 7, now=T0 + 1)
        entries.forget(conn, v, 8, now=T0 + 1)
    second = clusters.shapes(conn, v)
    assert second != first and all(s.entries < 4 for s in second if "runbook" in s.tags)


# ---- per viewer ------------------------------------------------------------------


@pytest.fixture
def team(db):
    """alice and bob in team `core`, carol in none; viewers by name."""
    conn = db
    with conn:
        tid, _ = tenants.create_tenant(conn, "t", now=T0)
        ids = {n: users.create_user(conn, tid, n, now=T0)[0] for n in ("alice", "bob", "carol")}
        core = users.create_team(conn, tid, "core", now=T0)
        users.join(conn, core, ids["alice"], now=T0)
        users.join(conn, core, ids["bob"], now=T0)
    return conn, {n: users.viewer(conn, tid, i, n) for n, i in ids.items()}


def write_all(conn, v, tag_lists, title, *, team=None):
    with conn:
        for i, tags in enumerate(tag_lists):
            entries.remember(conn, v, RememberParams(type="project", title=f"{title} {i}", content="body", tags=tags,
                                                     team=team), now=T0)


def test_clusters_form_over_what_the_viewer_sees(team):
    conn, vs = team
    write_all(conn, vs["alice"], ENGINEERING, "Alice private")
    write_all(conn, vs["alice"], RUNBOOKS, "Team runbook", team="core")
    assert [s.tags[0] for s in clusters.shapes(conn, vs["alice"])] == ["ticket", "runbook"]
    assert [(s.tags[0], s.entries) for s in clusters.shapes(conn, vs["bob"])] == [("runbook", 4)]
    assert clusters.shapes(conn, vs["carol"]) == ()
    with pytest.raises(NotFound):
        clusters.cluster_entries(conn, vs["bob"], "ticket", limit=10)
    shape, members = clusters.cluster_entries(conn, vs["bob"], "runbook", limit=10)
    assert {e.title for e in members} == {f"Team runbook {i}" for i in range(4)}


def test_a_team_shares_one_cluster_vocabulary_and_its_names(team, advisor, fake_messages):
    conn, vs = team
    fake_messages.set_script(namer)
    write_all(conn, vs["alice"], ENGINEERING, "Ticket", team="core")
    write_all(conn, vs["bob"], RUNBOOKS, "Runbook", team="core")
    alices, bobs = clusters.shapes(conn, vs["alice"]), clusters.shapes(conn, vs["bob"])
    assert alices == bobs and len(alices) == 2
    named, fresh = clusters.name(conn, vs["alice"], alices, advisor=advisor, now=T0)
    with conn:
        clusters.save_names(conn, vs["alice"].tenant_id, fresh)
    again, fresh = clusters.name(conn, vs["bob"], bobs, advisor=advisor, now=T0 + HOUR)
    assert [(c.name, c.named_by) for c in again] == [(c.name, "cache") for c in named]
    assert fresh == [] and len(fake_messages.requests) == 2


def test_a_name_made_from_private_titles_is_never_shown_to_another(team, advisor, fake_messages):
    conn, vs = team
    fake_messages.set_script(namer)
    write_all(conn, vs["alice"], RUNBOOKS, "Alice secret")
    write_all(conn, vs["bob"], RUNBOOKS, "Bob plain")
    alices, bobs = clusters.shapes(conn, vs["alice"]), clusters.shapes(conn, vs["bob"])
    assert [s.key for s in alices] == [s.key for s in bobs]  # the same tags, named from different titles
    with conn:
        clusters.save_names(conn, vs["alice"].tenant_id, clusters.name(conn, vs["alice"], alices, advisor=advisor,
                                                                       now=T0)[1])
    assert clusters.cached_names(conn, vs["bob"], [s.key for s in bobs], now=T0) == {}
    named, fresh = clusters.name(conn, vs["bob"], bobs, advisor=advisor, now=T0)
    assert [c.named_by for c in named] == ["advisor"] and len(fresh) == 1
    prompt = fake_messages.requests[-1]["messages"][0]["content"]
    assert "Bob plain" in prompt and "Alice secret" not in prompt
