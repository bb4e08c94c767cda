"""The entity and salience MCP tools through the real MCP SDK client, against a real daemon."""

from __future__ import annotations

import anyio

from tests.integration.test_mcp import _server, _session, _text


def test_entity_tools_and_remember_fields(daemon, tmp_path):
    with daemon.client() as c:
        first = c.remember(type="project", title="Stack", content="Apollo runs on PostgreSQL.", entities=["Apollo"])

    async def body(session, init):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        out = {"tools": tools}
        out["remember"] = await session.call_tool("remember", {
            "type": "project", "title": "Cache", "content": "We cache the sessions of Apollo in Redis.", "entities": ["Alice"],
            "permanent": True})
        out["again"] = await session.call_tool("remember", {
            "type": "project", "title": "Stack", "content": "apollo runs on postgresql.", "everywhere": True})
        out["relate"] = await session.call_tool("relate", {"source": "Alice", "relation": "works_on", "target": "apollo"})
        out["entities"] = await session.call_tool("entities", {"query": "a"})
        out["context"] = await session.call_tool("entity_context", {"name": "Apollo"})
        out["reinforce"] = await session.call_tool("reinforce", {"id": first.id})
        out["missing"] = await session.call_tool("entity_context", {"name": "Nobody"})
        out["bad"] = await session.call_tool("relate", {"source": "Alice", "relation": "loves", "target": "Apollo"})
        return out

    with open(tmp_path / "stderr", "w") as err:
        out = anyio.run(_session, _server(daemon.home), err, body)
    assert {"entities", "entity_context", "relate", "reinforce"} <= set(out["tools"])
    assert "entities: Alice, Redis, Apollo" in _text(out["remember"])
    assert _text(out["again"]).startswith(f"Already remembered as #{first.id} ")
    assert _text(out["relate"]) == "Alice works_on Apollo (weight 1)"
    assert [line.split(" [")[0] for line in _text(out["entities"]).splitlines()] == ["Apollo", "Alice"]
    context = _text(out["context"])
    assert "Alice works_on Apollo" in context and context.count("\n- #") == 2
    assert _text(out["reinforce"]) == f"#{first.id} salience 0.75 (1 reinforcement)"
    assert out["missing"].is_error and _text(out["missing"]).startswith("not_found:")
    assert out["bad"].is_error and _text(out["bad"]).startswith("invalid_params:")


def test_remember_names_lookalike_entities_and_the_model_merges_or_renames_them(daemon):
    from tests.integration.test_mcp_tools import run_session

    with daemon.client() as c:
        c.remember(type="project", title="Stack", content="The API runs on PostgreSQL.", entities=["PostgreSQL", "Redis"])

    async def body(session):
        said = await session.call_tool("remember", {"type": "project", "title": "DB", "content": "Backups of PostgresSQL"})
        merged = await session.call_tool("entity_merge", {"keep": "PostgreSQL", "other": "PostgresSQL"})
        renamed = await session.call_tool("entity_rename", {"name": "postgresql", "new_name": "Postgres"})
        taken = await session.call_tool("entity_rename", {"name": "Postgres", "new_name": "redis"})
        bad = await session.call_tool("entity_merge", {"keep": "Postgres", "other": ""})
        return said, merged, renamed, taken, bad

    said, merged, renamed, taken, bad = run_session(daemon.home, body)
    assert said.structured_content["possibly_same"] == [{"name": "PostgresSQL", "others": ["PostgreSQL"]}]
    assert "entity 'PostgresSQL' may be the same as 'PostgreSQL': if it is, `entity_merge` them" in _text(said)
    assert merged.structured_content["entity"]["aliases"] == ["PostgresSQL"]
    assert _text(merged).startswith("Merged 'PostgresSQL' into 'PostgreSQL': PostgreSQL [")
    assert renamed.structured_content["entity"]["name"] == "Postgres"
    assert set(renamed.structured_content["entity"]["aliases"]) == {"PostgreSQL", "PostgresSQL"}
    assert taken.is_error and _text(taken).startswith("conflict: ")  # another entity answers to it
    assert bad.is_error and _text(bad).startswith("invalid_params: other:")
