"""The thread, history, open-thread and graph tools through the real MCP SDK client, against a real daemon:
budgets and paging, and another tenant's ids answered exactly as missing ones."""

from __future__ import annotations

import jsonschema
import msgspec
import pytest

from arbiter.client import Client
from arbiter.errors import InvalidParams
from arbiter.mcp.entries import HistoryArgs, history
from arbiter.mcp.tool import Session
from tests.integration.test_mcp_tools import run_session, text


def _pages(session, tool: str, args: dict):
    """Every page of `tool`, following `next_cursor` until `more` is false."""

    async def walk():
        pages, cursor = [], args.pop("cursor", None)
        while True:
            r = await session.call_tool(tool, {**args, **({"cursor": cursor} if cursor else {})})
            assert not r.is_error, text(r)
            pages.append(r)
            cursor = r.structured_content["next_cursor"]
            if not r.structured_content["more"]:
                return pages

    return walk()


def test_a_long_thread_comes_in_pages_within_the_budget(home, daemon):
    with daemon.client() as c:
        root = c.remember(type="project", title="Migration log", content="Moving the jobs to Postgres. " * 100).id
        replies = [c.reply(root, f"Step {i}: moved queue {i} and checked its consumers. " * 4).id for i in range(30)]

    async def body(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        whole = await session.call_tool("thread", {"id": replies[3]})
        pages = await _pages(session, "thread", {"id": replies[3], "max_chars": 1500})
        return tools, whole, pages

    tools, whole, pages = run_session(home, body)
    assert [r["id"] for r in whole.structured_content["replies"][:3]] == replies[:3]
    assert len(pages) > 3
    first = pages[0].structured_content
    assert first["root"]["id"] == first["root_id"] == root
    assert first["root"]["content"].endswith("…") and f"`get` {root} reads it whole" in first["note"]
    assert all("root" not in p.structured_content for p in pages[1:])  # the root once, on the first page
    seen = [r["id"] for p in pages for r in p.structured_content["replies"]]
    assert seen == replies  # every reply once, in order
    for p in pages:
        assert len(text(p)) <= 1500, len(text(p))
        jsonschema.validate(p.structured_content, tools["thread"].output_schema)
    assert f'pass cursor "{first["next_cursor"]}"' in text(pages[0])
    assert text(pages[1]).startswith(f"Replies {len(first['replies']) + 1}-")


def test_thread_pages_skip_nothing_when_replies_retire_between(home, daemon):
    """A cursor names where the last page ended, not a position: replies retired before it shift nothing."""
    with daemon.client() as c:
        root = c.remember(type="project", title="Rollout log", content="Rolling out the new cache.").id
        replies = [c.reply(root, f"Step {i}: switched region {i} and watched its errors for an hour.").id
                   for i in range(12)]

    async def body(session):
        first = await session.call_tool("thread", {"id": root, "max_chars": 800})
        with daemon.client() as c:
            c.forget(first.structured_content["replies"][0]["id"])  # a reply already shown retires
        rest = await _pages(session, "thread", {"id": root, "max_chars": 800,
                                                "cursor": first.structured_content["next_cursor"]})
        return [first, *rest]

    pages = run_session(home, body)
    seen = [r["id"] for p in pages for r in p.structured_content["replies"]]
    assert seen == replies  # every reply once, in order: the one after the first page's last too


def test_a_long_history_comes_in_pages(home, daemon):
    with daemon.client() as c:
        entry = c.remember(type="project", title="Launch date", content="March 1").id
        for day in range(2, 40):
            c.update(entry, content=f"March {day}, said the planning meeting of that week")

        other = c.remember(type="project", title="Launch venue", content="The planning meeting picks one").id
        for hall in range(2, 40):
            c.update(other, content=f"Hall {hall}, said the planning meeting of that week")

    async def body(session):
        whole = await session.call_tool("history", {"id": entry})
        pages = await _pages(session, "history", {"id": entry, "max_chars": 1000})
        cursor = pages[0].structured_content["next_cursor"]
        searched = await session.call_tool("recall", {"query": "planning meeting", "limit": 1})
        crossed = [  # a cursor of another entry's history, or of a search, once filtered nothing: page 1 again
            await session.call_tool("history", {"id": other, "cursor": cursor}),
            await session.call_tool("history", {"id": entry, "cursor": searched.structured_content["next_cursor"]}),
            await session.call_tool("recall", {"query": "planning meeting", "cursor": cursor}),
            await session.call_tool("recall", {"query": "launch", "cursor": searched.structured_content["next_cursor"]}),
        ]
        bad = await session.call_tool("history", {"id": entry, "cursor": "9999"})
        junk = await session.call_tool("history", {"id": entry, "cursor": "next"})
        return whole, pages, bad, junk, crossed

    whole, pages, bad, junk, crossed = run_session(home, body)
    assert whole.structured_content["total"] == 1 + 39  # the entry and its 39 recorded states
    assert len(text(whole)) <= 8000
    states = [r["recorded_from"] for p in pages for r in p.structured_content["revisions"]]
    assert len(states) == 39 and states == sorted(states)
    assert [e["id"] for p in pages for e in p.structured_content["entries"]] == [entry]
    assert all(len(text(p)) <= 1000 for p in pages)
    assert text(pages[1]).startswith("(items ")
    refused = "invalid_params: cursor: not a cursor this session returned (or an old one): {} without cursor"
    assert bad.is_error and text(bad) == refused.format("read it again")
    assert junk.is_error and text(junk) == refused.format("read it again")
    assert [c.is_error for c in crossed] == [True] * 4
    assert [text(c) for c in crossed] == [refused.format(again) for again in ("read it again",) * 2 + ("search again",) * 2]


def test_a_history_that_grows_between_pages_shows_each_item_once(home, daemon):
    """The cursor was a position: an entry joining the chain between pages (a new supersede) pushed the rest
    down, and the next page began with an item the last one had shown."""
    with daemon.client() as c:
        entry = c.remember(type="project", title="Launch date", content="March 1").id
        for day in range(2, 30):
            c.update(entry, content=f"March {day}, said the planning meeting of that week")

    async def body(session):
        first = await session.call_tool("history", {"id": entry, "max_chars": 1000})
        with daemon.client() as c:
            later = c.remember(type="project", title="Launch date, final", content="April 2",
                               supersedes_ids=[entry]).id
        rest = await _pages(session, "history", {"id": entry, "max_chars": 1000,
                                                  "cursor": first.structured_content["next_cursor"]})
        return later, [first, *rest], await session.call_tool("history", {"id": entry})

    later, pages, whole = run_session(home, body)

    def items(page):
        sc = page.structured_content
        return ([("entry", e["id"]) for e in sc["entries"]] + [("relation", r["id"]) for r in sc["relations"]]
                + [("state", r["id"], r["recorded_from"]) for r in sc["revisions"]])

    paged = [x for p in pages for x in items(p)]
    assert len(paged) == len(set(paged)) and set(paged) == set(items(whole))
    assert ("entry", later) in paged and len(pages) > 2



def test_a_history_cursor_past_what_is_left_is_refused(daemon):
    """When every item a page had not shown is gone (a purge shortened the chain since), the next page is
    refused, not answered empty under "(items 41-40 of 40)"."""
    with daemon.client() as c:
        entry = c.remember(type="project", title="Launch date", content="March 1").id
        for day in range(2, 30):
            c.update(entry, content=f"March {day}, said the planning meeting of that week")
        whole = c.history(entry)
        kept: list[int] = []

        class Purged(Client):  # after the first page, the states it did not show are gone
            def history(self, *args, **kwargs):
                got = super().history(*args, **kwargs)
                return msgspec.structs.replace(got, revisions=got.revisions[:kept[0]]) if kept else got

        with Purged(daemon.socket, daemon.token) as purged:
            s = Session(purged)
            first = history(s, HistoryArgs(id=entry, max_chars=600))
            assert first.more and len(first.revisions) < len(whole.revisions)
            kept.append(len(first.revisions))
            with pytest.raises(InvalidParams) as refused:
                history(s, HistoryArgs(id=entry, max_chars=600, cursor=first.next_cursor))
    assert refused.value.message == "cursor: past the history's end: read it again without cursor"

def test_open_threads_and_expand(home, daemon):
    with daemon.client() as c:
        plan = c.remember(type="project", title="Cache plan", content="LRU for sessions").id
        c.reply(plan, "Measured: 93% hit rate")
        quiet = c.remember(type="project", title="Quiet", content="no replies").id
        cause = c.remember(type="context", title="Load doubled", content="Traffic doubled in May").id
        c.link(cause, "causes", plan)
        for i in range(3):
            c.reply(c.remember(type="project", title=f"Other {i}", content=f"other topic {i}").id, f"follow-up {i}")

    async def body(session):
        return (await session.call_tool("open_threads", {"limit": 2}),
                await session.call_tool("open_threads", {}),
                await session.call_tool("expand", {"id": plan}),
                await session.call_tool("expand", {"id": plan, "depth": 3}),
                await session.call_tool("open_threads", {"limit": 0}))

    two, every, graph, deep, none = run_session(home, body)
    assert len(two.structured_content["threads"]) == 2 and two.structured_content["more"] is True
    assert "raise limit" in text(two)
    roots = [t["root"]["id"] for t in every.structured_content["threads"]]
    assert plan in roots and quiet not in roots and "more" not in every.structured_content
    mine = next(t for t in every.structured_content["threads"] if t["root"]["id"] == plan)
    assert mine["replies"] == 1 and mine["last_reply"]["title"] == "Re: Cache plan"
    assert {"source_id": cause, "relation": "causes", "target_id": plan} in graph.structured_content["edges"]
    assert {n["id"]: n["hops"] for n in graph.structured_content["nodes"]}[cause] == 1
    assert f"#{cause} causes #{plan}" in text(graph)
    assert deep.is_error and text(deep) == "invalid_params: depth: must be at most 2"
    assert none.is_error and text(none) == "invalid_params: limit: must be at least 1"


def test_another_tenants_ids_read_as_missing_ones(home, daemon):
    with Client(daemon.socket, daemon.admin_token) as admin:
        token = admin.tenant_create("tenant-b").token
    with daemon.client(token) as b:
        theirs = b.remember(type="project", title="Their plan", content="Grafana for Zabbix dashboards").id
        b.reply(theirs, "done")
        fact = b.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Initech",
                                 "sources": [theirs]}], apply=True).facts[0].id
        b.remember(type="project", title="Tools", content="Zabbix and Zabbix Agent", entities=["Zabbix", "Zabbix Agent"])
        missing_id = theirs + 1000
    with daemon.client() as a:  # the session's own tenant holds facts and entities too
        a.remember(type="project", title="Ours", content="Kibana for logs", entities=["Kibana"])

    calls = {
        "thread": ({"id": theirs}, {"id": missing_id}),
        "history": ({"id": theirs}, {"id": missing_id}),
        "expand": ({"id": theirs}, {"id": missing_id}),
        "fact_history": ({"id": fact}, {"id": fact + 1000}),
        "entity_merge": ({"keep": "Kibana", "other": "Zabbix"}, {"keep": "Kibana", "other": "Nothing"}),
        "entity_rename": ({"name": "Zabbix", "new_name": "Zab"}, {"name": "Nothing", "new_name": "Zab"}),
    }

    async def body(session):
        out = {}
        for name, (their_args, missing_args) in calls.items():
            out[name] = (await session.call_tool(name, their_args), await session.call_tool(name, missing_args))
        out["open_threads"] = await session.call_tool("open_threads", {})
        out["predicates"] = await session.call_tool("predicates", {})
        return out

    out = run_session(home, body)
    swaps = {"thread": (theirs, missing_id), "history": (theirs, missing_id), "expand": (theirs, missing_id),
             "fact_history": (fact, fact + 1000), "entity_merge": ("Zabbix", "Nothing"),
             "entity_rename": ("Zabbix", "Nothing")}
    for name in calls:
        theirs_said, missing_said = out[name]
        assert theirs_said.is_error and missing_said.is_error, name
        a, b = swaps[name]
        assert text(theirs_said) == text(missing_said).replace(str(b), str(a)), name
        assert text(theirs_said).startswith("not_found: "), name
    assert out["open_threads"].structured_content["threads"] == []
    works_at = next(p for p in out["predicates"].structured_content["predicates"] if p["name"] == "works_at")
    assert works_at["active_facts"] == 0  # tenant b's fact is not counted here
