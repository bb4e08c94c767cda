"""A fake Anthropic Messages API for tests: the network edge, and the only mock.

The real `anthropic` SDK is pointed at it with `base_url`, so tests exercise
the SDK's own parsing and typed errors. Each test gives a *script*: steps
answered in order, one per request.

    with FakeMessages(['{"rephrased": "a", "answer": "b"}', 429, Delay(5.0)]) as fake:
        client = anthropic.Anthropic(api_key="test", base_url=fake.base_url)
        ...
        assert fake.requests[0]["model"] == "claude-haiku-4-5"

A step is one of:

- `str`: a 200 reply whose single text block is that string (valid JSON or not);
- `int`: that HTTP status with an Anthropic-style error body (429, 500, 529 ...);
- `Delay(seconds, then)`: wait, then answer `then` (a `str` or `int` step);
- `Reply(content, stop_reason)`: a 200 reply with those content blocks, as the
  API sends them (`tool_use` blocks for a scripted agent, bench/scenarios).

Instead of a list, the script may be a callable given each request's JSON body
and returning a step. When a list runs out, the fake answers 500 with a message
saying so, which makes a test that sends too many requests fail loudly.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Delay", "FakeMessages", "Reply", "Script", "Step", "fake_messages"]


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` before answering `then` (a reply text or an HTTP status)."""

    seconds: float
    then: str | int = '{"ok": true}'


@dataclass(frozen=True)
class Reply:
    """A 200 reply whose content is these blocks (`{"type": "tool_use", ...}` and text blocks)."""

    content: tuple[dict[str, Any], ...]
    stop_reason: str = "end_turn"


Step = str | int | Delay | Reply
Script = Sequence[Step] | Callable[[dict[str, Any]], Step]

# The `error.type` the real API sends for each status.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeMessages:
    """A local HTTP server speaking `POST /v1/messages` from a per-test script.

    Use as a context manager: the server starts on 127.0.0.1 (a free port) in a
    daemon thread and stops on exit, waking any request still in a `Delay`.
    `requests` holds every request body received, in order, as parsed JSON.
    """

    def __init__(self, script: Script = ()) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._steps: deque[Step] = deque()
        self._responder: Callable[[dict[str, Any]], Step] | None = None
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.set_script(script)

    def set_script(self, script: Script) -> None:
        """Replace the script: a list of steps, or a callable (request JSON -> step)."""
        with self._lock:
            if callable(script):
                self._responder, self._steps = script, deque()
            else:
                self._responder, self._steps = None, deque(script)

    @property
    def base_url(self) -> str:
        """The URL to give `anthropic.Anthropic(base_url=...)`."""
        if self._server is None:
            raise RuntimeError("FakeMessages is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeMessages:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # Handler threads are joined on close (not daemon) so nothing outlives
        # the test; a `Delay` waits on `_stopping`, so joining is prompt.
        self._server.daemon_threads = False
        self._server.block_on_close = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next_step(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            if self._responder is not None:
                return self._responder(body)
            if self._steps:
                return self._steps.popleft()
        return _Exhausted(len(self.requests))

    def _message(self, model: str, text: str) -> dict[str, Any]:
        return {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": max(1, len(text) // 4)},
        }


@dataclass(frozen=True)
class _Exhausted:
    """The script ran out; answered as a 500 naming the request number."""

    request_number: int


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
    }


def _handler_for(fake: FakeMessages) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no handler thread sits on an
        # idle keep-alive socket and blocks the join on close.
        protocol_version = "HTTP/1.0"
        timeout = 5  # seconds; a stalled client cannot hang the server's close

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0] != "/v1/messages":
                self._send(404, _error_body(404, f"FakeMessages: no route {self.path}"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, _error_body(400, "FakeMessages: request body is not JSON"))
                return
            try:
                step = fake._next_step(body)
            except Exception as exc:  # a broken test responder: say so, loudly
                self._send(500, _error_body(500, f"FakeMessages: responder raised {exc!r}"))
                return
            if isinstance(step, Delay):
                if fake._stopping.wait(step.seconds):
                    return  # shutting down: the client gave up long ago
                step = step.then
            if isinstance(step, _Exhausted):
                message = f"FakeMessages: script exhausted at request {step.request_number}"
                self._send(500, _error_body(500, message))
            elif isinstance(step, Reply):
                message = fake._message(str(body.get("model", "")), json.dumps(step.content))
                self._send(200, {**message, "content": list(step.content), "stop_reason": step.stop_reason})
            elif isinstance(step, bool) or not isinstance(step, (str, int)):
                self._send(500, _error_body(500, f"FakeMessages: bad script step {step!r}"))
            elif isinstance(step, int):
                self._send(step, _error_body(step, f"FakeMessages: scripted {step}"))
            else:
                self._send(200, fake._message(str(body.get("model", "")), step))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_fake")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up: expected in deadline tests

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

    return Handler


@pytest.fixture
def fake_messages() -> Iterator[FakeMessages]:
    """A running `FakeMessages` with an empty script; call `set_script` in the test."""
    with FakeMessages() as fake:
        yield fake
