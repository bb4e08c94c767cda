"""Maintenance: recompute salience, retire what fell below `min_salience`, refresh entity clusters, tidy.

`arbiter maintain` runs it for the caller's tenant; the daemon runs it for
every tenant once an interval (hourly by default) at the first quiet spell.
Retiring is `forget` with the reason recorded in `entry_retirements`: the
entry stays readable `--as-of`, and `restore` brings it back. Nothing is
deleted but access-log rows past their retention.
"""

from __future__ import annotations

import time

import apsw
import msgspec

from arbiter.verb import ACCESS_RETENTION_DAYS
from arbiter._time import US, format_time
from arbiter import derive
from arbiter.entities import clusters
from arbiter.model import MaintenanceReport
from arbiter.recall.maintain import compact
from arbiter.salience import SALIENCE_SQL
from arbiter.store import engine, entries, users

DEFAULT_MIN_SALIENCE = 0.01
DEFAULT_RETENTION_DAYS = ACCESS_RETENTION_DAYS
#: FTS merge steps per run; the daemon's idle compaction does the rest.
FTS_STEPS = 8
#: PostgreSQL's advisory lock class for "maintaining a tenant" (its second key is the tenant).
_LOCK = 0x4D41  # "MA"


def run(conn: apsw.Connection, tenant_id: int, *, now: int, min_salience: float = DEFAULT_MIN_SALIENCE,
        retention_days: float = DEFAULT_RETENTION_DAYS, trigger: str = "verb") -> MaintenanceReport:
    """One maintenance run for a tenant, in the caller's (writer) transaction; its report is stored too."""
    started = time.perf_counter()
    if engine.is_postgresql(conn):
        # Daemons sharing a database may maintain one tenant at once: the second waits for the first's commit,
        # then finds nothing left to retire (each retirement is recorded once).
        conn.execute("SELECT pg_advisory_xact_lock(CAST(? AS integer), CAST(? AS integer))", (_LOCK, tenant_id))
    derive.drain(conn, now=now, tenant_id=tenant_id)
    rows = conn.execute(
        f"SELECT e.id, {SALIENCE_SQL.format(now='?')}, coalesce(s.permanent, 0), s.entry_id IS NOT NULL "
        "FROM entries e LEFT JOIN entry_salience s ON s.tenant_id = e.tenant_id AND s.entry_id = e.id "
        "WHERE e.tenant_id = ? AND e.valid_to IS NULL",
        (now, tenant_id),
    ).fetchall()
    conn.executemany(
        "UPDATE entry_salience SET salience = ?, computed_at = ? WHERE tenant_id = ? AND entry_id = ?",
        [(value, now, tenant_id, eid) for eid, value, _, has_row in rows if has_row],
    )
    retired = [eid for eid, value, permanent, _ in rows if value < min_salience and not permanent]
    by_id = {eid: value for eid, value, _, _ in rows}
    for eid in retired:
        entries.retire(conn, tenant_id, eid, now=now)
        conn.execute(
            "INSERT INTO entry_retirements(tenant_id, entry_id, reason, salience, at) VALUES (?, ?, ?, ?, ?)",
            (tenant_id, eid, f"salience {by_id[eid]:.4f} fell below min_salience {min_salience:g}", by_id[eid], now),
        )
    gone = set(retired)
    kept = [value for eid, value, _, _ in rows if eid not in gone]
    conn.execute(
        "DELETE FROM access_log WHERE tenant_id = ? AND at < ?", (tenant_id, now - int(retention_days * 86_400 * US))
    )
    pruned = conn.changes()
    n_clusters = clusters.refresh(conn, tenant_id)
    merged, step = False, 1
    # FTS5's segments are SQLite's: PostgreSQL keeps its own indexes.
    for _ in range(0 if engine.is_postgresql(conn) else FTS_STEPS):
        step = compact(conn, start=step)
        if not step:
            break
        merged = True
    report = MaintenanceReport(
        at=format_time(now), trigger=trigger, salience_computed=len(rows),
        average_salience=round(sum(kept) / len(kept), 6) if kept else None, min_salience=min_salience,
        retired=retired, entity_clusters=n_clusters, access_log_pruned=pruned, fts_merged=merged,
        wal_checkpointed=None if engine.is_postgresql(conn) else False,  # `checkpoint`, after the commit
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
    )
    conn.execute(
        "INSERT INTO maintenance_runs(tenant_id, at, report) VALUES (?, ?, ?)",
        (tenant_id, now, msgspec.json.encode(report).decode()),
    )
    return report


def checkpoint(conn: apsw.Connection) -> bool | None:
    """Copy the WAL back into the database (PASSIVE: never waits on readers); True if all of it went.

    None on PostgreSQL: its WAL is the server's (checkpoints are its own).
    """
    if engine.is_postgresql(conn):
        return None
    log, done = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    return log == done


def last(conn: apsw.Connection, tenant_id: int) -> MaintenanceReport | None:
    row = conn.execute(
        "SELECT report FROM maintenance_runs WHERE tenant_id = ? ORDER BY id DESC LIMIT 1", (tenant_id,)
    ).fetchone()
    return msgspec.json.decode(row[0], type=MaintenanceReport) if row else None


# ---- the verb ----------------------------------------------------------------

from arbiter.model import MaintainParams  # noqa: E402
from arbiter.verb import Context, Verb  # noqa: E402


def maintain(ctx: Context, p: MaintainParams):
    """Recompute salience, retire entries below `min_salience` (recorded, restorable), refresh entity clusters, merge the index, checkpoint the WAL.

    It works on the whole tenant and reports retired ids, so with more than one user only the first user runs it.
    """
    if not ctx.viewer.solo:
        users.require_owner(ctx.conn, ctx.viewer, "maintenance (the whole tenant's)")
    report = run(
        ctx.conn, ctx.tenant_id, now=ctx.now, min_salience=p.min_salience,
        retention_days=ctx.services.access_retention_days,
    )

    run_id = ctx.conn.last_insert_rowid()  # `run` stores the report last

    def after_commit(conn: apsw.Connection) -> None:
        report.wal_checkpointed = checkpoint(conn)
        # Stored before the checkpoint ran: the stored report says what the answer says (status shows it).
        with conn:
            conn.execute("UPDATE maintenance_runs SET report = ? WHERE tenant_id = ? AND id = ?",
                         (msgspec.json.encode(report).decode(), ctx.tenant_id, run_id))

    ctx.committed.append(after_commit)
    return report


VERBS: dict[str, Verb] = {"maintain": Verb(MaintainParams, maintain, writes=True)}
