"""Salience: how much an entry matters now, exactly as MemoryGraph defines it; reinforcement; the access log.

    permanent:      max(initial, 0.8)
    otherwise:      clamp(base - decay + recency + frequency + reinforcement, 0, 1)
      base          = initial salience (default 0.5)
      decay         = base x decay_rate x age_days        (decay_rate default 0.01 a day)
      recency       = 0.1 x 1 / (1 + days_since_access)   (an entry never read: since it was recorded)
      frequency     = 0.05 x log2(1 + access_count)
      reinforcement = min(0.15 x reinforcement_count, 0.6)

Age counts from `recorded_at` (when the store learned the entry). An entry
without an `entry_salience` row has the defaults: rows exist only for
entries given a salience, made permanent, reinforced or read, so a bulk
write pays nothing here.

The access log: every entry `get` returns or `recall` ranks in the hits it
returns is logged as (entry, verb, time). Reads never wait for it: the
daemon queues accesses and the writer thread writes them in batches
(`record_accesses`), also bumping `access_count`/`last_access`. Maintenance
deletes log rows older than the retention (default 30 days); the counts
stay.
"""

from __future__ import annotations

import math

import apsw

from arbiter._time import US, format_time
from arbiter.errors import NotFound
from arbiter.model import SalienceInfo
from arbiter.store import engine
from arbiter.store.users import Viewer

DEFAULT_SALIENCE = 0.5
DEFAULT_DECAY_RATE = 0.01
PERMANENT_FLOOR = 0.8
DAY_US = 86_400 * US


def salience(*, initial: float, decay_rate: float, age_days: float, days_since_access: float, accesses: int,
             reinforcements: int, permanent: bool) -> float:
    """MemoryGraph's salience (the module docstring has the formula)."""
    if permanent:
        return max(initial, PERMANENT_FLOOR)
    value = (
        initial
        - initial * decay_rate * max(age_days, 0.0)
        + 0.1 / (1 + max(days_since_access, 0.0))
        + 0.05 * math.log2(1 + accesses)
        + min(0.15 * reinforcements, 0.6)
    )
    return min(max(value, 0.0), 1.0)


def sql_salience(initial, decay_rate, permanent, accesses, last_access, reinforcements, recorded_at, now) -> float:
    """`arbiter_salience(...)`: `salience` over an entries row and its (maybe missing) `entry_salience` row.

    On PostgreSQL the same function is SQL (pg/migrations/p001_core.sql); tests hold the two to the same values.
    """
    initial = DEFAULT_SALIENCE if initial is None else initial
    return salience(
        initial=initial, decay_rate=DEFAULT_DECAY_RATE if decay_rate is None else decay_rate,
        age_days=(now - recorded_at) / DAY_US,
        days_since_access=(now - (last_access or recorded_at)) / DAY_US,
        accesses=accesses or 0, reinforcements=reinforcements or 0, permanent=bool(permanent),
    )


#: SQL for one entry's salience at `?now`: `e` is the entries row, `s` its LEFT JOINed entry_salience row.
SALIENCE_SQL = (
    "arbiter_salience(s.initial, s.decay_rate, s.permanent, s.accesses, s.last_access, s.reinforcements, "
    "e.recorded_at, {now})"
)


def set_initial(conn: apsw.Connection, tenant_id: int, entry_id: int, *, initial: float | None, permanent: bool,
                now: int) -> None:
    """Give a new entry its own salience or permanence (the defaults need no row)."""
    if initial is None and not permanent:
        return
    conn.execute(
        "INSERT INTO entry_salience(entry_id, tenant_id, initial, permanent) VALUES (?, ?, ?, ?) "
        f"ON CONFLICT ({engine.conflict_key(conn, 'entry_id')}) "
        "DO UPDATE SET initial = excluded.initial, permanent = excluded.permanent",
        (entry_id, tenant_id, DEFAULT_SALIENCE if initial is None else initial, int(permanent)),
    )


def info(conn: apsw.Connection, tenant_id: int, entry_id: int, *, now: int) -> SalienceInfo:
    """An entry's salience now, and what it is made of."""
    row = conn.execute(
        f"SELECT e.id, {SALIENCE_SQL.format(now='?')}, coalesce(s.initial, ?), coalesce(s.permanent, 0), "
        "coalesce(s.accesses, 0), s.last_access, coalesce(s.reinforcements, 0) "
        "FROM entries e LEFT JOIN entry_salience s ON s.tenant_id = e.tenant_id AND s.entry_id = e.id "
        "WHERE e.id = ? AND e.tenant_id = ?",
        (now, DEFAULT_SALIENCE, entry_id, tenant_id),
    ).fetchone()
    if row is None:
        raise NotFound(f"entry {entry_id} not found")
    eid, value, initial, permanent, accesses, last, reinforcements = row
    return SalienceInfo(
        id=eid, salience=round(value, 6), initial=initial, permanent=bool(permanent), access_count=accesses,
        last_access=format_time(last), reinforcements=reinforcements,
    )


def reinforce(conn: apsw.Connection, v: Viewer, entry_id: int, *, now: int) -> SalienceInfo:
    """Add one reinforcement to an active entry `v` sees (+0.15 salience, up to +0.6 in all).

    A teammate may reinforce a shared entry: salience is the entry's, one value for everyone who sees it.
    """
    tenant_id = v.tenant_id
    if not conn.execute(
        f"SELECT 1 FROM entries e WHERE e.id = ? AND e.valid_to IS NULL AND {v.sees('e')}", (entry_id,)
    ).fetchone():
        raise NotFound(f"entry {entry_id} not found (or retired)", path="id")
    conn.execute(
        "INSERT INTO entry_salience(entry_id, tenant_id, reinforcements) VALUES (?, ?, 1) "
        f"ON CONFLICT ({engine.conflict_key(conn, 'entry_id')}) "
        "DO UPDATE SET reinforcements = entry_salience.reinforcements + 1",
        (entry_id, tenant_id),
    )
    return info(conn, tenant_id, entry_id, now=now)


def record_accesses(conn: apsw.Connection, accesses: list[tuple[int, int, str, int]]) -> None:
    """Write a batch of (tenant, entry, verb, time) accesses and bump each entry's counts. On the writer."""
    if not accesses:
        return
    conn.executemany("INSERT INTO access_log(tenant_id, entry_id, verb, at) VALUES (?, ?, ?, ?)", accesses)
    counts: dict[int, dict[int, tuple[int, int]]] = {}  # tenant -> entry -> (accesses, last)
    for tenant_id, entry_id, _, at in accesses:
        mine = counts.setdefault(tenant_id, {})
        n, last = mine.get(entry_id, (0, 0))
        mine[entry_id] = (n + 1, max(last, at))
    # A statement per tenant and _CHUNK entries (each entry once, so DO UPDATE meets each row once), not one per
    # entry: on PostgreSQL each was a statement to run and answer, ten a recall. An entry purged between the read
    # and this write has no row to count against.
    for tenant_id, mine in counts.items():
        items = list(mine.items())
        for at in range(0, len(items), _CHUNK):
            chunk = items[at:at + _CHUNK]
            conn.execute(
                "INSERT INTO entry_salience(entry_id, tenant_id, accesses, last_access) "
                f"SELECT v.column1, ?, v.column2, v.column3 FROM (VALUES {','.join(['(?, ?, ?)'] * len(chunk))}) v "
                "WHERE EXISTS (SELECT 1 FROM entries e WHERE e.tenant_id = ? AND e.id = v.column1) "
                f"ON CONFLICT ({engine.conflict_key(conn, 'entry_id')}) "
                "DO UPDATE SET accesses = entry_salience.accesses + excluded.accesses, "
                "last_access = max(coalesce(entry_salience.last_access, 0), excluded.last_access)",
                (tenant_id, *[x for entry_id, (n, last) in chunk for x in (entry_id, n, last)], tenant_id),
            )


_CHUNK = 64


# ---- the verb ----------------------------------------------------------------

from arbiter.model import IdParams  # noqa: E402
from arbiter.verb import Context, Verb  # noqa: E402


def reinforce_verb(ctx: Context, p: IdParams):
    """Reinforce an active entry: +0.15 salience (up to +0.6), so it surfaces more and retires later."""
    return reinforce(ctx.conn, ctx.viewer, p.id, now=ctx.now)


VERBS: dict[str, Verb] = {"reinforce": Verb(IdParams, reinforce_verb, writes=True)}
