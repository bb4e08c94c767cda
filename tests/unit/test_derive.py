"""The derive queue where several writers share one PostgreSQL database."""

from __future__ import annotations

from arbiter import derive
from arbiter._time import US
from arbiter.model import RememberParams
from arbiter.store import connect, entries, open_database, tenants, users

T0 = 1_800_000_000 * US


def test_two_writers_split_the_queue_rather_than_wait_or_repeat(pg_url):
    """A step takes the rows no other transaction holds: a second daemon's idle writer, stepping while the first
    has not committed, goes on with the next rows at once (a lock wait would fail it, `lock_timeout`)."""
    a, b = open_database(pg_url), connect(pg_url)
    try:
        with a:
            tid, _ = tenants.create_tenant(a, "alice", now=T0)
            n = derive.DERIVERS["sketch"].step + 20
            entries.remember_many(a, users.first_viewer(a, tid), [
                RememberParams(type="context", title=f"t{i}", content=f"note number {i}") for i in range(n)], now=T0)
        a.execute("SET lock_timeout = '5s'")
        b.execute("SET lock_timeout = '5s'")
        while derive.pending(a, names=("entities",)):
            with a:
                derive.step(a, now=T0, urgent=True)
        with a:
            assert derive.step(a, now=T0, urgent=True)  # the first `step` sketch rows, not committed yet
            with b:
                assert derive.step(b, now=T0, urgent=True)  # the rows the first writer does not hold, at once
                assert derive.step(b, now=T0, urgent=True) is False  # and none of the first writer's
            assert 0 < n - derive.pending(b, names=("sketch",)) < 20
        while derive.pending(a, names=("sketch",)):
            with a:
                derive.step(a, now=T0, urgent=True)
        # Each entry's word key beside the fingerprint the store wrote with it: all sketched, none twice (a key
        # is its primary key's).
        assert a.execute("SELECT count(*) FROM (SELECT entry_id FROM entry_sketches GROUP BY entry_id "
                         "HAVING count(*) = 2) x").fetchone()[0] == n
    finally:
        a.close()
        b.close()
