"""One verb, run: its phases in order (prepare, transaction, after, committed, finish, or steps).

`Runner.phases` is the one place that knows a verb's phases. It yields each
`Phase` (what to run and on which lane) and is sent back its value, so the
order, the transactions and what a failure undoes are written once. Two
drivers run it: `Runner.execute` runs every phase on the calling thread (tests,
benches), and the daemon runs each on its lane's thread (`Daemon._execute`).
"""

from __future__ import annotations

import collections
import contextlib
import traceback
from collections.abc import Callable, Generator
from functools import partial
from typing import Any, NamedTuple

import apsw
import msgspec

from arbiter._time import now_us
from arbiter.changes import core as changes
from arbiter.errors import ArbiterError, StorageFull, Unavailable
from arbiter.server._log import RateLimitedLog
from arbiter.store import engine
from arbiter.verb import Context, Services, Verb

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
# Accesses waiting for the writer; beyond this the oldest are dropped.
ACCESS_QUEUE_MAX = 100_000
DISK_FULL_LOG = "arbiter: disk full: writes refused until space is freed"
# Times a write is tried when PostgreSQL rolls it back for a serialization failure or a deadlock (another
# daemon, or another client, wrote the same rows at once): each try is a new transaction, so a retry is safe.
CONFLICT_TRIES = 5


class Caller(NamedTuple):
    """Who a request is from: the tenant (id and name) and the user (None: the tenant's first user)."""

    tenant_id: int
    tenant_name: str
    user_id: int | None
    #: The user's name, when the token lookup read it (else read with what they see).
    user_name: str | None = None


class Phase(NamedTuple):
    """One step of a verb: `work()` run on `lane` ("loop", "quick", "reader" or "writer")."""

    lane: str
    work: Callable[[], Any]
    #: A verb's own write (not a read's cache write): the index may need merging after it.
    writes: bool = False


def writer_settings(conn: apsw.Connection) -> None:
    """The writer connection's own settings (a runner's writer, the daemon's or a bench's); SQLite's only."""
    if engine.is_postgresql(conn):
        return
    conn.pragma("cache_size", -_WRITER_CACHE_KIB)
    conn.pragma("wal_autocheckpoint", _WRITER_AUTOCHECKPOINT)
    conn.pragma("journal_size_limit", _WRITER_AUTOCHECKPOINT * conn.pragma("page_size"))


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` comes of a full disk.

    SQLite may answer SQLITE_FULL by rolling back the whole transaction (when
    the statement had no statement journal to undo alone, or a page spill
    failed): the savepoint around it (`with conn`) then fails on its way out,
    and apsw raises that SQLError with the FullError as its context.
    """
    while exc is not None:
        if isinstance(exc, apsw.FullError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def lost(conn, exc: BaseException) -> bool:
    """Whether `exc` says `conn`'s PostgreSQL session is gone (never on SQLite, whose file cannot go away)."""
    if not engine.is_postgresql(conn):
        return False
    from arbiter.store.pg import connection

    return connection.lost(exc)


def _conflicted(conn, exc: BaseException) -> bool:
    """Whether PostgreSQL rolled the transaction back for a serialization failure or a deadlock (never on SQLite,
    whose writers take turns)."""
    if not engine.is_postgresql(conn):
        return False
    from arbiter.store.pg.connection import conflicted

    return conflicted(exc)


@contextlib.contextmanager
def transaction(conn: apsw.Connection, *, write: bool, small: bool = False, tenant_id: int | None = None):
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

    On PostgreSQL a read is one REPEATABLE READ snapshot (READ COMMITTED would
    give each statement of a verb its own), and a write a READ COMMITTED
    transaction whose row locks make writers wait for each other; a write
    names its caller's tenant (`engine.writing_for`), whose full text it settles.
    """
    if engine.is_postgresql(conn):
        if write and tenant_id is not None:
            engine.writing_for(conn, tenant_id)
        with conn if write else conn.snapshot():
            yield
        return
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
            rollback(conn)
            raise
    finally:
        if small:
            conn.execute("PRAGMA temp_store = DEFAULT")


def rollback(conn: apsw.Connection) -> None:
    """Undo what is left of a failed transaction: SQLite may have rolled it back already (a full disk)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


@contextlib.contextmanager
def upkeep(conn: apsw.Connection):
    """A transaction for the writer's own work (the access log, caches, idle upkeep, maintenance).

    As `with conn`, except that a full disk that rolled the transaction back
    under the savepoint is raised as the FullError it is, not as the
    savepoint's failure to roll back.
    """
    try:
        with conn:
            yield
    except apsw.Error as e:
        if disk_full(e) and not isinstance(e, apsw.FullError):
            rollback(conn)
            raise apsw.FullError("database or disk is full") from None
        raise


class DiskFull:
    """Whether writes are failing for a full disk: said once per episode; a write that commits ends it."""

    def __init__(self, log: Callable[..., None]):
        self.log = log
        self.now = False
        #: A write found the disk full since the last idle checkpoint (which then truncates the WAL).
        self.since_checkpoint = False

    def hit(self) -> None:
        self.since_checkpoint = True
        if not self.now:
            self.now = True
            self.log(DISK_FULL_LOG)

    def cleared(self) -> None:
        self.now = False


class Runner:
    """Runs verbs on a writer connection and per-lane read connections, with the caches verbs share.

    `reader(lane)` gives the calling thread's read connection for a lane. The
    caches (who a token is, what each user sees) are emptied by any change to
    people (`forget_callers`, as `services.people_changed`). A `shared`
    database (PostgreSQL, which other daemons write too) keeps none of them,
    nor the memory versions: another daemon's change would never empty them,
    and a rotated token would go on working here.
    """

    def __init__(self, writer: apsw.Connection, reader: Callable[[str], apsw.Connection], *,
                 services: Services | None = None, log: Callable[..., None] | None = None,
                 disk: DiskFull | None = None, shared: bool = False, clock: Callable[[], int] = now_us):
        self.writer = writer
        #: A verb's `now`, in microseconds (a test's runner gives fixed instants).
        self.clock = clock
        self.reader = reader
        self.services = services if services is not None else Services()
        self.log = log or RateLimitedLog()
        self.disk = disk or DiskFull(self.log)
        # Who a token is, and what each user sees (Viewer), kept between
        # requests. Any change to users, tokens, teams or membership (the
        # people verbs) empties both after its commit and bumps the generation,
        # so a lookup that read the old rows before the commit does not put
        # them back: a rotated token fails at once, a membership counts at once.
        self.tokens: dict[str, Caller] = {}
        self.viewers: dict[int, object] = {}
        self.generation = 0
        self.shared = shared
        self.services.people_changed = self.forget_callers
        # Counts committed writes, so `changes` recomputes a memory version only after one (arbiter/changes.py).
        self.changes = changes.Memo()
        self.services.changes = None if shared else self.changes
        #: Entries reads returned, as (tenant, entry, verb, time), for the writer's access log.
        self.accesses: collections.deque = collections.deque(maxlen=ACCESS_QUEUE_MAX)

    def forget_callers(self) -> None:
        """Drop what is known of callers (tokens, what each user sees); the generation stops stale refills."""
        self.generation += 1
        self.tokens.clear()
        self.viewers.clear()

    def execute(self, verb: Verb, params, caller: Caller):
        """Run `verb` to its answer, every phase on this thread (the daemon runs the same phases on its lanes)."""
        phases = self.phases(verb, params, caller)
        value = error = None
        while True:
            try:
                phase = phases.send(value) if error is None else phases.throw(error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = phase.work(), None
            except BaseException as e:  # handed to the phases, which say what it undoes
                value, error = None, e

    def phases(self, verb: Verb, params, caller: Caller) -> Generator[Phase, Any, Any]:
        """A verb's phases in order; each yields a Phase and is sent back its value (or thrown its error)."""
        if verb.stepped:
            return (yield from self._steps(verb, params, caller))
        notes: list[str] = []
        if verb.prepare is not None and verb.needs_prepare(params):
            params, notes = yield Phase("reader", partial(self._prepare, verb, params, caller))
        lane = "writer" if verb.writes else verb.lane
        result, after = yield Phase(lane, partial(self._work, verb, params, caller, notes), writes=verb.writes)
        if after:  # a read verb's cache writes: done before answering, so the next request sees them
            yield Phase("writer", partial(self._write_after, after))
        if verb.finish is not None and verb.needs_finish(params):
            result = yield from self._finish(verb, params, caller, result)
        return result

    def _context(self, conn: apsw.Connection, caller: Caller, **kw) -> Context:
        return Context(conn, caller.tenant_id, caller.tenant_name, self.clock(), self.services, user_id=caller.user_id,
                       user_name=caller.user_name, **kw)

    def _prepare(self, verb: Verb, params, caller: Caller):
        """Slow read-only work (LLM calls) on a reader, so the writer never waits on the network."""
        conn = self.reader("reader")
        ctx = self._context(conn, caller)
        with conn:
            return verb.prepare(ctx, params), ctx.notes

    def _work(self, verb: Verb, params, caller: Caller, notes: list[str]):
        """The verb in its one transaction; then, on the writer, what it asked for after the commit."""
        conn = self.writer if verb.writes else self.reader(verb.lane)
        generation = self.generation
        for tries in range(1, CONFLICT_TRIES + 1):
            ctx = self._context(conn, caller, notes=list(notes), seen_as=self.viewers.get(caller.user_id))
            try:
                with transaction(conn, write=verb.writes, small=verb.small, tenant_id=caller.tenant_id):
                    result = verb.run(ctx, params)
                    if verb.writes:
                        for later in ctx.after:
                            later(conn)
                        ctx.after.clear()
                break
            except Exception as e:
                if tries == CONFLICT_TRIES or not _conflicted(conn, e):
                    raise
            finally:
                if verb.writes:
                    self.changes.wrote()
        if verb.writes:
            self.disk.cleared()
        for later in ctx.committed:  # after the commit (a WAL checkpoint cannot run inside one), on the writer
            later(conn)
        if ctx.seen_as is not None and caller.user_id is not None and generation == self.generation \
                and not self.shared:
            self.viewers[caller.user_id] = ctx.seen_as
        self.accesses.extend((caller.tenant_id, entry_id, verb_name, ctx.now) for entry_id, verb_name in ctx.accessed)
        return result, ctx.after

    def _write_after(self, after: list) -> None:
        try:
            with upkeep(self.writer):
                for later in after:
                    later(self.writer)
        except apsw.FullError:  # only caches: the answer stands without them
            self.disk.hit()

    def _finish(self, verb: Verb, params, caller: Caller, result):
        """A write verb's second phase; if it fails, the first write's `result` with a note saying so.

        `finish` runs on a reader (it sees the first write), then the write it
        returns on the writer. The first write is committed: answering an error
        would invite the caller to write it again.
        """
        try:
            follow = yield Phase("reader", partial(self._judge, verb, params, caller, result))
            return (yield Phase("writer", partial(self._follow, caller, follow), writes=True))
        except ArbiterError as e:  # the caller's kind of failure (an entry gone in between): no traceback
            name = e.name
        except Exception as e:  # noqa: BLE001 - a bug is logged; the saved write is still answered as saved
            if disk_full(e):
                self.disk.hit()
                name = StorageFull.name
            elif lost(self.writer, e):
                name = Unavailable.name
            else:
                self.log("arbiter: a write's follow-up failed after the write committed\n" + traceback.format_exc(),
                         key="follow-up failed")
                name = ArbiterError.name
        return msgspec.structs.replace(
            result, note="; ".join(filter(None, [result.note, f"follow-up failed ({name}); the write is saved"]))
        )

    def _judge(self, verb: Verb, params, caller: Caller, result):
        conn = self.reader("reader")
        with conn:
            return verb.finish(self._context(conn, caller), params, result)

    def _follow(self, caller: Caller, follow):
        try:
            with transaction(self.writer, write=True, tenant_id=caller.tenant_id):
                result = follow(self._context(self.writer, caller))
        finally:
            self.changes.wrote()
        self.disk.cleared()
        return result

    def _steps(self, verb: Verb, params, caller: Caller):
        """A long verb (a backup): a generator on the writer, outside any transaction, one step per phase.

        Each step is its own writer task in the daemon, so writes that queued
        during a step run before the next one.
        """
        steps = verb.run(self._context(self.writer, caller), params)
        try:
            while True:
                done, value = yield Phase("writer", partial(self._step, steps))
                if done:
                    return value
        finally:
            yield Phase("writer", steps.close)

    def _step(self, steps) -> tuple[bool, Any]:
        try:
            next(steps)
        except StopIteration as stop:
            return True, stop.value
        finally:
            self.changes.wrote()
        return False, None
