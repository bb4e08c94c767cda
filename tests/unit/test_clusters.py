"""Topic clusters on a real SQLite file; names through the real anthropic SDK and the fake Messages API.

The cache clock is the `now` argument (microseconds), so TTL expiry needs no sleeping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from arbiter._time import US
from arbiter.advisor import Advisor
from arbiter.graph import clusters
from arbiter.model import RememberParams
from arbiter.store import entries, open_database, tenants, users
from tests.fake_messages import FakeMessages

T0 = 1_800_000_000 * US
HOUR = 3600 * US

ENGINEERING = [["ticket", "p1", "area:api", "bug"], ["ticket", "p0", "area:db", "bug"], ["ticket", "p2", "area:api"],
               ["ticket", "p1", "area:db", "feature"], ["ticket", "p0", "area:api", "bug"]]
RUNBOOKS = [["runbook", "ops", "deploy"], ["runbook", "ops", "rollback"], ["runbook", "ops", "oncall"],
            ["runbook", "oncall", "deploy"]]


@pytest.fixture
def store(tmp_path):
    conn = open_database(tmp_path / "a.db")
    with conn:
        tid, _ = tenants.create_tenant(conn, "t", now=T0)
        for i, tags in enumerate(ENGINEERING + RUNBOOKS):
            entries.remember(conn, users.first_viewer(conn, tid), RememberParams(type="project", title=f"Entry {i} {tags[0]}",
                                                       content="body", tags=tags), now=T0)
    yield conn, tid
    conn.close()


@pytest.fixture
def advisor(fake_messages: FakeMessages) -> Iterator[Advisor]:  # noqa: F811
    with Advisor(api_key="test", base_url=fake_messages.base_url, max_retries=0, timeout_s=5.0) as adv:
        yield adv


def namer(request: dict) -> str:
    """Name a cluster after the first tag in the prompt."""
    first = re.search(r"Tags: ([^,\n]+)", request["messages"][0]["content"])[1]
    return json.dumps({"name": f"{first} topic", "description": f"Everything about {first}."})


def test_shapes_drop_small_clusters_and_come_largest_first(store):
    conn, tid = store
    found = clusters.shapes(conn, tid)
    assert [set(s.tags) for s in found] == [
        {"ticket", "p0", "p1", "p2", "area:api", "area:db", "bug", "feature"},
        {"runbook", "ops", "deploy", "rollback", "oncall"},
    ]
    assert [s.entries for s in found] == [5, 4]
    assert found[0].tags[0] == "ticket"  # most used first
    assert found[0].key == clusters.cluster_key(sorted(found[0].tags))


def test_names_come_from_the_advisor_then_the_cache(store, advisor, fake_messages):  # noqa: F811
    conn, tid = store
    fake_messages.set_script(namer)
    found = clusters.shapes(conn, tid)
    named, fresh = clusters.name(conn, tid, found, advisor=advisor, now=T0)
    assert [(c.name, c.named_by) for c in named] == [("Ticket Topic", "advisor"), ("Runbook Topic", "advisor")]
    assert named[1].description == "Everything about runbook."
    assert len(fake_messages.requests) == 2  # one call per cluster
    prompts = sorted(r["messages"][0]["content"] for r in fake_messages.requests)
    assert "Entry 5 runbook" in prompts[0] and "Entry 0 ticket" in prompts[1]
    assert fake_messages.requests[0]["model"] == advisor.fast_model
    with conn:
        clusters.save_names(conn, tid, fresh)

    named, fresh = clusters.name(conn, tid, found, advisor=advisor, now=T0 + HOUR)
    assert [(c.name, c.named_by) for c in named] == [("Ticket Topic", "cache"), ("Runbook Topic", "cache")]
    assert fresh == [] and len(fake_messages.requests) == 2


def test_cached_names_expire_after_24_hours(store, advisor, fake_messages):  # noqa: F811
    conn, tid = store
    fake_messages.set_script(namer)
    found = clusters.shapes(conn, tid)
    with conn:
        clusters.save_names(conn, tid, clusters.name(conn, tid, found, advisor=advisor, now=T0)[1])
    named, _ = clusters.name(conn, tid, found, advisor=advisor, now=T0 + 24 * HOUR - 1)
    assert {c.named_by for c in named} == {"cache"} and len(fake_messages.requests) == 2

    named, fresh = clusters.name(conn, tid, found, advisor=advisor, now=T0 + 24 * HOUR)
    assert {c.named_by for c in named} == {"advisor"} and len(fake_messages.requests) == 4
    with conn:
        clusters.save_names(conn, tid, fresh)
    assert {c.named_by for c in clusters.name(conn, tid, found, advisor=advisor, now=T0 + 47 * HOUR)[0]} == {"cache"}


@pytest.mark.parametrize("failure", [500, "I'd call it Engineering.", '{"name": "Far Too Many Words Here", '
                                                                          '"description": "x"}'])
def test_a_failed_name_falls_back_and_is_not_cached(store, advisor, fake_messages, failure):  # noqa: F811
    conn, tid = store
    fake_messages.set_script([failure, failure])
    found = clusters.shapes(conn, tid)
    named, fresh = clusters.name(conn, tid, found, advisor=advisor, now=T0)
    assert fresh == []
    assert [c.name for c in named] == ["/".join(s.tags[:3]) for s in found]
    assert all(c.named_by == "fallback" and c.note.startswith("naming failed") for c in named)
    assert clusters.cached_names(conn, tid, [s.key for s in found], now=T0) == {}

    fake_messages.set_script(namer)  # the next briefing asks again
    named, fresh = clusters.name(conn, tid, found, advisor=advisor, now=T0 + 1)
    assert {c.named_by for c in named} == {"advisor"} and len(fresh) == 2


def test_no_advisor_means_fallback_names_and_no_error(store):
    conn, tid = store
    named, fresh = clusters.name(conn, tid, clusters.shapes(conn, tid), advisor=None, now=T0)
    assert [c.name for c in named] == ["ticket/area:api/bug", "runbook/ops/deploy"]
    assert fresh == [] and all(c.named_by == "fallback" for c in named)


def test_memo_follows_the_tag_graph(store):
    conn, tid = store
    first = clusters.shapes(conn, tid)
    assert clusters.shapes(conn, tid) is first  # memoized
    with conn:
        entries.forget(conn, users.first_viewer(conn, tid), 6, now=T0 + 1)
        entries.forget(conn, users.first_viewer(conn, tid), 7, now=T0 + 1)
        entries.forget(conn, users.first_viewer(conn, tid), 8, now=T0 + 1)
    second = clusters.shapes(conn, tid)
    assert second != first and all(s.entries < 4 for s in second if "runbook" in s.tags)
