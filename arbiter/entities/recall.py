"""What recall asks of entities and salience: the entities a query names, and per-candidate signals.

Kept here, not in `arbiter.recall`, so the pipeline only sees three
factors: `entities` (a candidate mentions an entity the query names, or an
alias of one), `clusters` (it mentions an entity of the same Louvain cluster
as one the query names: associative recall) and `salience`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import apsw

from arbiter.entities import names as nm
from arbiter.entities.visibility import names_sql, visible_sql, whole
from arbiter.entities.extract import canonical, extract
from arbiter.store.users import Viewer

_TOKEN = re.compile(r"[\w+#][\w+#.\-']*[\w+#]|[\w+#]")
#: Query words that never name an entity worth favouring (the recall stopwords cover the rest).
_MAX_NGRAM = 4


@dataclass(frozen=True)
class QueryEntities:
    """The entities a query names, and the Louvain clusters they are in."""

    ids: tuple[int, ...] = ()
    clusters: tuple[int, ...] = ()
    names: tuple[str, ...] = field(default=())


NONE = QueryEntities()


def query_entities(conn: apsw.Connection, v: Viewer, text: str, *, stopwords: frozenset[str]) -> QueryEntities:
    """Entities `v` sees named in `text`: any 1–4 word run (not a lone stopword) equal to a name or alias, any case.

    Clusters only for a viewer who sees the whole tenant: a cluster is drawn
    from every entry's co-mentions, so in a tenant of several users it would
    rank by what others wrote privately.
    """
    words = _TOKEN.findall(text)
    keys: set[str] = {nm.key(f.name) for f in extract(text)}
    for n in range(1, _MAX_NGRAM + 1):
        for i in range(len(words) - n + 1):
            run = words[i:i + n]
            if n == 1 and (run[0].casefold() in stopwords or len(run[0]) < 2):
                continue
            keys.add(nm.key(canonical(" ".join(run))))
    if not keys:
        return NONE
    rows = conn.execute(
        "SELECT DISTINCT n.entity_id, x.name FROM entity_names n JOIN entities x ON x.tenant_id = n.tenant_id "
        "AND x.id = n.entity_id "
        f"WHERE n.tenant_id = ? AND n.key IN ({','.join('?' * len(keys))}) AND {visible_sql(v)} "
        f"AND {names_sql(v)[0]}",
        (v.tenant_id, *keys),
    ).fetchall()
    if not rows:
        return NONE
    ids = tuple(sorted(r[0] for r in rows))
    if not whole(v):
        return QueryEntities(ids=ids, names=tuple(sorted(r[1] for r in rows)))
    clusters = tuple(r[0] for r in conn.execute(
        "SELECT DISTINCT cluster FROM entity_clusters WHERE tenant_id = ? "
        f"AND entity_id IN ({','.join('?' * len(ids))})",
        (v.tenant_id, *ids)
    ))
    return QueryEntities(ids=ids, clusters=clusters, names=tuple(sorted(r[1] for r in rows)))


def linked(conn: apsw.Connection, tenant_id: int, entity_ids: tuple[int, ...], entry_ids: list[int]) -> set[int]:
    """The entries (of `tenant_id`) among `entry_ids` that mention any of `entity_ids`."""
    if not entity_ids or not entry_ids:
        return set()
    return {r[0] for r in conn.execute(
        f"SELECT DISTINCT entry_id FROM entry_entities WHERE tenant_id = ? AND entry_id IN "
        f"({','.join('?' * len(entry_ids))}) AND entity_id IN ({','.join('?' * len(entity_ids))})",
        (tenant_id, *entry_ids, *entity_ids),
    )}


def in_clusters(conn: apsw.Connection, tenant_id: int, clusters: tuple[int, ...], entry_ids: list[int]) -> set[int]:
    """The entries among `entry_ids` that mention an entity of one of `clusters`."""
    if not clusters or not entry_ids:
        return set()
    return {r[0] for r in conn.execute(
        "SELECT DISTINCT l.entry_id FROM entry_entities l JOIN entity_clusters c ON c.tenant_id = l.tenant_id "
        "AND c.entity_id = l.entity_id "
        f"WHERE l.entry_id IN ({','.join('?' * len(entry_ids))}) AND c.tenant_id = ? "
        f"AND c.cluster IN ({','.join('?' * len(clusters))})",
        (*entry_ids, tenant_id, *clusters),
    )}


def saliences(conn: apsw.Connection, tenant_id: int, entry_ids: list[int], *, now: int) -> dict[int, float]:
    """Each entry's (of `tenant_id`) salience at `now`."""
    if not entry_ids:
        return {}
    from arbiter.salience import SALIENCE_SQL

    return dict(conn.execute(
        f"SELECT e.id, {SALIENCE_SQL.format(now='?')} FROM entries e LEFT "
        "JOIN entry_salience s ON s.tenant_id = e.tenant_id AND s.entry_id = e.id "
        f"WHERE e.tenant_id = ? AND e.id IN ({','.join('?' * len(entry_ids))})",
        (now, tenant_id, *entry_ids),
    ))
