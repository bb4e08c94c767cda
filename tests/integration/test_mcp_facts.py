"""The facts tools through the real MCP SDK client: propose through the gate, read what is true, recall shows facts."""

from __future__ import annotations

from tests.integration.test_mcp_tools import run_session, text


def test_an_agent_proposes_facts_and_reads_what_is_true_now(daemon):
    async def body(session):
        said = await session.call_tool("remember", {"type": "user", "title": "Job", "content": "I work at Acme."})
        entry = said.structured_content["entry"]["id"]
        first = await session.call_tool("propose_facts", {"facts": [
            {"subject": "user", "predicate": "works_at", "object": "Acme", "sources": [entry],
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
