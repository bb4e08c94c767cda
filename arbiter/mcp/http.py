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
published here. Writes made elsewhere (the CLI, another `arbiter mcp`)
notify nobody: only this server's own tool calls are seen.

Loopback only, and every request must carry `Authorization: Bearer TOKEN`.
The token lives in HOME/mcp-http.token (0600, like tenant tokens); it is
printed once, when it is created.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

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
from arbiter.mcp._daemon import say
from arbiter.mcp.server import McpServer, RpcError

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

    async def notify(self, ctx, touched: set[str]) -> None:
        """Tell each subscribed session which of `touched` it watches, and that the list changed; the caller
        (subscribed or not) on its own request's stream."""
        caller = _session_id(ctx)
        listed = types.ResourceListChangedNotification()
        for sid, (session, uris) in list(self._by_session.items()):
            if sid == caller:
                continue
            for uri in sorted(uris & touched):
                await session.send_notification(_updated(uri))  # dropped by the transport if its GET stream is closed
            await session.send_notification(listed)
        _, mine = self._by_session.get(caller, (None, set()))
        for note in [*(_updated(uri) for uri in sorted(mine & touched)), listed]:
            await ctx.session.send_notification(note, related_request_id=ctx.request_id)


def _updated(uri: str) -> types.ResourceUpdatedNotification:
    return types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))


def _session_id(ctx) -> str:
    return ctx.request.headers.get(MCP_SESSION_ID_HEADER, "") if ctx.request is not None else ""


class _Server(Server):
    """The SDK's lowlevel server, telling handshake clients that resources' `listChanged` is sent (after writes)."""

    def create_initialization_options(self, notification_options=None, *args, **kwargs):
        return super().create_initialization_options(
            notification_options or NotificationOptions(resources_changed=True), *args, **kwargs)


def build_app(mcp: McpServer, token: str, host: str):
    """The ASGI app: the SDK's streamable HTTP endpoint at /mcp, behind the bearer check."""
    subscriptions = Subscriptions()
    bus = InMemorySubscriptionBus()
    # One tool call at a time: the session's record of what a call changed is shared by every client.
    calling = anyio.Lock()

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

    async def call_tool(ctx, params):
        async with calling:
            result = await run("tools/call", params)
            touched = resources.touched_uris(mcp.session) if mcp.session.wrote else set()
        if touched:
            await subscriptions.notify(ctx, touched)
            for uri in sorted(touched):
                await bus.publish(ResourceUpdated(uri))
            await bus.publish(ResourcesListChanged())
        return types.CallToolResult.model_validate(result)

    async def subscribe(ctx, params):
        subscriptions.subscribe(ctx, str(params.uri))
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
        on_subscriptions_listen=ListenHandler(bus), on_list_prompts=list_prompts, on_get_prompt=get_prompt,
    )
    return BearerOnly(server.streamable_http_app(host=host), token)


def serve_http(mcp: McpServer, *, home: Path, host: str, port: int) -> None:
    """Serve until interrupted."""
    import uvicorn

    if host not in LOOPBACK:
        raise ValueError(f"{host!r} is not a loopback address")
    app = build_app(mcp, http_token(home), host)
    say(f"serving MCP over HTTP at http://{host}:{port}/mcp")
    uvicorn.run(app, host=host, port=port, log_level="warning")
