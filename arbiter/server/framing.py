"""Framing and connections: one JSON-RPC 2.0 object (or batch) per line, and the slots connections hold.

The daemon serves at most `max_connections` at once. At the limit a newcomer
is let in by closing the connection idle longest (one with nothing in flight):
idle clients (MCP sessions left open, a hung client) must not lock the rest
out, and our own clients reconnect when they next call. Only when every
connection has a request in flight is a newcomer refused. A connection is
closed after `idle_timeout` with nothing sent, or `line_timeout` into a line it
has not finished (a trickle of bytes never ends a line, yet keeps it active).
Unfinished lines across all connections share one byte budget.
"""

from __future__ import annotations

import asyncio
import codecs
import re

import msgspec

from arbiter.errors import ArbiterError, InvalidRequest, ParseError, Unavailable

MAX_FRAME = 4 * 1024 * 1024
# Read size, and the StreamReader limit (it stops reading a connection at twice
# this): what a connection can hold beyond the budgeted frame buffer.
_CHUNK = 64 * 1024
_UTF8_SLICE = 64 * 1024
# Connections served at once (also capped below the file descriptor limit,
# less FD_RESERVE for the database files, reader connections and pipes).
MAX_CONNECTIONS = 256
FD_RESERVE = 64
# Bytes of unfinished frames held across all connections: 16 clients each
# holding most of a 4 MiB frame must not cost 64 MB.
MAX_BUFFERED = 16 * 1024 * 1024
# A connection with nothing in flight and nothing received for this long is closed.
IDLE_TIMEOUT_S = 600.0
# A line begun and not ended within this long is closed with its connection: a 4 MiB frame takes
# milliseconds over a unix socket, and a client trickling bytes must not hold a slot forever.
LINE_TIMEOUT_S = 30.0
# At the limit, once it has closed idle connections to let others in, the daemon says so again only
# after the count has fallen below this share of the limit: once per episode, not per connection.
_CROWD_ENDS = 0.75

# A batch is answered request by request: this bounds the answer a frame can
# ask for (a 4 MiB frame of `{}` would otherwise be a 100 MB reply).
MAX_BATCH = 1000

_batch_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_BATCH = re.compile(rb"[ \t\r\n\x0b\x0c]*\[")  # a line that is a JSON-RPC batch (an array)
_encode = msgspec.json.Encoder().encode

def check_utf8(frame: bytes) -> None:
    """ParseError unless `frame` is UTF-8, checked without holding a decoded copy of it.

    msgspec checks the strings it decodes, but not those it skips (unknown
    fields, raw params), so the whole frame is checked first. A bulk frame is
    megabytes, and its decoded copy up to four times that (one emoji makes the
    str UCS-4): decode in slices and drop each.
    """
    if frame.isascii():
        return
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(frame)
    start = 0
    try:
        for start in range(0, len(view), _UTF8_SLICE):
            decoder.decode(view[start:start + _UTF8_SLICE], final=start + _UTF8_SLICE >= len(view))
    except UnicodeDecodeError as e:
        raise ParseError(f"frame is not valid UTF-8 (near byte {start + e.start})") from None



class _Connection:
    """What the daemon tracks of one client connection: for the buffer budget, the limit and the idle sweep."""

    __slots__ = ("writer", "last_active", "busy", "buffered", "line_since")

    def __init__(self, writer: asyncio.StreamWriter, now: float):
        self.writer = writer
        self.last_active = now
        self.busy = False
        self.buffered = 0
        self.line_since: float | None = None  # when the line not yet ended began

    def drop(self, task: asyncio.Task) -> None:
        # Not close(): it waits to send the answers the client has not read, forever if it never
        # reads, and the woken handler would run its next line. Idle, it waits at a read or a drain.
        task.cancel()
        self.writer.transport.abort()


def error_frame(req_id, err: ArbiterError) -> bytes:
    body = {"code": err.code, "message": err.message}
    data = err.data()
    if data:
        body["data"] = data
    return _encode({"jsonrpc": "2.0", "id": req_id, "error": body}) + b"\n"


def result_frame(req_id, result: msgspec.Struct) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + _encode(req_id) + b',"result":' + _encode(result) + b"}\n"



class Connections:
    """The daemon's job of holding connections and cutting their bytes into lines (a mixin of `Daemon`).

    Needs of the daemon: `max_connections`, `max_frame`, `max_buffered`,
    `idle_timeout`, `line_timeout`, `_stopping`, `log`, and `_dispatch(handed)`
    answering one request line.
    """

    def _init_connections(self) -> None:
        self._connections: dict[asyncio.Task, _Connection] = {}
        self._buffered = 0  # bytes of unfinished frames held across all connections
        self._crowded = False  # at the limit, idle connections were closed to let new ones in (said once)

    async def _close_idle(self) -> None:
        """Close connections with nothing in flight and nothing received for `idle_timeout` seconds,
        and those `line_timeout` seconds into a line they have not ended."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(min(self.idle_timeout, self.line_timeout) / 4, 60.0))
            now = loop.time()
            for task, conn in list(self._connections.items()):
                if conn.busy:
                    continue
                if now - conn.last_active > self.idle_timeout or (
                        conn.line_since is not None and now - conn.line_since > self.line_timeout):
                    conn.drop(task)

    def _make_room(self) -> bool:
        """At the limit: close the connection idle longest to let a newcomer in; False if every one is busy."""
        idle = [(conn.last_active, task) for task, conn in self._connections.items() if not conn.busy]
        if not idle:
            return False
        _, task = min(idle, key=lambda pair: pair[0])
        self._connections.pop(task).drop(task)
        if not self._crowded:
            self._crowded = True
            self.log(f"arbiter: {self.max_connections} connections open, the limit (serve --max-connections): "
                     "closing the longest-idle ones to let new ones in")
        return True

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        if len(self._connections) >= self.max_connections and not self._make_room():
            self.log(f"arbiter: refused a connection: {self.max_connections} are open and busy",
                     key="connection cap")
            writer.write(error_frame(None, Unavailable(
                f"too many connections: the daemon serves {self.max_connections} at once, each with a request "
                "in flight (serve --max-connections); retry later")))
            try:
                await writer.drain()
            except ConnectionError:
                pass
            writer.close()
            return
        task = asyncio.current_task()
        conn = self._connections[task] = _Connection(writer, loop.time())
        buf = bytearray()
        discarding = False  # inside a refused frame (too large, or over the budget): drop bytes until its newline
        try:
            while True:
                chunk = await reader.read(_CHUNK)
                if not chunk:
                    break
                conn.last_active = loop.time()
                ended = False  # a line ended in this chunk: what is left in the buffer began now
                if discarding:  # the tail of a frame already answered: drop it, never hold it
                    nl = chunk.find(b"\n")
                    if nl < 0:
                        continue
                    chunk = chunk[nl + 1:]
                    discarding = False
                    ended = True
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", start)) >= 0:
                    ended = True
                    if start == 0 and nl >= _CHUNK:
                        # A large frame at the buffer's front (a bulk write: MBs) is the buffer
                        # itself, handed over without a copy; what follows it starts a new one.
                        frame, buf = buf, buf[nl + 1:]
                        del frame[nl:]
                    else:
                        with memoryview(buf) as view:  # one copy of the frame, not two
                            frame = view[start:nl].tobytes()
                        start = nl + 1
                        if len(frame) >= _CHUNK:
                            # A large frame: its bytes leave the buffer before it runs, not after
                            # (a new buffer: deleting from a bytearray's front keeps its allocation).
                            buf, start = buf[start:], 0
                    if len(frame) > self.max_frame:  # it arrived whole, within one read
                        reply = error_frame(None, self._too_large())
                    elif frame and not frame.isspace():  # strip() would copy a bytearray
                        if self._stopping:  # a line not started is neither run nor answered
                            return
                        conn.busy = True
                        handed, frame = [frame], None  # the dispatch drops it once decoded: a bulk frame is MBs
                        reply = await self._dispatch_frame(handed)
                        conn.busy = False
                        conn.last_active = loop.time()
                    else:
                        continue
                    writer.write(reply)
                    await writer.drain()
                if start:
                    buf = buf[start:]
                refusal = None
                if len(buf) > self.max_frame:
                    refusal = self._too_large()
                elif self._buffered - conn.buffered + len(buf) > self.max_buffered:
                    refusal = Unavailable(
                        f"the daemon holds {self.max_buffered >> 20} MiB of unfinished requests, its limit "
                        "(serve --max-buffered): this one was dropped; retry")
                    self.log("arbiter: dropped a frame: the buffer budget is spent", key="buffer budget")
                if refusal is not None:
                    writer.write(error_frame(None, refusal))
                    await writer.drain()
                    discarding = True
                    buf.clear()
                self._buffered += len(buf) - conn.buffered
                conn.buffered = len(buf)
                if not (buf or discarding):
                    conn.line_since = None
                elif ended or conn.line_since is None:
                    conn.line_since = loop.time()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._buffered -= conn.buffered
            self._connections.pop(task, None)  # gone already if closed to make room
            if self._crowded and len(self._connections) < self.max_connections * _CROWD_ENDS:
                self._crowded = False
            writer.close()

    def _too_large(self) -> InvalidRequest:
        return InvalidRequest(f"frame larger than the limit of {self.max_frame} bytes", path="frame")

    async def _dispatch_frame(self, handed: list[bytes]) -> bytes:
        """Answer one line (handed over in a list, so that it can be let go of early).

        A line is a request, or a JSON-RPC 2.0 batch (an array of them) answered by an array.
        """
        if not _BATCH.match(handed[0]):  # not lstrip(): a large frame is a bytearray, which it would copy
            return await self._dispatch(handed)
        frame = handed.pop()
        try:
            check_utf8(frame)
            try:
                items = _batch_decoder.decode(frame)
            except msgspec.DecodeError as e:
                raise ParseError(f"malformed JSON: {e}") from None
            except RecursionError:
                raise InvalidRequest("JSON nested too deeply") from None
            if not items:
                raise InvalidRequest("an empty batch", path="batch")
            if len(items) > MAX_BATCH:
                raise InvalidRequest(f"a batch of {len(items)} requests; the limit is {MAX_BATCH}", path="batch")
        except ArbiterError as err:
            return error_frame(None, err)
        replies = [await self._dispatch([bytes(item)]) for item in items]
        return b"[" + b",".join(r.rstrip(b"\n") for r in replies) + b"]\n"
