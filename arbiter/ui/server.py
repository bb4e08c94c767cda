"""`arbiter ui`: the web view's local HTTP server.

It listens on 127.0.0.1 only, and every URL starts with a random token
(`http://127.0.0.1:PORT/TOKEN/`): without it nothing is served, not even the
page, so another local user or a web page probing localhost learns nothing.
The page reads the memory through the same `Client` as every other front end
(one client per request: the `Client` is not thread-safe), as JSON under
`TOKEN/api/` (graph, entry/ID, entity?name=, recall, whoami). It reads as the user whose token
its client holds (`arbiter --user NAME ui`), and so shows only what that user sees. Static files ship inside the package (`static/`), so the page
works with no network.
"""

from __future__ import annotations

import hmac
import mimetypes
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import msgspec

from arbiter.client import Client
from arbiter.errors import ArbiterError, DaemonOutdated, InvalidParams, NotFound, Unavailable

_STATIC = resources.files("arbiter.ui") / "static"
_STATUS = {NotFound: HTTPStatus.NOT_FOUND, InvalidParams: HTTPStatus.BAD_REQUEST,
           Unavailable: HTTPStatus.SERVICE_UNAVAILABLE, DaemonOutdated: HTTPStatus.SERVICE_UNAVAILABLE}
# The page and its scripts come from us alone; the token in the URL never leaks through a Referer.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}
_encode = msgspec.json.Encoder().encode


class EntryDetail(msgspec.Struct, kw_only=True):
    """What the page shows for a clicked node: the entry (as of the slider), its history and backlinks."""

    entry: object
    history: object
    backlinks: object
    visible: bool


def _entry(c: Client, q: dict[str, str], entry_id: int) -> EntryDetail:
    history = c.history(entry_id)  # NotFound for an id that is not this tenant's
    try:
        entry, visible = c.get(entry_id, as_of=q.get("as_of") or None), True
    except NotFound:  # not visible at that time: still show what it is (history holds the entry itself)
        entry, visible = next(e for e in history.entries if e.id == entry_id), False
    return EntryDetail(entry=entry, history=history, backlinks=c.backlinks(entry_id), visible=visible)


def _recall(c: Client, q: dict[str, str]):
    query = q.get("q", "").strip()
    if not query:
        raise InvalidParams("an empty search", path="q")
    return c.recall(query, limit=_int(q.get("limit", "50"), "limit"), as_of=q.get("as_of") or None)


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidParams(f"{name} must be a number", path=name) from None


class UIServer(ThreadingHTTPServer):
    """The web view on 127.0.0.1:`port` (0: any free port) for the tenant `client_factory` opens."""

    daemon_threads = True

    def __init__(self, client_factory: Callable[[], Client], *, port: int = 0, token: str | None = None):
        self.client_factory = client_factory
        self.token = token or secrets.token_urlsafe(24)
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/{self.token}/"

    def start(self) -> threading.Thread:
        """Serve on a background thread (tests, the bench); `shutdown()` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="arbiter-ui", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: UIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # the URL holds the token: keep it out of logs
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        prefix, _, rest = url.path.lstrip("/").partition("/")
        if not hmac.compare_digest(prefix.encode(), self.server.token.encode()):
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        if rest in ("", "index.html"):
            return self._static("index.html")
        if rest.startswith("static/"):
            return self._static(rest.removeprefix("static/"))
        if rest.startswith("api/"):
            return self._api(rest.removeprefix("api/"), {k: v[-1] for k, v in parse_qs(url.query).items()})
        return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _static(self, name: str) -> None:
        if "/" in name or name.startswith("."):
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        f = _STATIC / name
        if not f.is_file():
            return self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, f.read_bytes(), kind + ("; charset=utf-8" if kind.startswith("text/") or kind.endswith("javascript") else ""))

    def _api(self, route: str, q: dict[str, str]) -> None:
        try:
            with self.server.client_factory() as c:
                if route == "graph":
                    body = c.graph_view(as_of=q.get("as_of") or None, limit=_int(q.get("limit", "2000"), "limit"),
                                        view=q.get("view", "entries"))
                elif route == "entity":
                    body = c.entity_show(q.get("name", ""))
                elif route.startswith("entry/"):
                    body = _entry(c, q, _int(route.removeprefix("entry/"), "id"))
                elif route == "recall":
                    body = _recall(c, q)
                elif route == "whoami":
                    body = c.whoami()
                else:
                    raise NotFound(f"no API route {route!r}", path="route")
            self._send(HTTPStatus.OK, _encode(body), "application/json")
        except DaemonOutdated:
            # `arbiter ui` checked the daemon's code when it started: a mismatch now means the daemon was
            # restarted on other code (an upgrade) and this server is the one left behind, not the daemon.
            self._error(DaemonOutdated("the daemon was restarted on other code than this web view's (an upgrade?): "
                                       "restart `arbiter ui` (Ctrl-C, then run it again)"))
        except ArbiterError as e:
            self._error(e)

    def _error(self, e: ArbiterError) -> None:
        status = next((s for cls, s in _STATUS.items() if isinstance(e, cls)), HTTPStatus.INTERNAL_SERVER_ERROR)
        error = {"error": {"code": e.code, "name": e.name, "message": e.message, "path": e.path}}
        self._send(status, _encode(error), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in _HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
