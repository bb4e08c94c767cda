"""Every MCP tool through the official SDK client over stdio, against a real daemon.

Each tool is called once with good arguments (its structured result must
match its output schema) and once with an unknown argument (refused in one
line, as the socket refuses it). A tool added without a case here fails
`test_every_tool_has_a_case`: add it to CASES.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from arbiter import paths
from tests.conftest import DaemonProcess, arbiter_cli, as_user, tool_text as text, isolated_env

REPO = Path(__file__).resolve().parents[2]


def server_params(home: Path, *args: str) -> StdioServerParameters:
    """`arbiter mcp` with every fine-grained tool (these tests call each by name), unless `args` choose the tools."""
    tools = [] if "--tools" in args else ["--tools", "all"]
    return StdioServerParameters(
        command=sys.executable, args=["-m", "arbiter", "mcp", *tools, *args], env=isolated_env(home), cwd=str(REPO),
    )


def run_session(home: Path, body, *args: str, errlog=None, message_handler=None):
    """Open an MCP session on `arbiter mcp` for `home`, run `await body(session)`, return its result."""

    async def main():
        async with stdio_client(server_params(home, *args), errlog=errlog or sys.stderr) as (read, write):
            async with ClientSession(read, write, message_handler=message_handler) as session:
                await session.initialize()
                return await body(session)

    return anyio.run(main)






#: name -> arguments, given the corpus ids and the id of an entry the test may change.
CASES = {
    "remember": lambda ids, mine: {"type": "project", "title": "Export jobs time out", "content": "At 30 s.",
                                   "tags": ["ticket", "p1"]},
    "remember_many": lambda ids, mine: {"entries": [{"type": "learning", "title": f"Lesson {i}",
                                                     "content": f"Lesson number {i}."} for i in range(3)]},
    "update": lambda ids, mine: {"id": mine, "tags": ["ticket", "p2"]},
    "forget": lambda ids, mine: {"id": mine},
    "restore": lambda ids, mine: {"id": mine},
    "link": lambda ids, mine: {"source_id": mine, "relation": "relates_to", "target_id": ids["adr-queue"]},
    "unlink": lambda ids, mine: {"source_id": mine, "relation": "relates_to", "target_id": ids["adr-queue"]},
    "get": lambda ids, mine: {"id": ids["deadlock"]},
    "history": lambda ids, mine: {"id": ids["adr-queue"]},
    "recall": lambda ids, mine: {"query": "deadlock invoices payments"},
    "list": lambda ids, mine: {"tag": "runbook", "limit": 3},
    "conversation": lambda ids, mine: {},
    "conversations": lambda ids, mine: {"limit": 5},
    "reply": lambda ids, mine: {"parent_id": mine, "content": "Raised the timeout to 120 s."},
    "thread": lambda ids, mine: {"id": ids["login-r2"]},
    "around": lambda ids, mine: {"id": ids["login-r1"]},
    "backlinks": lambda ids, mine: {"id": ids["adr-queue"]},
    "density": lambda ids, mine: {"id": ids["adr-queue"]},
    "topic_cluster": lambda ids, mine: {"tag": "runbook", "limit": 3},
    "get_memory_briefing": lambda ids, mine: {},
    "propose_facts": lambda ids, mine: {"facts": [{"subject": "user", "predicate": "works_at", "object": "Acme",
                                                   "source_ids": [ids["deadlock"]]}]},
    "facts": lambda ids, mine: {"subject": "user"},
    "aspects": lambda ids, mine: {},

    "entities": lambda ids, mine: {"query": "post"},
    "entity_context": lambda ids, mine: {"name": "postgres"},
    "relate": lambda ids, mine: {"source": "Redis", "relation": "related_to", "target": "PostgreSQL"},
    "reinforce": lambda ids, mine: {"id": mine},
    "associations": lambda ids, mine: {"id": ids["adr-queue"]},
    "suggest_links": lambda ids, mine: {"id": ids["deadlock"]},
    "whoami": lambda ids, mine: {},
    "share": lambda ids, mine: {"id": mine, "team": "mcp-tools"},
    "unshare": lambda ids, mine: {"id": mine},
    "open_threads": lambda ids, mine: {"limit": 5},
    "expand": lambda ids, mine: {"id": ids["adr-queue"], "depth": 2},
    "topic_clusters": lambda ids, mine: {},
    "fact_history": lambda ids, mine: {"id": 1},  # the fact `propose_facts` made (it runs first, in tool order)
    "predicates": lambda ids, mine: {},
    "entity_merge": lambda ids, mine: {"keep": "Kibana", "other": "Kibana UI"},
    "entity_rename": lambda ids, mine: {"name": "Kibana", "new_name": "Kibana Dashboards"},
}
#: Order matters for the ones that change `mine`: link before unlink, forget last.
ORDER = ["update", "link", "unlink", "reply", "share", "unshare", "entity_merge", "entity_rename"]
LAST = ["forget", "restore"]


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_every_tool_works_with_good_arguments_and_matches_its_output_schema(memory):
    daemon, built = memory

    with daemon.client() as c:  # `share` needs a team the session's user is in; the entity tools, two entities
        c.team_add("mcp-tools")
        c.remember(type="reference", title="Dashboards", content="Logs are read in Kibana.", entities=["Kibana UI"])

    async def body(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        mine = (await session.call_tool("remember", CASES["remember"](built.ids, 0))).structured_content["entry"]["id"]
        names = [n for n in tools if n not in ORDER + LAST] + ORDER + LAST
        return tools, {name: await session.call_tool(name, CASES[name](built.ids, mine)) for name in names}

    tools, results = run_session(daemon.home, body)
    assert set(tools) == set(CASES), "add a case for each new tool to CASES"
    for name, result in results.items():
        assert not result.is_error, (name, text(result))
        tool = tools[name]
        assert tool.description and tool.input_schema["additionalProperties"] is False
        jsonschema.validate(result.structured_content, tool.output_schema)
        assert text(result).strip(), name
    assert results["recall"].structured_content["hits"][0]["id"] == built["deadlock"]
    assert "Lock invoices before payments" in text(results["get"])
    assert [e["id"] for e in results["history"].structured_content["entries"]] == [built["adr-queue-old"], built["adr-queue"]]
    assert results["update"].structured_content["entry"]["tags"] == ["ticket", "p2"]
    assert results["unlink"].structured_content["removed"] is True
    assert results["forget"].structured_content == {"id": results["update"].structured_content["entry"]["id"],
                                                     "forgotten": True,
                                                     "also": [results["reply"].structured_content["entry"]["id"]]}
    assert len(results["remember_many"].structured_content["ids"]) == 3
    assert results["restore"].structured_content == {"id": results["forget"].structured_content["id"], "restored": True}
    assert results["share"].structured_content["team"] == "mcp-tools"
    assert set(results["unshare"].structured_content["ids"]) == set(results["share"].structured_content["ids"])
    assert sorted(results["entity_rename"].structured_content["entity"]["aliases"]) == ["Kibana", "Kibana UI"]
    assert results["fact_history"].structured_content["facts"][0]["object"] == "Acme"
    assert any(e["relation"] == "supports" and e["target_id"] == built["adr-queue"] and "kind" not in e
               for e in results["expand"].structured_content["edges"])


def test_record_time_reads_what_was_known_then(home, daemon):
    async def body(session):
        first = await session.call_tool("remember", {"type": "project", "title": "Launch date", "content": "March 3"})
        entry = first.structured_content["entry"]
        await session.call_tool("update", {"id": entry["id"], "content": "March 10", "speaker": "Caroline"})
        now = await session.call_tool("get", {"id": entry["id"]})
        then = await session.call_tool("get", {"id": entry["id"], "known_at": entry["recorded_at"]})
        found = await session.call_tool("recall", {"query": "launch date march", "known_at": entry["recorded_at"]})
        history = await session.call_tool("history", {"id": entry["id"]})
        return now, then, found, history

    now, then, found, history = run_session(home, body)
    assert now.structured_content["content"] == "March 10" and now.structured_content["revised_at"]
    assert now.structured_content["speaker"] == "Caroline"
    assert then.structured_content["content"] == "March 3" and "revised_at" not in then.structured_content
    assert "speaker" not in then.structured_content
    assert found.structured_content["hits"][0]["excerpt"] == "**March** 3"
    revisions = history.structured_content["revisions"]
    assert [(r["change"], r["fields"]) for r in revisions] == [("remembered", []), ("updated", ["content", "speaker"])]
    assert revisions[0]["recorded_to"] == revisions[1]["recorded_from"]


def test_every_tool_refuses_an_unknown_argument_in_one_line(memory):
    daemon, built = memory

    async def body(session):
        out = {}
        for name, case in CASES.items():
            out[name] = await session.call_tool(name, {**case(built.ids, built["login"]), "bogus": 1})
        out["wrong type"] = await session.call_tool("get", {"id": "seven"})
        out["nested"] = await session.call_tool(
            "remember_many", {"entries": [{"type": "user", "title": "t", "content": "c", "colour": "red"}]})
        out["missing"] = await session.call_tool("recall", {})
        out["no such tool"] = await session.call_tool("teleport", {})
        out["after"] = await session.call_tool("list", {"limit": 1})
        return out

    with daemon.client() as c:
        before = c.status()
    out = run_session(daemon.home, body)
    with daemon.client() as c:  # nothing was written or retired by the refused calls
        after = c.status()
    assert (after.entries_active, after.entries_retired, after.relations, after.conversations) == (
        before.entries_active, before.entries_retired, before.relations, before.conversations)
    for name in CASES:
        assert out[name].is_error, name
        assert text(out[name]) == "invalid_params: bogus: unknown field", name
    assert text(out["wrong type"]) == "invalid_params: id: must be an integer, not text"
    assert text(out["nested"]) == "invalid_params: entries[0].colour: unknown field"
    assert text(out["missing"]) == "invalid_params: query: required"
    assert text(out["no such tool"]).startswith("method_not_found:")
    assert not out["after"].is_error


def test_daemon_errors_are_one_line_with_their_code(memory):
    daemon, built = memory

    async def body(session):
        return (
            await session.call_tool("get", {"id": 999_999}),
            await session.call_tool("link", {"source_id": built["login"], "relation": "supports",
                                             "target_id": built["login"]}),
            await session.call_tool("update", {"id": built["login"]}),
            await session.call_tool("remember", {"type": "user", "title": "x" * 300, "content": "c"}),
        )

    missing, self_loop, empty_update, long_title = run_session(daemon.home, body)
    assert text(missing) == "not_found: entry 999999 not found: list or recall shows the ids you can see"
    assert text(self_loop).startswith("invalid_params:")
    assert text(empty_update).startswith("invalid_params: arguments: give at least one of")
    assert text(long_title) == "invalid_params: title: 300 bytes is over the limit of 200"
    for r in (missing, self_loop, empty_update, long_title):
        assert r.is_error and "\n" not in text(r)


def test_errors_name_tools_and_arguments_never_cli_flags(people):
    """The store words its errors once for every front end: a model reads no `--flag`, a next step names a tool
    it has, and an id another user keeps private reads as one that never existed."""
    daemon, tokens = people
    paths.write_secret(paths.user_token_path(daemon.home, "default", "alice"), tokens["alice"])  # `--user alice`
    with as_user(people, "bob") as bob:
        bobs = bob.remember(type="project", title="Bob's own", content="private to bob").id
        shared = bob.remember(type="project", title="Bob's for the team", content="seen by core", team="core").id
    with as_user(people, "alice") as alice:
        old = alice.remember(type="project", title="Ship date", content="Friday", valid_from="2026-01-01T00:00:00Z")
        alice.remember(type="project", title="Ship date moves", content="Monday", supersedes_ids=[old.id])
    missing = 10**9
    refused = {
        "retired": ("get", {"id": old.id}),
        "missing": ("get", {"id": missing}),
        "hidden": ("get", {"id": bobs}),
        "not_hers": ("update", {"id": shared, "content": "edited by alice"}),
        "future_fact": ("propose_facts", {"facts": [{"subject": "user", "predicate": "lives_in", "object": "Mars",
                                                      "valid_from": "2999-01-01T00:00:00Z"}]}),
    }

    async def body(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        out = {k: await session.call_tool(name, args) for k, (name, args) in refused.items()}
        out["then"] = await session.call_tool("get", {"id": old.id, "as_of": old.valid_from})
        out["facts"] = await session.call_tool("facts", {"subject": "user"})
        return tools, out

    tools, out = run_session(daemon.home, body, "--user", "alice")
    said = {k: text(r) for k, r in out.items()}
    for k in refused:
        assert out[k].is_error and not re.search(r"--[a-z]|\barbiter [a-z]", said[k]), said[k]
    assert said["retired"].startswith(f"not_found: entry {old.id} is retired") and "as of an earlier" in said["retired"]
    assert not out["then"].is_error, said["then"]  # the way back it names works
    assert said["hidden"] == said["missing"].replace(str(missing), str(bobs))
    named = re.fullmatch(r"not_found: entry \d+ not found: (\w+) or (\w+) shows the ids you can see", said["missing"])
    assert named and set(named.groups()) <= tools, said["missing"]
    assert said["not_hers"].startswith("forbidden:") and ": reply to it instead" in said["not_hers"]
    assert "reply" in tools
    assert said["future_fact"].startswith(
        "invalid_params: facts[0].valid_from: 2999-01-01T00:00:00.000000Z is in the future")
    assert not out["facts"].is_error and "Mars" not in said["facts"]  # the refused batch changed nothing


def test_recall_pages_until_exhausted_within_the_budget(memory):
    daemon, built = memory

    async def body(session):
        pages, cursor = [], None
        while True:
            args = {"query": "the", "limit": 4, "max_chars": 600, **({"cursor": cursor} if cursor else {})}
            r = await session.call_tool("recall", args)
            assert not r.is_error, text(r)
            pages.append(r)
            cursor = r.structured_content["next_cursor"]
            if not r.structured_content["more"]:
                return pages

    pages = run_session(daemon.home, body)
    ids = [h["id"] for p in pages for h in p.structured_content["hits"]]
    assert len(pages) > 2 and len(ids) == len(set(ids))
    with daemon.client() as c:
        everything = [h.id for h in c.recall("the", limit=200).hits]
    assert ids == everything  # the same ranking, cut into pages, nothing skipped or repeated
    for p in pages:
        assert len(text(p)) <= 600 or len(p.structured_content["hits"]) == 1
        assert all(h["excerpt"] for h in p.structured_content["hits"])


def test_recall_pages_neither_repeat_nor_skip_when_written_between(daemon):
    """Each page ranks again: a write between pages (here a new top hit, and the conversation it starts) moves
    the ranking, and the next page still brings exactly the hits not shown yet."""
    with daemon.client() as c:
        before = [c.remember(type="reference", title=f"Gadget note {i}", content=f"The gadget runs job {i}.").id
                  for i in range(12)]

    async def body(session):
        r = await session.call_tool("recall", {"query": "gadget", "limit": 5})
        pages = [r]
        w = await session.call_tool("remember", {"type": "reference", "title": "Gadget gadget gadget",
                                                 "content": "The gadget, the gadget and the gadget."})
        assert not w.is_error, text(w)
        while r.structured_content["more"]:
            r = await session.call_tool("recall", {"query": "gadget", "limit": 5,
                                                   "cursor": r.structured_content["next_cursor"]})
            assert not r.is_error, text(r)
            pages.append(r)
        stale = await session.call_tool("recall", {"query": "gadget", "cursor": "5"})
        return pages, w.structured_content["entry"]["id"], stale

    pages, written, stale = run_session(daemon.home, body)
    ids = [h["id"] for p in pages for h in p.structured_content["hits"]]
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted([*before, written])
    assert stale.is_error and text(stale).startswith("invalid_params: cursor: not a cursor this session returned")


def test_list_pages_until_exhausted(memory):
    daemon, built = memory

    async def body(session):
        seen, cursor = [], None
        while True:
            r = await session.call_tool("list", {"tag": "ticket", "limit": 5, **({"cursor": cursor} if cursor else {})})
            seen += [e["id"] for e in r.structured_content["entries"]]
            cursor = r.structured_content["next_cursor"]
            if not r.structured_content["more"]:
                return seen

    seen = run_session(daemon.home, body)
    with daemon.client() as c:
        assert seen == [e.id for e in c.list(tag="ticket", limit=100)]


def test_a_batch_of_a_thousand(home, daemon):
    entries = [{"type": "reference", "title": f"Host {i}", "content": f"host-{i} runs service {i % 7}",
                "tags": ["host"]} for i in range(1000)]

    async def body(session):
        return await session.call_tool("remember_many", {"entries": entries})

    r = run_session(home, body)
    assert not r.is_error, text(r)
    ids = r.structured_content["ids"]
    assert len(ids) == 1000 and ids == sorted(ids)
    with daemon.client() as c:
        assert c.get(ids[-1]).title == "Host 999"
        assert c.get(ids[0]).conversation_id == r.structured_content["conversation_id"]


def test_recall_searches_the_sessions_conversation_first(home, daemon):
    with daemon.client() as c:
        other = c.conversation_create("Another session").id
        c.remember_many([{"type": "project", "title": f"Cache eviction note {i}", "content": "cache eviction policy LRU",
                          "conversation_id": other} for i in range(5)])

    async def body(session):
        wrote = await session.call_tool("remember", {"type": "project", "title": "Cache eviction here",
                                                      "content": "our cache eviction: LFU"})
        scoped = await session.call_tool("recall", {"query": "cache eviction"})
        wide = await session.call_tool("recall", {"query": "cache eviction", "everywhere": True})
        there = await session.call_tool("recall", {"query": "cache eviction", "conversation_id": other})
        current = await session.call_tool("conversation", {})
        briefing = await session.call_tool("get_memory_briefing", {})
        return wrote, scoped, wide, there, current, briefing

    wrote, scoped, wide, there, current, briefing = run_session(home, body)
    mine = wrote.structured_content["conversation_id"]
    assert mine and mine != other and current.structured_content["id"] == mine
    assert f"This session is conversation #{mine}" in text(briefing)  # as the instructions say it
    hits = scoped.structured_content["hits"]
    assert scoped.structured_content["conversation_id"] == mine
    assert hits[0]["id"] == wrote.structured_content["entry"]["id"] and hits[0]["scope"] == "conversation"
    assert all(h["scope"] == "tenant" for h in hits[1:])
    assert wide.structured_content["conversation_id"] is None
    assert all(h["scope"] == "tenant" for h in wide.structured_content["hits"])
    assert {h["scope"] for h in there.structured_content["hits"][:5]} == {"conversation"}


def test_a_session_resumes_a_conversation_named_by_the_client(home, daemon):
    with daemon.client() as c:
        conv = c.conversation_create("Planning").id

    async def body(session):
        return await session.call_tool("remember", {"type": "project", "title": "Plan", "content": "Q1 plan"})

    r = run_session(home, body, "--conversation", str(conv))
    assert r.structured_content["conversation_id"] == conv


def test_a_conversation_that_does_not_exist_is_refused_at_start(home, daemon):
    out = arbiter_cli(home, "mcp", "--conversation", "999")
    assert out.returncode == 1
    assert out.stderr.strip().endswith("conversation 999 not found in tenant 'default'")


def test_remember_names_the_call_for_links_and_suggest_links_hands_them_over(home, daemon):
    async def body(session):
        cause = await session.call_tool("remember", {
            "type": "context", "title": "Team skills", "content": "The team lacks Redis experience in production"})
        effect = await session.call_tool("remember", {
            "type": "project", "title": "Storage choice",
            "content": "We chose SQLite for the cache because the team lacks Redis experience"})
        asked = await session.call_tool("suggest_links", {"id": effect.structured_content["entry"]["id"]})
        walked = await session.call_tool("recall", {"query": "why SQLite", "graph": True})
        return cause, effect, asked, walked

    cause, effect, asked, walked = run_session(home, body)
    cause_id = cause.structured_content["entry"]["id"]
    effect_id = effect.structured_content["entry"]["id"]
    # Finding them is most of a write's time: the write names the call, the model makes it when it wants them.
    assert "suggested_links" not in effect.structured_content
    assert f"`suggest_links` with id {effect_id}" in text(effect)
    assert asked.structured_content["suggested_links"] == [{
        "kind": "causal", "source_id": cause_id, "relation": "causes", "target_id": effect_id,
        "reason": asked.structured_content["suggested_links"][0]["reason"],
    }]
    assert f"link {cause_id} causes {effect_id}" in text(asked) and "Possible links" in text(asked)
    assert not walked.is_error and walked.structured_content["hits"][0]["id"] == effect_id


def test_remember_auto_link_reports_what_the_advisor_linked(home, fake_messages):
    d = DaemonProcess(home, extra_env={"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url})
    d.start()
    try:
        with d.client() as c:
            cause = c.remember(type="context", title="Team skills",
                               content="The team lacks Redis experience in production").id
        fake_messages.set_script(lambda body: json.dumps({"links": [
            {"source": cause, "relation": "causes", "target": int(body["messages"][0]["content"]
                                                                   .split("NEW:\n[id ")[1].split("]")[0])}]}))

        async def body(session):
            return await session.call_tool("remember", {
                "type": "project", "title": "Storage choice", "auto_link": True,
                "content": "We chose SQLite for the cache because the team lacks Redis experience"})

        effect = run_session(home, body)
    finally:
        d.stop()
    effect_id = effect.structured_content["entry"]["id"]
    assert effect.structured_content["linked"] == [f"#{cause} causes #{effect_id}"]
    assert "suggested_links" not in effect.structured_content  # the one candidate is linked, not suggested
    assert f"Linked (judged by Arbiter's model): #{cause} causes #{effect_id}" in text(effect)


def test_link_takes_a_causes_qualifier(home, daemon):
    with daemon.client() as c:
        a, b = (c.remember(type="project", title=f"t{i}", content=f"c{i}").id for i in range(2))

    async def body(session):
        refused = await session.call_tool("link", {"source_id": a, "relation": "supports", "target_id": b,
                                                   "qualifier": "enables"})
        made = await session.call_tool("link", {"source_id": a, "relation": "causes", "target_id": b,
                                                "qualifier": "enables"})
        return refused, made

    refused, made = run_session(home, body)
    assert refused.is_error and text(refused).startswith("invalid_params: supports takes no qualifier")
    assert made.structured_content["qualifier"] == "enables" and f"#{a} causes (enables) #{b}" in text(made)


def test_a_conversation_older_than_the_newest_thousand_is_resumed(home, daemon):
    with daemon.client() as c:
        old = c.conversation_create("The first session").id
        for i in range(1000):
            c.conversation_create(f"Session {i}")
        assert old not in {conv.id for conv in c.conversation_list(1000)}  # beyond any one page

    async def body(session):
        resumed = await session.call_tool("conversation", {"id": old})
        wrote = await session.call_tool("remember", {"type": "project", "title": "Plan", "content": "Q1 plan"})
        missing = await session.call_tool("conversation", {"id": 987_654})
        return resumed, wrote, missing

    resumed, wrote, missing = run_session(home, body)
    assert resumed.structured_content == {"id": old, "title": "The first session",
                                          "created_at": resumed.structured_content["created_at"]}
    assert wrote.structured_content["conversation_id"] == old
    assert missing.is_error and text(missing) == "not_found: conversation 987654 not found (at id)"
    started = run_session(home, lambda s: s.call_tool("conversation", {}), "--conversation", str(old))
    assert started.structured_content["id"] == old


def test_forget_says_which_replies_it_retired_with_the_entry(home, daemon):
    async def body(session):
        root = (await session.call_tool("remember", {"type": "project", "title": "Cache plan", "content": "LRU"}))
        root_id = root.structured_content["entry"]["id"]
        replies = [(await session.call_tool("reply", {"parent_id": root_id, "content": f"step {i}"}))
                   .structured_content["entry"]["id"] for i in range(2)]
        forgot = await session.call_tool("forget", {"id": root_id})
        restored = await session.call_tool("restore", {"id": root_id})
        return root_id, replies, forgot, restored

    root_id, replies, forgot, restored = run_session(home, body)
    assert forgot.structured_content == {"id": root_id, "forgotten": True, "also": replies}
    assert text(forgot) == f"Retired #{root_id}, and your replies under it: #{replies[0]}, #{replies[1]}."
    assert restored.structured_content["restored"] is True
    with daemon.client() as c:  # restore reopens the one entry, as its description says: replies are restored each
        assert [e.id for e in c.list()] == [root_id]


def test_tool_arguments_match_their_verbs(home, daemon):
    """`reply` takes the verb's `source`; `unlink` takes no `qualifier` (the verb ignores it: it was accepted and dropped)."""
    with daemon.client() as c:
        a, b = (c.remember(type="project", title=f"t{i}", content=f"c{i}").id for i in range(2))
        c.link(a, "causes", b, qualifier="enables")

    async def body(session):
        replied = await session.call_tool("reply", {"parent_id": a, "content": "Fixed.", "source": "PR 42"})
        qualified = await session.call_tool("unlink", {"source_id": a, "relation": "causes", "target_id": b,
                                                       "qualifier": "prevents"})
        return replied, qualified

    replied, qualified = run_session(home, body)
    with daemon.client() as c:
        assert c.get(replied.structured_content["entry"]["id"]).source == "PR 42"
        assert [r.relation for r in c.around(a).relations] == ["causes"]  # the refused unlink removed nothing
    assert qualified.is_error and text(qualified) == "invalid_params: qualifier: unknown field"


def test_conversations_lists_what_the_conversation_tool_resumes(home, daemon):
    with daemon.client() as c:
        older, newer = (c.conversation_create(title).id for title in ("Planning Q1", "Incident review"))

    async def body(session):
        listed = await session.call_tool("conversations", {"limit": 1})
        everything = await session.call_tool("conversations", {})
        resumed = await session.call_tool("conversation", {"id": everything.structured_content["conversations"][1]["id"]})
        return listed, everything, resumed

    listed, everything, resumed = run_session(home, body)
    assert [c["id"] for c in listed.structured_content["conversations"]] == [newer]
    assert listed.structured_content["more"] is True
    assert [c["id"] for c in everything.structured_content["conversations"]] == [newer, older]
    assert text(everything).splitlines()[1].startswith(f"- #{newer} 'Incident review' (since ")
    assert resumed.structured_content["id"] == older


def test_a_refused_or_duplicate_first_write_starts_no_conversation(home, daemon):
    with daemon.client() as c:
        c.remember(type="reference", title="Staging host", content="staging runs on box-7")

    async def body(session):
        refused = await session.call_tool("remember", {"type": "project", "title": "t", "content": "new",
                                                       "supersedes_ids": [999_999]})
        duplicate = await session.call_tool("remember", {"type": "reference", "title": "staging host",
                                                         "content": "staging runs on box-7"})
        refused_many = await session.call_tool("remember_many", {"entries": [
            {"type": "project", "title": "a", "content": "a"}, {"type": "project", "title": "x" * 201, "content": "b"}]})
        before = await session.call_tool("conversation", {})
        wrote = await session.call_tool("remember", {"type": "project", "title": "Plan", "content": "Q1 plan"})
        wrote_many = await session.call_tool("remember_many", {"entries": [{"type": "project", "title": "b", "content": "b"}]})
        return refused, duplicate, refused_many, before, wrote, wrote_many

    refused, duplicate, refused_many, before, wrote, wrote_many = run_session(home, body)
    assert refused.is_error and refused_many.is_error and duplicate.structured_content["duplicate_of"]
    assert before.structured_content == {"id": None, "title": None, "created_at": None}
    started = wrote.structured_content["conversation_id"]
    assert started and wrote_many.structured_content["conversation_id"] == started
    with daemon.client() as c:
        assert [conv.id for conv in c.conversation_list()] == [started]


def test_remember_many_starts_the_sessions_conversation_with_its_batch(home, daemon):
    async def body(session):
        first = await session.call_tool("remember_many", {"entries": [{"type": "project", "title": "a", "content": "a"}]})
        then = await session.call_tool("remember", {"type": "project", "title": "b", "content": "b"})
        return first, then

    first, then = run_session(home, body)
    started = first.structured_content["conversation_id"]
    assert started and then.structured_content["conversation_id"] == started
    with daemon.client() as c:
        assert c.get(first.structured_content["ids"][0]).conversation_id == started


def test_recall_counts_its_facts_in_the_budget(home, daemon):
    with daemon.client() as c:
        ids = c.remember_many([{"type": "user", "title": f"Kayak trip {i}", "content": f"Paddled the kayak on lake {i}. "
                                "It rained; we camped on the shore and cooked over the fire." * 2} for i in range(12)])
        c.facts_propose([{"subject": "user", "predicate": f"owns_kayak_{i}", "sources": [ids[i]],
                          "object": f"a red sea kayak number {i}, seventeen feet long, bought second hand in the spring"}
                         for i in range(5)], apply=True)

    async def body(session):
        return await session.call_tool("recall", {"query": "kayak", "max_chars": 2000, "everywhere": True})

    r = run_session(home, body)
    assert len(r.structured_content["facts"]) == 5 and len(r.structured_content["hits"]) > 1
    assert len(text(r)) <= 2000, len(text(r))
    assert r.structured_content["more"] is True


def test_associations_name_the_entries_they_point_at(home, daemon):
    with daemon.client() as c:
        one = c.remember(type="project", title="Kubernetes upgrade plan", content="Upgrade Kubernetes to 1.31.").id
        two = c.remember(type="reference", title="Cluster runbook", content="Kubernetes nodes drain first.").id

    r = run_session(home, lambda session: session.call_tool("associations", {"id": one, "kind": "entity"}))
    (found,) = r.structured_content["associations"]
    assert (found["other_id"], found["type"], found["title"]) == (two, "reference", "Cluster runbook")
    assert text(r).splitlines()[1].startswith(f"#{two} [reference] Cluster runbook: entity/Kubernetes")
