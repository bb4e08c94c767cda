"""The boundary invariant (Reflections' eval gate): no verb makes a fact active except through the gate.

Every verb the daemon serves is called, with params built from its own type
(plus a few hand-made ones that reach deep), on a store holding active
facts, an applied batch, a proposed and an evaluated batch of candidates.
After each call, every active fact must have come through `gate.apply`: its
batch applied, its finding passing, its revisions candidate -> active. Only
the gate's entry points may change the set of active facts. A verb added
later is swept automatically.
"""

from __future__ import annotations

import msgspec
import pytest

from arbiter.errors import ArbiterError
from arbiter.facts import gate
from arbiter.facts.model import PASSING
from arbiter.model import RememberParams
from arbiter.store import entries, users
from arbiter.verbs import VERBS
from tests.unit.conftest import execute
from tests.unit.test_facts import T0, US

pytestmark = pytest.mark.both_engines

#: Verbs that may make facts active, and only by applying a batch through the gate.
GATE_VERBS = {"facts_propose", "batch_apply", "fact_extract"}
#: Verbs that may recreate active facts, only as a recorded history shows them passing the gate (an import
#: replays it through the gate's triggers: arbiter/transfer/facts.py). The invariant below holds after them too.
REPLAY_VERBS = {"import_batch"}


def _imported(digest: str, batch_status: str, finding: str) -> dict:
    """An import of one batch with one fact that was proposed, then made active (a history it may or may not have had)."""
    at, later = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
    return {"digest": digest, "lines": 3, "first_line": 2, "records": [
        {"kind": "fact_batch", "id": 1, "origin": "agent", "status": batch_status, "threshold": 0.5, "note": None,
         "created_at": at, "evaluated_at": None, "decided_at": None},
        {"kind": "fact", "id": 1, "batch_id": 1, "subject": "user", "predicate": "works_at", "object": "Forged",
         "subject_entity_id": None, "object_entity_id": None, "valid_from": at, "recorded_at": at,
         "changed_at": later, "aspects": [], "finding": finding, "reason": None, "sources": [],
         "states": [{"status": "candidate", "valid_to": None, "confidence": 1.0, "recorded_at": at},
                    {"status": "active", "valid_to": None, "confidence": 1.0, "recorded_at": later}]},
    ]}

EXTRA_PARAMS = {
    "facts_propose": [
        {"facts": [{"subject": "user", "predicate": "works_at", "object": "Initech"}]},
        {"facts": [{"subject": "user", "predicate": "works_at", "object": "Initech"}], "apply": True},
    ],
    "remember": [{"type": "user", "title": "I work at Hooli now", "content": "user works_at Hooli"}],
    "remember_many": [{"entries": [{"type": "user", "title": "t", "content": "user lives_in Paris"}]}],
    "predicate_declare": [{"name": "works_at", "functional": False}, {"name": "zz_new", "functional": True}],
    "recall": [{"query": "works Acme"}],
    # A history the gate never let through (the batch was only proposed; the finding is a rejection), then one it did.
    "import_batch": [_imported("a" * 64, "proposed", "accept"), _imported("b" * 64, "applied", "contradiction"),
                     _imported("c" * 64, "applied", "accept")],
}


def _value(field, ids: dict[str, int]):
    t = field.type
    mi = msgspec.inspect
    if isinstance(t, mi.UnionType):
        t = next(x for x in t.types if not isinstance(x, mi.NoneType))
    if isinstance(t, mi.IntType):
        return ids.get(field.name, ids["id"])
    if isinstance(t, mi.StrType):
        return "user" if field.name in ("subject", "name") else "x"
    if isinstance(t, mi.LiteralType):
        return t.values[0]
    if isinstance(t, mi.ListType):
        return [ids["id"]] if isinstance(t.item_type, mi.IntType) else []
    if isinstance(t, mi.BoolType):
        return False
    if isinstance(t, mi.FloatType):
        return 0.5
    return None


def _param_sets(name: str, params: type, ids: dict[str, int]) -> list[dict]:
    info = msgspec.inspect.type_info(params)
    generated = {f.name: _value(f, ids) for f in info.fields if f.required}
    sets = [generated] + EXTRA_PARAMS.get(name, [])
    for verb_id in (ids["batch"], ids["evaluated"], ids["candidate"], ids["entry"]):
        if "id" in generated:
            sets.append({**generated, "id": verb_id})
    return sets


def _active(db) -> set[int]:
    return {r[0] for r in db.execute("SELECT id FROM facts WHERE status = 'active'")}


def _assert_all_active_came_through_the_gate(db) -> None:
    bad = db.execute(
        "SELECT f.id, b.status, f.finding FROM facts f JOIN patch_batches b ON b.id = f.batch_id "
        "WHERE f.status = 'active' AND (b.status != 'applied' OR f.finding NOT IN ({}))".format(
            ",".join(f"'{p}'" for p in PASSING)
        )
    ).fetchall()
    assert not bad, bad
    for (fid,) in db.execute("SELECT id FROM facts WHERE status = 'active'").fetchall():
        states = [r[0] for r in db.execute("SELECT status FROM fact_revisions WHERE fact_id = ? ORDER BY id", (fid,))]
        assert states[:2] == ["candidate", "active"], (fid, states)


@pytest.fixture
def seeded(db, tenant):
    def run(verb, params, now):
        return execute(db, tenant, verb, params, now=now)

    with db:
        entry = entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="user", title="job", content="I work at Acme"), now=T0)
    applied = run("facts_propose", {"facts": [{"subject": "user", "predicate": "works_at", "object": "Acme",
                                                "sources": [entry]}], "apply": True}, T0)
    proposed = run("facts_propose", {"facts": [{"subject": "user", "predicate": "works_at", "object": "Globex"},
                                                {"subject": "user", "predicate": "enjoys", "object": "jazz"}]}, T0 + US)
    evaluated = run("facts_propose", {"facts": [{"subject": "user", "predicate": "lives_in", "object": "Oslo"}]},
                    T0 + 2 * US)
    with db:
        gate.evaluate(db, users.first_viewer(db, tenant), evaluated.id, now=T0 + 3 * US)
    return {"id": proposed.facts[0].id, "batch": proposed.id, "evaluated": evaluated.id,
            "candidate": proposed.facts[1].id, "entry": entry, "applied": applied.id}


def test_every_verb_is_swept_and_none_but_the_gate_activates_a_fact(db, tenant, seeded):
    now = T0 + 10 * US
    swept = []
    replayed: set[int] = set()
    for name, verb in VERBS.items():
        for params in _param_sets(name, verb.params, seeded):
            now += US
            before = _active(db)
            try:
                execute(db, tenant, name, msgspec.convert(params, verb.params), now=now)
            except (ArbiterError, msgspec.ValidationError):
                pass  # refused: it must then have changed nothing either
            after = _active(db)
            if name not in GATE_VERBS | REPLAY_VERBS:
                assert after == before, (name, params)
            if name in REPLAY_VERBS:
                replayed |= after - before
            _assert_all_active_came_through_the_gate(db)
            swept.append(name)
    assert set(swept) == set(VERBS)
    # The sweep did reach the gate's own paths: a batch was applied by a verb.
    assert db.execute("SELECT count(*) FROM patch_batches WHERE status = 'applied'").fetchone()[0] > 1
    # Only the history that shows the gate passing it was replayed into an active fact.
    assert [r[0] for r in db.execute(f"SELECT object FROM facts WHERE id IN ({','.join(map(str, replayed))})")] \
        == ["Forged"]
