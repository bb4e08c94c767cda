"""The `changes` verb: versions computed through the caller's Viewer, and the daemon's write count."""

from __future__ import annotations

import hashlib
import threading

import msgspec

from arbiter.changes.model import Changes, ChangesParams, EntryVersion
from arbiter.store import engine, entries
from arbiter.store.users import Viewer
from arbiter.verb import Context, Verb


def _version(*parts) -> int:
    digest = hashlib.blake2b(msgspec.json.encode(parts), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1  # fits a signed 64-bit integer, as every id on the wire does


def entry_versions(conn, v: Viewer, ids: list[int]) -> list[EntryVersion]:
    """A version per entry `v` sees among `ids`: its record time, its scope, and what supersedes it that `v` sees.

    As `superseded_by` does (`entries.superseded_by`): a link from an entry
    `v` cannot see, made or removed, moves nothing of theirs.
    """
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT e.id, coalesce(e.revised_at, e.recorded_at), e.scope_id, "
        f"{entries.superseded_by(v)} "
        f"FROM entries e WHERE e.id IN ({marks}) AND {v.sees('e')} ORDER BY e.id",
        ids,
    ).fetchall()
    return [EntryVersion(id=row[0], version=_version(*row)) for row in rows]


def memory_version(conn, v: Viewer) -> int:
    """A version of everything `v` sees: entries (each write stamps its record time), their scopes, links, facts."""
    row = conn.execute(
        f"SELECT count(*), total(e.id), max(coalesce(e.revised_at, e.recorded_at)), total(e.id * e.scope_id) "
        f"FROM entries e WHERE {v.sees('e')}"
    ).fetchone()
    # A link counts only when both its ends are seen: one to an entry the caller cannot see is as missing.
    links = conn.execute(
        "SELECT count(*), total(r.id) FROM entries e JOIN relations r ON r.tenant_id = e.tenant_id "
        "AND r.source_id = e.id "
        f"JOIN entries t ON t.tenant_id = r.tenant_id AND t.id = r.target_id WHERE {v.sees('e')} AND {v.sees('t')}"
    ).fetchone()
    facts = conn.execute(f"SELECT count(*), total(f.id), max(f.changed_at) FROM facts f WHERE {v.sees('f')}").fetchone()
    return _version(v.user_id, *row, *links, *facts)


class Memo:
    """The daemon's count of committed writes, and each viewer's memory version as of a count.

    The memory version scans what the caller sees (milliseconds at 10K
    entries), while a watcher asks every second: so it is computed again only
    after a write has committed somewhere in the daemon. The count is read
    before the read transaction starts, so a write that commits meanwhile
    makes the next call compute again (read after, it could count a write the
    snapshot does not hold, and keep a stale version until the next write).
    """

    def __init__(self):
        self.writes = 0
        self._lock = threading.Lock()
        self._memory: dict[int, tuple[int, int]] = {}  # user id -> (writes, version)

    def wrote(self) -> None:
        """A write committed (entries, links, facts, people: anything)."""
        with self._lock:
            self.writes += 1

    def memory(self, conn, v: Viewer, writes: int) -> int:
        """`v`'s memory version; `writes` is the count read before the read transaction's snapshot began."""
        known = self._memory.get(v.user_id)
        if known is not None and known[0] == writes:
            return known[1]
        version = memory_version(conn, v)
        with self._lock:
            if len(self._memory) > 4096:  # users come and go; the memo is only a cache
                self._memory.clear()
            self._memory[v.user_id] = (writes, version)
        return version


def changes(ctx: Context, p: ChangesParams) -> Changes:
    """Versions of what the caller sees, for a watcher to compare with the last ones it got.

    One version per entry of `ids` the caller sees (the others are left out,
    as missing ones are), and one of the caller's whole memory: it moves when
    anything they see does (an entry written, changed, retired, restored,
    superseded, shared or unshared, purged; a link from one; a fact). Poll
    only while something watches (`arbiter mcp` asks once a second).
    """
    memo: Memo | None = ctx.services.changes
    if memo is not None and engine.is_postgresql(ctx.conn):
        memo = None  # daemons may share the database: another one's writes never reach this one's count
    writes = memo.writes if memo is not None else 0  # first: before anything here reads (and starts the snapshot)
    v = ctx.viewer
    memory = memo.memory(ctx.conn, v, writes) if memo is not None else memory_version(ctx.conn, v)
    return Changes(entries=entry_versions(ctx.conn, v, sorted(set(p.ids))), memory=memory)


VERBS = {"changes": Verb(ChangesParams, changes, lane="quick")}
