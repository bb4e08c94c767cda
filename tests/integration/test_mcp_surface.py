"""The default tool surface through the official SDK client: small, strict schemas, and every tool reachable.

A client puts each listed tool's name, description and input schema in the model's context in every session;
`arbiter mcp` offers 14 tools that reach every fine-grained one (`--tools all`).
"""

from __future__ import annotations

import json
import re

import jsonschema

from tests.conftest import arbiter_cli, tool_text as text
from tests.integration.test_mcp_tools import CASES, LAST, ORDER, run_session

MAX_TOOLS = 14
MAX_DEFINITION_BYTES = 16_000

#: Each fine-grained tool -> the default tool that reaches it, the arguments it adds, and (if any) the arguments it
#: spells otherwise (for anyone moving from the fine-grained names). A tool added without an entry here fails below.
VIA = {
    "remember": ("remember", {}), "remember_many": ("remember", {}), "reply": ("remember", {}),
    "update": ("update", {}), "reinforce": ("update", {"reinforce": True}),
    "forget": ("forget", {}), "restore": ("forget", {"restore": True}),
    "link": ("link", {}), "unlink": ("link", {"remove": True}),
    "get": ("get", {}), "history": ("get", {"history": True}),
    "recall": ("recall", {}), "list": ("list", {}),
    "conversation": ("conversation", {}), "conversations": ("conversation", {"list": True}),
    "around": ("explore", {"kind": "around"}, {"k": "limit"}), "thread": ("explore", {"kind": "thread"}),
    "backlinks": ("explore", {"kind": "backlinks"}), "density": ("explore", {"kind": "density"}),
    "expand": ("explore", {"kind": "expand"}), "associations": ("explore", {"kind": "associations"}, {"kind": "association"}),
    "suggest_links": ("explore", {"kind": "suggestions"}), "topic_cluster": ("explore", {"kind": "topic"}),
    "topic_clusters": ("explore", {"kind": "topics"}), "open_threads": ("explore", {"kind": "open_threads"}),
    "get_memory_briefing": ("explore", {"kind": "briefing"}),
    "propose_facts": ("propose_facts", {}), "facts": ("facts", {}), "fact_history": ("facts", {"kind": "history"}),
    "aspects": ("facts", {"kind": "aspects"}), "predicates": ("facts", {"kind": "predicates"}),
    "entities": ("entities", {}), "entity_context": ("entities", {}),
    "relate": ("entity_edit", {"action": "relate"}), "entity_merge": ("entity_edit", {"action": "merge"}),
    "entity_rename": ("entity_edit", {"action": "rename"}),
    "whoami": ("share", {}), "share": ("share", {}), "unshare": ("share", {"remove": True}),
}


def via(name: str, arguments: dict) -> tuple[str, dict]:
    """The default tool and arguments that do what `name` does with `arguments`."""
    combined, fixed, *renamed = VIA[name]
    out = dict(arguments)
    for theirs, ours in (renamed[0] if renamed else {}).items():  # an argument the default tool spells otherwise
        if theirs in out:
            out[ours] = out.pop(theirs)
    return combined, {**out, **fixed}


STRICT_KEYS = {"type", "properties", "required", "additionalProperties", "items", "enum", "description", "default",
               "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
               "anyOf"}
STRICT_TYPES = {"object", "array", "string", "integer", "number", "boolean"}


def strict(node: dict, where: str) -> None:
    """`node` uses only object/array/string/integer/number/boolean/enum, one type each, anyOf only across types."""
    assert set(node) <= STRICT_KEYS, (where, set(node) - STRICT_KEYS)
    if "anyOf" in node:
        types = [b.get("type") for b in node["anyOf"]]
        assert "type" not in node and len(types) > 1 and len(set(types)) == len(types), where
        assert all(t in STRICT_TYPES for t in types), (where, types)
        for i, branch in enumerate(node["anyOf"]):
            strict(branch, f"{where}.anyOf[{i}]")
        return
    assert isinstance(node.get("type"), str) and node["type"] in STRICT_TYPES, (where, node.get("type"))
    if "enum" in node:
        assert node["type"] == "string" and all(isinstance(v, str) for v in node["enum"]), where
    for name, sub in node.get("properties", {}).items():
        strict(sub, f"{where}.{name}")
    if isinstance(node.get("items"), dict):
        strict(node["items"], f"{where}[]")
    assert set(node.get("required", [])) <= set(node.get("properties", {})), where


def definition_bytes(tools) -> int:
    """What a client puts in the model's context for these tools: name, description, input schema, as JSON."""
    return sum(len(json.dumps({"name": t.name, "description": t.description, "inputSchema": t.input_schema}).encode())
               for t in tools)


def test_the_default_surface_is_small_and_every_schema_is_strict(home, daemon):
    async def body(session):
        return (await session.list_tools()).tools

    default = run_session(home, body, "--tools", "default")
    fine = run_session(home, body, "--tools", "all")
    assert len(default) <= MAX_TOOLS, [t.name for t in default]
    assert definition_bytes(default) <= MAX_DEFINITION_BYTES, definition_bytes(default)
    assert definition_bytes(fine) > 2 * definition_bytes(default)
    for t in default + fine:
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        assert t.input_schema["type"] == "object" and t.input_schema["additionalProperties"] is False, t.name
        strict(t.input_schema, t.name)
    assert {t.name for t in fine} == set(VIA), "say in VIA how the default surface reaches each tool"
    assert {v[0] for v in VIA.values()} == {t.name for t in default}


def test_every_fine_grained_tool_answers_through_the_default_surface(memory):
    daemon, built = memory
    with daemon.client() as c:  # as test_mcp_tools: a team for `share`, two entities to merge
        c.team_add("mcp-surface")
        c.remember(type="reference", title="Dashboards", content="Logs are read in Kibana.", entities=["Kibana UI"])

    async def listed(session):
        return {t.name: t for t in (await session.list_tools()).tools}

    async def body(session):
        first, args = via("remember", CASES["remember"](built.ids, 0))
        mine = (await session.call_tool(first, args)).structured_content["entry"]["id"]
        out = {}
        for name in [n for n in VIA if n not in ORDER + LAST] + ORDER + LAST:
            arguments = CASES[name](built.ids, mine)
            if name == "share":
                arguments["team"] = "mcp-surface"
            out[name] = await session.call_tool(*via(name, arguments))
        return out

    fine = run_session(daemon.home, listed, "--tools", "all")
    results = run_session(daemon.home, body, "--tools", "default")
    for name, result in results.items():
        assert not result.is_error, (name, text(result))
        # What came back is the fine-grained tool's result: it matches that tool's output schema.
        jsonschema.validate(result.structured_content, fine[name].output_schema)
    assert results["history"].structured_content["entries"][-1]["id"] == built["adr-queue"]
    assert results["unlink"].structured_content["removed"] is True
    assert results["restore"].structured_content["restored"] is True
    assert results["conversations"].structured_content["conversations"]
    assert results["whoami"].structured_content["teams"] == ["mcp-surface"]
    assert len(results["remember_many"].structured_content["ids"]) == 3
    assert results["reply"].structured_content["verb"].startswith("Replied under")
    assert results["entity_context"].structured_content["entity"]["name"]


def test_an_argument_of_another_view_or_a_bad_enum_is_refused_with_what_is_allowed(home, daemon):
    async def body(session):
        calls = {
            "type": ("remember", {"type": "decision", "title": "t", "content": "c"}),
            "kind": ("explore", {"kind": "neighbours", "id": 1}),
            "no kind": ("explore", {"id": 1}),
            "association": ("explore", {"kind": "associations", "id": 1, "association": "causal"}),
            "other view's": ("explore", {"kind": "backlinks", "id": 1, "depth": 2}),
            "flag": ("forget", {"id": 1, "restore": "yes"}),
            "action": ("entity_edit", {"action": "delete", "name": "x"}),
            "hidden": ("around", {"id": 1}),
        }
        return {k: await session.call_tool(*call) for k, call in calls.items()}

    with daemon.client() as c:
        before = c.status()
    out = run_session(home, body, "--tools", "default")
    with daemon.client() as c:
        after = c.status()
    assert (after.entries_active, after.conversations) == (before.entries_active, before.conversations)
    assert all(r.is_error for r in out.values())
    said = {k: text(r) for k, r in out.items()}
    assert said["type"] == ("invalid_params: type: 'decision' is not one of "
                            "'context', 'feedback', 'learning', 'project', 'reference', 'user'")
    assert said["kind"].startswith("invalid_params: kind: 'neighbours' is not one of 'around', 'thread'")
    assert said["no kind"].startswith("invalid_params: kind: required, one of 'around'")
    assert said["association"] == "invalid_params: association: 'causal' is not one of 'entity', 'similarity', 'temporal'"
    assert said["other view's"] == "invalid_params: depth: not taken by this call (with these arguments it takes id)"
    assert said["flag"] == "invalid_params: restore: must be true or false"
    assert said["action"] == "invalid_params: action: 'delete' is not one of 'relate', 'merge', 'rename'"
    assert said["hidden"].startswith("method_not_found: no tool named 'around'") and "--tools all" in said["hidden"]


def test_a_remember_answer_names_the_call_that_suggests_links_and_that_call_finds_them(home, daemon):
    async def body(session):
        cause = await session.call_tool("remember", {
            "type": "project", "title": "Invoice export deadlock",
            "content": "The invoice export deadlocked because the payments job locked the ledger table first."})
        effect = await session.call_tool("remember", {
            "type": "project", "title": "Ledger lock order fixed",
            "content": "Because the payments job locked the ledger table first, the invoice export deadlocked; "
                       "the export now locks the ledger table before payments."})
        written = effect.structured_content
        asked = await session.call_tool("explore", {"kind": "suggestions", "id": written["entry"]["id"]})
        return cause.structured_content, written, text(effect), asked

    cause, written, said, asked = run_session(home, body, "--tools", "default")
    new = written["entry"]["id"]
    assert "suggested_links" not in written  # not found during the write: its slow part
    assert written["follow_up"] == f"links worth making from it: `explore` kind `suggestions` with id {new}"
    assert written["follow_up"] in said
    links = asked.structured_content["suggested_links"]
    assert any({c["source_id"], c["target_id"]} == {new, cause["entry"]["id"]} for c in links), links
    assert "call `link` with it" in text(asked)


def test_with_the_fine_grained_tools_the_answer_names_them(home, daemon):
    async def body(session):
        return await session.call_tool("remember", {"type": "learning", "title": "A lesson", "content": "Learned."})

    result = run_session(home, body, "--tools", "all")
    assert result.structured_content["follow_up"].startswith("links worth making from it: `suggest_links` with id ")


def test_a_list_of_tools_offers_those_and_an_unknown_name_is_refused(home, daemon):
    async def body(session):
        return [t.name for t in (await session.list_tools()).tools]

    assert run_session(home, body, "--tools", "recall,get,remember_many") == ["recall", "get", "remember_many"]
    refused = arbiter_cli(home, "mcp", "--tools", "recall,teleport")
    assert refused.returncode == 1
    assert refused.stderr.startswith("arbiter: error: --tools: no tool named 'teleport'; give all, default, or")


def test_an_empty_recall_in_a_conversation_lists_it_first_then_the_newest_of_the_memory(home, daemon):
    with daemon.client() as c:
        older = c.remember_many([{"type": "learning", "title": f"Older note {i}", "content": f"Note {i}."}
                                 for i in range(5)])

    async def body(session):
        mine = await session.call_tool("remember", {"type": "project", "title": "This session's", "content": "Mine."})
        found = await session.call_tool("recall", {"query": "", "limit": 4})
        return mine.structured_content["entry"]["id"], found

    mine, found = run_session(home, body, "--tools", "default")
    hits = found.structured_content["hits"]
    assert [h["id"] for h in hits] == [mine, *reversed(older[-3:])]
    assert [h["scope"] for h in hits] == ["conversation", "tenant", "tenant", "tenant"]
    assert found.structured_content["more"] is True
    assert not any(re.search(r"score", line) for line in text(found).splitlines())
