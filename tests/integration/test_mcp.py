"""`arbiter mcp` through the real MCP SDK client over stdio, against a real daemon."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from arbiter import paths
from arbiter._lock import lock_owner
from arbiter.client import Client
from tests.conftest import tool_text as _text, DaemonProcess, wait_for

REPO = Path(__file__).resolve().parents[2]
SECTIONS = [
    "## 1. Identity and totals",
    "## 2. Conventions",
    "## 3. Before you write",
    "## 4. Topic map",
    "## 5. Open threads",
    "## 6. Recent activity",
]
TOOLS = {
    "remember", "reply", "link", "recall", "get", "list", "forget", "around", "backlinks", "density",
    "topic_cluster", "get_memory_briefing",
}


def _server(home: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "arbiter", "mcp", *([] if "--tools" in args else ["--tools", "all"]), *args],
        env={"ARBITER_HOME": str(home)},
        cwd=str(REPO),
    )


async def _session(params: StdioServerParameters, errlog, body):
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return await body(session, init)






def test_initialize_instructions_are_the_briefing(memory, tmp_path):
    daemon, built = memory

    async def body(session, init):
        return init.instructions

    with open(tmp_path / "stderr", "w") as err:
        text = anyio.run(_session, _server(daemon.home), err, body)
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert len(text.encode()) < 8192
    threads_section = text[text.index(SECTIONS[4]):text.index(SECTIONS[5])]
    for root in built.thread_roots:
        assert f"#{built[root]} " in threads_section
    assert "`area:*`" in text and "`p<n>`" in text  # the priority + area tag family was detected
    # A daemon was already running: no start-up message.
    assert "started one" not in (tmp_path / "stderr").read_text()


def test_the_briefing_names_only_tools_the_model_can_call(memory, tmp_path):
    """A command-like code span in the instructions (snake_case, or `word NAME`) is a tool or one of its arguments."""
    daemon, built = memory

    async def body(session, init):
        tools = (await session.list_tools()).tools
        return init.instructions, {t.name for t in tools} | {p for t in tools for p in t.input_schema["properties"]} | {
            kind for t in tools for p in ("kind", "action") for kind in t.input_schema["properties"].get(p, {}).get("enum", [])}

    with open(tmp_path / "stderr", "w") as err:
        text, callable_names = anyio.run(_session, _server(daemon.home, "--tools", "default"), err, body)
    spans = set(re.findall(r"`([^`]+)`", text))
    command_like = {s for s in spans if re.fullmatch(r"[a-z]+(_[a-z]+)+|[a-z]+ [a-z]+ [A-Z]+", s)}
    assert {"propose_facts", "parent_id"} <= command_like  # the facts line and the guidance
    assert command_like <= callable_names, command_like - callable_names


def test_a_cut_briefing_names_the_tools_that_reach_what_it_cut(home, daemon, tmp_path):
    with daemon.client() as c:
        roots = c.remember_many([{"type": "project", "title": f"Open question number {i}: " + "which queue? " * 6,
                                  "content": f"question {i}", "tags": [f"topic-{i}", f"area-{i % 9}", f"team-{i % 5}", "question"]}
                                 for i in range(100)])
        for root in roots:
            c.reply(root, "still open")

    async def body(session, init):
        tools = (await session.list_tools()).tools
        return init.instructions, {t.name for t in tools}

    with open(tmp_path / "stderr", "w") as err:
        text, tools = anyio.run(_session, _server(home, "--tools", "default"), err, body)
    note = text[text.index("_Cut to stay under"):]
    named = set(re.findall(r"`([a-z_]+)`", note))
    assert {"explore", "open_threads"} <= named and named - {"open_threads", "topics", "topic"} <= tools, named - tools


def test_tools_are_listed_and_each_one_works(memory, tmp_path):
    daemon, built = memory
    ids = built.ids

    async def body(session, init):
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        out = {"tools": tools}
        calls = {
            "get_memory_briefing": {},
            "recall": {"query": "deadlock invoices payments"},
            "get": {"id": ids["deadlock"]},
            "list": {"tag": "runbook", "limit": 3},
            "around": {"id": ids["login-r1"]},
            "backlinks": {"id": ids["adr-queue"]},
            "density": {"id": ids["adr-queue"]},
            "topic_cluster": {"tag": "runbook", "limit": 3},
            "thread": {"id": ids["login-r2"]},
            "remember": {"type": "project", "title": "Export jobs time out at 30 s", "content": "See #%d." % ids["adr-queue"],
                         "tags": ["ticket", "p1", "area:api", "bug"]},
        }
        for name, args in calls.items():
            out[name] = await session.call_tool(name, args)
        new_id = int(re.search(r"#(\d+)", _text(out["remember"]))[1])
        out["reply"] = await session.call_tool("reply", {"parent_id": new_id, "content": "Raised the timeout to 120 s."})
        out["said"] = await session.call_tool("reply", {"parent_id": ids["adr-queue"], "content": "Agreed.",
                                                         "speaker": "Caroline"})
        out["link"] = await session.call_tool(
            "link", {"source_id": new_id, "relation": "relates_to", "target_id": ids["adr-queue"]})
        out["forget"] = await session.call_tool("forget", {"id": new_id})
        out["new_id"] = new_id
        return out

    with open(tmp_path / "stderr", "w") as err:
        out = anyio.run(_session, _server(daemon.home), err, body)
    tools = out["tools"]
    assert TOOLS <= set(tools)
    for t in tools.values():
        assert t.description and t.input_schema["type"] == "object"
    # A model fills each argument from its description alone: none is bare (a `limit` of what, a `facts` of what).
    bare = [f"{t.name}.{name}" for t in tools.values() for name, prop in t.input_schema.get("properties", {}).items()
            if "description" not in prop and not any("description" in alt for alt in prop.get("anyOf", []))]
    assert bare == []
    assert "recall" in tools["remember"].description and "reply" in tools["remember"].description
    assert set(tools["link"].input_schema["properties"]["relation"]["enum"]) >= {"supersedes", "contradicts"}
    for name in TOOLS | {"thread"}:
        assert not out[name].is_error, (name, _text(out[name]))
    assert SECTIONS[0] in _text(out["get_memory_briefing"])
    assert f"#{built['deadlock']} " in _text(out["recall"])
    assert "Lock invoices before payments" in _text(out["get"])
    assert _text(out["list"]).count("[reference]") == 3
    around = _text(out["around"])
    assert f"#{built['login']} " in around and f"#{built['login-r2']} " in around
    backlinks = _text(out["backlinks"])
    assert "reply:" in backlinks and "relation supports:" in backlinks and "mention:" not in backlinks
    assert _text(out["density"]).startswith(f"#{built['adr-queue']}: 1 incoming, 1 outgoing (supersedes, supports)")
    cluster = _text(out["topic_cluster"])
    assert "runbook" in cluster.splitlines()[1] and cluster.count("[reference]") == 3
    assert f"reply to #{built['login-r1']}" in _text(out["thread"])
    assert f"Replied under #{out['new_id']}" in _text(out["reply"])
    with daemon.client() as c:
        assert c.get(int(re.findall(r"#(\d+)", _text(out["said"]))[1])).speaker == "Caroline"
    assert "relates_to" in _text(out["link"])
    reply_id = int(re.search(r"#(\d+)", _text(out["reply"]).split(":", 1)[1])[1])
    assert _text(out["forget"]) == f"Retired #{out['new_id']}, and your replies under it: #{reply_id}."


def test_daemon_errors_are_tool_errors_with_the_daemons_message(memory, tmp_path):
    daemon, built = memory

    async def body(session, init):
        return (
            await session.call_tool("get", {"id": 999_999}),
            await session.call_tool("link", {"source_id": built["login"], "relation": "supports",
                                             "target_id": built["login"]}),
            await session.call_tool("topic_cluster", {"tag": "recipe"}),
            await session.call_tool("get", {"id": built["login"]}),  # the session survives errors
        )

    with open(tmp_path / "stderr", "w") as err:
        missing, self_loop, no_cluster, ok = anyio.run(_session, _server(daemon.home), err, body)
    assert missing.is_error and "not_found: entry 999999 not found" in _text(missing)
    assert self_loop.is_error and "invalid_params" in _text(self_loop)
    assert no_cluster.is_error and "no topic cluster" in _text(no_cluster)
    assert not ok.is_error


def test_mcp_starts_a_daemon_when_none_answers(tmp_path):
    home = Path(tempfile.mkdtemp(prefix="arb-"))

    async def body(session, init):
        wrote = await session.call_tool(
            "remember", {"type": "user", "title": "Prefers short answers", "content": "Keep replies brief."})
        return init.instructions, wrote

    err_path = tmp_path / "stderr"
    try:
        with open(err_path, "w") as err:
            instructions, wrote = anyio.run(_session, _server(home), err, body)
        stderr = err_path.read_text()
        assert "no daemon answered" in stderr and "started one" in stderr
        assert "nothing yet" in instructions.lower() and not wrote.is_error
        # The daemon outlives the MCP server: a plain client still reaches it.
        with Client.from_home(home) as c:
            assert c.get(1).title == "Prefers short answers"
    finally:
        pid = re.search(r"pid (\d+)", err_path.read_text() if err_path.exists() else "")
        if pid:
            os.kill(int(pid[1]), signal.SIGTERM)
            wait_for(lambda: not (home / "arbiter.sock").exists(), what="the started daemon to stop")
        shutil.rmtree(home, ignore_errors=True)


def test_the_daemon_and_plain_cli_do_not_load_the_sdk_or_networkx():
    code = (
        "import sys, arbiter.cli, arbiter.server, arbiter.verbs\n"
        "print(sorted(m for m in ('mcp', 'networkx', 'anthropic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_daemon_that_dies_mid_session_is_restarted(home, tmp_path):
    daemon = DaemonProcess(home).start()
    with daemon.client() as c:
        entry = c.remember(type="reference", title="Staging host", content="staging runs on box-7").id
    errlog = tmp_path / "stderr"

    def kill_and_wait(pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        # Gone, not just silent: a process still dying (its threads finishing an fsync) holds its lock, and
        # a daemon that holds its lock is one that refuses, which nothing restarts.
        wait_for(lambda: lock_owner(paths.lock_path(daemon.socket)) is None, what="the killed daemon to exit")

    async def body(session, init):
        kill_and_wait(daemon.proc.pid)
        read = await session.call_tool("get", {"id": entry})  # a read is retried after the restart
        restarted = int(re.search(r"started one \(pid (\d+)", errlog.read_text())[1])
        kill_and_wait(restarted)
        entities = await session.call_tool("entities", {})  # every tool that only reads, not just the core ones
        restarted = int(re.findall(r"started one \(pid (\d+)", errlog.read_text())[-1])
        kill_and_wait(restarted)
        write = await session.call_tool("remember", {"type": "project", "title": "x", "content": "y"})
        return read, entities, write

    try:
        with open(errlog, "w") as err:
            read, entities, write = anyio.run(_session, _server(home), err, body)
        assert not read.is_error and "box-7" in _text(read)
        assert not entities.is_error, _text(entities)
        assert write.is_error and "restarted" in _text(write) and "check with `get`" in _text(write)
    finally:
        daemon.stop()
        for pid in map(int, re.findall(r"started one \(pid (\d+)", errlog.read_text())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_a_daemon_refusing_connections_is_not_taken_for_dead(home, tmp_path, fake_messages):
    """Past --max-connections, every one busy, the daemon says so and closes: the write was never read, and no
    daemon is started."""
    daemon = DaemonProcess(home, args=("--max-connections", "1"), extra_env={
        "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_messages.base_url}).start()
    errlog = tmp_path / "stderr"
    holding = threading.Event()
    with daemon.client() as c:  # what the holder's write will ask the advisor to link to
        c.remember(type="context", title="Team skills", content="The team lacks Redis experience in production")
    fake_messages.set_script(lambda body: holding.wait(30) and '{"links": []}')
    held = {}

    def hold_the_slot() -> None:  # a request in flight (the advisor thinking): the one slot is busy, not idle
        with daemon.client() as c:
            held["entry"] = c.remember(type="project", title="held", auto_link=True,
                                       content="We chose SQLite for the cache because the team lacks Redis experience")

    async def body(session, init):
        holder = threading.Thread(target=hold_the_slot)
        holder.start()  # at the limit, it takes the MCP server's idle connection's place
        try:
            wait_for(lambda: fake_messages.requests, what="the holder's request to be in flight")
            return await session.call_tool("remember", {"type": "project", "title": "x", "content": "y"})
        finally:
            holding.set()
            holder.join()

    try:
        with open(errlog, "w") as err:
            write = anyio.run(_session, _server(home), err, body)
        assert write.is_error and "too many connections" in _text(write), _text(write)
        assert "started one" not in errlog.read_text()
        with daemon.client() as c:
            assert [e.title for e in c.list()] == ["held", "Team skills"]  # refused before it was read: not written
    finally:
        daemon.stop()
