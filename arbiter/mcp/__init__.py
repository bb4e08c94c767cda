"""`arbiter mcp`: the MCP front door over the daemon, on stdio or streamable HTTP.

It reaches memory only through `arbiter.client.Client`. On start it makes
sure a daemon answers on the configured socket (starting one, detached, if
none does, and saying so on stderr), fetches the tenant's briefing and serves
it as the `initialize` result's `instructions`: the model gets a map of the
memory before its first prompt.

Layout:
- `tool.py`: the tool pattern (read its docstring before adding a tool);
- `entries.py`, `graph.py`: the core tools; a feature adds `<feature>.py`
  and its module name to TOOL_MODULES below;
- `_paging.py`: what the tools whose results page share: the cursor, the
  `max_chars` budget, fitting a page to it;
- `resources.py`: the briefing and each entry as resources, and the prompts;
- `watch.py`: change notifications for changes made anywhere (polling the daemon while subscribed);
- `server.py`: the protocol on stdio (msgspec, no SDK: see why there);
- `http.py`: streamable HTTP through the official SDK, loopback and bearer token;
- `_daemon.py`: starting and reviving the daemon.

Only the `arbiter mcp` command imports this package, so neither the daemon
nor the rest of the CLI loads it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import ArbiterError, NotFound

#: Modules that declare tools (with `arbiter.mcp.tool.tool`), in `tools/list` order.
TOOL_MODULES = ["entries", "graph", "associations", "facts", "entities", "people"]


#: Daemon verbs deliberately without a tool, and why (docs/architecture.md, "MCP"). A tool costs every session its
#: description and schemas in the model's context, so a verb gets one when a model working in a memory needs it.
#: `tests/unit/test_mcp_daemon.py` keeps every verb either reached by a tool or named here.
WITHOUT_TOOL = {
    **dict.fromkeys(("batch_list", "batch_show", "batch_evaluate", "batch_apply", "batch_reject"), (
        "propose_facts applies through the gate in one call; a batch held for review is a human's to decide")),
    "predicate_declare": "tenant-wide, once and for good, and it changes how the gate treats every user's facts",
    "fact_extract": "asks the daemon's LLM to read entries: the model on the other end reads them itself",
    "tag_cooccurrence": "the briefing's tag vocabulary, pairs and families, and topic_cluster's tags, say it",
    "graph_view": "the web view's layout of a whole memory; expand is the model's walk",
    **dict.fromkeys(("export_page", "export_page_admin", "import_batch", "backup_create"), (
        "whole memories to and from files on the daemon's machine: an operator's job")),
    **dict.fromkeys(("tenant_create", "tenant_list", "user_add", "user_rotate", "user_list", "team_add", "team_join",
                     "team_leave", "team_list"), "administration: an operator's (whoami, share and unshare are tools)"),
    **dict.fromkeys(("maintain", "associations_rebuild"), "upkeep the daemon runs itself; an operator may force it"),
    "purge": "irreversible: forget retires and restore undoes it; purging is the user's call",
    **dict.fromkeys(("ping", "status"), "the server checks the daemon itself; the briefing carries the totals"),
}


def load_tools() -> None:
    """Import every tool module, so TOOLS holds every tool."""
    for name in TOOL_MODULES:
        importlib.import_module(f"arbiter.mcp.{name}")


def session_note(conversation_id: int | None) -> str:
    """What the instructions add to the briefing about this session's conversation."""
    if conversation_id is None:
        return ("\n\n## This session\nYour first write starts this session's conversation: your writes go to it "
                "and `recall` searches it first. Resume an earlier one with the `conversation` tool (with `list` it lists them).")
    return (f"\n\n## This session\nThis session is conversation #{conversation_id}: your writes go to it and "
            "`recall` searches it first (`everywhere` for the whole memory alike).")


def run(*, home: Path, socket_path: Path, tenant: str, token_file: Path | None = None,
        conversation_id: int | None = None, http: tuple[str, int] | None = None, tools: str | None = None) -> None:
    """Serve MCP on stdin/stdout until the client hangs up (or on loopback HTTP until interrupted).

    `tools`: `all` (every fine-grained tool), a comma list of tool names, or None for the default surface.
    """
    from arbiter.mcp import surface
    from arbiter.mcp._daemon import Reviving, ensure_daemon
    from arbiter.mcp.tool import Session

    load_tools()
    offered = surface.select(tools)  # a bad name is refused before anything starts

    ensure_daemon(home, socket_path)
    # The token decides who the session is (a user of a tenant); the file defaults to the tenant's first user.
    token = paths.read_secret(token_file or paths.token_path(home, tenant), f"tenant {tenant!r}")
    client = Reviving(socket_path, token, revive=lambda: ensure_daemon(home, socket_path))
    session = Session(client, conversation_id=conversation_id)
    try:
        instructions = client.briefing().text + session_note(conversation_id)
    except ArbiterError as e:
        raise type(e)(f"could not read the briefing: {e.message}", path=e.path) from None
    if conversation_id is not None:
        try:
            client.conversation_get(conversation_id)
        except NotFound:
            raise NotFound(f"conversation {conversation_id} not found in tenant {tenant!r}", path="conversation") from None
    from arbiter.mcp.server import McpServer, serve_stdio

    server = McpServer(session, instructions, offered)

    def fresh_instructions() -> str:
        # Its own connection: the briefing never waits behind a tool call on the shared one.
        with Client(socket_path, token) as fresh:
            return fresh.briefing().text + session_note(conversation_id)  # where each new client starts

    try:
        if http:
            from arbiter.mcp.http import serve_http

            serve_http(server, home=home, host=http[0], port=http[1], instructions=fresh_instructions)
        else:
            serve_stdio(server)
    finally:
        client.close()
