"""Topic clusters: Louvain communities of the tag co-occurrence graph, with LLM names.

Nodes are tags, edge weights the number of active entries two tags share.
Louvain (networkx's, step for step, in graph/louvain.py: importing networkx
would keep 15-20 MB resident in the daemon) runs with a fixed seed over edges
added in sorted order, so the same data always gives the same clusters. Clusters of fewer than three
tags are dropped; the rest are ordered by size, then internal weight.

The graph keeps the strongest pairs, whole weight classes at a time, up to
MAX_EDGES (in a large memory, tags that met once are noise). An entry belongs
to the cluster holding most of its tags (ties: the earlier cluster). Cluster
shapes are memoized on the versions of the viewer's scopes (graph/tags.py).

Clusters are of what the viewer sees: the graph is the sum of the tag rows of
the scopes they see whole. Teammates who see the same scopes get the same
clusters, one vocabulary for the team.

Names come from the advisor (one call per cluster, the fast model), shown
the cluster's tags and the titles of up to 20 of its newest entries the
viewer sees. A name is cached for 24 hours per (tenant, sha256 of the sorted
member tags, the scopes those titles came from), and a cached name is used
only by a viewer who sees all of those scopes whole: it was made from
nothing they cannot see, and a teammate reuses a name made from the team's
titles. When the advisor fails, or there is none, the name is the top three
tags joined by `/`, and that fallback is never cached.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw

from arbiter._time import US
from arbiter.errors import NotFound
from arbiter.graph import tags as tag_graph
from arbiter.graph.louvain import louvain_communities
from arbiter.model import Entry, TopicCluster
from arbiter.store import entries
from arbiter.store.users import Viewer

if TYPE_CHECKING:
    from arbiter.advisor import Advisor

SEED = 20260423
MIN_TAGS = 3
# Louvain's cost grows with edges; a large memory keeps its strongest pairs,
# whole weight classes at a time (pairs seen once go first). See bench/briefing.py.
MAX_EDGES = 1000
NAME_TTL_US = 24 * 3600 * US
TITLES_FOR_NAMING = 20
NAMING_WORKERS = 4


@dataclass(frozen=True)
class Shape:
    """A cluster before naming: its tags (most used first), internal weight and entry count."""

    key: str
    tags: tuple[str, ...]
    weight: int
    entries: int


@dataclass(frozen=True)
class NameRow:
    """A fresh advisor name, to be written to the cache by `save_names`; `scopes`: those its titles came from."""

    key: str
    name: str
    description: str
    named_at: int
    scopes: tuple[int, ...] = ()


def cluster_key(tags: list[str] | tuple[str, ...]) -> str:
    """sha256 (hex) of the sorted member tags, NUL-separated: the cluster's stable id."""
    return hashlib.sha256("\x00".join(sorted(tags)).encode()).hexdigest()


def shapes(conn: apsw.Connection, v: Viewer) -> tuple[Shape, ...]:
    """The clusters of what `v` sees, largest first (memoized on the versions of its scopes)."""
    return tag_graph.memoized(conn, v, "clusters", lambda: _compute(conn, v))


def _compute(conn: apsw.Connection, v: Viewer) -> tuple[Shape, ...]:
    edges = tag_graph.strongest_pairs(conn, v, max_pairs=MAX_EDGES)
    if not edges:
        return ()
    use = {t.tag: t.count for t in tag_graph.counts(conn, v)}
    communities = [
        c for c in louvain_communities(((p.a, p.b, p.count) for p in edges), seed=SEED) if len(c) >= MIN_TAGS
    ]
    home = {tag: i for i, community in enumerate(communities) for tag in community}
    weight: Counter[int] = Counter()
    for p in edges:
        if (i := home.get(p.a)) is not None and i == home.get(p.b):
            weight[i] += p.count
    found = sorted(
        (
            (tuple(sorted(community, key=lambda t: (-use.get(t, 0), t))), weight[i])
            for i, community in enumerate(communities)
        ),
        key=lambda c: (-len(c[0]), -c[1], c[0]),
    )
    sizes = tag_graph.majority_counts(conn, v, {tag: i for i, (members, _) in enumerate(found) for tag in members})
    return tuple(
        Shape(key=cluster_key(members), tags=members, weight=w, entries=sizes.get(i, 0))
        for i, (members, w) in enumerate(found)
    )


def assign(votes: Counter) -> int:
    """The cluster an entry belongs to, given how many of its tags fall in each."""
    return min(votes, key=lambda i: (-votes[i], i))


def of_tags(tags: list[str], where: dict[str, int]) -> int | None:
    """`assign` from an entry's tags (`where`: tag -> cluster index); None if none is in a cluster."""
    hits = [where[t] for t in tags if t in where]
    return assign(Counter(hits)) if hits else None


def shape_of_tag(conn: apsw.Connection, v: Viewer, tag: str) -> tuple[int, Shape]:
    """(index, shape) of the cluster holding `tag` among `v`'s, or NotFound."""
    for i, shape in enumerate(shapes(conn, v)):
        if tag in shape.tags:
            return i, shape
    raise NotFound(
        f"tag {tag!r} is in no topic cluster (a cluster needs at least {MIN_TAGS} co-occurring tags "
        "on active entries)",
        path="tag",
    )


def cluster_entries(conn: apsw.Connection, v: Viewer, tag: str, *, limit: int) -> tuple[Shape, list[Entry]]:
    """The cluster of `tag` and its newest active entries `v` sees (those the cluster holds most of whose tags)."""
    index, shape = shape_of_tag(conn, v, tag)
    all_shapes = shapes(conn, v)
    where = {t: i for i, s in enumerate(all_shapes) for t in s.tags}
    out: list[Entry] = []
    before = None
    while len(out) < limit:
        ids = tag_graph.entries_with_any(conn, v, list(shape.tags), limit=limit * 4, before_id=before)
        if not ids:
            break
        for e in entries.get_any(conn, v, ids):
            if of_tags(e.tags, where) == index:
                out.append(e)
                if len(out) == limit:
                    break
        before = ids[-1]
    return shape, out


# ---- names -------------------------------------------------------------------


def _fallback(shape: Shape, note: str) -> TopicCluster:
    return TopicCluster(
        key=shape.key,
        name="/".join(shape.tags[:3]),
        description=f"Entries tagged {', '.join(shape.tags[:3])}" + (" and related tags." if len(shape.tags) > 3 else "."),
        named_by="fallback",
        tags=list(shape.tags),
        entries=shape.entries,
        weight=shape.weight,
        note=note,
    )


def _scopes_text(ids) -> str:
    return " ".join(str(int(i)) for i in sorted(set(ids)))


def cached_names(conn: apsw.Connection, v: Viewer, keys: list[str], *, now: int) -> dict[str, tuple[str, str]]:
    """Names cached for these cluster keys, younger than 24 hours at `now`, made only from scopes `v` sees whole.

    Of several such names for one key, the newest.
    """
    if not keys:
        return {}
    seen = set(tag_graph.scopes(conn, v))
    marks = ",".join("?" * len(keys))
    rows = conn.execute(
        f"SELECT tags_sha256, scopes, name, description FROM cluster_names "
        f"WHERE tenant_id = ? AND tags_sha256 IN ({marks}) AND named_at > ? ORDER BY named_at",
        (v.tenant_id, *(bytes.fromhex(k) for k in keys), now - NAME_TTL_US),
    )
    return {
        key.hex(): (name, desc) for key, made_from, name, desc in rows if {int(s) for s in made_from.split()} <= seen
    }


def save_names(conn: apsw.Connection, tenant_id: int, rows: list[NameRow]) -> None:
    """Write fresh names to the cache (replacing expired ones); the caller owns the transaction."""
    for r in rows:
        conn.execute(
            "INSERT INTO cluster_names(tenant_id, tags_sha256, scopes, name, description, named_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, tags_sha256, scopes) DO UPDATE SET "
            "name = excluded.name, description = excluded.description, named_at = excluded.named_at",
            (tenant_id, bytes.fromhex(r.key), _scopes_text(r.scopes), r.name, r.description, r.named_at),
        )


def _titles(conn: apsw.Connection, v: Viewer, shape: Shape) -> tuple[list[str], tuple[int, ...]]:
    """Titles of the cluster's newest entries `v` sees whole, and the scopes they are in (what a name is made from)."""
    ids = tag_graph.entries_with_any(conn, v, list(shape.tags), limit=TITLES_FOR_NAMING)
    if not ids:
        return [], ()
    rows = conn.execute(
        f"SELECT e.title, e.scope_id FROM entries e WHERE e.id IN ({','.join('?' * len(ids))}) AND {v.sees()} "
        "ORDER BY e.id DESC",
        ids,
    ).fetchall()
    return [title for title, _ in rows], tuple(sorted({scope for _, scope in rows}))


def name(
    conn: apsw.Connection,
    v: Viewer,
    found: list[Shape] | tuple[Shape, ...],
    *,
    advisor: Advisor | None,
    now: int,
    deadline: float | None = None,
) -> tuple[list[TopicCluster], list[NameRow]]:
    """Name clusters from the cache, else the advisor (in parallel), else the fallback.

    Returns the named clusters in the order given and the fresh names the
    caller should `save_names` (the fallback is never among them). `now` is
    the cache clock (microseconds); `deadline` bounds the advisor calls
    (`time.monotonic()` seconds).
    """
    from arbiter.advisor import AdvisorError

    cached = cached_names(conn, v, [s.key for s in found], now=now)
    named: dict[str, TopicCluster] = {}
    for s in found:
        if s.key in cached:
            n, d = cached[s.key]
            named[s.key] = TopicCluster(
                key=s.key, name=n, description=d, named_by="cache", tags=list(s.tags), entries=s.entries, weight=s.weight
            )
    todo = [s for s in found if s.key not in named]
    fresh: list[NameRow] = []
    if todo and advisor is None:
        for s in todo:
            named[s.key] = _fallback(s, "no LLM configured (set ANTHROPIC_API_KEY for the daemon)")
    elif todo:
        titles = {s.key: _titles(conn, v, s) for s in todo}

        def ask(s: Shape):
            try:
                return advisor.name_cluster(list(s.tags), titles[s.key][0], deadline=deadline)
            except AdvisorError as e:
                return e

        with ThreadPoolExecutor(min(NAMING_WORKERS, len(todo)), thread_name_prefix="arbiter-naming") as pool:
            answers = list(pool.map(ask, todo))
        for s, answer in zip(todo, answers):
            if isinstance(answer, AdvisorError):
                named[s.key] = _fallback(s, f"naming failed: {answer.reason}")
                continue
            n, d = answer
            fresh.append(NameRow(key=s.key, name=n, description=d, named_at=now, scopes=titles[s.key][1]))
            named[s.key] = TopicCluster(
                key=s.key, name=n, description=d, named_by="advisor", tags=list(s.tags), entries=s.entries,
                weight=s.weight,
            )
    return [named[s.key] for s in found], fresh


def naming_deadline(budget_s: float) -> float:
    """A `deadline` for `name`, `budget_s` seconds from now."""
    return time.monotonic() + budget_s
