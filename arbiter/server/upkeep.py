"""Idle upkeep: the writer's work between requests, so that requests never wait on it.

When no request has arrived for `IDLE_S`, after writes, the writer thread
derives what writes left to it (arbiter/derive.py: the urgent derivers, then
the FTS index merge, `recall.maintain.compact`, then the rest), a
bounded step at a time, checking for new requests between steps, then
checkpoints the WAL; and the heap is trimmed. Reads hand the entries they
returned to the writer's access log in batches, after answering; once an
interval (hourly) the writer runs maintenance at a quiet spell.

On PostgreSQL several daemons may serve one database, and each runs this
loop. Each idle job is taken in turns under an advisory lock keyed by the job
(and the tenant, for maintenance): a daemon that finds the lock held leaves
the job to its holder, so no queued entry is derived twice and no tenant is
maintained twice an interval. The lock is a session lock taken before the
job's transaction begins, so the transaction's snapshot is taken after the
lock is held and sees what the last holder committed, whatever the database's
default isolation. A daemon that dies mid-job loses its session and with it
the lock; its uncommitted step is rolled back and stays queued. There is no
WAL to checkpoint and no FTS5 index to merge there.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import traceback
from pathlib import Path

import apsw

from arbiter import derive, maintenance
from arbiter._time import US, now_us
from arbiter.errors import Unavailable
from arbiter.recall.maintain import compact
from arbiter.salience import record_accesses
from arbiter.server import _memory
from arbiter.server.runner import lost, upkeep
from arbiter.store import engine
from arbiter.store.db import BUSY_TIMEOUT_MS

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
# The writer logs queued accesses once this many wait, or this long after the first.
ACCESS_BATCH = 512
ACCESS_FLUSH_S = 1.0
# On PostgreSQL the planner's statistics are refreshed this long after a write at most, quiet spell or not: a client
# that loads and then reads without pausing leaves none, and its recalls were planned on the empty tables' picture
# until autovacuum's turn (at 4,000 entries p50 19 ms, 3.7 after the refresh; docs/benchmarks.md).
STATISTICS_AFTER_S = 1.0
# The first key of every advisory lock the daemon takes on PostgreSQL ("AR" and the job below), so Arbiter's
# locks keep clear of another program's in a shared cluster; the second key is the tenant, 0 for all.
_LOCK_SPACE = 0x41520000


class Job(enum.IntEnum):
    """Work only one of the daemons sharing a PostgreSQL database does at a time."""

    FIRST_RUN = 1  # the `default` tenant and the admin token of a new database
    DERIVE_URGENT = 2  # derive.step(urgent=True)
    DERIVE = 3  # derive.step(urgent=False)
    MAINTENANCE = 4  # maintenance.run, per tenant
    MERGE = 5  # recall.maintain.compact: full-text segments folded
    STATISTICS = 6  # store/pg/db.py refresh_statistics: the planner's picture of tables a bulk load grew


def take_turn(conn, job: Job, tenant_id: int = 0, *, wait: bool = False) -> bool:
    """In the caller's PostgreSQL transaction: hold `job`'s lock until it ends; False if another holds it
    (or wait for it: `wait`)."""
    fn = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    got = conn.execute(f"SELECT {fn}(CAST(? AS integer), CAST(? AS integer))", (_LOCK_SPACE + job, tenant_id))
    return wait or got.fetchone()[0]


@contextlib.contextmanager
def turn(conn, job: Job, tenant_id: int = 0):
    """Outside a transaction on PostgreSQL: hold `job`'s session lock for the block; yields False if another
    session holds it (the block then does nothing)."""
    key = (_LOCK_SPACE + job, tenant_id)
    mine = conn.execute("SELECT pg_try_advisory_lock(CAST(? AS integer), CAST(? AS integer))", key).fetchone()[0]
    try:
        yield mine
    finally:
        if mine and not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(CAST(? AS integer), CAST(? AS integer))", key)


class Upkeep:
    """The daemon's idle work, access log and maintenance (a mixin of `Daemon`, on its writer thread)."""

    def _init_upkeep(self) -> None:
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._requests = 0  # requests started, to tell a quiet spell from a busy one
        self._wrote = asyncio.Event()  # a write since the index was last fully merged
        self._compact_from = 1  # the scope idle merging goes on from (recall.maintain.compact)
        self._wrote.set()  # a database opened after a bulk load may need merging
        self._active = asyncio.Event()  # requests since the last idle work
        self._active.set()
        self._access_timer: asyncio.TimerHandle | None = None
        self._statistics_timer: asyncio.TimerHandle | None = None
        self._idle_checkpoint_bytes = 0  # IDLE_CHECKPOINT_PAGES in bytes of WAL, once the page size is known

    def _failed(self, what: str, exc: BaseException) -> None:
        """Log an idle job's failure: one line for a lost PostgreSQL connection, else with its traceback.

        Any exception: idle work runs in a task (or a pool's future) nobody awaits, and one it let through would
        end idle work for the daemon's life without a word.
        """
        if isinstance(exc, Unavailable) or lost(self._writer, exc):
            self.log(f"arbiter: {what} waits: PostgreSQL is unreachable ({exc})", key=f"{what} lost")
        else:
            self.log(f"arbiter: {what} failed\n" + "".join(traceback.format_exception(exc)), key=f"{what} failed")

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
        if self.shared:
            await loop.run_in_executor(self._writer_pool, self._statistics_logged)
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
                self.disk.hit()
                more = False  # the checkpoint below retries until there is room
            except Exception as e:  # noqa: BLE001 - logged (`_failed`)
                self._failed("idle upkeep (retried after the next write)", e)
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
        if self.shared:
            return True
        wal = Path(f"{self.db_path}-wal")
        if not self.disk.since_checkpoint and wal.exists() and wal.stat().st_size < self._idle_checkpoint_bytes:
            return True
        self._writer.set_busy_timeout(50)
        try:
            busy, _, _ = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            self.disk.since_checkpoint = self.disk.since_checkpoint and bool(busy)
            return not busy
        except apsw.FullError:
            self.disk.hit()
            return False
        finally:
            self._writer.set_busy_timeout(BUSY_TIMEOUT_MS)

    def _compact_step(self) -> bool:
        """One step of idle upkeep: the urgent derivers first (entities and near-copy keys: recall and
        `remember` read them), then the index, then the rest (arbiter/derive.py)."""
        if self.shared:
            self._live_writer()
            return (self._derive_in_turn(Job.DERIVE_URGENT) or self._merge_in_turn()
                    or self._derive_in_turn(Job.DERIVE))
        with upkeep(self._writer):
            if derive.step(self._writer, now=now_us(), urgent=True):
                return True
            resume = compact(self._writer, start=self._compact_from)
            self._compact_from = resume or 1  # a finished pass starts from the first scope next time
            more = bool(resume)
        with upkeep(self._writer):
            return derive.step(self._writer, now=now_us(), urgent=False) or more

    def _statistics(self) -> None:
        """Before idle work on PostgreSQL: the statistics of tables the writes since the last pass grew, first, so
        that derivation and the next reads are planned on them."""
        from arbiter.store.pg.db import refresh_statistics

        self._live_writer()
        with turn(self._writer, Job.STATISTICS) as mine:
            if mine:
                refresh_statistics(self._writer)

    def _merge_in_turn(self) -> bool:
        """One full-text merge step on PostgreSQL, if no other daemon is taking one; True if there may be more."""
        with turn(self._writer, Job.MERGE) as mine:
            if not mine:
                return False
            with upkeep(self._writer):
                resume = compact(self._writer, start=self._compact_from)
            self._compact_from = resume or 1
            return bool(resume)

    def _derive_in_turn(self, job: Job) -> bool:
        """One derive step on PostgreSQL, if no other daemon is taking one; True if it derived something."""
        with turn(self._writer, job) as mine:
            if not mine:
                return False
            with upkeep(self._writer):
                return derive.step(self._writer, now=now_us(), urgent=job == Job.DERIVE_URGENT)

    # ---- access log -------------------------------------------------------------

    def _schedule_access_flush(self, loop) -> None:
        """Have the writer log the queued accesses: at once past ACCESS_BATCH, else within ACCESS_FLUSH_S.

        On the loop thread, after the read has its result: the read never
        waits, and coalescing a second of reads into one transaction keeps the
        writer's work (and its fsync) off the readers' heels. The deque is
        bounded: if the writer falls that far behind, the oldest accesses are
        dropped (they only feed salience's frequency and recency).
        """
        if len(self.runner.accesses) >= ACCESS_BATCH:
            if self._access_timer is not None:
                self._access_timer.cancel()
                self._access_timer = None
            self._writer_pool.submit(self._flush_accesses)
        elif self._access_timer is None:
            def due():
                self._access_timer = None
                self._writer_pool.submit(self._flush_accesses)

            self._access_timer = loop.call_later(ACCESS_FLUSH_S, due)

    def _schedule_statistics(self, loop) -> None:
        """After a write on PostgreSQL: have the writer refresh the statistics within STATISTICS_AFTER_S (on the loop
        thread; one pass for any number of writes meanwhile)."""
        if self._statistics_timer is None:
            def due():
                self._statistics_timer = None
                self._writer_pool.submit(self._statistics_logged)

            self._statistics_timer = loop.call_later(STATISTICS_AFTER_S, due)

    def _statistics_logged(self) -> None:
        try:
            self._statistics()
        except Exception as e:  # noqa: BLE001 - logged (`_failed`)
            self._failed("the tables' statistics (retried after the next write)", e)

    def _flush_accesses(self) -> None:
        if self.shared:
            try:
                self._live_writer()
            except Unavailable:
                return  # PostgreSQL is down: the accesses stay queued (bounded) for the next flush
        batch = []
        while self.runner.accesses:
            batch.append(self.runner.accesses.popleft())
        if batch:
            try:
                with upkeep(self._writer):
                    record_accesses(self._writer, batch)
            except apsw.FullError:
                self.disk.hit()
            except Exception as e:  # noqa: BLE001 - logged (`_failed`)
                self._failed("the access log (those accesses are dropped)", e)

    # ---- maintenance ------------------------------------------------------------

    async def _maintain_when_idle(self) -> None:
        """Every `maintenance_interval_s`, at the first quiet spell, run maintenance for each tenant on the writer."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.maintenance_interval_s)
            await self._quiet_spell()
            try:
                await loop.run_in_executor(self._writer_pool, self._maintain_all)
            except apsw.FullError:
                self.disk.hit()
            except Exception as e:  # noqa: BLE001 - logged (`_failed`)
                self._failed("maintenance (retried at the next interval)", e)

    def _maintain_all(self) -> None:
        if self.shared:
            self._live_writer()
        tenant_ids = [r[0] for r in self._writer.execute("SELECT id FROM tenants ORDER BY id")]
        for tenant_id in tenant_ids:
            if not self.shared:
                self._maintain(tenant_id)
                continue
            with turn(self._writer, Job.MAINTENANCE, tenant_id) as mine:
                if mine and not self._maintained_since(tenant_id, now_us() - int(self.maintenance_interval_s * US)):
                    self._maintain(tenant_id)
        if not self.shared:
            maintenance.checkpoint(self._writer)

    def _maintained_since(self, tenant_id: int, since: int) -> bool:
        """Whether a maintenance run of the tenant (another daemon's, or the `maintain` verb's) began since `since`."""
        return self._writer.execute("SELECT 1 FROM maintenance_runs WHERE tenant_id = ? AND at >= ? LIMIT 1",
                                    (tenant_id, since)).fetchone() is not None

    def _maintain(self, tenant_id: int) -> None:
        engine.writing_for(self._writer, tenant_id)
        with upkeep(self._writer):
            report = maintenance.run(
                self._writer, tenant_id, now=now_us(), min_salience=self.min_salience,
                retention_days=self.services.access_retention_days,
                trigger="idle",
            )
        self.runner.changes.wrote()
        if report.retired:
            self.log(f"arbiter: maintenance retired {len(report.retired)} low-salience entries of tenant {tenant_id}")
