"""The daemon: serves the verbs over a unix socket, JSON-RPC 2.0, one JSON object per line.

Threads: the asyncio loop frames and routes. Writes run on one writer thread
with one connection (SQLite serializes writers anyway; one thread makes the
order explicit and avoids BusyError). Reads run by their verb's lane
(`Verb.lane`), each on connections of its own reading WAL snapshots without
waiting on the writer: "loop" (a row by key, `get`) on the loop itself, with no
thread handoff; "quick" (a page by index, `list`) on a one-thread pool; the
rest (recall, briefing) on the reader pool. So a cheap read never queues
behind an expensive one. When no request has arrived for `IDLE_S`, after
writes the writer thread derives what bulk writes left to it
(arbiter/derive.py) and merges the FTS index (`recall.maintain.compact`), a
bounded step at a time, checking for new requests between steps, then
checkpoints the WAL; and the heap is trimmed. Reads hand the entries they
returned to the writer's access log in batches, after answering; once an
interval (hourly) the writer runs maintenance at a quiet spell.
"""

from __future__ import annotations

import asyncio
import contextlib
import codecs
import collections
import os
import re
import resource
import signal
import stat
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import apsw
import msgspec

from arbiter import _code, paths
from arbiter._lock import take_lock
from arbiter.server import _memory
from arbiter.server._log import RateLimitedLog
from arbiter._time import now_us
from arbiter.errors import (
    ArbiterError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    StorageFull,
    Unauthorized,
    Unavailable,
)
from arbiter.model import Request
from arbiter import maintenance
from arbiter.changes import core as changes
from arbiter import derive
from arbiter.recall.maintain import compact
from arbiter.validation import describe
from arbiter.salience import record_accesses
from arbiter.store import connect, open_database, tenants, users
from arbiter.store.db import BUSY_TIMEOUT_MS
from arbiter.verbs import VERBS, Context, Verb

MAX_FRAME = 4 * 1024 * 1024
# Read size, and the StreamReader limit (it stops reading a connection at twice
# this): what a connection can hold beyond the budgeted frame buffer.
_CHUNK = 64 * 1024
#: A request frame at least this large (a bulk write) is followed by a heap trim.
_TRIM_AFTER = 1 << 20
_UTF8_SLICE = 64 * 1024
# Quiet time before idle compaction starts: longer than the gap between a
# client's back-to-back requests, short enough that a bulk load is merged
# (and recall fast again) within seconds of its last batch.
IDLE_S = 0.25
# The idle checkpoint waits until the WAL holds this many pages (~30 single writes) or a write found the
# disk full. A checkpoint resets the WAL, and the first commit after a reset writes and syncs a new WAL
# header before its pages, in a file grown again from zero: a write on a quiet daemon paid for that every
# time (round trip p50 8.0 -> 7.2 and 6.1 -> 5.6 ms, bench/remember.py's lag interleaved, 40 writes twice).
IDLE_CHECKPOINT_PAGES = 1000
# After a checkpoint failed for a full disk, wait this long before the next try.
CHECKPOINT_RETRY_S = 1.0
STORAGE_FULL_LOG = "arbiter: the disk holding the database is full: writes fail until space is freed"
# Threads (each with its own read connection) for `Verb.lane == "quick"`:
# bounded reads get a lane of their own, so they never queue behind recalls.
QUICK_READERS = 1
# Page cache per reader connection (KiB): SQLite's default is 2 MiB each; the
# readers' working set (entry rows, FTS doclists) is small and the OS caches the file.
_READER_CACHE_KIB = 1024
# Accesses waiting for the writer; beyond this the oldest are dropped.
ACCESS_QUEUE_MAX = 100_000
# The writer logs queued accesses once this many wait, or this long after the first.
ACCESS_BATCH = 512
ACCESS_FLUSH_S = 1.0
# The writer's page cache (SQLite's default is 2 MiB): half of it cost no
# measurable ingest speed at 30K entries (CPU time per entry) and keeps a
# 2000-entry batch's peak 1 MB lower.
_WRITER_CACHE_KIB = 1024
# WAL pages after which a commit checkpoints (SQLite's default: 1000). The
# writer checkpoints the WAL whenever the daemon goes quiet (`_checkpoint`), so
# this only bounds the WAL during a long burst. At 1000 a 100-fact apply
# (~730 pages) paid for a checkpoint, 8 MB written and synced, every other
# batch (bench/facts.py: p50 41 -> 39 ms CPU, a few ms less wall). The WAL
# file keeps that size between checkpoints in a burst (journal_size_limit):
# cut back to 8 MB it grew again each time, and every `remember`'s commit cost
# 0.1 ms more (bench/remember.py).
_WRITER_AUTOCHECKPOINT = 4000
# The loop's and the quick lane's connections read a row or a page at a time.
_QUICK_CACHE_KIB = 256

# Connections served at once (also capped below the file descriptor limit,
# less FD_RESERVE for the database files, reader connections and pipes).
MAX_CONNECTIONS = 256
FD_RESERVE = 64
# Bytes of unfinished frames held across all connections: 16 clients each
# holding most of a 4 MiB frame must not cost 64 MB.
MAX_BUFFERED = 16 * 1024 * 1024
# A connection with nothing in flight and nothing received for this long is closed.
IDLE_TIMEOUT_S = 600.0

# A batch is answered request by request: this bounds the answer a frame can
# ask for (a 4 MiB frame of `{}` would otherwise be a 100 MB reply).
MAX_BATCH = 1000

_request_decoder = msgspec.json.Decoder(Request)
_batch_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_BATCH = re.compile(rb"[ \t\r\n\x0b\x0c]*\[")  # a line that is a JSON-RPC batch (an array)
_param_decoders = {name: msgspec.json.Decoder(verb.params) for name, verb in VERBS.items()}
_encode = msgspec.json.Encoder().encode


def _check_utf8(frame: bytes) -> None:
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
    """What the daemon tracks of one client connection: for the buffer budget and the idle sweep."""

    __slots__ = ("writer", "last_active", "busy", "buffered")

    def __init__(self, writer: asyncio.StreamWriter, now: float):
        self.writer = writer
        self.last_active = now
        self.busy = False
        self.buffered = 0


def _raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard one; return the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an unlimited hard limit is above what the kernel allows
            pass
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def writer_settings(conn: apsw.Connection) -> None:
    """The writer connection's own settings (the benches that run verbs as the writer does use them too)."""
    conn.pragma("cache_size", -_WRITER_CACHE_KIB)
    conn.pragma("wal_autocheckpoint", _WRITER_AUTOCHECKPOINT)
    conn.pragma("journal_size_limit", _WRITER_AUTOCHECKPOINT * conn.pragma("page_size"))


@contextlib.contextmanager
def _transaction(conn: apsw.Connection, *, write: bool, small: bool = False):
    """A verb's transaction: a consistent snapshot for a read; for a write, the write lock first.

    A write verb reads before it writes (who the caller is, what exists). In
    a deferred transaction that read takes a snapshot, and if another process
    holds the write lock by then, the write fails at once with BusyError
    (SQLite cannot wait: the snapshot might go stale). BEGIN IMMEDIATE takes
    the lock first, waiting up to the busy timeout.

    No savepoint around the verb: inside an open savepoint SQLite copies every
    page a statement changes into the sub-journal (a temporary file, growing
    for the whole transaction), which cost a 100-fact apply 19 ms of its 56 ms
    of CPU (bench/facts.py). A failed verb is undone by the ROLLBACK below;
    its own `with conn` blocks are savepoints as before.

    A `small` write (`Verb.small`: one entry, one link) keeps its statement
    journals in memory. Every statement that fires triggers inside a
    transaction keeps the pages it changes in a statement journal, so that it
    can fail alone; SQLite holds the first 64 KiB (eight pages) in memory and
    moves the rest to a temporary file, which it creates and deletes for each
    such statement: an entry's insert changes ~20 pages, so every `remember`
    paid for a file (0.2-0.25 ms of CPU, bench/remember.py). `temp_store` is
    read when the transaction begins; the writer goes back to the default
    after it, so bulk writes and idle upkeep, whose statements change
    thousands of pages, still spill to a file instead of holding megabytes.
    """
    if not write:
        with conn:
            yield
        return
    if small:
        conn.execute("PRAGMA temp_store = MEMORY")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # the verb failed, or the commit did (a full disk): nothing of it stays
                conn.execute("ROLLBACK")
            raise
    finally:
        if small:
            conn.execute("PRAGMA temp_store = DEFAULT")


def _error_frame(req_id, err: ArbiterError) -> bytes:
    body = {"code": err.code, "message": err.message}
    data = err.data()
    if data:
        body["data"] = data
    return _encode({"jsonrpc": "2.0", "id": req_id, "error": body}) + b"\n"


def _result_frame(req_id, result: msgspec.Struct) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + _encode(req_id) + b',"result":' + _encode(result) + b"}\n"


class Daemon:
    """One Arbiter daemon: a database, a socket, and the verbs between them."""

    def __init__(
        self,
        *,
        home: Path,
        db_path: Path,
        socket_path: Path,
        max_frame: int = MAX_FRAME,
        max_connections: int = MAX_CONNECTIONS,
        max_buffered: int = MAX_BUFFERED,
        idle_timeout: float = IDLE_TIMEOUT_S,
        readers: int | None = None,
        synchronous: str = "FULL",
        services: dict | None = None,
        log=None,
        maintenance_interval_s: float = 3600.0,
        min_salience: float = 0.01,
    ):
        self.home = home
        self.db_path = db_path
        self.socket_path = socket_path
        self.max_frame = max_frame
        self.max_connections = max_connections
        # Room for at least one frame of the largest size, whatever was asked.
        self.max_buffered = max(max_buffered, max_frame)
        self.idle_timeout = idle_timeout
        self.synchronous = synchronous
        self.services = services or {}
        self.log = RateLimitedLog(log)
        # Each reader holds a connection (schema, page cache) and a thread: more
        # readers than cores add memory without adding throughput.
        self._readers = readers or min(4, os.cpu_count() or 1)
        # Who a token is, and what each user sees (Viewer), kept between
        # requests. Any change to users, tokens, teams or membership (the
        # people verbs) empties both after its commit and bumps the generation,
        # so a lookup that read the old rows before the commit does not put
        # them back: a rotated token fails at once, a membership counts at once.
        self._tokens: dict[str, tuple[int, str, int | None]] = {}
        self._viewers: dict[int, object] = {}
        self._token_generation = 0
        self.services["people_changed"] = self._forget_callers
        # Counts committed writes, so `changes` recomputes a memory version only after one (arbiter/changes.py).
        self._changes = self.services["changes"] = changes.Memo()
        self._admin_hash: bytes | None = None
        self._local = threading.local()
        self._reader_conns: list[apsw.Connection] = []
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._requests = 0  # requests started, to tell a quiet spell from a busy one
        self._wrote = asyncio.Event()  # a write since the index was last fully merged
        self._compact_from = 1  # the scope idle merging goes on from (recall.maintain.compact)
        self._wrote.set()  # a database opened after a bulk load may need merging
        self._active = asyncio.Event()  # requests since the last idle work
        self._active.set()
        self._stopping = False  # a signal came: connections start no new line
        self._lock_fds: list[int] = []
        self._made: list[Path] = []  # folders and lock files this start created, deepest last (`_unclaim`)
        self.maintenance_interval_s = maintenance_interval_s
        self.min_salience = min_salience
        self._accesses: collections.deque = collections.deque(maxlen=ACCESS_QUEUE_MAX)
        self._access_timer: asyncio.TimerHandle | None = None
        self._connections: dict[asyncio.Task, _Connection] = {}
        self._buffered = 0  # bytes of unfinished frames held across all connections
        self._storage_full = False  # a write found the disk full since the last idle checkpoint
        self._idle_checkpoint_bytes = 0  # IDLE_CHECKPOINT_PAGES in bytes of WAL, once the page size is known

    # ---- start-up -----------------------------------------------------------

    def _claim(self) -> None:
        """Lock the database, then the socket: one daemon per database file and one per socket.

        The database lock is what keeps two writers off one file (`serve
        --socket other.sock` on a served home is refused); the socket lock keeps
        a daemon of another database from replacing a live socket. Each lock file
        holds the owner's pid, for `arbiter stop` and for the refusal message.
        """
        for folder in (self.socket_path.parent, self.db_path.parent):
            missing = [d for d in (folder, *folder.parents) if not d.exists()]
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._made.extend(reversed(missing))
        db_lock, socket_lock = paths.lock_path(self.db_path), paths.lock_path(self.socket_path)
        fresh = not db_lock.exists()
        held = take_lock(db_lock, f"{os.getpid()}\n{self.socket_path}\n", self._lock_fds)
        if held is not None:
            self._unclaim()
            pid, _, where = held.partition("\n")
            raise Unavailable(f"another arbiter daemon (pid {pid or '?'}) is already serving {self.db_path}"
                              + (f" on {where.strip()}" if where.strip() else ""))
        self._made += [db_lock] if fresh else []
        fresh = not socket_lock.exists()
        if take_lock(socket_lock, f"{os.getpid()}\n", self._lock_fds) is not None:
            self._unclaim()
            raise Unavailable(f"another arbiter daemon is already serving on {self.socket_path}")
        self._made += [socket_lock] if fresh else []
        # We hold the lock, so a socket left here belongs to a dead daemon. Anything else is not ours to
        # delete: `--socket` naming the user's file by mistake must not cost them the file.
        try:
            mode = self.socket_path.lstat().st_mode
        except FileNotFoundError:
            return
        if not (stat.S_ISSOCK(mode) or stat.S_ISLNK(mode)):
            self._unclaim()
            raise InvalidParams(f"{self.socket_path} is not a socket: serve on a path that is free or holds "
                                "a socket arbiter left", path="socket")
        self.socket_path.unlink()

    def _unclaim(self) -> None:
        """A start refused before the database opened leaves nothing: the lock files and folders it made go.

        Only files it made, and only while it still holds their locks (a daemon
        that meanwhile opened one finds it locked and is refused as it would be).
        """
        for made in reversed(self._made):
            try:
                made.rmdir() if made.is_dir() else made.unlink()
            except OSError:  # a folder something else wrote into meanwhile stays
                pass
        self._made = []
        self._release_locks()

    def _release_locks(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds = []

    def _first_run(self, conn: apsw.Connection) -> None:
        """A new database gets a `default` tenant and an admin token, written to 0600 files.

        A token file the home already holds is kept, and the new database takes its token: it may be the only
        copy of another database's (`serve --db scratch.db` on a home in use), which tokens stored hashed
        cannot give back.
        """
        now = now_us()
        with conn:
            if conn.execute("SELECT count(*) FROM tenants").fetchone()[0] == 0:
                path = paths.token_path(self.home, paths.DEFAULT_TENANT)
                held = paths.held_secret(path)
                _, token = tenants.create_tenant(conn, paths.DEFAULT_TENANT, now=now, token=held)
                if held is None:
                    paths.write_secret(path, token)
                self.log(f"arbiter: created tenant 'default' (token {'' if held is None else 'already '}in {path})")
            row = conn.execute("SELECT value FROM settings WHERE key = 'admin_token_hash'").fetchone()
            if row is None:
                import secrets

                path = paths.admin_token_path(self.home)
                held = paths.held_secret(path)
                token = held or "arbadm_" + secrets.token_urlsafe(32)
                conn.execute(
                    "INSERT INTO settings(key, value) VALUES ('admin_token_hash', ?)", (users.hash_token(token),)
                )
                if held is None:
                    paths.write_secret(path, token)
                row = (users.hash_token(token),)
            self._admin_hash = row[0]

    def _reader_conn(self, lane: str = "reader") -> apsw.Connection:
        """This thread's read connection (made on first use; a lane's threads read few pages each)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.db_path, synchronous=self.synchronous)
            conn.pragma("query_only", True)
            conn.pragma("cache_size", -(_READER_CACHE_KIB if lane == "reader" else _QUICK_CACHE_KIB))
            self._local.conn = conn
            self._reader_conns.append(conn)
        return conn

    # ---- serving --------------------------------------------------------------

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Run until SIGTERM/SIGINT, then drain in-flight requests and clean up."""
        self._claim()
        _code.fingerprint()  # hash the sources now: later they may be another version's
        fd_limit = _raise_fd_limit()
        if fd_limit - FD_RESERVE < self.max_connections:
            self.max_connections = max(1, fd_limit - FD_RESERVE)
            self.log(f"arbiter: serving at most {self.max_connections} connections "
                     f"(file descriptor limit {fd_limit})")
        self._writer_pool = ThreadPoolExecutor(1, thread_name_prefix="arbiter-writer")
        self._reader_pool = ThreadPoolExecutor(self._readers, thread_name_prefix="arbiter-reader")
        self._quick_pool = ThreadPoolExecutor(QUICK_READERS, thread_name_prefix="arbiter-quick")
        loop = asyncio.get_running_loop()
        # asyncio reports accept() failures (no file descriptors left) here: one line, rate-limited.
        loop.set_exception_handler(lambda _, ctx: self.log(
            f"arbiter: {ctx.get('message')}: {ctx.get('exception')!r}", key=str(ctx.get("message"))))
        try:
            self._writer = await loop.run_in_executor(
                self._writer_pool, lambda: open_database(self.db_path, synchronous=self.synchronous, say=self.log)
            )
            writer_settings(self._writer)
            self._idle_checkpoint_bytes = IDLE_CHECKPOINT_PAGES * (self._writer.pragma("page_size") + 24)
            await loop.run_in_executor(self._writer_pool, self._first_run, self._writer)
            old_umask = os.umask(0o177)  # the socket is born 0600: no window where others can connect
            try:
                server = await asyncio.start_unix_server(self._handle, path=str(self.socket_path), limit=_CHUNK)
            finally:
                os.umask(old_umask)
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            self.log(f"arbiter: serving {self.db_path} on {self.socket_path}")
            if ready is not None:
                ready.set()
            chores = [asyncio.create_task(self._work_when_idle()), asyncio.create_task(self._maintain_when_idle()),
                      asyncio.create_task(self._close_idle())]
            await stop.wait()
            self._stopping = True
            server.close()
            for chore in chores:
                chore.cancel()
            await asyncio.gather(*chores, return_exceptions=True)
            # Finish and answer what was started before the signal. Not one wait: `_idle` is set between two
            # requests of a batch, and its waiter still wakes when the next request has cleared it again.
            while self._busy:
                await self._idle.wait()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
        finally:
            await self._close(loop)

    async def _work_when_idle(self) -> None:
        """After requests, once none has arrived for IDLE_S: merge the index (after writes), then trim memory.

        Merging runs one step (`compact`, ~2000 pages) on the writer thread at a
        time, and a new step starts only while no request is in flight, so a
        write queued behind it waits for one step at most; interrupted merging
        resumes at the next quiet spell. Then the WAL is checkpointed and freed
        heap memory goes back to the system (a briefing or a bulk batch must not
        leave the daemon larger than it was).
        """
        while True:
            await self._active.wait()
            await self._quiet_spell()
            self._active.clear()
            if self._wrote.is_set():
                self._wrote.clear()
                await self._merge_and_checkpoint()
            _memory.trim()

    async def _quiet_spell(self) -> None:
        """Return once no request has been in flight, and none has arrived, for IDLE_S."""
        while True:
            await self._idle.wait()
            seen = self._requests
            await asyncio.sleep(IDLE_S)
            if self._busy == 0 and self._requests == seen:
                return

    async def _merge_and_checkpoint(self) -> None:
        loop = asyncio.get_running_loop()
        seen = self._requests
        while True:
            # Any request since the quiet spell ends it, not only one in flight now: back-to-back
            # requests leave the daemon idle for a fraction of a millisecond between them, and a
            # step (up to ~0.3 s of Python) run beside them takes the GIL from every one.
            if self._busy or self._requests != seen:
                self._wrote.set()  # interrupted: finish at the next quiet spell
                self._active.set()
                return
            try:
                more = await loop.run_in_executor(self._writer_pool, self._compact_step)
            except apsw.FullError:
                self._storage_full = True
                more = False  # the checkpoint below retries until there is room
            except apsw.Error:
                self.log("arbiter: index compaction failed; retrying after the next write\n"
                         + traceback.format_exc(), key="compaction failed")
                return
            if not more:
                break
        if not self._busy and not await loop.run_in_executor(self._writer_pool, self._checkpoint):
            await asyncio.sleep(CHECKPOINT_RETRY_S)
            self._wrote.set()
            self._active.set()

    def _checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it to zero bytes; False if it has to wait.

        Run when idle, so the WAL's disk space is given back between bursts of
        writes: after a full disk, writes resume as soon as the space freed holds
        the pages still in the WAL. A reader in the middle of a request makes it
        wait, briefly (the next quiet spell tries again). A WAL of fewer than
        `IDLE_CHECKPOINT_PAGES` is left as it is, unless a write found the disk full.
        """
        wal = Path(f"{self.db_path}-wal")
        if not self._storage_full and wal.exists() and wal.stat().st_size < self._idle_checkpoint_bytes:
            return True
        self._writer.set_busy_timeout(50)
        try:
            busy, _, _ = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            self._storage_full = self._storage_full and bool(busy)
            return not busy
        except apsw.FullError:
            self._disk_full()
            return False
        finally:
            self._writer.set_busy_timeout(BUSY_TIMEOUT_MS)

    def _disk_full(self) -> None:
        """A write found the disk full: say so (a few times a second at most); the idle checkpoint truncates the WAL."""
        self.log(STORAGE_FULL_LOG, key="storage_full")
        self._storage_full = True

    def _compact_step(self) -> bool:
        """One step of idle upkeep: the urgent derivers first (entities and near-copy keys: recall and
        `remember` read them), then the index, then the rest (arbiter/derive.py)."""
        with self._writer:
            if derive.step(self._writer, now=now_us(), urgent=True):
                return True
            resume = compact(self._writer, start=self._compact_from)
            self._compact_from = resume or 1  # a finished pass starts from the first scope next time
            more = bool(resume)
        with self._writer:
            return derive.step(self._writer, now=now_us(), urgent=False) or more

    async def _close(self, loop) -> None:
        if hasattr(self, "_writer") and self._access_timer is not None:
            self._access_timer.cancel()
        try:
            if hasattr(self, "_writer"):
                await loop.run_in_executor(self._writer_pool, self._close_writer)
            self._writer_pool.shutdown(wait=True)
            self._reader_pool.shutdown(wait=True)
            self._quick_pool.shutdown(wait=True)
            for conn in self._reader_conns:
                conn.close()
        finally:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass
            if hasattr(self, "_writer"):
                self._release_locks()
            else:  # refused before the database opened (another program's file, a folder...)
                self._unclaim()
        if hasattr(self, "_writer"):  # a start that failed to open the database says why, and only that
            self.log("arbiter: stopped")

    def _close_writer(self) -> None:
        self._flush_accesses()  # what reads queued since the last flush
        try:
            self._writer.pragma("optimize")  # writes statistics: it fails on a full disk, which is no reason to stay up
        except apsw.Error as e:
            self.log(f"arbiter: skipped PRAGMA optimize at close: {e}")
        self._writer.close()

    async def _close_idle(self) -> None:
        """Close connections with nothing in flight and nothing received for `idle_timeout` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(self.idle_timeout / 4, 60.0))
            now = loop.time()
            for task, conn in list(self._connections.items()):
                if not conn.busy and now - conn.last_active > self.idle_timeout:
                    # Not close(): it waits to send the answers the client has not read, forever if it never
                    # reads, and the woken handler would run its next line. Idle, it waits at a read or a drain.
                    task.cancel()
                    conn.writer.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        if len(self._connections) >= self.max_connections:
            self.log(f"arbiter: refused a connection: {self.max_connections} are open", key="connection cap")
            writer.write(_error_frame(None, Unavailable(
                f"too many connections: the daemon serves {self.max_connections} at once "
                "(serve --max-connections); retry later")))
            try:
                await writer.drain()
            except ConnectionError:
                pass
            writer.close()
            return
        conn = self._connections[asyncio.current_task()] = _Connection(writer, loop.time())
        buf = bytearray()
        discarding = False  # inside a refused frame (too large, or over the budget): drop bytes until its newline
        try:
            while True:
                chunk = await reader.read(_CHUNK)
                if not chunk:
                    break
                conn.last_active = loop.time()
                if discarding:  # the tail of a frame already answered: drop it, never hold it
                    nl = chunk.find(b"\n")
                    if nl < 0:
                        continue
                    chunk = chunk[nl + 1:]
                    discarding = False
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", start)) >= 0:
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
                        reply = _error_frame(None, self._too_large())
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
                    writer.write(_error_frame(None, refusal))
                    await writer.drain()
                    discarding = True
                    buf.clear()
                self._buffered += len(buf) - conn.buffered
                conn.buffered = len(buf)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._buffered -= conn.buffered
            del self._connections[asyncio.current_task()]
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
            _check_utf8(frame)
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
            return _error_frame(None, err)
        replies = [await self._dispatch([bytes(item)]) for item in items]
        return b"[" + b",".join(r.rstrip(b"\n") for r in replies) + b"]\n"

    async def _dispatch(self, handed: list[bytes]) -> bytes:
        frame = handed.pop()
        self._busy += 1
        self._requests += 1
        self._idle.clear()
        self._active.set()
        req_id = None
        try:
            _check_utf8(frame)
            try:
                req = _request_decoder.decode(frame)
            except msgspec.ValidationError as e:
                message, path = describe(e)
                raise InvalidRequest(f"not a JSON-RPC 2.0 request: {message}", path=path) from None
            except msgspec.DecodeError as e:
                raise ParseError(f"malformed JSON: {e}") from None
            except RecursionError:
                raise InvalidRequest("JSON nested too deeply") from None
            req_id = req.id
            verb = VERBS.get(req.method)
            if verb is None:
                raise MethodNotFound(f"unknown method {req.method!r}", path="method")
            tenant = await self._authenticate(verb, req.token)  # before params: strangers learn nothing
            try:
                params = _param_decoders[req.method].decode(req.params)
            except msgspec.ValidationError as e:
                message, path = describe(e, verb.params)
                path = path or "params"  # the params as a whole (not an object, say)
                raise InvalidParams(f"{path}: {message}", path=path) from None
            except msgspec.DecodeError as e:
                raise InvalidParams(f"params: {e}", path="params") from None
            large = len(frame) >= _TRIM_AFTER
            del frame, req  # `req.params` was a view of the frame; the params are decoded now

            result = await self._run(verb, params, tenant)
            if large:
                # A bulk write's strings and rows are freed now; give the pages back before the next
                # batch arrives rather than at the next quiet spell (~1 MB less at the peak, ~1 ms).
                del params
                _memory.trim()
            return _result_frame(req_id, result)
        except ArbiterError as err:
            return _error_frame(req_id, err)
        except apsw.FullError:
            self._disk_full()
            self._wrote.set()  # the idle checkpoint gives the WAL's space back once the disk has room
            return _error_frame(req_id, StorageFull(
                "the disk holding the database is full: nothing was written; free some space and retry "
                "(reads still work)"))
        except Exception as exc:  # a bug: answer, log it (a few times a second at most), keep serving
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.log("arbiter: internal error\n" + traceback.format_exc(),
                     key=f"{type(exc).__name__} at {where.filename}:{where.lineno}")
            return _error_frame(req_id, ArbiterError(f"internal error: {type(exc).__name__}"))
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()

    async def _authenticate(self, verb: Verb, token: str | None) -> tuple[int, str, int | None]:
        """(tenant id, tenant name, user id) of the caller; a token names one user (store/users.py)."""
        if verb.public:
            return (0, "", None)
        if not token:
            raise Unauthorized("missing token", path="token")
        if verb.admin:
            if users.hash_token(token) != self._admin_hash:
                raise Unauthorized("this method needs the admin token", path="token")
            return (0, "admin", None)
        caller = self._tokens.get(token)
        if caller is None:
            generation = self._token_generation
            loop = asyncio.get_running_loop()
            row = await loop.run_in_executor(
                self._quick_pool, lambda: users.user_by_token(self._reader_conn("quick"), users.hash_token(token))
            )
            if row is None:
                raise Unauthorized("token matches no user", path="token")
            caller = (row[0], row[1], row[2])
            if generation == self._token_generation:
                self._tokens[token] = caller
        return caller

    def _forget_callers(self) -> None:
        """Drop what the daemon knows of callers (tokens, what each user sees); the generation stops stale refills."""
        self._token_generation += 1
        self._tokens.clear()
        self._viewers.clear()

    async def _run(self, verb: Verb, params, tenant: tuple[int, str, int | None]):
        loop = asyncio.get_running_loop()
        notes: list[str] = []
        if verb.prepare is not None and verb.needs_prepare(params):
            def prepare():
                conn = self._reader_conn()
                ctx = Context(conn, tenant[0], tenant[1], now_us(), self.services, user_id=tenant[2])
                with conn:
                    return verb.prepare(ctx, params), ctx.notes

            params, notes = await loop.run_in_executor(self._reader_pool, prepare)

        def work():
            conn = self._writer if verb.writes else self._reader_conn(verb.lane)
            generation = self._token_generation
            ctx = Context(conn, tenant[0], tenant[1], now_us(), self.services, notes=notes, user_id=tenant[2],
                          seen_as=self._viewers.get(tenant[2]))
            try:
                with _transaction(conn, write=verb.writes, small=verb.small):  # one verb, one transaction
                    result = verb.run(ctx, params)
                    if verb.writes:
                        for later in ctx.after:
                            later(conn)
                        ctx.after.clear()
            finally:
                if verb.writes:
                    self._changes.wrote()
            for later in ctx.committed:  # after the commit, still on this (writer) thread
                later(conn)
            if ctx.seen_as is not None and tenant[2] is not None and generation == self._token_generation:
                self._viewers[tenant[2]] = ctx.seen_as
            self._accesses.extend((tenant[0], entry_id, verb_name, ctx.now) for entry_id, verb_name in ctx.accessed)
            return result, ctx.after

        def write_after(after):
            try:
                with self._writer:
                    for later in after:
                        later(self._writer)
            except apsw.FullError:  # only caches: the answer stands without them
                self._disk_full()

        if verb.stepped:
            return await self._run_steps(verb, params, tenant)
        if verb.lane == "loop" and not verb.writes:
            result, after = work()
        else:
            pool = (self._writer_pool if verb.writes else self._quick_pool if verb.lane == "quick"
                    else self._reader_pool)
            if verb.writes:
                self._wrote.set()
            result, after = await loop.run_in_executor(pool, work)
        if self._accesses:
            self._schedule_access_flush(loop)
        if after:  # a read verb's cache writes: done before answering, so the next request sees them
            await loop.run_in_executor(self._writer_pool, write_after, after)
        if verb.finish is not None and verb.needs_finish(params):
            result = await self._finish(verb, params, tenant, result)
        return result

    async def _finish(self, verb: Verb, params, tenant: tuple[int, str, int | None], result):
        """A write verb's second phase; if it fails, the first write's `result` with a note saying so.

        The first write is committed: answering an error would invite the caller to write it again.
        """
        try:
            return await self._follow_up(verb, params, tenant, result)
        except ArbiterError as e:  # the caller's kind of failure (an entry gone in between): no traceback
            name = e.name
        except apsw.FullError:
            self._disk_full()
            name = StorageFull.name
        except Exception:  # noqa: BLE001 - a bug: logged, and the saved write is still answered as saved
            self.log("arbiter: a write's follow-up failed after the write committed\n" + traceback.format_exc(),
                     key="follow-up failed")
            name = ArbiterError.name
        return msgspec.structs.replace(
            result, note="; ".join(filter(None, [result.note, f"follow-up failed ({name}); the write is saved"]))
        )

    async def _follow_up(self, verb: Verb, params, tenant: tuple[int, str, int | None], result):
        """`finish` on a reader (it sees the first write), then the write it returns on the writer."""
        loop = asyncio.get_running_loop()

        def judge():
            conn = self._reader_conn()
            ctx = Context(conn, tenant[0], tenant[1], now_us(), self.services, user_id=tenant[2])
            with conn:
                return verb.finish(ctx, params, result)

        follow = await loop.run_in_executor(self._reader_pool, judge)

        def write():
            ctx = Context(self._writer, tenant[0], tenant[1], now_us(), self.services, user_id=tenant[2])
            try:
                with _transaction(self._writer, write=True):
                    return follow(ctx)
            finally:
                self._changes.wrote()

        self._wrote.set()
        return await loop.run_in_executor(self._writer_pool, write)

    # ---- access log -------------------------------------------------------------

    def _schedule_access_flush(self, loop) -> None:
        """Have the writer log the queued accesses: at once past ACCESS_BATCH, else within ACCESS_FLUSH_S.

        On the loop thread, after the read has its result: the read never
        waits, and coalescing a second of reads into one transaction keeps the
        writer's work (and its fsync) off the readers' heels. The deque is
        bounded: if the writer falls that far behind, the oldest accesses are
        dropped (they only feed salience's frequency and recency).
        """
        if len(self._accesses) >= ACCESS_BATCH:
            if self._access_timer is not None:
                self._access_timer.cancel()
                self._access_timer = None
            self._writer_pool.submit(self._flush_accesses)
        elif self._access_timer is None:
            def due():
                self._access_timer = None
                self._writer_pool.submit(self._flush_accesses)

            self._access_timer = loop.call_later(ACCESS_FLUSH_S, due)

    def _flush_accesses(self) -> None:
        batch = []
        while self._accesses:
            batch.append(self._accesses.popleft())
        if batch:
            try:
                with self._writer:
                    record_accesses(self._writer, batch)
            except apsw.FullError:
                self._disk_full()
            except apsw.Error:
                self.log("arbiter: access log write failed; those accesses are dropped\n" + traceback.format_exc(),
                         key="access log")

    # ---- maintenance ------------------------------------------------------------

    async def _maintain_when_idle(self) -> None:
        """Every `maintenance_interval_s`, at the first quiet spell, run maintenance for each tenant on the writer."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.maintenance_interval_s)
            await self._quiet_spell()
            try:
                await loop.run_in_executor(self._writer_pool, self._maintain_all)
            except apsw.Error:
                self.log("arbiter: maintenance failed; retrying at the next interval\n" + traceback.format_exc())

    def _maintain_all(self) -> None:
        tenant_ids = [r[0] for r in self._writer.execute("SELECT id FROM tenants ORDER BY id")]
        for tenant_id in tenant_ids:
            with self._writer:
                report = maintenance.run(
                    self._writer, tenant_id, now=now_us(), min_salience=self.min_salience,
                    retention_days=self.services.get("access_retention_days", maintenance.DEFAULT_RETENTION_DAYS),
                    trigger="idle",
                )
            self._changes.wrote()
            if report.retired:
                self.log(f"arbiter: maintenance retired {len(report.retired)} low-salience entries of tenant {tenant_id}")
        maintenance.checkpoint(self._writer)

    async def _run_steps(self, verb: Verb, params, tenant: tuple[int, str, int | None]):
        """A long verb (a backup) as a generator on the writer connection, one step per writer task.

        Each `next()` is its own task on the writer pool, so writes that queued
        during a step run before the next one. No transaction wraps the steps.
        """
        loop = asyncio.get_running_loop()
        ctx = Context(self._writer, tenant[0], tenant[1], now_us(), self.services, user_id=tenant[2])
        steps = verb.run(ctx, params)
        done = object()

        def step():
            try:
                next(steps)
            except StopIteration as stop:
                return done, stop.value
            finally:
                self._changes.wrote()
            return None, None

        try:
            while True:
                flag, result = await loop.run_in_executor(self._writer_pool, step)
                if flag is done:
                    return result
        finally:
            await loop.run_in_executor(self._writer_pool, steps.close)


def run(**kwargs) -> None:
    """Serve in the foreground until a signal."""
    os.umask(0o077)  # the database, its WAL and the token files are the user's alone
    _memory.tune()  # before the first thread
    asyncio.run(Daemon(**kwargs).serve())
