"""Salience, reinforcement, the access log, duplicates and maintenance, on a real SQLite file and PostgreSQL."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, strategies as st

from arbiter import duplicates, maintenance, salience, verbs
from arbiter._time import US
from arbiter import derive
from arbiter.entities import clusters
from arbiter.errors import NotFound
from arbiter.model import RememberParams
from arbiter.cli.salience import maintenance_line
from arbiter.store import engine, entries, tenants, users
from arbiter.server.runner import Caller, Runner
from tests.unit.conftest import execute

pytestmark = pytest.mark.both_engines

NOW = 1795168800 * US
DAY = 86_400 * US


def run(db, tenant, verb: str, *, now=NOW, user_id=None, **params):
    return execute(db, tenant, verb, params, now=now, user_id=user_id)


def remember(db, tenant, content: str, *, now=NOW, title="Note", **kw):
    return run(db, tenant, "remember", now=now, type="project", title=title, content=content, **kw)


# ---- what salience must do, whatever its numbers -------------------------------------


unit = st.floats(min_value=0, max_value=1)
days = st.floats(min_value=0, max_value=3000)
counts = st.integers(min_value=0, max_value=10_000)


@st.composite
def states(draw, permanent: bool | None = None):
    """The keyword arguments of one entry's salience: its own, its age and its reads."""
    return {"initial": draw(unit), "decay_rate": draw(st.floats(min_value=0, max_value=0.1)),
            "age_days": draw(days), "days_since_access": draw(days), "accesses": draw(counts),
            "reinforcements": draw(st.integers(0, 100)),
            "permanent": draw(st.booleans()) if permanent is None else permanent}


def more(state: dict, field: str, by) -> dict:
    return {**state, field: state[field] + by}


@given(states(), st.floats(min_value=0, max_value=3000))
def test_an_older_entry_never_weighs_more_and_a_recent_read_never_less(state, later):
    now = salience.salience(**state)
    assert 0.0 <= now <= 1.0
    assert salience.salience(**more(state, "age_days", later)) <= now
    assert salience.salience(**more(state, "days_since_access", later)) <= now


@given(states(), st.integers(1, 10_000))
def test_reads_and_reinforcements_never_lower_it(state, n):
    now = salience.salience(**state)
    assert salience.salience(**more(state, "accesses", n)) >= now
    assert salience.salience(**more(state, "reinforcements", n)) >= now


def test_a_little_valued_entry_rises_with_each_read_and_reinforcement_until_capped():
    state = {"initial": 0.1, "decay_rate": salience.DEFAULT_DECAY_RATE, "age_days": 0.0, "days_since_access": 0.0,
             "accesses": 0, "reinforcements": 0, "permanent": False}
    base = salience.salience(**state)
    assert salience.salience(**more(state, "accesses", 1)) > base
    assert salience.salience(**more(state, "reinforcements", 1)) > base
    # Capped: reinforcing forever does not take a little-valued entry to full weight.
    capped = salience.salience(**more(state, "reinforcements", 100))
    assert capped == salience.salience(**more(state, "reinforcements", 1000)) < 1.0


@given(states(permanent=True), days, counts)
def test_a_permanent_entry_never_decays(state, age, accesses):
    now = salience.salience(**state)
    assert now >= state["initial"]
    assert salience.salience(**{**state, "age_days": age, "days_since_access": age, "accesses": accesses}) == now


@given(states(permanent=False), st.floats(min_value=0.5, max_value=0.99))
def test_without_reads_every_entry_fades_to_nothing(state, initial):
    state = {**state, "initial": initial, "accesses": 0, "reinforcements": 0,
             "decay_rate": salience.DEFAULT_DECAY_RATE}
    fresh = salience.salience(**{**state, "age_days": 0.0, "days_since_access": 0.0})
    assert fresh >= initial
    faded = salience.salience(**{**state, "age_days": 3000.0, "days_since_access": 3000.0})
    assert faded <= maintenance.DEFAULT_MIN_SALIENCE  # so maintenance retires it


def test_remember_sets_salience_and_reinforce_adds(db, tenant):
    plain = remember(db, tenant, "plain")
    assert salience.info(db, tenant, plain.id, now=NOW).salience == pytest.approx(0.6)  # 0.5 + recency 0.1
    high = remember(db, tenant, "high", salience=0.9, permanent=True)
    info = run(db, tenant, "reinforce", id=high.id)
    assert (info.initial, info.permanent, info.reinforcements, info.salience) == (0.9, True, 1, 0.9)
    assert run(db, tenant, "reinforce", id=plain.id).salience == pytest.approx(0.75)


def test_maintenance_speaks_of_a_wal_only_where_it_checkpoints_one(db, tenant):
    """SQLite's WAL is the file's, checkpointed by `maintain`; PostgreSQL's is the server's: its report says
    nothing of one, rather than "not fully checkpointed" after every run."""
    remember(db, tenant, "A note to keep")
    report = run(db, tenant, "maintain")
    stored = run(db, tenant, "status").last_maintenance
    line = maintenance_line(report)
    if engine.is_postgresql(db):
        assert report.wal_checkpointed is None and stored.wal_checkpointed is None and "WAL" not in line
    else:
        assert report.wal_checkpointed is True and stored.wal_checkpointed is True and "WAL checkpointed" in line


def test_reinforce_refuses_missing_retired_and_foreign(db, tenant):
    gone = remember(db, tenant, "gone")
    run(db, tenant, "forget", id=gone.id)
    for entry_id in (gone.id, 999):
        with pytest.raises(NotFound):
            run(db, tenant, "reinforce", id=entry_id)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"type": "project", "title": "t", "content": "c", "salience": 1.5}, RememberParams)


def test_accesses_count_and_log(db, tenant):
    e = remember(db, tenant, "read me")
    with db:
        salience.record_accesses(db, [(tenant, e.id, "get", NOW + DAY), (tenant, e.id, "recall", NOW + 2 * DAY)])
    info = salience.info(db, tenant, e.id, now=NOW + 2 * DAY)
    assert (info.access_count, info.last_access) == (2, "2026-11-22T10:00:00.000000Z")
    assert db.execute("SELECT verb FROM access_log ORDER BY id").fetchall() == [("get",), ("recall",)]


def test_a_batch_of_many_entries_and_two_tenants_counts_each_entry_and_skips_one_purged(db, tenant):
    with db:
        other = tenants.create_tenant(db, "bob", now=NOW)[0]
    mine = [remember(db, tenant, f"note {i}").id for i in range(70)]  # more than one statement's worth
    theirs = remember(db, other, "theirs").id
    gone = mine.pop()
    with db:
        entries.purge(db, users.first_viewer(db, tenant), gone)
    batch = [(tenant, i, "recall", NOW + DAY) for i in [*mine, gone]] + [(tenant, mine[0], "get", NOW + 2 * DAY),
                                                                     (other, theirs, "recall", NOW + 3 * DAY)]
    with db:
        salience.record_accesses(db, batch)
    counts = {i: (salience.info(db, tenant, i, now=NOW).access_count) for i in mine}
    assert counts == {i: 2 if i == mine[0] else 1 for i in mine}
    assert salience.info(db, tenant, mine[0], now=NOW).last_access == "2026-11-22T10:00:00.000000Z"
    assert salience.info(db, other, theirs, now=NOW).access_count == 1
    assert db.execute("SELECT count(*) FROM entry_salience WHERE entry_id = ?", (gone,)).fetchone()[0] == 0


def test_reads_collect_their_accesses(db, tenant):
    e = remember(db, tenant, "the quarterly roadmap")
    runner, caller = Runner(db, lambda lane: db, clock=lambda: NOW), Caller(tenant, "alice", None)
    runner.execute(verbs.VERBS["get"], msgspec.convert({"id": e.id}, verbs.VERBS["get"].params), caller)
    runner.execute(verbs.VERBS["recall"], msgspec.convert({"query": "roadmap"}, verbs.VERBS["recall"].params), caller)
    assert list(runner.accesses) == [(tenant, e.id, "get", NOW), (tenant, e.id, "recall", NOW)]


def test_the_sql_salience_is_the_python_one(db):
    """What SQLite calls in Python, PostgreSQL computes in SQL (p001_core.sql): the two agree."""
    rows = [(None, None, None, None, None, None, NOW - 3 * DAY), (0.9, 0.01, 1, 0, None, 0, NOW - 900 * DAY),
            (0.2, 0.05, 0, 7, NOW - DAY, 2, NOW - 40 * DAY), (0.5, 0.01, 0, 0, 0, 9, NOW),
            (1.0, 0.0, 0, 1000, NOW, 1, NOW - DAY), (0.0, 0.5, 0, 3, NOW - 2 * DAY, 0, NOW - 400 * DAY)]
    for row in rows:
        got = db.execute("SELECT arbiter_salience(?, ?, ?, ?, ?, ?, ?, ?)", (*row, NOW)).fetchone()[0]
        assert got == pytest.approx(salience.sql_salience(*row, NOW), abs=1e-12), row


def test_reinforcements_and_reads_add_up_in_the_store(db, tenant):
    v = users.first_viewer(db, tenant)
    with db:
        eid = entries.remember(db, v, RememberParams(type="project", title="Note", content="read me"), now=NOW)
        salience.set_initial(db, tenant, eid, initial=0.3, permanent=False, now=NOW)
        salience.reinforce(db, v, eid, now=NOW)
        salience.reinforce(db, v, eid, now=NOW)
        salience.record_accesses(db, [(tenant, eid, "get", NOW + DAY)])
        salience.record_accesses(db, [(tenant, eid, "recall", NOW + 2 * DAY), (tenant, eid, "get", NOW)])
    info = salience.info(db, tenant, eid, now=NOW + 2 * DAY)
    assert (info.initial, info.reinforcements, info.access_count, info.last_access) == (
        0.3, 2, 3, "2026-11-22T10:00:00.000000Z")
    assert info.salience == pytest.approx(round(salience.sql_salience(0.3, None, 0, 3, NOW + 2 * DAY, 2, NOW,
                                                                      NOW + 2 * DAY), 6))


# ---- duplicates --------------------------------------------------------------------


def test_identical_content_is_not_written_twice(db, tenant):
    first = remember(db, tenant, "Deploys  happen on  Fridays.", entities=["Apollo"])
    again = remember(db, tenant, "deploys happen on fridays.")
    assert again.duplicate_of == first.id and again.id == first.id
    assert [m.name for m in again.entities] == ["Apollo"]
    assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 1
    other_type = run(db, tenant, "remember", type="user", title="Note", content="Deploys happen on Fridays.")
    assert other_type.duplicate_of is None
    forced = remember(db, tenant, "Deploys happen on Fridays.", allow_duplicate=True)
    assert forced.duplicate_of is None and forced.id != first.id and first.id in forced.similar


def test_a_retired_entry_is_no_duplicate(db, tenant):
    first = remember(db, tenant, "Deploys happen on Fridays.")
    run(db, tenant, "forget", id=first.id)
    assert remember(db, tenant, "Deploys happen on Fridays.").duplicate_of is None


def test_near_duplicates_come_back_as_similar(db, tenant):
    text = "The staging database is rebuilt every night at two from the production snapshot taken at midnight"
    a = remember(db, tenant, text)
    near = remember(db, tenant, text.replace("two", "three"))
    assert near.similar == [a.id]
    assert remember(db, tenant, "Lunch is at noon on Tuesdays in the big room").similar == []


def test_a_pair_the_index_proposes_is_similar_only_from_seven_tenths_of_its_word_pairs(db, tenant):
    text = ("the staging database is rebuilt every night at two from the production snapshot taken at midnight "
            "by the backup job on the old cluster")
    loose = ("the staging database is rebuilt every night at blue from the production copy blue at new noon "
             "the noon job on the old cluster")
    mine, theirs = duplicates.words(text), duplicates.words(loose)
    assert set(duplicates.bands(mine)) & set(duplicates.bands(theirs))  # a candidate of each other
    assert 0.3 < duplicates.jaccard(mine, theirs) < 0.7
    remember(db, tenant, text)
    assert remember(db, tenant, loose).similar == []


def test_similar_entries_come_most_similar_first(db, tenant):
    text = ("the staging database is rebuilt every night at two from the production snapshot taken at midnight "
            "by the backup job on the old cluster")
    close = remember(db, tenant, text.replace("old cluster", "new cluster"))  # 0.84 of the word pairs shared
    far = remember(db, tenant, text.replace("two", "three").replace("midnight", "noon"))  # 0.70
    assert remember(db, tenant, text).similar == [close.id, far.id]


def test_remember_compares_a_bulk_writes_entries_before_the_idle_writer_indexes_them(db, tenant):
    text = "The staging database is rebuilt every night at two from the production snapshot taken at midnight"
    bulk = [{"type": "project", "title": "Note", "content": text}]
    filler = [{"type": "context", "title": f"n{i}", "content": f"filler {i}"} for i in range(duplicates.PENDING_COMPARED)]
    first = run(db, tenant, "remember_many", entries=bulk).ids[0]
    assert derive.pending(db, tenant, names=("sketch",)) == 1  # its band keys are not written yet
    near = remember(db, tenant, text.replace("two", "three"))
    assert near.similar == [first] and near.note is None
    assert remember(db, tenant, text.upper()).duplicate_of == first
    # Past the newest PENDING_COMPARED unindexed entries, the answer says how many it did not compare.
    run(db, tenant, "remember_many", entries=filler + [{"type": "context", "title": "x", "content": "y z"}])
    partial = remember(db, tenant, text.replace("two", "four"))
    assert partial.similar == [near.id] and "not compared with 2 entries a bulk write just made" in partial.note
    with db:
        derive.drain(db, now=NOW)
    assert remember(db, tenant, "unrelated words").note is None  # all indexed: nothing left out
    assert duplicates.unindexed(db, users.first_viewer(db, tenant)) == []
    assert remember(db, tenant, f"  {text} ").duplicate_of == first  # now through its key


def test_another_users_unindexed_bulk_write_is_not_counted_or_compared(db, tenant):
    with db:
        ann, ben = (users.create_user(db, tenant, name, now=NOW)[0] for name in ("ann", "ben"))
    text = "The staging database is rebuilt every night at two from the production snapshot taken at midnight"
    private = [{"type": "project", "title": f"n{i}", "content": f"{text} {i}"}
               for i in range(duplicates.PENDING_COMPARED + 2)]
    run(db, tenant, "remember_many", user_id=ben, entries=private)
    mine = run(db, tenant, "remember", user_id=ann, type="project", title="Mine", content=text)
    assert (mine.similar, mine.duplicate_of, mine.note) == ([], None, None)
    theirs = run(db, tenant, "remember", user_id=ben, type="project", title="Theirs", content=text)
    assert theirs.similar and "not compared with 2 entries" in theirs.note


def test_a_retired_entry_is_not_similar(db, tenant):
    text = "The staging database is rebuilt every night at two from the production snapshot taken at midnight"
    old = remember(db, tenant, text)
    run(db, tenant, "forget", id=old.id)
    assert remember(db, tenant, text.replace("two", "three")).similar == []


def test_the_same_text_under_another_title_is_another_entry(db, tenant):
    rota = remember(db, tenant, "Alice is on call this week", title="Rota")
    plan = remember(db, tenant, "alice is on call  this week", title="Deploy plan")
    assert plan.duplicate_of is None and plan.id != rota.id and plan.similar == [rota.id]
    assert remember(db, tenant, "Alice is on call this week", title=" deploy PLAN").duplicate_of == plan.id


def test_update_moves_the_fingerprint(db, tenant):
    e = remember(db, tenant, "old words")
    run(db, tenant, "update", id=e.id, content="new words")
    assert duplicates.duplicate_of(db, users.first_viewer(db, tenant), "project", "Note", "old words") is None
    assert duplicates.duplicate_of(db, users.first_viewer(db, tenant), "project", "note", "NEW words") == e.id


def test_lsh_finds_high_jaccard_pairs():
    base = [f"w{i}" for i in range(40)]
    a, b = frozenset(base), frozenset(base[:-3] + ["x1", "x2", "x3"])
    assert duplicates.jaccard(a, b) >= 0.8
    assert set(duplicates.bands(a)) & set(duplicates.bands(b))


# ---- maintenance -------------------------------------------------------------------


def test_maintenance_touches_only_its_own_tenant(db, tenant):
    from arbiter.store import tenants

    with db:
        other = tenants.create_tenant(db, "mallory", now=NOW - 200 * DAY)[0]
    theirs = remember(db, other, "old and never read", now=NOW - 200 * DAY)
    mine = remember(db, tenant, "old and never read too", now=NOW - 200 * DAY)
    with db:
        report = maintenance.run(db, tenant, now=NOW)
    assert report.retired == [mine.id] and report.salience_computed == 1
    assert run(db, other, "get", id=theirs.id).valid_to is None


def test_maintenance_retires_low_salience_with_a_reason_and_keeps_the_rest(db, tenant):
    old = remember(db, tenant, "old and never read", now=NOW - 200 * DAY)
    kept = remember(db, tenant, "old but permanent", now=NOW - 200 * DAY, permanent=True)
    fresh = remember(db, tenant, "fresh")
    with db:
        report = maintenance.run(db, tenant, now=NOW)
    assert report.retired == [old.id] and report.salience_computed == 3
    assert report.average_salience == pytest.approx((0.8 + 0.6) / 2)
    reason, value = db.execute("SELECT reason, salience FROM entry_retirements WHERE entry_id = ?", (old.id,)).fetchone()
    assert "below min_salience 0.01" in reason and value == 0.0
    assert run(db, tenant, "get", id=old.id, as_of=(NOW - DAY) / US).id == old.id  # retired, not deleted
    assert {e.id for e in run(db, tenant, "list").entries} == {kept.id, fresh.id}
    assert maintenance.last(db, tenant) == report
    run(db, tenant, "restore", id=old.id)  # nothing true is lost: restore brings it back
    assert old.id in {e.id for e in run(db, tenant, "list").entries}


def test_min_salience_zero_retires_nothing(db, tenant):
    remember(db, tenant, "old", now=NOW - 900 * DAY)
    with db:
        assert maintenance.run(db, tenant, now=NOW, min_salience=0).retired == []


def test_maintenance_refreshes_entity_clusters_and_status_reports_it(db, tenant):
    remember(db, tenant, "Redis and Kafka in Apollo", entities=["Apollo"])
    remember(db, tenant, "Redis caches Apollo sessions", entities=["Apollo"])
    remember(db, tenant, "Zeus uses Go", entities=["Zeus"])
    with db:
        report = maintenance.run(db, tenant, now=NOW)
    assert report.entity_clusters == 2
    shown = run(db, tenant, "entity_show", name="Apollo")
    assert {e.name for e in shown.cluster.entities} == {"Apollo", "Redis", "Kafka"}
    status = run(db, tenant, "status")
    assert (status.entities, status.entity_clusters, status.last_maintenance) == (5, 2, report)
    assert clusters.cluster_of(db, users.first_viewer(db, tenant), shown.entity.id).id == shown.cluster.id


def test_access_log_is_pruned_past_its_retention(db, tenant):
    e = remember(db, tenant, "x")
    with db:
        salience.record_accesses(db, [(tenant, e.id, "get", NOW - 40 * DAY), (tenant, e.id, "get", NOW - DAY)])
        report = maintenance.run(db, tenant, now=NOW, retention_days=30)
    assert report.access_log_pruned == 1
    assert salience.info(db, tenant, e.id, now=NOW).access_count == 2  # the counts stay


def test_the_briefing_names_the_most_mentioned_entities(db, tenant):
    from arbiter import briefing

    for i in range(3):
        remember(db, tenant, f"Redis note {i}", entities=["Apollo"])
    remember(db, tenant, "Kafka once")
    with db:
        result, _ = briefing.build(db, users.first_viewer(db, tenant), "alice", now=NOW, advisor=None)
    assert "Most-mentioned entities" in result.text
    assert result.text.index("**Apollo** (other) ×3") < result.text.index("**Kafka** (tool) ×1")
    assert result.bytes <= 8192


def test_the_briefing_says_how_many_more_entities_the_latest_entries_mention(db, tenant):
    from arbiter import briefing

    for i in range(briefing.MAX_ENTITIES + 4):
        remember(db, tenant, f"note {i}", entities=[f"Thing{i:02d}"])
    with db:
        result, _ = briefing.build(db, users.first_viewer(db, tenant), "alice", now=NOW, advisor=None)
    assert "… 4 more (`entities` finds them by name or type, up to 200 a call" in result.text


def test_recall_entity_cluster_and_salience_factors_show_in_explain(db, tenant):
    import dataclasses

    from arbiter.model import RecallParams
    from arbiter.recall import DEFAULT, recall

    plain = remember(db, tenant, "the deploy checklist for the team")
    named = remember(db, tenant, "the deploy checklist for Apollo", entities=["Apollo"])
    mate = remember(db, tenant, "the deploy checklist mentions Redis", entities=["Redis"])
    remember(db, tenant, "Apollo caches in Redis", entities=["Apollo", "Redis"])
    with db:
        maintenance.run(db, tenant, now=NOW, min_salience=0)
    run(db, tenant, "reinforce", id=plain.id)
    tuning = dataclasses.replace(DEFAULT, entity_boost=0.5, cluster_boost=0.2, salience_weight=0.4)
    with db:
        hits = recall(db, users.first_viewer(db, tenant), RecallParams(query="apollo deploy checklist", explain=True), now=NOW, tuning=tuning).hits
    parts = {h.id: h.parts for h in hits}
    assert parts[named.id]["entities"] == 1.5 and parts[plain.id]["entities"] == 1.0
    assert parts[mate.id]["clusters"] == 1.2 and parts[plain.id]["clusters"] == 1.0
    assert parts[plain.id]["salience"] > parts[named.id]["salience"]  # reinforced
    with db:
        off = recall(db, users.first_viewer(db, tenant), RecallParams(query="apollo deploy checklist", explain=True,
                                             disable=["entities", "clusters", "salience"]), now=NOW, tuning=tuning)
    assert not {"entities", "clusters", "salience"} & set(off.hits[0].parts)


def test_two_writers_maintaining_one_tenant_retire_each_entry_once(pg_url):
    """Daemons sharing a PostgreSQL database may maintain one tenant at once: the second waits for the first
    and finds nothing left to retire."""
    import threading

    from arbiter.store import connect, open_database, tenants
    from tests import pg

    a, b = open_database(pg_url), connect(pg_url)
    try:
        with a:
            tid, _ = tenants.create_tenant(a, "alice", now=NOW - 200 * DAY)
            old = entries.remember(a, users.first_viewer(a, tid), RememberParams(
                type="project", title="Note", content="old and never read"), now=NOW - 200 * DAY)
        second = {}

        def maintain_too():
            with b:
                second["report"] = maintenance.run(b, tid, now=NOW)

        with a:
            first = maintenance.run(a, tid, now=NOW)
            racer = threading.Thread(target=maintain_too)
            racer.start()
            pg.wait_until_blocked(a)
        racer.join()
        assert (first.retired, second["report"].retired) == ([old], [])
        assert a.execute("SELECT count(*) FROM entry_retirements").fetchone()[0] == 1
    finally:
        a.close()
        b.close()
