"""`arbiter mcp`: a stdio MCP server over the daemon, built on the official MCP Python SDK.

It reaches memory only through `arbiter.client.Client`. On start it makes
sure a daemon answers on the configured socket (starting one, detached, if
none does, and saying so on stderr), fetches the tenant's briefing and serves
it as the `initialize` result's `instructions`: the model gets a map of the
memory before its first prompt. Daemon errors come back as MCP tool errors
(`isError`) carrying the daemon's message.

Only the `arbiter mcp` command imports this module, so neither the daemon nor
the rest of the CLI loads the SDK.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity
from pydantic import Field

from arbiter import __version__, paths
from arbiter.client import Client
from arbiter.errors import ArbiterError, Unavailable
from arbiter.model import EntryType, RelationType

START_TIMEOUT_S = 20.0
EXCERPT_CHARS = 240

EntryId = Annotated[int, Field(ge=1, description="An entry id (the number shown as #ID).")]
AsOf = Annotated[
    str | None,
    Field(description="Read the memory as it stood at this instant (RFC 3339, e.g. 2026-11-20T10:00:00Z)."),
]


def _say(message: str) -> None:
    print(f"arbiter mcp: {message}", file=sys.stderr, flush=True)


# ---- reaching the daemon -------------------------------------------------------


def _answers(socket_path: Path) -> bool:
    try:
        with Client(socket_path, None, timeout=2) as c:
            c.ping()
        return True
    except Unavailable:
        return False


def _serve_command(home: Path, socket_path: Path) -> list[str]:
    # A frozen build is the `arbiter` executable itself; otherwise run this
    # interpreter on the package.
    base = [sys.executable] if getattr(sys, "frozen", False) else [sys.executable, "-m", "arbiter"]
    return [*base, "--home", str(home), "--socket", str(socket_path), "serve"]


def ensure_daemon(home: Path, socket_path: Path, *, timeout: float = START_TIMEOUT_S) -> int | None:
    """Start a detached daemon unless one answers on `socket_path`; its pid, or None if one was running."""
    if _answers(socket_path):
        return None
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = home / "daemon.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            _serve_command(home, socket_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives this server and its client's process group
        )
    _say(f"no daemon answered on {socket_path}; started one (pid {proc.pid}, log {log_path})")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _answers(socket_path):
            return proc.pid
        # Another server may have won a race to start it: then ours exits, and theirs answers.
        if proc.poll() is not None and not _answers(socket_path):
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise Unavailable(f"the daemon exited with status {proc.returncode}: {' / '.join(tail)}")
        time.sleep(0.05)
    raise Unavailable(f"the daemon did not answer on {socket_path} within {timeout:.0f}s (log: {log_path})")


#: Tools that write. A write cut off by a dying daemon may or may not have
#: committed, so it is never retried blindly; reads are.
WRITES = frozenset({"remember", "reply", "link", "forget"})


class Calls:
    """The one Client, shared by tool calls (the SDK runs sync tools on worker threads).

    If the daemon has gone away, `revive` starts a new one (saying so on
    stderr); a read is then retried once, a write reports what happened.
    """

    def __init__(self, client: Client, revive: Callable[[], object] | None = None):
        self.client = client
        self.revive = revive
        self._lock = threading.Lock()

    def __call__(self, method: str, *args, **kwargs) -> Any:
        with self._lock:
            try:
                try:
                    return getattr(self.client, method)(*args, **kwargs)
                except Unavailable:
                    if self.revive is None:
                        raise
                    self.client.close()
                    self.revive()
                    if method in WRITES:
                        raise Unavailable(
                            "the daemon stopped during this call and was restarted; the write may or may "
                            "not have been saved: check with `get` or `recall` before retrying"
                        ) from None
                    return getattr(self.client, method)(*args, **kwargs)
            except ArbiterError as e:
                where = f" (at {e.path})" if e.path and e.path not in e.message else ""
                raise ToolError(f"{e.name}: {e.message}{where}") from None


# ---- rendering: short text a model reads well ------------------------------------


def _day(text: str | None) -> str:
    return (text or "")[:10]


def _line(e) -> str:
    """`#42 [project] Title (2026-11-20, tags: a, b)` for an Entry, EntryRef or Hit."""
    marks = [_day(getattr(e, "valid_from", None) or getattr(e, "recorded_at", None))]
    if getattr(e, "superseded", False) or getattr(e, "superseded_by", None):
        marks.append("superseded")
    elif getattr(e, "valid_to", None):
        marks.append("retired")
    if e.tags:
        marks.append("tags: " + ", ".join(e.tags))
    return f"#{e.id} [{e.type}] {e.title} ({'; '.join(marks)})"


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def _full(e) -> str:
    lines = [_line(e)]
    if e.parent_id:
        lines.append(f"reply to #{e.parent_id}")
    if e.superseded_by:
        lines.append("superseded by " + ", ".join(f"#{i}" for i in e.superseded_by))
    if e.valid_to and not e.superseded_by:
        lines.append(f"retired {e.valid_to}")
    if e.source:
        lines.append(f"source: {e.source}")
    if e.conversation_id:
        lines.append(f"conversation {e.conversation_id}")
    lines += ["", e.content]
    return "\n".join(lines)


def _listing(title: str, items: list, empty: str = "(none)", *, excerpt: bool = False) -> str:
    lines = [title]
    for e in items:
        lines.append("- " + _line(e))
        if excerpt and getattr(e, "content", None):
            lines.append("  " + _excerpt(e.content))
    if not items:
        lines.append(empty)
    return "\n".join(lines)


# ---- the server ------------------------------------------------------------------


class _NoRequestState:
    """A request-state codec that mints nothing and accepts nothing.

    The SDK seals state only for tools that pause to ask the client for input
    (multi-round-trip requests). Arbiter's tools never do, so there is no state
    to protect, and refusing every token means none can be replayed. It also
    spares the executable the `cryptography` package the SDK's default
    AES-GCM codec needs (see packaging/rthook_cryptography.py).
    """

    def seal(self, payload: bytes) -> str:
        raise RuntimeError("arbiter's MCP tools never pause for input, so they carry no request state")

    def unseal(self, token: str) -> bytes:
        raise InvalidRequestState("arbiter mints no request state")




def build_server(call: Calls, instructions: str) -> MCPServer:
    """The MCP server: the briefing as instructions and one tool per memory verb."""
    server = MCPServer(
        "arbiter", instructions=instructions, version=__version__, log_level="WARNING",
        request_state_security=RequestStateSecurity(codec=_NoRequestState(), audience="arbiter"),
    )

    def tool(name: str):
        return server.tool(name=name, structured_output=False)

    @tool("remember")
    def remember(
        type: Annotated[EntryType, Field(description=(
            "user: about the person; feedback: how they want you to work; project: work, tickets, decisions; "
            "reference: how-tos, runbooks, facts to look up; learning: lessons; context: session summaries."))],
        title: Annotated[str, Field(description="One specific line, at most 200 bytes.")],
        content: Annotated[str, Field(description="The memory itself. Mention related entries as #ID.")],
        tags: Annotated[list[str], Field(description=(
            "Up to 32 tags without spaces. Reuse the briefing's tag vocabulary and families."))] = [],
        supersedes_ids: Annotated[list[int], Field(description=(
            "Entries this one replaces: they retire (still readable in history)."))] = [],
        source: Annotated[str | None, Field(description="Where this came from (URL, file, person).")] = None,
    ) -> str:
        """Store a NEW memory entry.

        Read before you write: `recall` the key words first (and check the
        briefing's topic map and open threads). If the memory already holds
        this subject, do not duplicate it: use `reply` to add to its thread,
        or pass `supersedes_ids` when the new entry replaces an old one.
        Reuse existing tags.
        """
        e = call("remember", type=type, title=title, content=content, tags=tags, supersedes_ids=supersedes_ids,
                 source=source)
        retired = f"; retired {', '.join(f'#{i}' for i in supersedes_ids)}" if supersedes_ids else ""
        note = f"\nnote: {e.note}" if e.note else ""
        return f"Remembered {_line(e)}{retired}{note}"

    @tool("reply")
    def reply(
        parent_id: Annotated[int, Field(ge=1, description="The entry (or thread) to reply to.")],
        content: Annotated[str, Field(description="The follow-up: progress, an answer, a correction, a comment.")],
        title: Annotated[str | None, Field(description="Defaults to 'Re: <parent title>'.")] = None,
        type: Annotated[EntryType | None, Field(description="Defaults to the parent's type.")] = None,
        tags: Annotated[list[str] | None, Field(description="Defaults to the parent's tags.")] = None,
    ) -> str:
        """Continue a thread: add an entry under an existing one.

        Prefer this over `remember` whenever the new information follows up
        on something already stored (a status update, an answer, a fix, a
        comment), above all on the open threads listed in the briefing. Type,
        title and tags default to the parent's.
        """
        e = call("reply", parent_id, content, title=title, type=type, tags=tags)
        return f"Replied under #{parent_id}: {_line(e)}"

    @tool("thread")
    def thread(id: EntryId, as_of: AsOf = None) -> str:
        """Read a whole thread (root and replies, oldest first) from any entry in it. Read it before replying."""
        t = call("thread", id, as_of=as_of)
        lines = ["Root: " + _full(t.root), "", f"{len(t.replies)} replies:"]
        for r in t.replies:
            lines += [f"{'  ' * (t.depth[r.id] - 1)}- {_line(r)} reply to #{r.parent_id}",
                      f"{'  ' * t.depth[r.id]}{_excerpt(r.content)}"]
        return "\n".join(lines)

    @tool("link")
    def link(
        source_id: EntryId,
        relation: Annotated[RelationType, Field(description=(
            "supersedes: source replaces target (target retires); contradicts: they disagree, both stay; "
            "refines: source details target; supports: source is evidence for target; relates_to: same subject."))],
        target_id: EntryId,
    ) -> str:
        """Relate two existing entries: SOURCE relation TARGET.

        Link whenever you extend or correct something already stored, after
        `recall`/`get` has confirmed both ids. `supersedes` retires the target.
        """
        r = call("link", source_id, relation, target_id)
        return f"Linked #{r.source_id} {r.relation} #{r.target_id} (relation {r.id})"

    @tool("recall")
    def recall(
        query: Annotated[str, Field(description="Key words: names, identifiers, the subject.")],
        types: Annotated[list[EntryType], Field(description="Prefer these entry types.")] = [],
        tag: Annotated[str | None, Field(description="Prefer entries with this tag.")] = None,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        as_of: AsOf = None,
    ) -> str:
        """Search memory by words. Call it BEFORE writing anything that may already be stored,
        and whenever the answer may be in memory. Returns ids, with excerpts for the top three; read one in full with `get`."""
        res = call("recall", query, types=types or None, tag=tag, limit=limit, as_of=as_of)
        lines = [f"{len(res.hits)} hits for {query!r}:"]
        for h in res.hits:
            lines.append("- " + _line(h))
            if h.excerpt:
                lines.append("  " + _excerpt(h.excerpt))
        if res.note:
            lines.append(f"note: {res.note}")
        return "\n".join(lines)

    @tool("get")
    def get(id: EntryId, as_of: AsOf = None) -> str:
        """Read one entry in full: content, tags, thread parent, what superseded it."""
        return _full(call("get", id, as_of=as_of))

    @tool("list")
    def list_(
        types: Annotated[list[EntryType], Field(description="Only these types.")] = [],
        tag: Annotated[str | None, Field(description="Only entries with this tag.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        before_id: Annotated[int | None, Field(ge=1, description="Page: entries older than this id.")] = None,
    ) -> str:
        """Browse entries newest first with hard filters (types, tag). For a topic, prefer `topic_cluster`."""
        items = call("list", types=types or None, tag=tag, limit=limit, before_id=before_id)
        return _listing(f"{len(items)} entries, newest first:", items, excerpt=True)

    @tool("forget")
    def forget(id: EntryId) -> str:
        """Retire an entry that is wrong or no longer true: it leaves searches but stays in history.

        When a newer entry replaces it, use `remember` with `supersedes_ids`
        (or `link` ... supersedes) instead, so the replacement is recorded.
        """
        done = call("forget", id)
        return f"Retired #{id}." if done else f"#{id} was already retired."

    @tool("around")
    def around(id: EntryId, k: Annotated[int, Field(ge=1, le=20, description="Entries per list.")] = 5) -> str:
        """An entry's neighbourhood in one call: parent, children, siblings, entries sharing the most
        tags, #ID references both ways and explicit relations. Use it before replying to, superseding or
        forgetting an entry."""
        a = call("around", id, k=k)
        parts = [_full(a.entry), ""]
        parts.append("Parent: " + (_line(a.parent) if a.parent else "none (a thread root)"))
        parts.append(_listing("Children (replies):", a.children))
        parts.append(_listing("Siblings:", a.siblings))
        parts.append("Sharing tags:" + "".join(
            f"\n- {_line(n.entry)} shares {', '.join(n.shared_tags)}" for n in a.shared_tags) + (
            "" if a.shared_tags else "\n(none)"))
        parts.append(_listing("References (#ID in its text):", a.references))
        parts.append(_listing("Mentioned by:", a.mentioned_by))
        parts.append("Relations:" + "".join(
            f"\n- {'this' if r.direction == 'out' else _line(r.entry)} {r.relation} "
            f"{_line(r.entry) if r.direction == 'out' else 'this'}" for r in a.relations) + (
            "" if a.relations else "\n(none)"))
        return "\n".join(parts)

    @tool("backlinks")
    def backlinks(id: EntryId) -> str:
        """What points at an entry: replies, entries mentioning #ID, incoming relations. Check it before
        forgetting or superseding an entry."""
        b = call("backlinks", id)
        lines = [f"{len(b.links)} backlinks to #{id}:"]
        for link_ in b.links:
            kind = f"relation {link_.relation}" if link_.kind == "relation" else link_.kind
            lines.append(f"- {kind}: {_line(link_.entry)}")
        return "\n".join(lines)

    @tool("density")
    def density(id: EntryId) -> str:
        """How connected an entry is: incoming and outgoing relations, their kinds, entries within two
        hops. A dense entry is central: change it with care."""
        d = call("density", id)
        kinds = ", ".join(d.relations) or "none"
        return f"#{d.id}: {d.in_degree} incoming, {d.out_degree} outgoing ({kinds}); {d.reach_2hop} entries within 2 hops"

    @tool("topic_cluster")
    def topic_cluster(
        tag: Annotated[str, Field(description="Any tag of the topic (see the briefing's topic map).")],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> str:
        """The topic a tag belongs to and its most recent entries. Read up on a topic before writing into it."""
        r = call("topic_cluster", tag, limit=limit)
        c = r.cluster
        head = f"Topic {c.name!r} ({c.entries} entries): {c.description}\nTags: {', '.join(c.tags)}"
        return head + "\n" + _listing("Most recent:", r.entries, excerpt=True)

    @tool("get_memory_briefing")
    def get_memory_briefing() -> str:
        """The map of this memory (the same briefing as at session start): totals, tag conventions,
        guidance, named topics, open threads, recent activity. Call it again after many writes or when
        unsure what the memory holds."""
        return call("briefing").text

    return server


def run(*, home: Path, socket_path: Path, tenant: str) -> None:
    """Serve MCP on stdin/stdout until the client hangs up."""
    ensure_daemon(home, socket_path)
    token = paths.read_secret(paths.token_path(home, tenant), f"tenant {tenant!r}")
    client = Client(socket_path, token)
    call = Calls(client, revive=lambda: ensure_daemon(home, socket_path))
    try:
        instructions = client.briefing().text
    except ArbiterError as e:
        raise type(e)(f"could not read the briefing: {e.message}", path=e.path) from None
    try:
        build_server(call, instructions).run("stdio")
    finally:
        client.close()
