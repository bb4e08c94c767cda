"""Facts in an export file: declared predicates, patch batches, facts with every recorded state, links between facts.

Export reads what the caller sees, as every fact read does (`Viewer.sees`
on the batch's and the fact's author and scope): their batches and those
batches' facts, each fact's sources among the entries they see, and its
entity links only to entities in the same file.

Import replays each fact's recorded history through the database's own
gate instead of writing its final state: the fact goes in as a candidate
(the insert trigger records its first state), then each later state is an
update stamped with its original record time (the update trigger records
it). The `facts_gate` trigger still lets a fact become active only while
its batch is `evaluated` and its finding passes, so an applied batch is
reopened as `evaluated` for the replay and closed as `applied` again in the
same transaction: nobody sees it open, and nothing is disabled. A fact that
was ever active must come from an applied batch with a passing finding, its
states must go candidate -> active (or rejected) once and never back, and it
must become active still current (`valid_to` unset), exactly the shapes
`gate.apply` leaves; anything else is refused with its line number. So an
import recreates what the gate once let through, as it let it through; it
cannot make a fact true that its own recorded history does not show passing
the gate. (It does not judge the facts again against the importing tenant's
own: an import into a tenant that already holds facts in the same scope can
leave two current values of a functional predicate, as the two homes held
them; the next batch on that subject is judged against both.)

The facts' search index (`facts_fts`) and the aspect counts are written by
the triggers as the states replay; aspect scores are recomputed at the end
of each batch; predicates used only by applied facts are registered as
applying them would.
"""

from __future__ import annotations

import msgspec

from arbiter._time import format_time, parse_time
from arbiter.entities import visibility
from arbiter.errors import InvalidParams
from arbiter.facts import aspects, store
from arbiter.facts.model import PASSING
from arbiter.store.users import Viewer
from arbiter.transfer.model import (
    ExportPage,
    ExportPageParams,
    FactBatchRecord,
    FactLinkRecord,
    FactRecord,
    FactStateRecord,
    PredicateRecord,
    Torn,
)

_encode = msgspec.json.Encoder().encode
_slugs = msgspec.json.Decoder(list[str])


def _page(rows: list, build, limit: int) -> ExportPage:
    raw = [msgspec.Raw(_encode(build(r))) for r in rows]
    return ExportPage(records=raw, next=rows[-1][0] if len(rows) == limit else None)


# ---- export ----------------------------------------------------------------------


def predicates_page(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    """Declared predicates (the tenant's schema, seen by all its users), by name; the cursor is an offset."""
    rows = conn.execute(
        # The cast serves both engines, whichever type PostgreSQL's column has (integer or boolean).
        "SELECT name, functional, declared_at FROM predicates WHERE tenant_id = ? AND CAST(declared AS INTEGER) = 1 "
        "ORDER BY name LIMIT ? OFFSET ?", (v.tenant_id, p.limit, p.after),
    ).fetchall()
    raw = [msgspec.Raw(_encode(PredicateRecord(name=n, functional=bool(f), declared_at=format_time(at))))
           for n, f, at in rows]
    return ExportPage(records=raw, next=p.after + len(rows) if len(rows) == p.limit else None)


def batches_page(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT b.id, b.origin, b.status, b.threshold, b.note, b.created_at, b.evaluated_at, b.decided_at, u.name, "
        "t.name FROM patch_batches b LEFT JOIN users u ON u.id = b.author_id LEFT JOIN scopes s ON s.id = b.scope_id "
        f"LEFT JOIN teams t ON t.id = s.team_id WHERE {v.sees('b')} AND b.id > ? ORDER BY b.id LIMIT ?",
        (p.after, p.limit),
    ).fetchall()
    return _page(rows, lambda r: FactBatchRecord(
        id=r[0], origin=r[1], status=r[2], threshold=r[3], note=r[4], created_at=format_time(r[5]),
        evaluated_at=format_time(r[6]), decided_at=format_time(r[7]), author=r[8], team=r[9],
    ), p.limit)


def facts_page(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT f.id, f.batch_id, f.subject, f.predicate, f.object, f.subject_entity_id, f.object_entity_id, "
        "f.valid_from, f.recorded_at, f.changed_at, f.aspect_slugs, f.finding, "
        f"{store.named_sql(v)['reason']}, {store.sources_sql(conn, v)} "
        f"FROM facts f WHERE {v.sees('f')} AND f.id > ? ORDER BY f.id LIMIT ?",
        (p.after, p.limit),
    ).fetchall()
    if not rows:
        return ExportPage(records=[], next=None)
    states: dict[int, list[FactStateRecord]] = {r[0]: [] for r in rows}
    for fid, status, valid_to, confidence, at in conn.execute(
        "SELECT fact_id, status, valid_to, confidence, recorded_at FROM fact_revisions "
        f"WHERE {store.pin(conn, v.tenant_id)}fact_id BETWEEN ? AND ? ORDER BY id", (rows[0][0], rows[-1][0]),
    ):
        if fid in states:
            states[fid].append(FactStateRecord(status=status, valid_to=format_time(valid_to), confidence=confidence,
                                               recorded_at=format_time(at)))
    linked = [e for r in rows for e in (r[5], r[6]) if e is not None]
    # An entity the reader does not see is not in the file: the fact is exported unlinked from it.
    shown = set(linked) if visibility.whole(v) else visibility.visible_ids(conn, v, linked)
    return _page(rows, lambda r: FactRecord(
        id=r[0], batch_id=r[1], subject=r[2], predicate=r[3], object=r[4],
        subject_entity_id=r[5] if r[5] in shown else None, object_entity_id=r[6] if r[6] in shown else None,
        valid_from=format_time(r[7]), recorded_at=format_time(r[8]), changed_at=format_time(r[9]),
        aspects=_slugs.decode(r[10]), finding=r[11], reason=r[12],
        sources=sorted(int(x) for x in r[13].split(",")) if r[13] else [], states=states[r[0]],
    ), p.limit)


def links_page(conn, v: Viewer, p: ExportPageParams) -> ExportPage:
    rows = conn.execute(
        "SELECT f.id, f.supersedes_fact_id, f.finding_fact_id FROM facts f "
        f"WHERE {v.sees('f')} AND (f.supersedes_fact_id IS NOT NULL OR f.finding_fact_id IS NOT NULL) "
        "AND f.id > ? ORDER BY f.id LIMIT ?", (p.after, p.limit),
    ).fetchall()
    named = sorted({x for r in rows for x in r[1:] if x is not None})
    seen = set(named) if (v.solo or v.everyone) or not named else {r[0] for r in conn.execute(
        f"SELECT f.id FROM facts f WHERE f.id IN ({','.join('?' * len(named))}) AND {v.sees('f')}", named)}
    return _page(rows, lambda r: FactLinkRecord(
        id=r[0], supersedes_fact_id=r[1] if r[1] in seen else None, finding_fact_id=r[2] if r[2] in seen else None,
    ), p.limit)


PAGES = {"predicate": predicates_page, "fact_batch": batches_page, "fact": facts_page, "fact_link": links_page}


# ---- checks shared by the client's whole-file check and the daemon ---------------------


def check_states(rec: FactRecord, batch_applied: bool) -> None:
    """Refuse a fact history the gate could not have left (see the module docstring)."""
    first = rec.states[0]
    if first.status != "candidate" or first.recorded_at != rec.recorded_at:
        raise InvalidParams("a fact's first state is its proposal: candidate, recorded at its recorded_at",
                            path="states")
    for before, after in zip(rec.states, rec.states[1:]):
        if before.status != "candidate" and after.status != before.status:
            raise InvalidParams(f"a fact never leaves {before.status}", path="states")
        if (before.status, before.valid_to, before.confidence) == (after.status, after.valid_to, after.confidence):
            raise InvalidParams("two states in a row are the same: a recorded state is a change", path="states")
        if after.status == "active" and before.status == "candidate":
            if not batch_applied:
                raise Torn("an active fact comes only from an applied batch, and its batch is not applied",
                           path="states")
            if rec.finding not in PASSING:
                raise InvalidParams("an active fact comes only from an applied batch, with a passing finding "
                                    "(accept or supersede)", path="states")
            if after.valid_to is not None:
                raise InvalidParams("a fact becomes active current (valid_to unset)", path="states")
    for slug in rec.aspects:
        if slug not in aspects.BY_SLUG:
            raise InvalidParams(f"{slug!r} is not an aspect", path="aspects")


# ---- import ------------------------------------------------------------------------


def _time(value: str | None, path: str) -> int | None:
    return None if value is None else parse_time(value, path=path)


class Loader:
    """One import batch's fact records into a tenant; `finish` closes what the replay opened (same transaction)."""

    def __init__(self, conn, tenant_id: int, people, *, batches, facts, entries, entities, now: int):
        self.conn, self.tenant_id, self.people, self.now = conn, tenant_id, people, now
        self.batches, self.facts, self.entries, self.entities = batches, facts, entries, entities
        self._batch: dict[int, tuple[int, int, str]] = {}  # new batch id -> (author, scope, status)
        self._reopened: set[int] = set()
        self._touched: set[str] = set()
        self._used: set[str] = set()
        self.count = 0

    def add(self, rec, ref) -> None:
        """Write record `rec`; `ref(mapping, old, field, what)` maps an id of the file (raising on a dangling one).

        A refusal is raised without its line: the import says which line, for every record alike."""
        if isinstance(rec, PredicateRecord):
            # A predicate the tenant already has keeps its kind here: a tenant's schema is declared once.
            self.conn.execute(
                "INSERT INTO predicates(tenant_id, name, functional, declared_at, declared) VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (tenant_id, name) DO UPDATE SET declared = 1",
                (self.tenant_id, rec.name, int(rec.functional), parse_time(rec.declared_at, path="declared_at")),
            )
        elif isinstance(rec, FactBatchRecord):
            self._add_batch(rec)
        elif isinstance(rec, FactRecord):
            self._add_fact(rec, ref)
        else:
            self.conn.execute(
                "UPDATE facts SET supersedes_fact_id = ?, finding_fact_id = ? WHERE tenant_id = ? AND id = ?",
                (ref(self.facts, rec.supersedes_fact_id, "supersedes_fact_id", "fact"),
                 ref(self.facts, rec.finding_fact_id, "finding_fact_id", "fact"), self.tenant_id,
                 ref(self.facts, rec.id, "id", "fact")),
            )

    def _add_batch(self, rec: FactBatchRecord) -> None:
        author = self.people.user(rec.author)
        scope = self.people.scope(author, rec.team, count=False)
        new = self.conn.execute(
            "INSERT INTO patch_batches(tenant_id, author_id, scope_id, origin, status, threshold, note, created_at, "
            "evaluated_at, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (self.tenant_id, author, scope, rec.origin, rec.status, rec.threshold, rec.note,
             parse_time(rec.created_at, path="created_at"), _time(rec.evaluated_at, "evaluated_at"),
             _time(rec.decided_at, "decided_at")),
        ).fetchall()[0][0]
        self.batches.fresh[rec.id] = new
        self._batch[new] = (author, scope, rec.status)

    def _batch_of(self, new: int) -> tuple[int, int, str]:
        if new not in self._batch:  # written by an earlier batch of this import
            self._batch[new] = self.conn.execute(
                "SELECT author_id, scope_id, status FROM patch_batches WHERE tenant_id = ? AND id = ?",
                (self.tenant_id, new)).fetchone()
        return self._batch[new]

    def _add_fact(self, rec: FactRecord, ref) -> None:
        batch = ref(self.batches, rec.batch_id, "batch_id", "fact batch")
        author, scope, status = self._batch_of(batch)
        check_states(rec, status == "applied")
        first = rec.states[0]
        # RETURNING, not last_insert_rowid: on PostgreSQL that is the session's last sequence value, which the
        # facts triggers' own inserts move.
        fid = self.conn.execute(
            "INSERT INTO facts(tenant_id, author_id, scope_id, batch_id, subject, subject_key, subject_entity_id, "
            "predicate, object, object_key, object_entity_id, confidence, status, valid_from, valid_to, aspect_slugs, "
            "finding, reason, recorded_at, changed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'candidate', ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (self.tenant_id, author, scope, batch, rec.subject, store.key(rec.subject),
             ref(self.entities, rec.subject_entity_id, "subject_entity_id", "entity"), rec.predicate, rec.object,
             store.key(rec.object), ref(self.entities, rec.object_entity_id, "object_entity_id", "entity"),
             first.confidence, parse_time(rec.valid_from, path="valid_from"), _time(first.valid_to, "valid_to"),
             _encode(rec.aspects).decode(), rec.finding, rec.reason, parse_time(rec.recorded_at, path="recorded_at"),
             parse_time(rec.recorded_at, path="recorded_at")),
        ).fetchall()[0][0]
        self.facts.fresh[rec.id] = fid
        store.add_sources(self.conn, self.tenant_id, fid, [ref(self.entries, e, "sources", "entry") for e in rec.sources])
        previous = first.status
        for state in rec.states[1:]:
            activates = state.status == "active" and previous != "active"
            if activates and status == "applied" and batch not in self._reopened:
                # The gate's own condition, met as the original apply met it: see the module docstring.
                self.conn.execute("UPDATE patch_batches SET status = 'evaluated' WHERE tenant_id = ? AND id = ?",
                                  (self.tenant_id, batch))
                self._reopened.add(batch)
            self.conn.execute(
                "UPDATE facts SET status = ?, valid_to = ?, confidence = ?, changed_at = ? WHERE tenant_id = ? "
                "AND id = ?",
                (state.status, _time(state.valid_to, "valid_to"), state.confidence,
                 parse_time(state.recorded_at, path="recorded_at"), self.tenant_id, fid),
            )
            if activates:  # aspects are materialised as the fact becomes active, as apply does
                self.conn.executemany(
                    "INSERT INTO fact_aspects(fact_id, aspect, tenant_id) VALUES (?, ?, ?)",
                    [(fid, slug, self.tenant_id) for slug in dict.fromkeys(rec.aspects)],
                )
                self._used.add(rec.predicate)
            if previous == "active" or activates:
                self._touched.update(rec.aspects)
            previous = state.status
        self.conn.execute("UPDATE facts SET changed_at = ? WHERE tenant_id = ? AND id = ?",
                          (parse_time(rec.changed_at, path="changed_at"), self.tenant_id, fid))
        self.count += 1

    def finish(self) -> None:
        """Close the batches the replay reopened; register used predicates and rescore touched aspects, as apply does."""
        for batch in self._reopened:
            self.conn.execute("UPDATE patch_batches SET status = 'applied' WHERE tenant_id = ? AND id = ?",
                              (self.tenant_id, batch))
        store.register_used(self.conn, self.tenant_id, self._used, now=self.now)
        aspects.refresh(self.conn, self.tenant_id, self._touched, now=self.now)
