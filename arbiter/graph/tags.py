"""The tag graph: tag counts, co-occurring pairs and shared-tag neighbours over active entries.

Reads `entry_tags`, `tag_counts` and `tag_pairs` (migration m003_tag_graph),
which triggers on `entries` keep in step: a tag counts while its entry is
active (`valid_to IS NULL`). `tag_graph_version` changes with every change to
them, so anything derived from the whole graph (clusters, tag families) is
memoized on it with `memoized`.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable, TypeVar

import apsw

from arbiter.store.users import Viewer
import msgspec

from arbiter.model import TagCooccurrence, TagCount, TagPair

T = TypeVar("T")

_MEMO_MAX = 64
_memo: OrderedDict[tuple, object] = OrderedDict()
_memo_lock = threading.Lock()


def version(conn: apsw.Connection, tenant_id: int) -> int:
    """A number that changes whenever the tenant's active tags change (0 before any tag)."""
    row = conn.execute("SELECT version FROM tag_graph_version WHERE tenant_id = ?", (tenant_id,)).fetchone()
    return row[0] if row else 0


def memoized(conn: apsw.Connection, tenant_id: int, what: str, compute: Callable[[], T]) -> T:
    """`compute()` once per (database, tenant, tag-graph version, `what`), then from memory.

    Safe because everything memoized here is a pure function of the tag graph,
    and the version moves on every change to it (in the same transaction).
    """
    key = (conn.filename, tenant_id, version(conn, tenant_id), what)
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


def counts(conn: apsw.Connection, tenant_id: int, *, limit: int | None = None) -> list[TagCount]:
    """Tags in use by active entries, most used first (ties by name)."""
    rows = conn.execute(
        "SELECT tag, n FROM tag_counts WHERE tenant_id = ? ORDER BY n DESC, tag LIMIT ?",
        (tenant_id, -1 if limit is None else limit),
    )
    return [TagCount(tag=t, count=n) for t, n in rows]


def distinct(conn: apsw.Connection, tenant_id: int) -> int:
    """How many different tags the tenant's active entries carry."""
    return conn.execute("SELECT count(*) FROM tag_counts WHERE tenant_id = ?", (tenant_id,)).fetchone()[0]


def pairs(conn: apsw.Connection, tenant_id: int, *, tag: str | None = None, limit: int | None = None) -> list[TagPair]:
    """Pairs of tags sharing active entries, strongest first; with `tag`, only its pairs."""
    where, args = "tenant_id = ?", [tenant_id]
    if tag is not None:
        where += " AND (a = ? OR b = ?)"
        args += [tag, tag]
    rows = conn.execute(
        f"SELECT a, b, n FROM tag_pairs WHERE {where} ORDER BY n DESC, a, b LIMIT ?",
        (*args, -1 if limit is None else limit),
    )
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def strongest_pairs(conn: apsw.Connection, tenant_id: int, *, max_pairs: int) -> list[TagPair]:
    """The pairs of the heaviest weight classes that together stay within `max_pairs`, sorted by (a, b).

    A class is never split: ties cannot be broken by anything but name, which
    would make the graph depend on spelling. The heaviest class is always kept.
    """
    classes = conn.execute(
        "SELECT n, count(*) FROM tag_pairs WHERE tenant_id = ? GROUP BY n ORDER BY n DESC", (tenant_id,)
    ).fetchall()
    if not classes:
        return []
    floor, total = classes[0][0], 0
    for n, how_many in classes:
        total += how_many
        if total > max_pairs and n != classes[0][0]:
            break
        floor = n
    rows = conn.execute(
        "SELECT a, b, n FROM tag_pairs WHERE tenant_id = ? AND n >= ? ORDER BY a, b", (tenant_id, floor)
    )
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def pairs_among(conn: apsw.Connection, tenant_id: int, tags: list[str]) -> list[TagPair]:
    """The pairs with both tags in `tags`."""
    if not tags:
        return []
    marks = ",".join("?" * len(tags))
    rows = conn.execute(
        f"SELECT a, b, n FROM tag_pairs WHERE tenant_id = ? AND a IN ({marks}) AND b IN ({marks}) ORDER BY a, b",
        (tenant_id, *tags, *tags),
    )
    return [TagPair(a=a, b=b, count=n) for a, b, n in rows]


def majority_counts(conn: apsw.Connection, tenant_id: int, group_of: dict[str, int]) -> dict[int, int]:
    """Active entries per group, each entry counted in the group holding most of its tags (ties: the lower group)."""
    if not group_of:
        return {}
    rows = conn.execute(
        """
        WITH g(tag, grp) AS (SELECT key, value FROM json_each(?1)),
        votes AS (
            SELECT et.entry_id AS entry, g.grp AS grp, count(*) AS n
            FROM entry_tags et JOIN g ON g.tag = et.tag
            WHERE et.tenant_id = ?2
            GROUP BY et.entry_id, g.grp
        ),
        ranked AS (SELECT grp, row_number() OVER (PARTITION BY entry ORDER BY n DESC, grp) AS r FROM votes)
        SELECT grp, count(*) FROM ranked WHERE r = 1 GROUP BY grp
        """,
        (msgspec.json.encode(group_of).decode(), tenant_id),
    )
    return dict(rows)


def cooccurrence(conn: apsw.Connection, tenant_id: int, *, tag: str | None, limit: int) -> TagCooccurrence:
    """The co-occurrence view: with `tag`, its count and its partners; else the top tags and pairs."""
    if tag is None:
        return TagCooccurrence(tags=counts(conn, tenant_id, limit=limit), pairs=pairs(conn, tenant_id, limit=limit))
    row = conn.execute("SELECT n FROM tag_counts WHERE tenant_id = ? AND tag = ?", (tenant_id, tag)).fetchone()
    return TagCooccurrence(
        tags=[TagCount(tag=tag, count=row[0] if row else 0)],
        pairs=pairs(conn, tenant_id, tag=tag, limit=limit),
    )


def entries_with_any(
    conn: apsw.Connection, tenant_id: int, tags: list[str], *, limit: int, before_id: int | None = None
) -> list[int]:
    """Ids of active entries carrying any of `tags`, newest first."""
    if not tags:
        return []
    marks = ",".join("?" * len(tags))
    rows = conn.execute(
        f"SELECT DISTINCT entry_id FROM entry_tags WHERE tenant_id = ? AND tag IN ({marks}) AND entry_id < ? "
        "ORDER BY entry_id DESC LIMIT ?",
        (tenant_id, *tags, before_id or (1 << 62), limit),
    )
    return [r[0] for r in rows]


def shared_tag_neighbors(conn: apsw.Connection, v: Viewer, entry_id: int, *, k: int) -> list[tuple[int, list[str]]]:
    """The `k` active entries `v` sees sharing the most tags with `entry_id` (rarer shared tags break ties)."""
    rows = conn.execute(
        f"""
        SELECT b.entry_id, group_concat(b.tag, char(31)), count(*) AS shared, sum(1.0 / c.n) AS rarity
        FROM entry_tags a
        JOIN entry_tags b ON b.tenant_id = a.tenant_id AND b.tag = a.tag AND b.entry_id != a.entry_id
        JOIN entries e ON e.id = b.entry_id
        JOIN tag_counts c ON c.tenant_id = a.tenant_id AND c.tag = a.tag
        WHERE a.entry_id = ? AND a.tenant_id = ? AND {v.sees()}
        GROUP BY b.entry_id
        ORDER BY shared DESC, rarity DESC, b.entry_id DESC
        LIMIT ?
        """,
        (entry_id, v.tenant_id, k),
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


def conventions(conn: apsw.Connection, tenant_id: int) -> Conventions:
    """Tag families (two or more tags of one shape) and which families co-occur (memoized)."""
    return memoized(conn, tenant_id, "conventions", lambda: _conventions(conn, tenant_id))


def _conventions(conn: apsw.Connection, tenant_id: int) -> Conventions:
    members: dict[str, list[TagCount]] = {}
    for tc in counts(conn, tenant_id):
        if (fam := family_of(tc.tag)) is not None:
            members.setdefault(fam, []).append(tc)
    families = {
        name: Family(name=name, members=tuple(t.tag for t in tcs), uses=sum(t.count for t in tcs))
        for name, tcs in members.items()
        if len(tcs) >= 2
    }
    together: Counter[tuple[str, str]] = Counter()
    for p in pairs_among(conn, tenant_id, [t for f in families.values() for t in f.members]):
        fa, fb = family_of(p.a), family_of(p.b)
        if fa in families and fb in families and fa != fb:
            together[(min(fa, fb), max(fa, fb))] += p.count
    fam_pairs = [FamilyPair(a=families[a], b=families[b], together=n) for (a, b), n in together.items()]
    fam_pairs.sort(key=lambda fp: (-fp.together, fp.a.name, fp.b.name))
    ordered = sorted(families.values(), key=lambda f: (-f.uses, f.name))
    return Conventions(families=tuple(ordered), family_pairs=tuple(fam_pairs))
