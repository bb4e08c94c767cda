"""The tag graph: tag counts, co-occurring pairs and shared-tag neighbours over active entries a viewer sees.

Reads `entry_tags`, `tag_counts` and `tag_pairs` (migration m016_tag_scopes,
first built per tenant by m003), which triggers on `entries` keep in step: a
tag counts while its entry is active (`valid_to IS NULL`). They are kept per
visibility scope (`entries.scope_id`: a user's private entries, or a team's),
like the full-text indexes (store/fts.py), and a viewer reads the sums over
the scopes they see whole (`Viewer.scopes`). So a count, a pair, a family or
a cluster never tells anyone of an entry they cannot see, and a single-user
tenant (one scope) reads the same rows it read when they were per tenant.
What a user wrote into a team they have left is seen by them but not counted
(as in search statistics: a subset of what they see, so nothing leaks).

Each scope has a `tag_graph_version` that changes with every change to its
rows, so anything derived from a viewer's graph (clusters, tag families) is
memoized on the versions of the viewer's scopes with `memoized`: teammates
who see the same scopes share one computation.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, TypeVar

import apsw
import msgspec

from arbiter.model import TagCooccurrence, TagCount, TagPair
from arbiter.store import engine, users
from arbiter.store.users import Viewer

T = TypeVar("T")

# Two memoized values (clusters, conventions) per set of scopes seen.
_MEMO_MAX = 256
_memo: OrderedDict[tuple, object] = OrderedDict()
_memo_lock = threading.Lock()


def scopes(conn: apsw.Connection, v: Viewer) -> tuple[int, ...]:
    """The scopes whose tags `v` counts: those it sees whole (every scope of the tenant for upkeep)."""
    if v.everyone:
        return tuple(users.tenant_scopes(conn, v.tenant_id))
    return v.scopes


def _scoped(conn: apsw.Connection, v: Viewer, ids: tuple[int, ...], alias: str = "") -> str:
    """SQL: the tag rows (of table alias `alias`, "" or "b.") of the scopes `ids` of `v`'s tenant.

    On PostgreSQL these rows carry their tenant, and naming it routes the statement to the tenant's node under
    Citus (p005_tenant_keys); SQLite's tag tables have no tenant column, nor need one (a scope is one tenant's).
    """
    pin = f"{alias}tenant_id = {int(v.tenant_id)} AND " if engine.is_postgresql(conn) else ""
    return f"{pin}{alias}scope_id IN {_in(ids)}"


def _limit(limit: int | None) -> tuple[str, tuple]:
    """A LIMIT clause and its binding, none for no limit (SQLite refuses `LIMIT NULL`, PostgreSQL `LIMIT -1`)."""
    return ("", ()) if limit is None else (" LIMIT ?", (limit,))


def _in(ids: tuple[int, ...]) -> str:
    """SQL `IN` list of scope ids (integers of ours, so no bindings; one id is an equality to SQLite)."""
    return "(" + ",".join(str(int(i)) for i in ids) + ")" if ids else "(NULL)"


def version(conn: apsw.Connection, v: Viewer) -> tuple[tuple[int, int], ...]:
    """(scope, version) of each scope `v` counts, sorted: changes whenever a tag `v` sees changes."""
    ids = scopes(conn, v)
    found = dict(conn.execute(f"SELECT scope_id, version FROM tag_graph_version WHERE {_scoped(conn, v, ids)}"))
    return tuple(sorted((s, found.get(s, 0)) for s in ids))


def memoized(conn: apsw.Connection, v: Viewer, what: str, compute: Callable[[], T]) -> T:
    """`compute()` once per (database, scopes and their versions, `what`), then from memory.

    Safe because everything memoized here is a pure function of the tag rows
    of those scopes, and a scope's version moves on every change to them (in
    the same transaction). Keyed by scopes, not by user: viewers who see the
    same scopes see the same graph.
    """
    key = (conn.filename, version(conn, v), what)
    with _memo_lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]  # type: ignore[return-value]
    value = compute()
    with _memo_lock:
        _memo[key] = value
        while len(_memo) > _MEMO_MAX:
            _memo.popitem(last=False)
    return value


def counts(conn: apsw.Connection, v: Viewer, *, limit: int | None = None) -> list[TagCount]:
    """Tags in use by active entries `v` sees, most used first (ties by name)."""
    cut, bound = _limit(limit)
    rows = conn.execute(
        f"SELECT tag, sum(n) AS k FROM tag_counts WHERE {_scoped(conn, v, scopes(conn, v))} "
        f"GROUP BY tag ORDER BY k DESC, tag{cut}",
        bound,
    )
    return [TagCount(tag=t, count=n) for t, n in rows]


def distinct(conn: apsw.Connection, v: Viewer) -> int:
    """How many different tags the active entries `v` sees carry."""
    return conn.execute(
        f"SELECT count(DISTINCT tag) FROM tag_counts WHERE {_scoped(conn, v, scopes(conn, v))}"
    ).fetchone()[0]


def _summed(conn: apsw.Connection, v: Viewer, narrow: str = "") -> str:
    """SQL: `(a, b, k)`, a row per pair of tags sharing active entries `v` sees, `k` how many; `narrow` (" AND ...")
    limits the pairs summed."""
    return f"SELECT a, b, sum(n) AS k FROM tag_pairs WHERE {_scoped(conn, v, scopes(conn, v))}{narrow} GROUP BY a, b"


def pairs(conn: apsw.Connection, v: Viewer, *, tag: str | None = None, limit: int | None = None) -> list[TagPair]:
    """Pairs of tags sharing active entries `v` sees, strongest first; with `tag`, only its pairs."""
    narrow, args = ("", []) if tag is None else (" AND (a = ? OR b = ?)", [tag, tag])
    cut, bound = _limit(limit)
    rows = conn.execute(f"{_summed(conn, v, narrow)} ORDER BY k DESC, a, b{cut}", (*args, *bound))
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def pair_count(conn: apsw.Connection, v: Viewer, *, at_least: int = 1) -> int:
    """How many pairs of tags share at least `at_least` active entries `v` sees."""
    return conn.execute(f"SELECT count(*) FROM ({_summed(conn, v)} HAVING sum(n) >= ?) p", (at_least,)).fetchone()[0]


def strongest_pairs(conn: apsw.Connection, v: Viewer, *, max_pairs: int) -> list[TagPair]:
    """The pairs of the heaviest weight classes that together stay within `max_pairs`, sorted by (a, b).

    A class is never split: ties cannot be broken by anything but name, which
    would make the graph depend on spelling. The heaviest class is always kept.
    """
    summed = _summed(conn, v)
    classes = conn.execute(f"SELECT k, count(*) FROM ({summed}) p GROUP BY k ORDER BY k DESC").fetchall()
    if not classes:
        return []
    floor, total = classes[0][0], 0
    for n, how_many in classes:
        total += how_many
        if total > max_pairs and n != classes[0][0]:
            break
        floor = n
    rows = conn.execute(f"{summed} HAVING sum(n) >= ? ORDER BY a, b", (floor,))
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def pairs_among(conn: apsw.Connection, v: Viewer, tags: list[str]) -> list[TagPair]:
    """The pairs with both tags in `tags`."""
    if not tags:
        return []
    marks = ",".join("?" * len(tags))
    rows = conn.execute(f"{_summed(conn, v, f' AND a IN ({marks}) AND b IN ({marks})')} ORDER BY a, b", (*tags, *tags))
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def majority_counts(conn: apsw.Connection, v: Viewer, group_of: dict[str, int]) -> dict[int, int]:
    """Active entries per group, each entry counted in the group holding most of its tags (ties: the lower group)."""
    if not group_of:
        return {}
    # An object's members: SQLite's json_each reads them, PostgreSQL's jsonb_each_text (as text).
    members = ("SELECT key, CAST(value AS bigint) FROM jsonb_each_text(CAST(?1 AS jsonb))" if engine.is_postgresql(conn)
               else "SELECT key, value FROM json_each(?1)")
    rows = conn.execute(
        f"""
        WITH g(tag, grp) AS ({members}),
        votes AS (
            SELECT et.entry_id AS entry, g.grp AS grp, count(*) AS n
            FROM entry_tags et JOIN g ON g.tag = et.tag
            WHERE {_scoped(conn, v, scopes(conn, v), "et.")}
            GROUP BY et.entry_id, g.grp
        ),
        ranked AS (SELECT grp, row_number() OVER (PARTITION BY entry ORDER BY n DESC, grp) AS r FROM votes)
        SELECT grp, count(*) FROM ranked WHERE r = 1 GROUP BY grp
        """,
        (msgspec.json.encode(group_of).decode(),),
    )
    return dict(rows)


@dataclass(frozen=True)
class Vocabulary:
    """The most used tags, how many different tags there are, the strongest pairs and how many share 2+ entries."""

    tags: tuple[TagCount, ...]
    distinct: int
    pairs: tuple[TagPair, ...]
    paired: int


def vocabulary(conn: apsw.Connection, v: Viewer, *, top: int, strongest: int) -> Vocabulary:
    """The `top` tags and `strongest` pairs `v` sees, and how many tags (memoized: a sum over scopes costs ms)."""
    return memoized(
        conn, v, f"vocabulary {top} {strongest}",
        lambda: Vocabulary(
            tags=tuple(counts(conn, v, limit=top)), distinct=distinct(conn, v),
            pairs=tuple(pairs(conn, v, limit=strongest)), paired=pair_count(conn, v, at_least=2),
        ),
    )


def cooccurrence(conn: apsw.Connection, v: Viewer, *, tag: str | None, limit: int) -> TagCooccurrence:
    """The co-occurrence view: with `tag`, its count and its partners; else the top tags and pairs."""
    if tag is None:
        return TagCooccurrence(tags=counts(conn, v, limit=limit), pairs=pairs(conn, v, limit=limit))
    n = conn.execute(
        f"SELECT coalesce(sum(n), 0) FROM tag_counts WHERE {_scoped(conn, v, scopes(conn, v))} AND tag = ?", (tag,)
    ).fetchone()[0]
    return TagCooccurrence(tags=[TagCount(tag=tag, count=n)], pairs=pairs(conn, v, tag=tag, limit=limit))


def entries_with_any(
    conn: apsw.Connection, v: Viewer, tags: list[str], *, limit: int, before_id: int | None = None
) -> list[int]:
    """Ids of active entries in the scopes `v` sees whole carrying any of `tags`, newest first."""
    if not tags:
        return []
    marks = ",".join("?" * len(tags))
    rows = conn.execute(
        f"SELECT DISTINCT entry_id FROM entry_tags WHERE {_scoped(conn, v, scopes(conn, v))} AND tag IN ({marks}) "
        "AND entry_id < ? ORDER BY entry_id DESC LIMIT ?",
        (*tags, before_id or (1 << 62), limit),
    )
    return [r[0] for r in rows]


def shared_tag_neighbors(conn: apsw.Connection, v: Viewer, entry_id: int, *, k: int) -> list[tuple[int, list[str]]]:
    """The `k` active entries `v` sees sharing the most tags with `entry_id` (rarer shared tags break ties).

    Rarity is a tag's count over what `v` sees, so the order tells nothing
    of entries `v` cannot see.
    """
    counted = _scoped(conn, v, scopes(conn, v), "c.")
    searched = _scoped(conn, v, scopes(conn, v) + (() if v.everyone else v.left), "b.")
    rows = conn.execute(
        f"""
        WITH mine(tag, rarity) AS MATERIALIZED (
            SELECT a.tag, 1.0 / coalesce((SELECT sum(c.n) FROM tag_counts c WHERE {counted} AND c.tag = a.tag), 1)
            FROM (SELECT DISTINCT j.value AS tag FROM entries x, json_each(x.tags) j
                  WHERE x.tenant_id = ?4 AND x.id = ?1 AND x.valid_to IS NULL) a
        )
        SELECT b.entry_id, group_concat(b.tag, ?3), count(*) AS shared, sum(m.rarity) AS rarity
        FROM mine m
        JOIN entry_tags b ON {searched} AND b.tag = m.tag AND b.entry_id != ?1
        JOIN entries e ON e.id = b.entry_id
        WHERE {v.sees()}
        GROUP BY b.entry_id
        ORDER BY shared DESC, rarity DESC, b.entry_id DESC
        LIMIT ?2
        """,
        (entry_id, k, "\x1f", v.tenant_id),
    )
    return [(eid, sorted(tags.split("\x1f"))) for eid, tags, _, _ in rows]


# ---- conventions -------------------------------------------------------------

# `area:api`, `status/open`, `team=core`: a prefix and a value.
_PREFIXED = re.compile(r"^([^:/=]+)([:/=]).+$")
# `p0`, `p1`, `sev2`: letters and a number.
_NUMBERED = re.compile(r"^([A-Za-z]+)\d+$")


def family_of(tag: str) -> str | None:
    """The tag family a tag belongs to by its shape (`area:*`, `p<n>`), or None."""
    if m := _PREFIXED.match(tag):
        return f"{m[1]}{m[2]}*"
    if m := _NUMBERED.match(tag):
        return f"{m[1]}<n>"
    return None


@dataclass(frozen=True)
class Family:
    """Tags sharing a shape (`area:*`); `uses` sums their counts."""

    name: str
    members: tuple[str, ...]
    uses: int


@dataclass(frozen=True)
class FamilyPair:
    """Two families whose tags share entries `together` times."""

    a: Family
    b: Family
    together: int


@dataclass(frozen=True)
class Conventions:
    families: tuple[Family, ...]
    family_pairs: tuple[FamilyPair, ...]


def conventions(conn: apsw.Connection, v: Viewer) -> Conventions:
    """Tag families (two or more tags of one shape) and which families co-occur, over what `v` sees (memoized)."""
    return memoized(conn, v, "conventions", lambda: _conventions(conn, v))


def _conventions(conn: apsw.Connection, v: Viewer) -> Conventions:
    members: dict[str, list[TagCount]] = {}
    for tc in counts(conn, v):
        if (fam := family_of(tc.tag)) is not None:
            members.setdefault(fam, []).append(tc)
    families = {
        name: Family(name=name, members=tuple(t.tag for t in tcs), uses=sum(t.count for t in tcs))
        for name, tcs in members.items()
        if len(tcs) >= 2
    }
    together: Counter[tuple[str, str]] = Counter()
    for p in pairs_among(conn, v, [t for f in families.values() for t in f.members]):
        fa, fb = family_of(p.a), family_of(p.b)
        if fa in families and fb in families and fa != fb:
            together[(min(fa, fb), max(fa, fb))] += p.count
    fam_pairs = [FamilyPair(a=families[a], b=families[b], together=n) for (a, b), n in together.items()]
    fam_pairs.sort(key=lambda fp: (-fp.together, fp.a.name, fp.b.name))
    ordered = sorted(families.values(), key=lambda f: (-f.uses, f.name))
    return Conventions(families=tuple(ordered), family_pairs=tuple(fam_pairs))
