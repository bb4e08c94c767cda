"""The MCP protocol over stdio, spoken directly: JSON-RPC 2.0, one JSON object per line.

Why not the SDK's server here: importing any part of the `mcp` package loads
all of it (its `__init__` pulls in the client, Starlette, uvicorn, httpx and
both versions of the pydantic wire types): 63 MB of RSS before the first
request, against a 40 MB budget for the whole `arbiter mcp` process, and
pydantic validation of every message on the hot path. Stdio MCP is small
(the `initialize` handshake, tools, resources, prompts, ping and a few
notifications), so it is served here with msgspec; the tests hold it to the
protocol with the official SDK client and the MCP Inspector.
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import IO, Callable

import msgspec

from arbiter import __version__
from arbiter.errors import ArbiterError, InvalidParams, NotFound
from arbiter.mcp import resources, surface
from arbiter.mcp._daemon import say
from arbiter.mcp.tool import Session, call_tool, error_line
from arbiter.mcp.watch import POLL_S, Watch

#: Handshake revisions we speak; a client offering another gets the newest.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": False},
}

# JSON-RPC and MCP error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603
RESOURCE_NOT_FOUND = -32002


class McpServer:
    """One MCP session: answers each request, and says which notifications follow it.

    While a resource is subscribed, a thread polls the daemon for changes made
    anywhere (`watch.py`) and sends what it finds through `emit` (stdio sets
    it). A poll and a request never overlap (`lock`), so a change this
    session's own write made is told once, after that write.
    """

    def __init__(self, session: Session, instructions: str, tools: dict | None = None):
        self.session = session
        #: The tools this server offers (`surface.select`): the default surface unless told otherwise.
        self.tools = surface.build() if tools is None else tools
        session.called_as = surface.called_as(self.tools)
        self.instructions = instructions
        self.subscribed: set[str] = set()
        self.watch = Watch(session.daemon)
        self.lock = threading.RLock()
        self.emit: Callable[[list[dict]], None] | None = None
        self.poll_s = POLL_S
        self._pending: list[dict] = []  # notifications a request's handler found, sent after its response
        self._poller: threading.Thread | None = None
        self._failing = False
        self._tools = [t.listing() for t in self.tools.values()]
        self.methods: dict[str, Callable[[dict], dict]] = {
            "initialize": self.initialize,
            "ping": lambda p: {},
            "tools/list": lambda p: {"tools": self._tools},
            "tools/call": self.call_tool,
            "resources/list": lambda p: resources.list_resources(self.session, _optional_str(p, "cursor")),
            "resources/templates/list": lambda p: resources.list_templates(),
            "resources/read": lambda p: resources.read_resource(self.session, _str(p, "uri")),
            "resources/subscribe": self.subscribe,
            "resources/unsubscribe": self.unsubscribe,
            "prompts/list": lambda p: resources.list_prompts(),
            "prompts/get": lambda p: resources.get_prompt(_str(p, "name"), _optional_object(p, "arguments")),
        }

    def initialize(self, params: dict) -> dict:
        offered = params.get("protocolVersion")
        return {
            "protocolVersion": offered if offered in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": "arbiter", "version": __version__},
            "instructions": self.instructions,
        }

    def call_tool(self, params: dict) -> dict:
        s = self.session
        s.changed_ids.clear()
        s.wrote = False
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise InvalidParams.at("arguments", "must be an object")
        return call_tool(s, self.tools, _str(params, "name"), arguments)

    def after(self, method: str) -> list[dict]:
        """Notifications owed after `method` ran: what a write changed (here or, found by the poll, anywhere)."""
        out, self._pending = self._pending, []
        if method != "tools/call" or not self.session.wrote:
            return out
        changed = set(resources.changed_uris(self.session, self.subscribed))
        if self.subscribed:
            try:
                changed.update(self.watch.poll(self.subscribed)[0])
            except ArbiterError as e:  # the write stands; the next poll finds what this one missed
                say(f"could not poll for changes after a write ({error_line(e)})")
        return out + [_updated(uri) for uri in sorted(changed)] + ([LIST_CHANGED] if self.session.listed else [])

    def subscribe(self, params: dict) -> dict:
        uri = _str(params, "uri")
        # Polled now: the new URI's state is the baseline its notifications are measured from.
        self._pending += _notifications(*self.watch.poll(self.subscribed | {uri}))
        self.subscribed.add(uri)
        if self.emit is not None and self._poller is None:
            self._poller = threading.Thread(target=self._poll_while_subscribed, name="arbiter-mcp-watch", daemon=True)
            self._poller.start()
        return {}

    def unsubscribe(self, params: dict) -> dict:
        self.subscribed.discard(_str(params, "uri"))
        if not self.subscribed:
            self.watch.reset()
        return {}

    def _poll_while_subscribed(self) -> None:
        """Every `poll_s`, send what changed anywhere; end once nothing is subscribed."""
        stopped = threading.Event()  # never set: its wait is the pause between polls
        while True:
            stopped.wait(self.poll_s)
            with self.lock:
                if not self.subscribed:
                    self._poller = None
                    return
                try:
                    notes = _notifications(*self.watch.poll(self.subscribed))
                except ArbiterError as e:  # the daemon is down (and being revived): say so once, keep polling
                    if not self._failing:
                        say(f"could not poll for changes ({error_line(e)}); retrying every {self.poll_s:g}s")
                    self._failing = True
                    continue
                self._failing = False
                if notes:
                    self.emit(notes)

    def handle(self, message) -> tuple[dict | None, list[dict]]:
        """One decoded message -> (its response or None for a notification, notifications to send after)."""
        with self.lock:
            return self._handle(message)

    def _handle(self, message) -> tuple[dict | None, list[dict]]:
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "invalid_request: not a JSON-RPC 2.0 message"), []
        req_id, method = message.get("id"), message.get("method")
        if message.get("jsonrpc") != "2.0":
            return _error(req_id, INVALID_REQUEST, "invalid_request: not a JSON-RPC 2.0 message"), []
        if not isinstance(method, str):
            return None, []  # a response to a request we never send, or junk without an id
        if "id" not in message:
            return None, []  # notifications/initialized, cancelled: nothing to do
        params = message.get("params") or {}
        try:
            result = self.dispatch(method, params)
        except RpcError as e:
            self._pending = []
            return _error(req_id, e.code, e.message), []
        return {"jsonrpc": "2.0", "id": req_id, "result": result}, self.after(method)

    def dispatch(self, method: str, params) -> dict:
        """Run one request's method; its result, or RpcError with the code and one-line message."""
        handler = self.methods.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"method_not_found: unknown method {method!r}")
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "invalid_params: params must be an object")
        try:
            return handler(params)
        except NotFound as e:
            raise RpcError(RESOURCE_NOT_FOUND if method == "resources/read" else INVALID_PARAMS, error_line(e)) from None
        except InvalidParams as e:
            raise RpcError(INVALID_PARAMS, error_line(e)) from None
        except ArbiterError as e:
            raise RpcError(e.code, error_line(e)) from None
        except Exception as e:  # a bug: answer, log it, keep serving
            traceback.print_exc(file=sys.stderr)
            raise RpcError(INTERNAL, f"internal_error: {type(e).__name__}: {e}") from None


class RpcError(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _str(params: dict, key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise InvalidParams.at(key, "required, a string")
    return value


def _optional_str(params: dict, key: str) -> str | None:
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidParams.at(key, "must be a string")
    return value


def _optional_object(params: dict, key: str) -> dict | None:
    value = params.get(key)
    if value is not None and not isinstance(value, dict):
        raise InvalidParams.at(key, "must be an object")
    return value


LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}


def _updated(uri: str) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


def _notifications(changed: list[str], listed: bool) -> list[dict]:
    return [_updated(uri) for uri in changed] + ([LIST_CHANGED] if listed else [])


def _error(req_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}


def serve_stdio(server: McpServer, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
    """Answer requests line by line until stdin closes. One request at a time, in order."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    encode = msgspec.json.Encoder().encode
    writing = threading.Lock()  # the watch thread writes notifications too

    def send(frames) -> None:
        with writing:
            for frame in frames:
                stdout.write(encode(frame) + b"\n")
            stdout.flush()

    server.emit = send
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError as e:
            out, after = [_error(None, PARSE_ERROR, f"parse_error: {e}")], []
        else:
            if message == []:
                out, after = [_error(None, INVALID_REQUEST, "invalid_request: an empty batch")], []
            elif isinstance(message, list):  # a JSON-RPC batch (protocol 2025-03-26)
                answered = [server.handle(m) for m in message]
                batch = [r for r, _ in answered if r is not None]
                out, after = ([batch] if batch else []), [n for _, ns in answered for n in ns]
            else:
                response, after = server.handle(message)
                out = [response] if response is not None else []
        send((*out, *after))
    with server.lock:
        server.subscribed.clear()  # the watch thread ends at its next turn
