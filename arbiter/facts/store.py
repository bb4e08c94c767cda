"""Facts' SQL: batches, candidates, reads (now, `as_of`, `known_at`), lineage and the predicate registry.

Nothing here makes a fact active: that is `arbiter.facts.gate.apply`, the one
path (and the database's triggers refuse any other).
"""

from __future__ import annotations

import apsw
import msgspec

from arbiter import _time
from arbiter._time import format_time
from arbiter.errors import Conflict, InvalidParams, NotFound
from arbiter.facts.model import (
    Batch,
    BatchSummary,
    Fact,
    FactProposal,
    FactRevision,
    Predicate,
    normalize_predicate,
)
from arbiter.entities import core as entities_core
from arbiter.entities import visibility
from arbiter.entities.extract import canonical
from arbiter.store import engine, relations
from arbiter.store.users import Viewer

_slugs = msgspec.json.Decoder(list[str])

#: Predicates that ship with Arbiter. Functional: one active object per subject.
FUNCTIONAL = frozenset({
    "works_at", "lives_in", "born_in", "born_on", "has_name", "has_age", "has_job_title", "has_role",
    "married_to", "located_in", "nationality", "has_birthday", "reports_to", "current_project",
})
MULTI_VALUED = frozenset({
    "enjoys", "knows", "likes", "dislikes", "has_skill", "studied_at", "speaks", "owns", "member_of",
    "friend_of", "parent_of", "child_of", "sibling_of", "believes", "values", "practices", "has_read",
    "has_watched", "listens_to", "plays", "created", "attended", "visited", "uses", "has_pet", "allergic_to",
})
#: Predicates whose object names a thing of a known type: at apply, such an
#: object is resolved to an entity (created if none), as the seed's "Acme Corp"
#: (organisation) is. Other parts only link to entities that already exist.
OBJECT_TYPES = {
    "works_at": "organisation", "studied_at": "organisation", "member_of": "organisation",
    "lives_in": "location", "born_in": "location", "located_in": "location", "visited": "location",
    "knows": "person", "friend_of": "person", "married_to": "person", "parent_of": "person",
    "child_of": "person", "sibling_of": "person", "reports_to": "person",
}
#: Any predicate starting so is functional (one current preference per subject and topic).
FUNCTIONAL_PREFIXES = ("prefers_",)


def key(text: str) -> str:
    """How parts are matched: whitespace folded, case-folded."""
    return " ".join(text.split()).casefold()


def entity_of(conn: apsw.Connection, v: Viewer, text: str) -> tuple[int, str] | None:
    """(id, type) of the existing entity `v` sees that a part names (by name, alias or normalised form), else None."""
    found = entities_core.lookup(conn, v.tenant_id, text)
    if found is None:
        return None
    # Whether it exists for `v`, and its type, in one statement.
    row = conn.execute(
        f"SELECT x.type FROM entities x WHERE x.id = ? AND {visibility.visible_sql(v)}", (found[0],)
    ).fetchone()
    return None if row is None else (found[0], row[0])


def link_object(conn: apsw.Connection, tenant_id: int, fact_id: int, predicate: str, obj: str, *, now: int) -> None:
    """At apply: the unlinked object of a typed predicate (works_at → organisation...) becomes an entity."""
    # Exact, alias or normalised name, else a new entity: not `resolve`'s
    # trigram step, which costs ~10 ms an object once a tenant has a few
    # thousand entities (bench/facts.py) and would dominate an apply.
    # Spelling variants are joined later with `entity merge`.
    found = entities_core.lookup(conn, tenant_id, obj)
    if found is None and engine.is_postgresql(conn):  # another daemon may be creating it: as `resolve` does
        engine.serialize(conn, engine.ENTITY_NAMES, tenant_id)
        found = entities_core.lookup(conn, tenant_id, obj)
    entity = found[0] if found else entities_core.create(conn, tenant_id, canonical(obj), type=OBJECT_TYPES[predicate], now=now)
    conn.execute("UPDATE facts SET object_entity_id = ? WHERE tenant_id = ? AND id = ?", (entity, tenant_id, fact_id))


# ---- predicates -----------------------------------------------------------------


def is_functional(conn: apsw.Connection, tenant_id: int, name: str) -> bool:
    row = conn.execute("SELECT functional FROM predicates WHERE tenant_id = ? AND name = ?", (tenant_id, name)).fetchone()
    if row is not None:
        return bool(row[0])
    return name in FUNCTIONAL or name.startswith(FUNCTIONAL_PREFIXES)


def _builtin(name: str) -> bool:
    return name in FUNCTIONAL or name in MULTI_VALUED or name.startswith(FUNCTIONAL_PREFIXES)


def declare(conn: apsw.Connection, v: Viewer, name: str, functional: bool, *, now: int) -> Predicate:
    """Declare a predicate once; declaring it again the same way is a no-op, differently a `conflict`."""
    norm = normalize_predicate(name)
    if not norm or not norm[0].isalpha():
        raise InvalidParams.at("name", f"{name!r} has no letters to make a snake_case name of")
    tenant_id = v.tenant_id
    current = conn.execute(
        "SELECT functional FROM predicates WHERE tenant_id = ? AND name = ?", (tenant_id, norm)
    ).fetchone()
    builtin = _builtin(norm)
    known = bool(current[0]) if current else (is_functional(conn, tenant_id, norm) if builtin else None)
    if known is not None and known != functional:
        kind = "functional" if known else "multi-valued"
        raise Conflict(f"predicate {norm} is already declared {kind}; a predicate is declared once", path="name")
    if current is None and not builtin:
        conn.execute(
            "INSERT INTO predicates(tenant_id, name, functional, declared_at) VALUES (?, ?, ?, ?)",
            (tenant_id, norm, int(functional), now),
        )
    elif current is not None:  # declaring what an apply registered makes it the tenant's schema
        conn.execute("UPDATE predicates SET declared = 1 WHERE tenant_id = ? AND name = ?", (tenant_id, norm))
    return _predicate(conn, v, norm)


def register_used(conn: apsw.Connection, tenant_id: int, names: set[str], *, now: int) -> None:
    """A new predicate first applied is registered multi-valued (built-ins need no row), not declared:
    the registry lists it only to whoever sees a fact using it."""
    for name in names:
        if not _builtin(name):
            conn.execute(
                "INSERT INTO predicates(tenant_id, name, functional, declared_at, declared) "
                "VALUES (?, ?, 0, ?, 0) ON CONFLICT DO NOTHING",
                (tenant_id, name, now),
            )


def _active_count(conn: apsw.Connection, v: Viewer, name: str) -> int:
    return conn.execute(
        f"SELECT count(*) FROM facts f WHERE f.tenant_id = ? AND f.status = 'active' AND f.valid_to IS NULL "
        f"AND f.predicate = ? AND {v.sees('f')}",
        (v.tenant_id, name),
    ).fetchone()[0]


def _predicate(conn: apsw.Connection, v: Viewer, name: str) -> Predicate:
    return Predicate(
        name=name, functional=is_functional(conn, v.tenant_id, name), builtin=_builtin(name),
        active_facts=_active_count(conn, v, name),
    )


def predicates(conn: apsw.Connection, v: Viewer) -> list[Predicate]:
    """Built-in and declared predicates, and those a fact `v` sees uses, with how many current facts `v` sees; by name.

    A declaration is the tenant's schema, seen by all its users; a predicate
    only ever registered by applying a fact is as private as the facts using it.
    """
    declared = [r[0] for r in conn.execute(
        f"SELECT p.name FROM predicates p WHERE p.tenant_id = ? AND (p.declared != 0 OR EXISTS ("
        f"SELECT 1 FROM facts f WHERE f.tenant_id = p.tenant_id AND f.predicate = p.name AND f.status = 'active' "
        f"AND {v.sees('f')}))",
        (v.tenant_id,),
    )]
    names = sorted(set(declared) | FUNCTIONAL | MULTI_VALUED)
    return [_predicate(conn, v, n) for n in names]


# ---- batches and candidates --------------------------------------------------------


def create_batch(
    conn: apsw.Connection, v: Viewer, *, scope: int, origin: str, threshold: float, note: str | None, now: int
) -> int:
    """A new batch by `v`'s user in `scope` (their private scope, or a team's they are in): its facts are seen as
    an entry of that author and scope would be."""
    return conn.execute(
        "INSERT INTO patch_batches(tenant_id, author_id, scope_id, origin, status, threshold, note, created_at) "
        "VALUES (?, ?, ?, ?, 'proposed', ?, ?, ?) RETURNING id",
        (v.tenant_id, v.user_id, scope, origin, threshold, note, now),
    ).fetchone()[0]


def add_candidates(
    conn: apsw.Connection,
    v: Viewer,
    batch_id: int,
    items: list[tuple[FactProposal, list[str], int | None, int | None]],
    *,
    now: int,
) -> list[int]:
    """Insert candidates (each with its staged aspect slugs and entity ids) and their source links; ids in order.

    Every source and time is checked before anything is written; a source
    must be an entry the proposer sees.
    """
    tenant_id = v.tenant_id
    author, scope = conn.execute("SELECT author_id, scope_id FROM patch_batches WHERE tenant_id = ? AND id = ?",
                                 (tenant_id, batch_id)).fetchone()
    rows = []
    for i, (p, slugs, subject_entity, object_entity) in enumerate(items):
        relations.require_entries(conn, v, list(dict.fromkeys(p.sources)), f"facts[{i}].sources")
        valid_from = _time.valid_from(p.valid_from, now=now, path=f"facts[{i}].valid_from",
                                      what="a fact", plan="a plan for later is a fact that holds now")
        rows.append((p, slugs, subject_entity, object_entity, valid_from))
    ids = []
    for p, slugs, subject_entity, object_entity, valid_from in rows:
        # RETURNING, not last_insert_rowid: on PostgreSQL the trigger's fact_revisions row draws a sequence after it.
        fid = conn.execute(
            "INSERT INTO facts(tenant_id, author_id, scope_id, batch_id, subject, subject_key, subject_entity_id, "
            "predicate, object, object_key, object_entity_id, confidence, status, valid_from, aspect_slugs, "
            "recorded_at, changed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'candidate', ?, ?, ?, ?) RETURNING id",
            (tenant_id, author, scope, batch_id, p.subject, key(p.subject), subject_entity, p.predicate, p.object, key(p.object),
             object_entity, p.confidence, valid_from, msgspec.json.encode(slugs).decode(), now, now),
        ).fetchone()[0]
        ids.append(fid)
        add_sources(conn, tenant_id, fid, dict.fromkeys(p.sources))
    return ids


def pin(conn: apsw.Connection, tenant_id: int, alias: str = "") -> str:
    """SQL `tenant_id = N AND ` for a table SQLite keys by fact alone (fact_sources, fact_revisions; `alias` "" or
    "s."): PostgreSQL's rows carry their tenant, and naming it keeps the statement on its node under Citus
    (p005_tenant_keys); SQLite's have no such column, nor need one (a fact is one tenant's)."""
    return f"{alias}tenant_id = {int(tenant_id)} AND " if engine.is_postgresql(conn) else ""


def add_sources(conn: apsw.Connection, tenant_id: int, fact_id: int, entry_ids) -> None:
    """Record entries a fact rests on (one already recorded stays once).

    PostgreSQL's fact_sources names its tenant (p005_tenant_keys: Citus routes an INSERT by it); SQLite's has
    no such column, nor needs one (a fact is one tenant's).
    """
    pg = engine.is_postgresql(conn)
    conn.executemany(
        f"INSERT INTO fact_sources({'tenant_id, ' if pg else ''}fact_id, entry_id) VALUES ({'?, ' if pg else ''}?, ?) "
        "ON CONFLICT DO NOTHING",
        [((tenant_id,) if pg else ()) + (fact_id, entry_id) for entry_id in entry_ids],
    )


def batch_row(conn: apsw.Connection, v: Viewer, batch_id: int) -> tuple:
    """(id, origin, status, threshold, created_at, evaluated_at, decided_at, note, scope_id); one `v` does not see
    (another tenant's, another user's private one, a team's they are not in) is not_found."""
    row = conn.execute(
        "SELECT b.id, b.origin, b.status, b.threshold, b.created_at, b.evaluated_at, b.decided_at, b.note, b.scope_id "
        f"FROM patch_batches b WHERE b.id = ? AND {v.sees('b')}",
        (batch_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"batch {batch_id} not found", path="id")
    return row


def _counts(conn: apsw.Connection, where: str, binds: tuple) -> dict[str, int]:
    return {
        s: n for s, n in conn.execute(f"SELECT status, count(*) FROM facts WHERE {where} GROUP BY status", binds)
    }


def _who(conn: apsw.Connection, tenant_id: int, batch_id: int) -> tuple[str | None, str | None]:
    """(author name, team name or None) of a batch."""
    return conn.execute(
        "SELECT u.name, t.name FROM patch_batches b LEFT JOIN users u ON u.id = b.author_id "
        "LEFT JOIN scopes s ON s.id = b.scope_id LEFT JOIN teams t ON t.id = s.team_id WHERE b.tenant_id = ? "
        "AND b.id = ?",
        (tenant_id, batch_id),
    ).fetchone()


def batch(conn: apsw.Connection, v: Viewer, batch_id: int, *, note: str | None = None, changed: bool = True) -> Batch:
    bid, origin, status, threshold, created, evaluated, decided, _, _ = batch_row(conn, v, batch_id)
    facts = _facts(conn, v, "f.batch_id = ?", (bid,), order="f.id")
    author, team = _who(conn, v.tenant_id, bid)
    return Batch(
        id=bid, origin=origin, status=status, threshold=threshold, created_at=format_time(created),
        evaluated_at=format_time(evaluated), decided_at=format_time(decided), facts=facts,
        counts=_counts(conn, "tenant_id = ? AND batch_id = ?", (v.tenant_id, bid)), note=note, changed=changed, author=author, team=team,
    )


def batches(conn: apsw.Connection, v: Viewer, *, status: str | None, limit: int) -> list[BatchSummary]:
    """Batches `v` sees, newest first, with their facts' counts by status."""
    sql = f"SELECT b.id, b.origin, b.status, b.created_at FROM patch_batches b WHERE b.tenant_id = ? AND {v.sees('b')}"
    binds: tuple = (v.tenant_id,)
    if status is not None:
        sql += " AND b.status = ?"
        binds += (status,)
    out = []
    for bid, origin, st, created in conn.execute(sql + " ORDER BY b.id DESC LIMIT ?", binds + (limit,)).fetchall():
        counts = _counts(conn, "tenant_id = ? AND batch_id = ?", (v.tenant_id, bid))
        author, team = _who(conn, v.tenant_id, bid)
        out.append(BatchSummary(
            id=bid, origin=origin, status=st, created_at=format_time(created), facts=sum(counts.values()),
            counts=counts, author=author, team=team,
        ))
    return out


# ---- reads ------------------------------------------------------------------------

_COLUMNS = (
    "f.id, f.subject, f.predicate, f.object, f.subject_entity_id, f.object_entity_id, {confidence}, {status}, "
    "f.valid_from, {valid_to}, {supersedes}, f.batch_id, {sources}, "
    "f.aspect_slugs, f.finding, {reason}, f.recorded_at"
)
#: The reason shown for a finding about a fact the reader does not see (its id and object are in the stored one).
UNSEEN_REASON = "judged against a fact you do not see"


def named_sql(v: Viewer, fact: str = "f") -> dict[str, str]:
    """SQL for the columns that name another fact: shown only if `v` sees that fact.

    A team fact's author who has left the team still sees it, but a member
    who applied its batch since may have had it supersede a team fact.
    """
    if v.solo or v.everyone:
        return {"supersedes": f"{fact}.supersedes_fact_id", "reason": f"{fact}.reason"}
    seen = "EXISTS (SELECT 1 FROM facts g WHERE g.id = {col} AND " + v.sees("g") + ")"
    return {
        "supersedes": f"CASE WHEN {seen.format(col=f'{fact}.supersedes_fact_id')} THEN {fact}.supersedes_fact_id END",
        "reason": f"CASE WHEN {fact}.finding_fact_id IS NULL OR {seen.format(col=f'{fact}.finding_fact_id')} "
                  f"THEN {fact}.reason ELSE '{UNSEEN_REASON}' END",
    }


def same_tenant(conn: apsw.Connection, alias: str, fact: str) -> str:
    """SQL `alias.tenant_id = fact.tenant_id AND ` joining a table SQLite keys by fact alone to its fact, where
    its rows carry their tenant (PostgreSQL: as `pin`)."""
    return f"{alias}.tenant_id = {fact}.tenant_id AND " if engine.is_postgresql(conn) else ""


def sources_sql(conn: apsw.Connection, v: Viewer, fact: str = "f") -> str:
    """SQL: a fact's source entry ids that `v` sees, comma-separated (a teammate's fact may cite their private entry)."""
    # `pin`, not `same_tenant`: Citus pins a subquery of the SELECT list to one shard only by a constant (correlated,
    # the join to entries was refused: "complex joins are only supported when ...").
    if v.solo or v.everyone:
        return (f"(SELECT group_concat(entry_id) FROM fact_sources s "
                f"WHERE {pin(conn, v.tenant_id, 's.')}s.fact_id = {fact}.id)")
    return (f"(SELECT group_concat(s.entry_id) FROM fact_sources s JOIN entries e ON e.id = s.entry_id "
            f"WHERE {pin(conn, v.tenant_id, 's.')}s.fact_id = {fact}.id AND {v.sees('e')})")


def _now_columns(conn: apsw.Connection, v: Viewer) -> str:
    return _COLUMNS.format(confidence="f.confidence", status="f.status", valid_to="f.valid_to",
                           sources=sources_sql(conn, v), **named_sql(v))


def _known_columns(conn: apsw.Connection, v: Viewer) -> str:
    """The state recorded at a record-time instant: the latest revision at or before it."""
    return _COLUMNS.format(confidence="r.confidence", status="r.status", valid_to="r.valid_to",
                           sources=sources_sql(conn, v), **named_sql(v))


def known_join(conn: apsw.Connection, tenant_id: int) -> str:
    """SQL: ` JOIN fact_revisions r`, each fact `f` (of `tenant_id`) and its latest revision recorded by `:known`."""
    # The subquery names its tenant (`pin`): correlated with `f`, Citus refused its join ("complex joins ...").
    return (f" JOIN fact_revisions r ON {same_tenant(conn, 'r', 'f')}r.id = (SELECT max(x.id) FROM fact_revisions x "
            f"WHERE {pin(conn, tenant_id, 'x.')}x.fact_id = f.id AND x.recorded_at <= :known)")


def _fact(row: tuple) -> Fact:
    (fid, subject, predicate, obj, sent, oent, conf, status, vfrom, vto, sup, bid, sources, slugs, finding, reason,
     recorded) = row
    return Fact(
        id=fid, subject=subject, predicate=predicate, object=obj, subject_entity_id=sent, object_entity_id=oent,
        confidence=conf, status=status, valid_from=format_time(vfrom), valid_to=format_time(vto),
        supersedes_fact_id=sup, batch_id=bid,
        sources=sorted(int(x) for x in sources.split(",")) if sources else [],
        aspects=_slugs.decode(slugs), finding=finding, reason=reason, recorded_at=format_time(recorded),
    )


def _facts(conn: apsw.Connection, v: Viewer, where: str, binds, *, order: str = "f.id",
           limit: int | None = None) -> list[Fact]:
    sql = f"SELECT {_now_columns(conn, v)} FROM facts f WHERE ({where}) AND {v.sees('f')} ORDER BY {order}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [_fact(r) for r in conn.execute(sql, binds)]


def read(
    conn: apsw.Connection,
    v: Viewer,
    *,
    subject: str | None = None,
    predicate: str | None = None,
    status: str = "active",
    as_of: int | None = None,
    known_at: int | None = None,
    limit: int = 100,
) -> list[Fact]:
    """Facts of a status (default active), true now or at `as_of` (valid time), as recorded at `known_at`.

    Only active facts have a validity window; `as_of` on candidate or rejected
    facts is refused. With `known_at`, a fact counts only if it was recorded by
    then, in the state it had then. Only facts `v` sees, by today's visibility.
    """
    if as_of is not None and status != "active":
        raise InvalidParams.at("as_of", "only active facts have a validity window")
    binds: dict = {"t": v.tenant_id, "status": status}
    if known_at is None:
        cols, join, st, vto = _now_columns(conn, v), "", "f.status", "f.valid_to"
    else:
        cols, join, st, vto = _known_columns(conn, v), known_join(conn, v.tenant_id), "r.status", "r.valid_to"
        binds["known"] = known_at
    where = [f"f.tenant_id = :t AND {st} = :status", v.sees("f")]
    if status == "active" and known_at is None:
        where.append("f.status = 'active'")  # lets the partial index serve the read
    if subject is not None:
        where.append("f.subject_key = :s")
        binds["s"] = key(subject)
    if predicate is not None:
        where.append("f.predicate = :p")
        binds["p"] = normalize_predicate(predicate)
    if status == "active":
        if as_of is None:
            where.append(f"{vto} IS NULL")
        else:
            where.append(f"f.valid_from <= :as_of AND ({vto} IS NULL OR {vto} > :as_of)")
            binds["as_of"] = as_of
    sql = (
        f"SELECT {cols} FROM facts f{join} WHERE {' AND '.join(where)} "
        f"ORDER BY f.subject_key, f.predicate, f.valid_from, f.id LIMIT {int(limit)}"
    )
    return [_fact(r) for r in conn.execute(sql, binds)]


def get(conn: apsw.Connection, v: Viewer, fact_id: int) -> Fact:
    found = _facts(conn, v, "f.id = ?", (fact_id,))
    if not found:
        raise NotFound(f"fact {fact_id} not found", path="id")
    return found[0]


def lineage(conn: apsw.Connection, v: Viewer, fact_id: int) -> tuple[list[Fact], list[FactRevision]]:
    """The supersession chain through a fact, both ways, oldest first, and every revision of its facts (those `v` sees)."""
    get(conn, v, fact_id)
    ids = [r[0] for r in conn.execute(
        """
        WITH RECURSIVE up(id) AS (
            SELECT ?1 UNION SELECT f.supersedes_fact_id FROM facts f JOIN up ON f.id = up.id
                WHERE f.tenant_id = ?2 AND f.supersedes_fact_id IS NOT NULL
        ), down(id) AS (
            SELECT ?1 UNION SELECT f.id FROM facts f JOIN down ON f.supersedes_fact_id = down.id WHERE f.tenant_id = ?2
        )
        SELECT id FROM up UNION SELECT id FROM down
        """,
        (fact_id, v.tenant_id),
    )]
    facts = _facts(conn, v, f"f.id IN ({','.join('?' * len(ids))})", ids, order="f.valid_from, f.id")
    ids = [f.id for f in facts]
    marks = ",".join("?" * len(ids))
    revisions = [
        FactRevision(fact_id=fid, status=st, valid_to=format_time(vto), confidence=conf, recorded_at=format_time(at))
        for fid, st, vto, conf, at in conn.execute(
            "SELECT fact_id, status, valid_to, confidence, recorded_at FROM fact_revisions "
            f"WHERE {pin(conn, v.tenant_id)}fact_id IN ({marks}) "
            # Record time, then fact: states one apply recorded at one instant come in an order an import can
            # reproduce (it replays each fact's states in turn; transfer/facts.py).
            "ORDER BY recorded_at, fact_id, id",
            ids,
        )
    ]
    return facts, revisions
