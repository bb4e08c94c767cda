"""`arbiter mcp --http 127.0.0.1:PORT`: MCP's streamable HTTP transport, for clients that cannot spawn a process.

The official SDK serves the transport (sessions, SSE, its DNS-rebinding
checks on loopback); every request it hands us runs through the same
`McpServer` methods as stdio, so tools, resources and prompts answer alike.

Change notifications: one HTTP server has many clients, so a write through
any of them notifies every client subscribed to what it changed (the
briefing, each entry touched), as `notifications/resources/updated`, and
then `notifications/resources/list_changed` (to the writer too). A
client that shook hands (protocol 2025-11-25 and before) subscribes with
`resources/subscribe`: the writer's own notifications ride the response
stream of its `tools/call` (before the result; stdio sends them after it),
other clients' their standing GET stream (a client without one open misses
them, as the transport specifies). A 2026-07-28 client opens
`subscriptions/listen`, served by the SDK's `ListenHandler` from the events
published here. Changes made elsewhere (the CLI, a teammate, another
`arbiter mcp`) are found by polling the daemon (`watch.py`) while any client
has a subscription (a `resources/subscribe`, or a listen stream), and told
the same way on the clients' standing streams.

Loopback only, and every request must carry `Authorization: Bearer TOKEN`.
The token lives in HOME/mcp-http.token (0600, like tenant tokens); it is
printed once, when it is created.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from pathlib import Path
from typing import Callable

import anyio
import mcp_types as types
import msgspec
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError

from arbiter import __version__, paths
from arbiter.mcp import resources
from arbiter.errors import ArbiterError
from arbiter.mcp._daemon import say
from arbiter.mcp.server import McpServer, RpcError
from arbiter.mcp.tool import Session, error_line

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def token_path(home: Path) -> Path:
    return home / "mcp-http.token"


def http_token(home: Path) -> str:
    """The bearer token, created (and printed, the one time) on first use."""
    path = token_path(home)
    if path.exists():
        return paths.read_secret(path, "arbiter mcp --http")
    token = secrets.token_urlsafe(32)
    paths.write_secret(path, token)
    say(f"created the HTTP bearer token (shown once; kept in {path}): {token}")
    return token


class BearerOnly:
    """ASGI middleware: a request without the right bearer token gets 401 and reaches nothing."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: missing or wrong bearer token"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="arbiter"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class Subscriptions:
    """Handshake-era clients' `resources/subscribe`s: each MCP session's URIs, and the session to notify."""

    def __init__(self):
        self._by_session: dict[str, tuple[ServerSession, set[str]]] = {}

    def subscribe(self, ctx, uri: str) -> None:
        # Keep the newest request's session handle: its standalone channel is the client's GET stream.
        _, uris = self._by_session.get(_session_id(ctx), (None, set()))
        uris.add(uri)
        self._by_session[_session_id(ctx)] = (ctx.session, uris)

    def unsubscribe(self, ctx, uri: str) -> None:
        if entry := self._by_session.get(_session_id(ctx)):
            entry[1].discard(uri)

    def uris(self, live: set[str] | None = None) -> set[str]:
        """Every URI some session watches; sessions not in `live` (ended: the client left) are forgotten first."""
        if live is not None:
            for sid in set(self._by_session) - live:
                del self._by_session[sid]
        return {uri for _, uris in self._by_session.values() for uri in uris}

    async def broadcast(self, changed: list[str], listed: bool) -> None:
        """What a poll found: each session hears of the URIs it watches (and of the list), on its GET stream."""
        for session, uris in list(self._by_session.values()):
            for uri in [u for u in changed if u in uris]:
                await session.send_notification(_updated(uri))
            if listed:
                await session.send_notification(types.ResourceListChangedNotification())

    async def notify(self, ctx, touched: set[str], listed: bool) -> None:
        """Tell each subscribed session which of `touched` it watches, and (if `listed`) that the list changed;
        the caller (subscribed or not) on its own request's stream."""
        caller = _session_id(ctx)
        moved = [types.ResourceListChangedNotification()] if listed else []
        for sid, (session, uris) in list(self._by_session.items()):
            if sid == caller:
                continue
            for uri in sorted(uris & touched):
                await session.send_notification(_updated(uri))  # dropped by the transport if its GET stream is closed
            for note in moved:
                await session.send_notification(note)
        _, mine = self._by_session.get(caller, (None, set()))
        for note in [*(_updated(uri) for uri in sorted(mine & touched)), *moved]:
            await ctx.session.send_notification(note, related_request_id=ctx.request_id)


def _updated(uri: str) -> types.ResourceUpdatedNotification:
    return types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))


def _session_id(ctx) -> str:
    return ctx.request.headers.get(MCP_SESSION_ID_HEADER, "") if ctx.request is not None else ""


class Listening(ListenHandler):
    """The SDK's `subscriptions/listen`, keeping what each open stream watches (so the poll knows what to ask)."""

    def __init__(self, bus, opened):
        super().__init__(bus)
        self.watched: dict[object, tuple[set[str], bool]] = {}  # stream -> (URIs, wants list changes)
        self._opened = opened

    def uris(self) -> tuple[set[str], bool]:
        """Every URI an open stream watches, and whether any wants list changes."""
        return ({u for uris, _ in self.watched.values() for u in uris},
                any(listed for _, listed in self.watched.values()))

    async def __call__(self, ctx, params):
        stream = object()
        wanted = params.notifications
        self.watched[stream] = (set(wanted.resource_subscriptions or ()), bool(wanted.resources_list_changed))
        await self._opened()
        try:
            return await super().__call__(ctx, params)
        finally:
            del self.watched[stream]


class _Server(Server):
    """The SDK's lowlevel server, telling handshake clients that resources' `listChanged` is sent (after writes),
    and each client the briefing as it is when it connects (`fresh`), not as it was when the server started."""

    def __init__(self, *args, fresh: Callable[[], str] | None = None, **kwargs):
        self._fresh = fresh
        super().__init__(*args, **kwargs)

    @property
    def instructions(self) -> str | None:
        """Read by the SDK for each `initialize` and `server/discover`."""
        if self._fresh is not None:
            try:
                self._instructions = self._fresh()
            except ArbiterError as e:  # the daemon is down: the last briefing read, rather than none
                say(f"could not read the briefing for a new client ({error_line(e)}); sent the last one")
        return self._instructions

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        self._instructions = value

    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        return super().create_initialization_options(
            notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)


def build_app(mcp: McpServer, token: str, host: str, instructions: Callable[[], str] | None = None):
    """The ASGI app: the SDK's streamable HTTP endpoint at /mcp, behind the bearer check.

    `instructions` reads the briefing for each client that connects (one server outlives many sessions).
    """
    subscriptions = Subscriptions()
    bus = InMemorySubscriptionBus()
    # One tool call (or poll) at a time: the session's record of what a call changed is shared by every
    # client, and a poll between a write and its own notifications would tell them twice.
    calling = anyio.Lock()
    # Each client's own conversation (by MCP session id), all starting where the server was told to start.
    sessions: dict[str, Session] = {}
    start = mcp.session.conversation_id
    polling: list[asyncio.Task] = []

    def watched() -> set[str] | None:
        """Every URI a client watches (None: no client watches anything, so nothing is polled)."""
        listened, lists = listening.uris()
        uris = subscriptions.uris(live()) | listened
        return uris if uris or lists else None

    async def publish(changed, listed: bool) -> None:
        for uri in sorted(changed):
            await bus.publish(ResourceUpdated(uri))
        if listed:
            await bus.publish(ResourcesListChanged())

    async def poll_while_watched() -> None:
        failing = False
        while True:
            await anyio.sleep(mcp.poll_s)
            async with calling:
                uris = watched()
                if uris is None:
                    mcp.watch.reset()
                    polling.clear()
                    return
                try:
                    changed, listed = await anyio.to_thread.run_sync(mcp.watch.poll, uris)
                except Exception as e:  # noqa: BLE001 - the daemon down (being revived) or a bug: say so once, keep polling
                    if not failing:
                        what = error_line(e) if isinstance(e, ArbiterError) else f"{type(e).__name__}: {e}"
                        say(f"could not poll for changes ({what}); retrying every {mcp.poll_s:g}s")
                    failing = True
                    continue
                failing = False
            try:
                await subscriptions.broadcast(changed, listed)
                await publish(changed, listed)
            except Exception as e:  # noqa: BLE001 - e.g. a session closing mid-send: the others still want news
                say(f"could not send change notifications ({type(e).__name__}: {e})")

    async def opened() -> None:
        """Something is watched now: take its baseline at once, and poll from here on."""
        changed, listed = [], False
        async with calling:
            if uris := watched():
                try:
                    changed, listed = await anyio.to_thread.run_sync(mcp.watch.poll, uris)
                except ArbiterError as e:  # the poll to come takes the baseline instead
                    say(f"could not poll for changes ({error_line(e)})")
        if changed or listed:
            await subscriptions.broadcast(changed, listed)
            await publish(changed, listed)
        if not polling or polling[0].done():
            polling[:] = [asyncio.get_running_loop().create_task(poll_while_watched())]

    def live() -> set[str] | None:
        # The SDK keeps its open sessions in the session manager (private: no public way to ask). A session the
        # client ended must not keep the poll going; if the SDK moves this, sessions are kept, as before.
        sessions = getattr(getattr(server, "_session_manager", None), "_server_instances", None)
        return set(sessions) if isinstance(sessions, dict) else None

    listening = Listening(bus, opened)

    async def run(method: str, params) -> dict:
        body = {} if params is None else params.model_dump(by_alias=True, exclude_none=True, mode="json")
        body.pop("_meta", None)
        try:
            result = await anyio.to_thread.run_sync(mcp.dispatch, method, body)
        except RpcError as e:
            raise MCPError(e.code, e.message) from None
        return msgspec.to_builtins(result)  # a tool's structured content is its View Struct

    async def list_tools(ctx, params):
        return types.ListToolsResult.model_validate(await run("tools/list", params))

    def session_of(ctx) -> Session:
        """The client's Session (its conversation, what its calls changed); sessions the SDK ended are dropped."""
        if (open_ids := live()) is not None:
            for ended in set(sessions) - open_ids:
                del sessions[ended]
        sid = _session_id(ctx)
        if sid not in sessions:
            sessions[sid] = Session(mcp.session.daemon, conversation_id=start)
            sessions[sid].called_as = mcp.session.called_as
        return sessions[sid]

    async def call_tool(ctx, params):
        async with calling:
            mcp.session = session_of(ctx)  # tool calls run one at a time, so the server's session is the caller's
            result = await run("tools/call", params)
            touched = resources.touched_uris(mcp.session) if mcp.session.wrote else set()
            listed = bool(touched) and mcp.session.listed
            if touched and (uris := watched()):
                try:  # what changed anywhere, told now (the next poll would tell it again otherwise)
                    touched.update((await anyio.to_thread.run_sync(mcp.watch.poll, uris))[0])
                except ArbiterError as e:  # the write stands; the next poll finds what this one missed
                    say(f"could not poll for changes after a write ({error_line(e)})")
        if touched:
            await subscriptions.notify(ctx, touched, listed)
            await publish(touched, listed)
        return types.CallToolResult.model_validate(result)

    async def subscribe(ctx, params):
        subscriptions.subscribe(ctx, str(params.uri))
        await opened()
        return types.EmptyResult()

    async def unsubscribe(ctx, params):
        subscriptions.unsubscribe(ctx, str(params.uri))
        return types.EmptyResult()

    async def list_resources(ctx, params):
        return types.ListResourcesResult.model_validate(await run("resources/list", params))

    async def list_templates(ctx, params):
        return types.ListResourceTemplatesResult.model_validate(await run("resources/templates/list", params))

    async def read_resource(ctx, params):
        return types.ReadResourceResult.model_validate(await run("resources/read", params))

    async def list_prompts(ctx, params):
        return types.ListPromptsResult.model_validate(await run("prompts/list", params))

    async def get_prompt(ctx, params):
        return types.GetPromptResult.model_validate(await run("prompts/get", params))

    server = _Server(
        "arbiter", version=__version__, instructions=mcp.instructions, on_list_tools=list_tools,
        on_call_tool=call_tool, on_list_resources=list_resources, on_list_resource_templates=list_templates,
        on_read_resource=read_resource, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=listening, on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        fresh=instructions,
    )
    app = server.streamable_http_app(host=host)
    return BearerOnly(app, token)


def serve_http(mcp: McpServer, *, home: Path, host: str, port: int,
               instructions: Callable[[], str] | None = None) -> None:
    """Serve until interrupted; `instructions` reads each connecting client's briefing."""
    import uvicorn

    if host not in LOOPBACK:
        raise ValueError(f"{host!r} is not a loopback address")
    app = build_app(mcp, http_token(home), host, instructions)
    say(f"serving MCP over HTTP at http://{host}:{port}/mcp")
    uvicorn.run(app, host=host, port=port, log_level="warning")
