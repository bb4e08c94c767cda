"""The daemon: serves the verbs over a unix socket, JSON-RPC 2.0, one JSON object per line.

The daemon frames and routes; each job lives in one module:

- `framing`: connections, their limit and timeouts, lines and batches;
- `runner`: a verb's phases (prepare, transaction, after, committed, finish,
  steps), the one `execute` tests and benches call too;
- `upkeep`: idle work on the writer (the derivers, index merge,
  associations, checkpoint), the access log, hourly maintenance;
- `claim`: the lock files that make one daemon per database and per socket.

On PostgreSQL (`--db postgresql://...`) several daemons serve one database:
each claims only its socket, writes are transactions that wait on each
other's row locks (a serialization failure or deadlock is tried again), idle
work is taken in turns under advisory locks (`upkeep`), and a connection the
server dropped (a restart) is replaced before the next request uses it.

Threads: the asyncio loop frames and routes. Writes run on one writer thread
with one connection (SQLite serializes writers anyway; one thread makes the
order explicit and avoids BusyError). Reads run by their verb's lane
(`Verb.lane`), each on connections of its own reading WAL snapshots without
waiting on the writer: "loop" (a row by key, `get`) on the loop itself, with no
thread handoff; "quick" (a page by index, `list`) on a one-thread pool; the
rest (recall, briefing) on the reader pool. So a cheap read never queues
behind an expensive one.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import apsw
import msgspec

from arbiter import _code, paths
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
from arbiter.server import _memory
from arbiter.server._log import RateLimitedLog
from arbiter.server.claim import Claim
from arbiter.server.framing import (
    _CHUNK, FD_RESERVE, IDLE_TIMEOUT_S, LINE_TIMEOUT_S, MAX_BUFFERED, MAX_CONNECTIONS, MAX_FRAME, Connections,
    check_utf8, error_frame, result_frame,
)
from arbiter.server.runner import Caller, DiskFull, Runner, disk_full, lost, writer_settings
from arbiter.server.upkeep import IDLE_CHECKPOINT_PAGES, IDLE_S, Job, Upkeep, take_turn
from arbiter.store import connect, engine, open_database, tenants, users
from arbiter.validation import describe
from arbiter.verb import Services
from arbiter.verbs import VERBS, Verb

__all__ = ["Daemon", "IDLE_CHECKPOINT_PAGES", "IDLE_S", "MAX_FRAME", "run", "writer_settings"]

#: A request frame at least this large (a bulk write) is followed by a heap trim.
_TRIM_AFTER = 1 << 20
# Threads (each with its own read connection) for `Verb.lane == "quick"`:
# bounded reads get a lane of their own, so they never queue behind recalls.
QUICK_READERS = 1
# Page cache per reader connection (KiB): SQLite's default is 2 MiB each; the
# readers' working set (entry rows, FTS doclists) is small and the OS caches the file.
_READER_CACHE_KIB = 1024
# The loop's and the quick lane's connections read a row or a page at a time.
_QUICK_CACHE_KIB = 256

_request_decoder = msgspec.json.Decoder(Request)
_param_decoders = {name: msgspec.json.Decoder(verb.params) for name, verb in VERBS.items()}


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


class Daemon(Connections, Upkeep):
    """One Arbiter daemon: a database, a socket, and the verbs between them."""

    def __init__(
        self,
        *,
        home: Path,
        db_path: Path | str,
        socket_path: Path,
        max_frame: int = MAX_FRAME,
        max_connections: int = MAX_CONNECTIONS,
        max_buffered: int = MAX_BUFFERED,
        idle_timeout: float = IDLE_TIMEOUT_S,
        line_timeout: float = LINE_TIMEOUT_S,
        readers: int | None = None,
        synchronous: str = "FULL",
        services: Services | None = None,
        log=None,
        maintenance_interval_s: float = 3600.0,
        min_salience: float = 0.01,
    ):
        self.home = home
        self.db_path = db_path
        #: Served from PostgreSQL (`db_path` a URL): several daemons may share the database.
        self.shared = engine.is_url(db_path)
        self.socket_path = socket_path
        self.max_frame = max_frame
        self.max_connections = max_connections
        # Room for at least one frame of the largest size, whatever was asked.
        self.max_buffered = max(max_buffered, max_frame)
        self.idle_timeout = idle_timeout
        self.line_timeout = line_timeout
        self.synchronous = synchronous
        self.services = services or Services()
        self.log = RateLimitedLog(log)
        # Each reader holds a connection (schema, page cache) and a thread: more
        # readers than cores add memory without adding throughput.
        self._readers = readers or min(4, os.cpu_count() or 1)
        self.disk = DiskFull(self.log)
        # The writer connection is set once the database is open (`serve`).
        self.runner = Runner(None, self._reader_conn, services=self.services, log=self.log, disk=self.disk,
                             shared=self.shared)
        self._admin_hash: bytes | None = None
        self._local = threading.local()
        self._reader_conns: list[apsw.Connection] = []
        self._stopping = False  # a signal came: connections start no new line
        self._claim = Claim(None if self.shared else db_path, socket_path)
        self.maintenance_interval_s = maintenance_interval_s
        self.min_salience = min_salience
        self._init_connections()
        self._init_upkeep()

    # ---- start-up -----------------------------------------------------------

    def _first_run(self, conn: apsw.Connection) -> None:
        """A new database gets a `default` tenant and an admin token, written to 0600 files.

        A token file the home already holds is kept, and the new database takes its token: it may be the only
        copy of another database's (`serve --db scratch.db` on a home in use), which tokens stored hashed
        cannot give back.
        """
        now = now_us()
        with conn:
            if self.shared:  # daemons started at once on a new database: one creates the tenant and the admin token
                take_turn(conn, Job.FIRST_RUN, wait=True)
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
        """This thread's read connection (made on first use; a lane's threads read few pages each).

        A PostgreSQL session the server dropped is replaced here, before a request fails on it.
        """
        conn = getattr(self._local, "conn", None)
        if conn is not None and self.shared and not conn.alive():
            self._reader_conns.remove(conn)
            self._local.conn = None
            conn.close()
            conn = None
        if conn is None:
            conn = connect(self.db_path, synchronous=self.synchronous)
            if self.shared:
                conn.execute("SET default_transaction_read_only = on")
            else:
                conn.pragma("query_only", True)
                conn.pragma("cache_size", -(_READER_CACHE_KIB if lane == "reader" else _QUICK_CACHE_KIB))
            self._local.conn = conn
            self._reader_conns.append(conn)
        return conn

    def _live_writer(self) -> None:
        """On the writer thread: replace the writer's PostgreSQL session if the server dropped it (a restart)."""
        if self.shared and not self._writer.alive():
            old = self._writer
            self._writer = self.runner.writer = connect(self.db_path)
            old.close()
            self.log("arbiter: reconnected to PostgreSQL", key="reconnected")

    # ---- serving --------------------------------------------------------------

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Run until SIGTERM/SIGINT, then drain in-flight requests and clean up."""
        self._claim.take()
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
            self._pools = {"writer": self._writer_pool, "reader": self._reader_pool, "quick": self._quick_pool}
            writer_settings(self._writer)
            self.runner.writer = self._writer
            if not self.shared:
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
            self.log(f"arbiter: serving {self._database()} on {self.socket_path}")
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
                self._claim.release()
            else:  # refused before the database opened (another program's file, a folder...)
                self._claim.undo()
        if hasattr(self, "_writer"):  # a start that failed to open the database says why, and only that
            self.log("arbiter: stopped")

    def _database(self) -> str:
        """The database, for the log: a URL without its password."""
        return engine.shown(self.db_path)

    def _close_writer(self) -> None:
        self._flush_accesses()  # what reads queued since the last flush
        if self.shared:  # PostgreSQL keeps its own statistics (autovacuum's ANALYZE)
            self._writer.close()
            return
        try:
            self._writer.pragma("optimize")  # writes statistics: it fails on a full disk, which is no reason to stay up
        except apsw.Error as e:
            self.log(f"arbiter: skipped PRAGMA optimize at close: {e}")
        self._writer.close()

    # ---- routing ----------------------------------------------------------------

    async def _dispatch(self, handed: list[bytes]) -> bytes:
        frame = handed.pop()
        self._busy += 1
        self._requests += 1
        self._idle.clear()
        self._active.set()
        req_id = None
        try:
            check_utf8(frame)
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
            caller = await self._authenticate(verb, req.token)  # before params: strangers learn nothing
            try:
                params = _param_decoders[req.method].decode(req.params)
            except msgspec.ValidationError as e:
                message, path = describe(e, verb.params)
                raise InvalidParams.at(path or "params", message) from None  # "params": not an object, say
            except msgspec.DecodeError as e:
                raise InvalidParams.at("params", str(e)) from None
            large = len(frame) >= _TRIM_AFTER
            del frame, req  # `req.params` was a view of the frame; the params are decoded now

            result = await self._execute(verb, params, caller)
            if large:
                # A bulk write's strings and rows are freed now; give the pages back before the next
                # batch arrives rather than at the next quiet spell (~1 MB less at the peak, ~1 ms).
                del params
                _memory.trim()
            return result_frame(req_id, result)
        except ArbiterError as err:
            return error_frame(req_id, err)
        except Exception as exc:
            if disk_full(exc):
                self.disk.hit()
                self._wrote.set()  # the idle checkpoint gives the WAL's space back once the disk has room
                return error_frame(req_id, StorageFull(
                    "the disk holding the database is full: nothing was written; free some space and retry "
                    "(reads still work)"))
            if lost(self._writer, exc):
                self.log("arbiter: lost the connection to PostgreSQL (restarted or unreachable); the failed "
                         "requests are answered `unavailable`, and the next ones reconnect", key="lost")
                return error_frame(req_id, Unavailable(
                    "the connection to PostgreSQL was lost during this request (a restart?); retry it: "
                    "the daemon reconnects"))
            # A bug: answer, log it (a few times a second at most), keep serving.
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.log("arbiter: internal error\n" + traceback.format_exc(),
                     key=f"{type(exc).__name__} at {where.filename}:{where.lineno}")
            return error_frame(req_id, ArbiterError(f"internal error: {type(exc).__name__}"))
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()

    async def _authenticate(self, verb: Verb, token: str | None) -> Caller:
        """Who the caller is; a token names one user (store/users.py)."""
        if verb.public:
            return Caller(0, "", None)
        if not token:
            raise Unauthorized("missing token", path="token")
        if verb.admin:
            if users.hash_token(token) != self._admin_hash:
                raise Unauthorized("this method needs the admin token", path="token")
            return Caller(0, "admin", None)
        callers = self.runner
        caller = callers.tokens.get(token)
        if caller is None:
            generation = callers.generation
            loop = asyncio.get_running_loop()
            row = await loop.run_in_executor(
                self._quick_pool, lambda: users.user_by_token(self._reader_conn("quick"), users.hash_token(token))
            )
            if row is None:
                raise Unauthorized("token matches no user", path="token")
            caller = Caller(*row)
            if generation == callers.generation and not self.shared:
                callers.tokens[token] = caller
        return caller

    async def _execute(self, verb: Verb, params, caller: Caller):
        """The runner's phases for one request, each on its lane: the loop itself, or a lane's threads."""
        loop = asyncio.get_running_loop()
        phases = self.runner.phases(verb, params, caller)
        value = error = None
        wrote = False
        while True:
            try:
                phase = phases.send(value) if error is None else phases.throw(error)
            except StopIteration as stop:
                result = stop.value
                break
            if phase.writes:
                self._wrote.set()
                wrote = True
            try:
                work, lane = phase.work, phase.lane
                if self.shared and lane == "writer":
                    work = partial(self._on_live_writer, work)
                elif self.shared and lane == "loop":
                    # A row by key is a round trip to the server there, and a reconnect may wait for the connect
                    # timeout: neither may hold the loop, which frames every other connection's requests.
                    lane = "quick"
                if lane == "loop":
                    value = work()
                else:
                    value = await loop.run_in_executor(self._pools[lane], work)
                error = None
            except BaseException as e:  # handed to the phases, which say what it undoes
                value, error = None, e
        if self.runner.accesses:
            self._schedule_access_flush(loop)
        if wrote and self.shared:
            self._schedule_statistics(loop)
        return result

    def _on_live_writer(self, work):
        self._live_writer()
        return work()


def run(**kwargs) -> None:
    """Serve in the foreground until a signal."""
    os.umask(0o077)  # the database, its WAL and the token files are the user's alone
    _memory.tune()  # before the first thread
    asyncio.run(Daemon(**kwargs).serve())
