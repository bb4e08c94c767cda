"""The evaluation gate: the only path from a candidate fact to active truth.

    propose (candidates in a batch) -> evaluate (findings per fact) -> apply (one transaction)

`evaluate` records a finding and reason on every candidate without changing
what is true. `apply` re-evaluates against active truth as it stands at that
moment (it may have moved since the batch was evaluated), then, in the
caller's one transaction, makes the passing facts active, retires what they
supersede, reinforces what they duplicate, materialises staged aspects and
rejects the rest. The database's triggers (migrations m009 and m017) refuse
any other way for a fact to become active.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import msgspec

from arbiter.errors import Conflict, Forbidden
from arbiter.facts import aspects, store
from arbiter.facts.model import PASSING
from arbiter.store import engine
from arbiter.store.users import Viewer

#: A candidate contradicting an active functional fact supersedes it only if
#: it is newer and at least this confident; otherwise it is rejected.
SUPERSEDE_CONFIDENCE = 0.7

_slugs = msgspec.json.Decoder(list[str])


@dataclass
class _Candidate:
    id: int
    subject: str
    subject_key: str
    predicate: str
    object: str
    object_key: str
    confidence: float
    valid_from: int
    object_entity_id: int | None
    aspect_slugs: str  # staged, as JSON
    finding: str = ""
    target: int | None = None  # the fact it supersedes, reinforces or contradicts
    reason: str = ""


@dataclass
class _Current:
    """The fact a candidate is compared with: active already, or passing earlier in this batch."""

    id: int
    object: str
    object_key: str
    valid_from: int
    active: bool


def _candidates(conn: apsw.Connection, tenant_id: int, batch_id: int) -> list[_Candidate]:
    return [
        _Candidate(*row)
        for row in conn.execute(
            "SELECT id, subject, subject_key, predicate, object, object_key, confidence, valid_from, object_entity_id, "
            "aspect_slugs FROM facts "
            "WHERE tenant_id = ? AND batch_id = ? AND status = 'candidate' ORDER BY valid_from, id",
            (tenant_id, batch_id),
        )
    ]


def _active(conn: apsw.Connection, tenant_id: int, scope: int, subject_key: str, predicate: str) -> list[_Current]:
    # The batch's own scope only, which whoever runs the gate sees whole
    # (`_judged_scope`), so no finding names a fact they cannot see; and a
    # private belief never retires (nor swallows, as a duplicate) a team's
    # fact, nor a team's fact a private one.
    return [
        _Current(fid, obj, okey, vfrom, True)
        for fid, obj, okey, vfrom in conn.execute(
            "SELECT id, object, object_key, valid_from FROM facts WHERE tenant_id = ? AND subject_key = ? "
            "AND predicate = ? AND valid_to IS NULL AND status = 'active' AND scope_id = ? ORDER BY valid_from, id",
            (tenant_id, subject_key, predicate, scope),
        )
    ]


def _judge(conn: apsw.Connection, tenant_id: int, batch_id: int, threshold: float, scope: int) -> list[_Candidate]:
    """Findings for every candidate of a batch, in valid-time order, against the active facts of its scope; writes nothing."""
    cands = _candidates(conn, tenant_id, batch_id)
    current: dict[tuple[str, str], list[_Current]] = {}
    functional: dict[str, bool] = {}
    for c in cands:
        if c.subject_key == c.object_key:
            c.finding, c.reason = "malformed", "subject and object are the same"
            continue
        if c.confidence < threshold:
            c.finding, c.reason = "low_confidence", f"confidence {c.confidence:g} is below the threshold {threshold:g}"
            continue
        slot = (c.subject_key, c.predicate)
        if slot not in current:
            current[slot] = _active(conn, tenant_id, scope, *slot)
        if c.predicate not in functional:
            functional[c.predicate] = store.is_functional(conn, tenant_id, c.predicate)
        known = current[slot]
        same = next((k for k in known if k.object_key == c.object_key), None)
        if same is not None:
            c.finding, c.target = "reinforce", same.id
            c.reason = f"duplicate of {'active fact' if same.active else 'candidate'} #{same.id}: reinforces it"
            continue
        if functional[c.predicate] and known:
            old = known[-1]
            newer = c.valid_from > old.valid_from or (c.valid_from == old.valid_from and old.active)
            if newer and c.confidence >= SUPERSEDE_CONFIDENCE:
                c.finding, c.target = "supersede", old.id
                c.reason = f"{c.predicate} is functional: supersedes #{old.id} ({old.object})"
                known[:] = [_Current(c.id, c.object, c.object_key, c.valid_from, False)]
            else:
                why = "is not newer" if not newer else f"confidence {c.confidence:g} < {SUPERSEDE_CONFIDENCE:g}"
                c.finding, c.target = "contradiction", old.id
                c.reason = f"contradicts #{old.id} ({c.predicate} {old.object}) and {why}, so it cannot supersede it"
            continue
        c.finding, c.reason = "accept", "passes"
        known.append(_Current(c.id, c.object, c.object_key, c.valid_from, False))
    return cands


def _record(conn: apsw.Connection, tenant_id: int, cands: list[_Candidate]) -> None:
    conn.executemany(
        "UPDATE facts SET finding = ?, finding_fact_id = ?, reason = ? WHERE tenant_id = ? AND id = ?",
        [(c.finding, c.target, c.reason, tenant_id, c.id) for c in cands],
    )


def _judged_scope(conn: apsw.Connection, v: Viewer, batch_id: int, scope: int) -> int:
    """The batch's scope, if `v` sees all of it; Forbidden for its author after they left its team.

    The gate reads the scope's active facts, and its findings name them and
    retire them: someone who left the team no longer sees them.
    """
    if v.solo or v.everyone or scope in v.scopes:
        return scope
    team = conn.execute("SELECT t.name FROM scopes s JOIN teams t ON t.id = s.team_id WHERE s.id = ?",
                        (scope,)).fetchone()[0]
    raise Forbidden(f"batch {batch_id} is for team {team!r}, which you left: its members evaluate and apply it "
                    "(you may reject it, or propose its facts again)", path="id")


def evaluate(conn: apsw.Connection, v: Viewer, batch_id: int, *, now: int) -> str:
    """Record findings on a proposed or evaluated batch `v` sees; returns the batch's status before.

    Changes nothing that is true; a decided (applied or rejected) batch is left as it is.
    """
    engine.serialize(conn, engine.FACT_GATE, v.tenant_id)
    _, _, status, threshold, *_, scope = store.batch_row(conn, v, batch_id)
    if status in ("proposed", "evaluated"):
        _record(conn, v.tenant_id, _judge(conn, v.tenant_id, batch_id, threshold, _judged_scope(conn, v, batch_id, scope)))
        conn.execute("UPDATE patch_batches SET status = 'evaluated', evaluated_at = ? WHERE tenant_id = ? AND id = ?",
                     (now, v.tenant_id, batch_id))
    return status


def apply(conn: apsw.Connection, v: Viewer, batch_id: int, *, now: int) -> bool:
    """Evaluate (again) and apply a batch `v` sees in the caller's transaction; False if it was already applied.

    A rejected batch cannot be applied (`conflict`). Where daemons share a database, one applies at a time in a
    tenant: two batches superseding one functional fact would otherwise each retire it and both stand.
    """
    tenant_id = v.tenant_id
    engine.serialize(conn, engine.FACT_GATE, tenant_id)
    _, _, status, threshold, *_, scope = store.batch_row(conn, v, batch_id)
    if status == "applied":
        return False
    if status == "rejected":
        raise Conflict(f"batch {batch_id} was rejected; propose its facts again in a new batch", path="id")
    cands = _judge(conn, tenant_id, batch_id, threshold, _judged_scope(conn, v, batch_id, scope))
    _record(conn, tenant_id, cands)
    conn.execute("UPDATE patch_batches SET status = 'evaluated', evaluated_at = ? WHERE tenant_id = ? AND id = ?",
                 (now, tenant_id, batch_id))
    touched: set[str] = set()
    used: set[str] = set()
    for c in cands:
        if c.finding in PASSING:
            if c.finding == "supersede":
                conn.execute(
                    "UPDATE facts SET valid_to = max(valid_from, ?), changed_at = ? WHERE tenant_id = ? AND id = ? "
                    "AND valid_to IS NULL",
                    (c.valid_from, now, tenant_id, c.target),
                )
                touched.update(_aspects_of(conn, tenant_id, c.target))
            if c.object_entity_id is None and c.predicate in store.OBJECT_TYPES:
                store.link_object(conn, tenant_id, c.id, c.predicate, c.object, now=now)
            conn.execute(
                "UPDATE facts SET status = 'active', supersedes_fact_id = ?, changed_at = ? WHERE tenant_id = ? "
                "AND id = ?",
                (c.target if c.finding == "supersede" else None, now, tenant_id, c.id),
            )
            slugs = _slugs.decode(c.aspect_slugs)
            conn.executemany(
                "INSERT INTO fact_aspects(fact_id, aspect, tenant_id) VALUES (?, ?, ?)",
                [(c.id, s, tenant_id) for s in slugs],
            )
            touched.update(slugs)
            used.add(c.predicate)
            continue
        if c.finding == "reinforce":
            conn.execute(
                "UPDATE facts SET confidence = max(confidence, ?), changed_at = ? WHERE tenant_id = ? AND id = ?",
                (c.confidence, now, tenant_id, c.target),
            )
            store.add_sources(conn, tenant_id, c.target, [r[0] for r in conn.execute(
                f"SELECT entry_id FROM fact_sources WHERE {store.pin(conn, tenant_id)}fact_id = ?", (c.id,))])
            touched.update(_aspects_of(conn, tenant_id, c.target))
        conn.execute("UPDATE facts SET status = 'rejected', changed_at = ? WHERE tenant_id = ? AND id = ?",
                     (now, tenant_id, c.id))
    conn.execute("UPDATE patch_batches SET status = 'applied', decided_at = ? WHERE tenant_id = ? AND id = ?",
                 (now, tenant_id, batch_id))
    store.register_used(conn, tenant_id, used, now=now)
    aspects.refresh(conn, tenant_id, touched, now=now)
    return True


def reject(conn: apsw.Connection, v: Viewer, batch_id: int, *, now: int) -> bool:
    """Reject a whole batch `v` sees: its candidates become rejected. False if it already was; an applied batch is a `conflict`."""
    engine.serialize(conn, engine.FACT_GATE, v.tenant_id)
    _, _, status, *_ = store.batch_row(conn, v, batch_id)
    if status == "rejected":
        return False
    if status == "applied":
        raise Conflict(f"batch {batch_id} was applied; supersede its facts with a new batch instead", path="id")
    conn.execute(
        "UPDATE facts SET status = 'rejected', finding = 'batch_rejected', reason = 'the batch was rejected', "
        "changed_at = ? WHERE tenant_id = ? AND batch_id = ? AND status = 'candidate'",
        (now, v.tenant_id, batch_id),
    )
    conn.execute("UPDATE patch_batches SET status = 'rejected', decided_at = ? WHERE tenant_id = ? AND id = ?",
                 (now, v.tenant_id, batch_id))
    return True


def _aspects_of(conn: apsw.Connection, tenant_id: int, fact_id: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT aspect FROM fact_aspects WHERE tenant_id = ? AND fact_id = ?",
                                       (tenant_id, fact_id))]
