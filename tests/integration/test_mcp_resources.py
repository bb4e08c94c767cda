"""MCP resources (the briefing, each entry), change notifications and prompts, through the SDK client."""

from __future__ import annotations

import pytest
from mcp import MCPError, types

from tests.integration.test_mcp_tools import run_session


def test_resources_list_and_read(home, daemon):
    with daemon.client() as c:
        ids = c.remember_many([{"type": "reference", "title": f"Note {i}", "content": f"note {i}"} for i in range(120)])

    async def body(session):
        first = await session.list_resources()
        second = await session.list_resources(params=types.PaginatedRequestParams(cursor=first.next_cursor))
        templates = await session.list_resource_templates()
        briefing = await session.read_resource("arbiter://briefing")
        entry = await session.read_resource(f"arbiter://entry/{ids[0]}")
        errors = []
        for uri in ("arbiter://entry/999999", "arbiter://nothing"):
            with pytest.raises(MCPError) as e:
                await session.read_resource(uri)
            errors.append(e.value)
        return first, second, templates, briefing, entry, errors

    first, second, templates, briefing, entry, errors = run_session(home, body)
    uris = [str(r.uri) for r in first.resources + second.resources]
    assert uris[0] == "arbiter://briefing"
    assert uris[1:] == [f"arbiter://entry/{i}" for i in reversed(ids)]  # every entry once, newest first
    assert second.next_cursor is None
    assert templates.resource_templates[0].uri_template == "arbiter://entry/{id}"
    assert "## 1. Identity and totals" in briefing.contents[0].text
    assert entry.contents[0].text.startswith(f"#{ids[0]} [reference] Note 0")
    assert errors[0].error.message == "not_found: entry 999999 not found: list or recall shows the ids you can see"
    assert errors[1].error.message.startswith("not_found: no resource 'arbiter://nothing'")


# resources/subscribe is how the handshake protocol (2025-11-25, which `arbiter mcp`
# speaks) asks for change notifications; the SDK warns that the 2026-07-28 protocol
# replaces it.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_a_write_notifies_subscribers_of_what_changed(home, daemon):
    with daemon.client() as c:
        watched = c.remember(type="project", title="Watched", content="watched v1").id
        other = c.remember(type="project", title="Other", content="other v1").id  # not a duplicate of the first
    seen = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification):
            seen.append(message)

    async def body(session):
        await session.subscribe_resource(f"arbiter://entry/{watched}")
        await session.subscribe_resource("arbiter://briefing")
        await session.call_tool("update", {"id": other, "content": "v2"})
        await session.call_tool("update", {"id": watched, "content": "v2"})
        await session.call_tool("get", {"id": watched})  # a read notifies nothing
        await session.unsubscribe_resource("arbiter://briefing")
        await session.call_tool("update", {"id": watched, "content": "v3"})
        return await session.read_resource(f"arbiter://entry/{watched}")

    after = run_session(home, body, message_handler=on_message)
    updated = [str(n.params.uri) for n in seen if n.method == "notifications/resources/updated"]
    # update(other): the briefing; update(watched): both; unsubscribed from the briefing: the entry.
    assert updated == ["arbiter://briefing", "arbiter://briefing", f"arbiter://entry/{watched}",
                       f"arbiter://entry/{watched}"]
    assert [n.method for n in seen].count("notifications/resources/list_changed") == 3
    assert after.contents[0].text.endswith("v3")


def test_prompts_teach_the_loop(home, daemon):
    async def body(session):
        listed = await session.list_prompts()
        decision = await session.get_prompt("record_decision", {"decision": "Use Postgres for queues"})
        errors = []
        for name, args in (("what_do_we_know", {}), ("what_do_we_know", {"subject": "x", "extra": "y"}),
                           ("nonsense", {})):
            with pytest.raises(MCPError) as e:
                await session.get_prompt(name, args)
            errors.append(e.value.error.message)
        return listed, decision, errors

    listed, decision, errors = run_session(home, body)
    assert {p.name for p in listed.prompts} == {"record_decision", "what_do_we_know"}
    words = decision.messages[0].content.text
    assert "Use Postgres for queues" in words and "recall" in words and "supersedes_ids" in words
    assert errors[0].startswith("invalid_params: arguments.subject")
    assert errors[1].startswith("invalid_params: arguments.extra")
    assert errors[2].startswith("not_found: no prompt")


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_a_write_tool_that_changed_nothing_notifies_nothing(home, daemon):
    with daemon.client() as c:
        kept = c.remember(type="project", title="Kept", content="kept v1")
        retired = c.remember(type="project", title="Retired", content="retired v1").id
        c.forget(retired)
    seen = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification):
            seen.append(message.method)

    async def body(session):
        await session.subscribe_resource("arbiter://briefing")
        await session.call_tool("conversation", {})  # which one is current: a read
        await session.call_tool("remember", {"type": "project", "title": "kept", "content": "kept v1"})
        await session.call_tool("forget", {"id": retired})  # already retired
        await session.call_tool("restore", {"id": kept.id})  # not retired
        quiet = list(seen)
        await session.call_tool("forget", {"id": kept.id})
        await session.send_ping()  # stdio sends a call's notifications after its result: they are in by the pong
        return quiet

    quiet = run_session(home, body, message_handler=on_message)
    assert quiet == []
    assert seen == ["notifications/resources/updated", "notifications/resources/list_changed"]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_entity_salience_and_fact_writes_notify_only_what_a_resource_shows(home, daemon):
    with daemon.client() as c:
        entry = c.remember(type="project", title="Stack", content="Apollo runs on PostgreSQL.",
                           entities=["Apollo", "Apollo Server"]).id
    seen = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification):
            seen.append((message.method, str(getattr(message.params, "uri", ""))))

    async def body(session):
        for uri in ("arbiter://briefing", f"arbiter://entry/{entry}"):
            await session.subscribe_resource(uri)
        entry_before = (await session.read_resource(f"arbiter://entry/{entry}")).contents[0].text
        briefing_before = (await session.read_resource("arbiter://briefing")).contents[0].text
        # Salience and entity relations show in no resource: the entry and the briefing read the same after.
        await session.call_tool("reinforce", {"id": entry})
        await session.call_tool("relate", {"source": "Apollo", "relation": "depends_on", "target": "PostgreSQL"})
        await session.send_ping()
        quiet = list(seen)
        same = ((await session.read_resource(f"arbiter://entry/{entry}")).contents[0].text == entry_before and
                (await session.read_resource("arbiter://briefing")).contents[0].text == briefing_before)
        # A merge changes the entity names the briefing lists, and nothing of the entry list; so do facts
        # (the briefing's facts line counts them, and batches held for review).
        await session.call_tool("entity_merge", {"keep": "Apollo", "other": "Apollo Server"})
        await session.call_tool("propose_facts", {"facts": [{"subject": "Apollo", "predicate": "uses",
                                                             "object": "PostgreSQL"}], "apply": False})
        await session.send_ping()
        merged = seen[len(quiet):]
        return quiet, same, merged, briefing_before, (await session.read_resource("arbiter://briefing")).contents[0].text

    quiet, same, merged, before, after = run_session(home, body, message_handler=on_message)
    assert quiet == [] and same
    assert merged == [("notifications/resources/updated", "arbiter://briefing")] * 2
    assert "Apollo Server" in before and "Apollo Server" not in after
