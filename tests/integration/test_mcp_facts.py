"""The facts tools through the real MCP SDK client: propose through the gate, read what is true, recall shows facts."""

from __future__ import annotations

from tests.integration.test_mcp_tools import run_session, text


def test_an_agent_proposes_facts_and_reads_what_is_true_now(daemon):
    async def body(session):
        said = await session.call_tool("remember", {"type": "user", "title": "Job", "content": "I work at Acme."})
        entry = said.structured_content["entry"]["id"]
        first = await session.call_tool("propose_facts", {"facts": [
            {"subject": "user", "predicate": "works_at", "object": "Acme", "source_ids": [entry],
             "valid_from": "2024-01-01T00:00:00Z"}]})
        moved = await session.call_tool("propose_facts", {"facts": [
            {"subject": "user", "predicate": "works_at", "object": "Globex", "confidence": 1.0},
            {"subject": "user", "predicate": "lives_in", "object": "Oslo", "confidence": 0.3}]})
        now = await session.call_tool("facts", {"subject": "user"})
        then = await session.call_tool("facts", {"subject": "user", "as_of": "2025-01-01T00:00:00Z"})
        found = await session.call_tool("recall", {"query": "where does the user work"})
        scores = await session.call_tool("aspects", {})
        bad = await session.call_tool("propose_facts", {"facts": [{"subject": "", "predicate": "p", "object": "o"}]})
        return first, moved, now, then, found, scores, bad, entry

    first, moved, now, then, found, scores, bad, entry = run_session(daemon.home, body)
    assert first.structured_content["status"] == "applied"
    findings = [(f["object"], f["status"], f["finding"]) for f in moved.structured_content["facts"]]
    assert findings == [("Globex", "active", "supersede"), ("Oslo", "rejected", "low_confidence")]
    assert "low_confidence" in text(moved)
    assert [f["object"] for f in now.structured_content["facts"]] == ["Globex"]
    assert [f["object"] for f in then.structured_content["facts"]] == ["Acme"]
    assert found.structured_content["facts"][0]["object"] == "Globex"
    assert text(found).startswith("Facts (true now):")
    career = next(a for a in scores.structured_content["aspects"] if a["slug"] == "career")
    assert career["facts"] == 1 and "Nothing known yet about" in text(scores)
    assert bad.is_error and text(bad).startswith("invalid_params")


def test_fact_history_shows_what_a_fact_replaced_and_predicates_say_how_each_behaves(daemon):
    with daemon.client() as c:
        first = c.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Acme",
                                  "valid_from": "2024-01-01T00:00:00Z"}], apply=True).facts[0].id
        now = c.facts_propose([{"subject": "user", "predicate": "works_at", "object": "Globex"}], apply=True).facts[0].id
        c.facts_propose([{"subject": "user", "predicate": "enjoys_kayaking_with", "object": "Ana"}], apply=True)

    async def body(session):
        return (await session.call_tool("fact_history", {"id": now}), await session.call_tool("predicates", {}),
                await session.call_tool("fact_history", {"id": 0}), await session.call_tool("predicates", {"x": 1}))

    history, predicates, zero, extra = run_session(daemon.home, body)
    facts = history.structured_content["facts"]
    assert [(f["id"], f["object"]) for f in facts] == [(first, "Acme"), (now, "Globex")]
    assert facts[0]["valid_to"] and facts[1]["supersedes_fact_id"] == first
    assert f"(replaces #{first})" in text(history)
    by_name = {p["name"]: p for p in predicates.structured_content["predicates"]}
    assert by_name["works_at"]["functional"] is True and by_name["works_at"]["active_facts"] == 1
    assert by_name["enjoys_kayaking_with"]["functional"] is False and not by_name["enjoys_kayaking_with"]["builtin"]
    assert "works_at (1)" in text(predicates).splitlines()[0]
    assert text(zero) == "invalid_params: id: must be at least 1"
    assert text(extra) == "invalid_params: x: unknown field"
