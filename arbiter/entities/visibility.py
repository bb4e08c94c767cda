"""Who may know what of the tenant's entities: the SQL every entity read filters and dates with.

Entities are one namespace per tenant, but an entity exists for a user only
if an entry they see mentions it or an active fact they see names it
(`visible_sql`), and what they learn of it (its times, aliases, mentions,
relations' times, a merge's time) comes from what they see: another user's
private note must be indistinguishable from missing. A viewer who sees the
whole tenant (`whole`) needs no filter. docs/architecture.md, Entities:
Visibility, says why each rule is what it is.
"""

from __future__ import annotations

import apsw

from arbiter.store.users import Viewer


def whole(v: Viewer) -> bool:
    """Whether `v` sees every entity of the tenant (one user, or the daemon's own upkeep): no filter needed."""
    return v.solo or v.everyone


def visible_sql(v: Viewer, x: str = "x") -> str:
    """SQL: the entities row `x` exists for `v`: an entry `v` sees mentions it, or an active fact `v` sees names it."""
    tenant = f"{x}.tenant_id = {int(v.tenant_id)}"
    if whole(v):
        return tenant
    return (
        f"({tenant} AND (EXISTS (SELECT 1 FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id "
        "AND e.id = l.entry_id "
        f"WHERE l.entity_id = {x}.id AND {v.sees('e')})"
        + "".join(f" OR EXISTS ({arm})" for arm in _facts_sql(v, "1", x)) + "))"
    )


def _facts_sql(v: Viewer, select: str, x: str | None = None) -> tuple[str, ...]:
    """SQL: two SELECTs of `select` from the active facts `v` sees that name the entities row `x` (with no `x`, any
    entity), one per end a fact names an entity at, subject and object; `select` says `{id}` for that end's column.

    The one spelling of "an active fact `v` sees names it" for every entity read (`visible_sql`, `dated_sql`,
    `times_sql`, `named_sql`): a fact another user keeps private, or one not active, must not make an entity exist,
    date it or count for `v`. An arm per end, so that each reads its end's index (facts_subject_entity,
    facts_object_entity)."""
    return tuple(
        f"SELECT {select.format(id=f'f.{end}_entity_id')} FROM facts f WHERE "
        f"{'' if x is None else f'f.{end}_entity_id = {x}.id AND '}f.status = 'active' AND {v.sees('f')}"
        for end in ("subject", "object")
    )


def times_sql(v: Viewer, x: str = "x") -> tuple[str, str]:
    """SQL: (created_at, updated_at) of the entities row `x` as `v` may know them.

    A viewer who sees the whole tenant gets the row's own. Anyone else gets
    the times of what they see: created_at is the earliest `recorded_at` of
    an entry they see that mentions it or an active fact they see that names
    it (never before the row's), updated_at the latest (never before that).
    The row's times may be another user's: a private note that created,
    retyped or merged the entity would otherwise say someone wrote about it then.
    """
    if whole(v):
        return f"{x}.created_at", f"{x}.updated_at"
    # Every table of these subqueries names its tenant as a constant: Citus pins a subquery of a SELECT list to one
    # shard only so (correlated, it refused the join: "complex joins are only supported when ...").
    seen = (
        "SELECT e.recorded_at AS seen_at FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id "
        "AND e.id = l.entry_id "
        f"WHERE l.tenant_id = {int(v.tenant_id)} AND l.entity_id = {x}.id AND {v.sees('e')}"
        + "".join(f" UNION ALL {arm}" for arm in _facts_sql(v, "f.recorded_at", x))
    )
    return _dates(x, seen)


def dated_sql(v: Viewer, x: str, first_entry: str, last_entry: str) -> tuple[str, str]:
    """SQL: `times_sql` of the entities row `x` (`v` not the whole tenant), for a read that has already gathered the
    entries `v` sees naming it: `first_entry` and `last_entry` are the earliest and latest of their `recorded_at`
    (NULL if none), so only the facts are read here."""
    facts = " ".join(f"UNION ALL {arm}" for arm in _facts_sql(v, "f.recorded_at", x))
    seen = f"SELECT {first_entry} AS seen_at UNION ALL SELECT {last_entry} {facts}"
    return _dates(x, seen)


def _dates(x: str, seen: str) -> tuple[str, str]:
    """SQL: (created_at, updated_at) of the entities row `x` from the times `seen_at` of `seen` (NULLs ignored): the
    earliest and the latest, neither before the row's created_at (then the row's created_at). The names are
    this module's own: a caller's alias `x` (`relation_times_sql` reads its ends as `s` and `t`) is hidden
    inside the subquery by any alias the subquery declares, and PostgreSQL does not look past it (SQLite does)."""
    return (f"(SELECT max({x}.created_at, coalesce(min(seen_at), {x}.created_at)) FROM ({seen}) seen_times)",
            f"(SELECT max({x}.created_at, coalesce(max(seen_at), {x}.created_at)) FROM ({seen}) seen_times)")


def links_sql(tenant_id: int, n: int) -> str:
    """SQL for a `WITH`: `m(entity_id, entry_id)`, the links of the `n` entities (of `tenant_id`) bound first, in
    entry order. Read
    as `m CROSS JOIN entries e` (m first: SQLite keeps a CROSS JOIN's order), each leaf page of `entries` is read
    once for the run of links into it, not once a link."""
    # One entity's links come in entry order from its index (entity_id, entry_id): copying them out first only costs
    # (`get` of an entity with 4.6K links, in process: 0.85 ms of CPU materialised, 0.68 not).
    how = "MATERIALIZED" if n > 1 else "NOT MATERIALIZED"
    return (f"m(entity_id, entry_id) AS {how} (SELECT entity_id, entry_id FROM entry_entities "
            f"WHERE tenant_id = {int(tenant_id)} AND entity_id IN ({','.join('?' * n)}) ORDER BY entry_id)")


def seen_links_sql(v: Viewer, n: int, *, until: bool = False) -> str:
    """SQL for a `WITH`: `links_sql`'s `m`, then `c(id, n, first, last)`: for each of the `n` entities bound first
    that an entry `v` sees names (recorded by a time bound after the ids, with `until`), how many such entries, and
    the earliest and latest of their `recorded_at`, in one pass over the links (the inputs of `dated_sql`)."""
    recorded = "e.recorded_at <= ? AND " if until else ""
    return (f"{links_sql(v.tenant_id, n)}, c(id, n, first, last) AS (SELECT m.entity_id, count(*), min(e.recorded_at), "
            f"max(e.recorded_at) FROM m CROSS JOIN entries e WHERE e.id = m.entry_id AND {recorded}{v.sees('e')} "
            "GROUP BY m.entity_id)")


def retired_sql(v: Viewer, x: str = "x") -> str:
    """SQL: a merged-away entities row `x`'s `retired_at` as `v` may know it (NULL while it is not merged away).

    A viewer who sees the whole tenant gets the merge's own time. Anyone else
    gets their `updated_at` (`times_sql`): the merge is anyone's act on the
    tenant's names, possibly into an entity only another user's private notes
    name, and its time would say when that user was at work on it.
    """
    if whole(v):
        return f"{x}.retired_at"
    return f"CASE WHEN {x}.retired_at IS NULL THEN NULL ELSE {times_sql(v, x)[1]} END"


def relation_times_sql(v: Viewer, r: str = "r") -> tuple[str, str]:
    """SQL: (created_at, updated_at) of the entity_relations row `r` as `v` may know them.

    A relation is anyone's statement about two entities, shown with its
    weight to whoever sees both; a viewer who does not see the whole tenant
    gets its times never before they knew both ends (`times_sql`'s
    created_at of each): earlier, it would say someone knew of them first.
    """
    if whole(v):
        return f"{r}.created_at", f"{r}.updated_at"
    ends = [f"(SELECT {times_sql(v, e)[0]} FROM entities {e} WHERE {e}.tenant_id = {int(v.tenant_id)} "
            f"AND {e}.id = {r}.{end}_id)"
            for e, end in (("s", "source"), ("t", "target"))]
    created = f"max({r}.created_at, max({ends[0]}, {ends[1]}))"
    return created, f"max({r}.updated_at, {created})"


def names_sql(v: Viewer, n: str = "n") -> tuple[str, str]:
    """SQL: (whether `v` knows the entity_names row `n`, when they first met it) for aliases.

    A viewer who sees the whole tenant knows every name, from its row's time.
    Anyone else knows the entity's display name (one namespace: whoever names
    the entity sees what it is called) and an alias only through an entry they
    see whose link came through it (`entry_entities.name_id`), from the first
    such entry's `recorded_at` (never before the name's row): a spelling only
    another user's private notes wrote, or that came with a merge of an entity
    only those name, is theirs.
    """
    if whole(v):
        return "TRUE", f"{n}.created_at"
    through = (f"FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id AND e.id = l.entry_id "
               f"WHERE l.entity_id = {n}.entity_id AND l.name_id = {n}.id AND {v.sees('e')}")
    return (f"({n}.is_alias = 0 OR EXISTS (SELECT 1 {through}))",
            f"max({n}.created_at, coalesce((SELECT min(e.recorded_at) {through}), {n}.created_at))")


def mentions_sql(v: Viewer, x: str = "x") -> str:
    """SQL: how many entries `v` sees mention the entity row `x` (retired ones too)."""
    if whole(v):
        # The tenant as a constant: Citus pins a subquery of the SELECT list to one shard only so (see core._columns).
        return f"(SELECT count(*) FROM entry_entities l WHERE l.tenant_id = {int(v.tenant_id)} AND l.entity_id = {x}.id)"
    return (f"(SELECT count(*) FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id AND e.id = l.entry_id "
            f"WHERE l.entity_id = {x}.id AND {v.sees('e')})")


def visible(conn: apsw.Connection, v: Viewer, entity_id: int) -> bool:
    """Whether entity `entity_id` exists for `v`."""
    return conn.execute(f"SELECT 1 FROM entities x WHERE x.id = ? AND {visible_sql(v)}", (entity_id,)).fetchone() is not None


def visible_ids(conn: apsw.Connection, v: Viewer, ids) -> set[int]:
    """The entities among `ids` that exist for `v`."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return set()
    return {r[0] for r in conn.execute(
        f"SELECT x.id FROM entities x WHERE x.id IN ({','.join('?' * len(ids))}) AND {visible_sql(v)}", ids
    )}


#: How many of the tenant's newest entries `sees_most` reads (for `count`, the entities list and the web view's entity
#: graph).
SAMPLE = 1000


def named_sql(v: Viewer) -> str:
    """SQL: `visible_sql` from the other side, a row (`id`, `m`) per link of an entry `v` sees (`m` 1) and per
    active fact `v` sees naming an entity (`m` 0): reads every entry of the tenant, and only what `v` sees after."""
    return (
        "SELECT l.entity_id AS id, 1 AS m FROM entries e JOIN entry_entities l ON l.tenant_id = e.tenant_id "
        f"AND l.entry_id = e.id WHERE {v.sees('e')}"
        + "".join(f" UNION ALL {arm}" for arm in _facts_sql(v, "{id}, 0"))
    )


def sees_most(conn: apsw.Connection, v: Viewer) -> bool:
    """Whether `v` sees at least half of the tenant's `SAMPLE` newest entries: which plan is cheaper for them."""
    n, seen = conn.execute(
        f"SELECT count(*), coalesce(sum(CAST({v.sees('e')} AS INTEGER)), 0) FROM (SELECT e.tenant_id, e.scope_id, e.author_id FROM entries e "
        "WHERE e.tenant_id = ? ORDER BY e.id DESC LIMIT ?) e", (v.tenant_id, SAMPLE),
    ).fetchone()
    return seen * 2 >= n
