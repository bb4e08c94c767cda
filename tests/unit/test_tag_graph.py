"""The tag graph tables stay equal to a recount of active entries, whatever the writes, on both engines."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from arbiter.graph import tags as tag_graph
from arbiter.model import RememberParams, UpdateParams
from arbiter.store import db, entries, open_database, relations, tenants, users

pytestmark = pytest.mark.both_engines
RUNS = itertools.count()
TAGS = ["a", "b", "c", "d", "area:x", "area:y", "p1", "p2"]
tag_lists = st.lists(st.sampled_from(TAGS), max_size=5)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.integers(1, 2), tag_lists),
        # A batch: one INSERT of several rows (PostgreSQL's trigger adds them set-based).
        st.tuples(st.just("many"), st.integers(1, 2), st.lists(tag_lists, min_size=2, max_size=5)),
        st.tuples(st.just("update"), st.integers(0, 30), tag_lists),
        st.tuples(st.just("forget"), st.integers(0, 30)),
        st.tuples(st.just("purge"), st.integers(0, 30)),
        st.tuples(st.just("supersede"), st.integers(0, 30), tag_lists),
    ),
    max_size=40,
)


def recount(conn, tenant_id):
    counts, pairs = Counter(), Counter()
    for (raw,) in conn.execute("SELECT tags FROM entries WHERE tenant_id = ? AND valid_to IS NULL", (tenant_id,)):
        t = sorted(set(msgspec.json.decode(raw)))
        counts.update(t)
        pairs.update(itertools.combinations(t, 2))
    return dict(counts), dict(pairs)


def stored(conn, tenant_id):
    v = users.first_viewer(conn, tenant_id)
    counts = {t.tag: t.count for t in tag_graph.counts(conn, v)}
    pairs = {(p.a, p.b): p.count for p in tag_graph.pairs(conn, v)}
    return counts, pairs


@pytest.fixture(scope="module")
def conn(shared_db):
    return shared_db


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=ops)
def test_counts_and_pairs_match_a_recount(conn, script):
    now = 1
    with conn:
        run = next(RUNS)
        t1, _ = tenants.create_tenant(conn, f"t{run}", now=now)
        t2, _ = tenants.create_tenant(conn, f"u{run}", now=now)
    ids = []
    for op in script:
        now += 1
        with conn:
            kind = op[0]
            if kind == "remember":
                tid = t1 if op[1] == 1 else t2
                ids.append(entries.remember(conn, users.first_viewer(conn, tid), RememberParams(type="user", title="t", content="c",
                                                                      tags=op[2]), now=now))
                continue
            if kind == "many":
                tid = t1 if op[1] == 1 else t2
                ids += entries.remember_many(conn, users.first_viewer(conn, tid), [
                    RememberParams(type="user", title="t", content="c", tags=tags) for tags in op[2]], now=now)
                continue
            if not ids:
                continue
            target = ids[op[1] % len(ids)]
            row = conn.execute("SELECT tenant_id, valid_to FROM entries WHERE id = ?", (target,)).fetchone()
            if row is None:
                continue
            tid, retired = row
            if kind == "update" and retired is None:
                entries.update(conn, users.first_viewer(conn, tid), UpdateParams(id=target, tags=op[2]), now=now)
            elif kind == "forget":
                entries.forget(conn, users.first_viewer(conn, tid), target, now=now)
            elif kind == "purge":
                entries.purge(conn, users.first_viewer(conn, tid), target)
            elif kind == "supersede":
                new = entries.remember(conn, users.first_viewer(conn, tid), RememberParams(type="user", title="t", content="c", tags=op[2]),
                                       now=now)
                ids.append(new)
                if retired is None:
                    relations.link(conn, users.first_viewer(conn, tid), new, "supersedes", target, now=now)
    for tid in (t1, t2):
        counts, pairs = recount(conn, tid)
        assert stored(conn, tid) == (counts, pairs)
        v = users.first_viewer(conn, tid)  # every reader of the pairs sums them alike
        assert [tag_graph.pair_count(conn, v, at_least=k) for k in (1, 2, 3)] == \
            [sum(n >= k for n in pairs.values()) for k in (1, 2, 3)]
        assert {(p.a, p.b): p.count for p in tag_graph.pairs(conn, v, tag="a")} == \
            {ab: n for ab, n in pairs.items() if "a" in ab}
        assert {(p.a, p.b): p.count for p in tag_graph.pairs_among(conn, v, ["a", "b", "p1"])} == \
            {ab: n for ab, n in pairs.items() if set(ab) <= {"a", "b", "p1"}}


def test_the_migration_backfills_existing_entries(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    monkeypatch.setattr(db, "MIGRATIONS", db.MIGRATIONS[:2])
    conn = open_database(path)
    with conn:
        conn.execute("INSERT INTO tenants(name, token_hash, created_at) VALUES ('t', x'01', 1)")  # as m001 made them
        tid = conn.last_insert_rowid()
        for tags in (["a", "b"], ["a", "b", "c"], ["c"]):  # rows as the m002 schema held them
            conn.execute(
                "INSERT INTO entries(tenant_id, type, title, content, tags, content_hash, recorded_at, valid_from) "
                "VALUES (?, 'user', 't', 'c', ?, x'00', 1, 1)",
                (tid, json.dumps(tags)),
            )
        conn.execute("UPDATE entries SET valid_to = 2 WHERE id = 3")  # forget, as the m002 schema did it
    monkeypatch.undo()
    assert db.migrate(conn) == len(db.MIGRATIONS)
    assert stored(conn, tid) == ({"a": 2, "b": 2, "c": 1}, {("a", "b"): 2, ("a", "c"): 1, ("b", "c"): 1})
    assert tag_graph.version(conn, users.first_viewer(conn, tid))[0][1] > 0
    conn.close()


# ---- per visibility scope --------------------------------------------------------


def recount_scopes(conn):
    """(scope, tag) -> n, (scope, a, b) -> n and the (scope, tag, entry) rows, recounted from the active entries."""
    counts, pairs, rows = Counter(), Counter(), set()
    for eid, scope, raw in conn.execute("SELECT id, scope_id, tags FROM entries WHERE valid_to IS NULL"):
        t = sorted(set(msgspec.json.decode(raw)))
        counts.update((scope, x) for x in t)
        pairs.update((scope, a, b) for a, b in itertools.combinations(t, 2))
        rows.update((scope, x, eid) for x in t)
    return dict(counts), dict(pairs), rows


def stored_scopes(conn):
    return (
        {(s, t): n for s, t, n in conn.execute("SELECT scope_id, tag, n FROM tag_counts")},
        {(s, a, b): n for s, a, b, n in conn.execute("SELECT scope_id, a, b, n FROM tag_pairs")},
        set(conn.execute("SELECT scope_id, tag, entry_id FROM entry_tags")),
    )


@pytest.fixture
def team(db):
    """A tenant whose first user is `owner`, with alice and bob in team `core` and carol in none."""
    conn = db
    with conn:
        tid, _ = tenants.create_tenant(conn, "t", now=1)
        ids = {name: users.create_user(conn, tid, name, now=1)[0] for name in ("alice", "bob", "carol")}
        core = users.create_team(conn, tid, "core", now=1)
        for name in ("alice", "bob"):
            users.join(conn, core, ids[name], now=1)
    return conn, tid, ids


def viewer(conn, tid, ids, name):
    return users.viewer(conn, tid, ids[name], name)


def write(conn, v, tags, *, team=None, now=2, parent=None):
    with conn:
        if parent is not None:
            from arbiter.graph import threads
            from arbiter.model import ReplyParams

            return threads.reply(conn, v, ReplyParams(parent_id=parent, content="r", tags=tags), now=now)
        return entries.remember(conn, v, RememberParams(type="user", title="t", content="c", tags=tags, team=team),
                                now=now)


def tag_counts(conn, v):
    return {t.tag: t.count for t in tag_graph.counts(conn, v)}


def test_each_user_counts_only_what_they_see(team):
    conn, tid, ids = team
    alice, bob, carol = (viewer(conn, tid, ids, n) for n in ("alice", "bob", "carol"))
    write(conn, alice, ["secret", "x"])
    write(conn, alice, ["x", "y"], team="core")
    write(conn, bob, ["bob-only", "x"])
    write(conn, carol, ["carol", "x", "y"])

    assert tag_counts(conn, alice) == {"secret": 1, "x": 2, "y": 1}
    assert tag_counts(conn, bob) == {"bob-only": 1, "x": 2, "y": 1}
    assert tag_counts(conn, carol) == {"carol": 1, "x": 1, "y": 1}
    assert tag_counts(conn, users.first_viewer(conn, tid)) == {}
    assert {(p.a, p.b): p.count for p in tag_graph.pairs(conn, bob)} == {("bob-only", "x"): 1, ("x", "y"): 1}
    assert tag_graph.distinct(conn, bob) == 3
    nothing = tag_graph.cooccurrence(conn, bob, tag="secret", limit=10)
    assert [(t.tag, t.count) for t in nothing.tags] == [("secret", 0)] and nothing.pairs == []
    x = tag_graph.cooccurrence(conn, bob, tag="x", limit=10)
    assert x.tags[0].count == 2 and {(p.a, p.b) for p in x.pairs} == {("bob-only", "x"), ("x", "y")}
    # The whole tenant (the daemon's upkeep) adds every scope.
    assert tag_counts(conn, users.whole_tenant(tid)) == {"secret": 1, "x": 4, "y": 2, "bob-only": 1, "carol": 1}
    assert stored_scopes(conn) == recount_scopes(conn)


def test_share_and_unshare_move_a_threads_counts_and_both_versions(team):
    conn, tid, ids = team
    alice, bob = viewer(conn, tid, ids, "alice"), viewer(conn, tid, ids, "bob")
    root = write(conn, alice, ["plan", "q3"])
    write(conn, alice, ["plan", "risk"], parent=root)
    before = dict(tag_graph.version(conn, alice))
    assert tag_counts(conn, bob) == {}

    from arbiter.graph import cascades

    with conn:
        cascades.share(conn, alice, root, users.team_scope(conn, users.team_id(conn, tid, "core")), now=3)
    assert tag_counts(conn, bob) == {"plan": 2, "q3": 1, "risk": 1}
    assert tag_counts(conn, alice) == {"plan": 2, "q3": 1, "risk": 1}  # moved, not doubled
    after = dict(tag_graph.version(conn, alice))
    assert all(after[s] > before[s] for s in alice.scopes)
    bobs_reply = write(conn, bob, ["plan", "done"], parent=root)
    assert stored_scopes(conn) == recount_scopes(conn)

    with conn:
        cascades.share(conn, alice, root, None, now=4)
    assert tag_counts(conn, bob) == {"plan": 1, "done": 1}  # his reply came back to him
    assert tag_counts(conn, alice) == {"plan": 2, "q3": 1, "risk": 1}
    assert stored_scopes(conn) == recount_scopes(conn)
    with conn:
        entries.forget(conn, bob, bobs_reply, now=5)
    assert tag_counts(conn, bob) == {}


def test_neighbours_rank_by_the_rarity_the_viewer_sees(team):
    conn, tid, ids = team
    alice, bob = viewer(conn, tid, ids, "alice"), viewer(conn, tid, ids, "bob")
    probe = write(conn, bob, ["m", "n"], team="core")
    with_m = write(conn, bob, ["m"], team="core")
    with_n = write(conn, bob, ["n"], team="core")
    # A tie (newest first). Alice's private entries make `n` common for her only: counted over the
    # whole tenant, `m` would be the rarer tag and move ahead for bob.
    assert [e for e, _ in tag_graph.shared_tag_neighbors(conn, bob, probe, k=5)] == [with_n, with_m]
    for _ in range(3):
        write(conn, alice, ["n"])
    assert [e for e, _ in tag_graph.shared_tag_neighbors(conn, bob, probe, k=5)] == [with_n, with_m]
    for _ in range(3):
        write(conn, bob, ["n"])
    assert [e for e, _ in tag_graph.shared_tag_neighbors(conn, bob, probe, k=2)][0] == with_m


def test_m016_rebuilds_the_graph_per_scope_and_keeps_only_names_made_from_one_scope(tmp_path, monkeypatch):
    path = tmp_path / "m015.db"
    monkeypatch.setattr(db, "MIGRATIONS", db.MIGRATIONS[: [n for n, _ in db.MIGRATIONS].index("m016_tag_scopes")])
    conn = open_database(path)
    with conn:
        solo, _ = tenants.create_tenant(conn, "solo", now=1)
        many, _ = tenants.create_tenant(conn, "many", now=1)
        a = users.create_user(conn, many, "alice", now=1)[0]
        core = users.create_team(conn, many, "core", now=1)
        users.join(conn, core, a, now=1)
    alice = users.viewer(conn, many, a, "alice")

    def old_write(v, tags, scope=None):  # rows as the m015 schema held them (it stored content_hash)
        conn.execute(
            "INSERT INTO entries(tenant_id, author_id, scope_id, type, title, content, tags, content_hash, "
            "recorded_at, valid_from) VALUES (?, ?, ?, 'user', 't', 'c', ?, x'00', 2, 2)",
            (v.tenant_id, v.user_id, scope or v.private_scope, json.dumps(tags)),
        )

    with conn:
        old_write(users.first_viewer(conn, solo), ["a", "b"])
        old_write(users.first_viewer(conn, many), ["a", "b"])
        old_write(alice, ["a", "c"])
        old_write(alice, ["a", "b", "c"], users.member_scope(conn, alice, "core", path="team"))
    with conn:
        for tid in (solo, many):  # names cached over the whole tenant, as m003 kept them
            conn.execute("INSERT INTO cluster_names VALUES (?, x'00', 'n', 'd', 1)", (tid,))
    monkeypatch.undo()
    assert db.migrate(conn) == len(db.MIGRATIONS)
    assert stored_scopes(conn) == recount_scopes(conn)
    assert tag_counts(conn, users.viewer(conn, many, a, "alice")) == {"a": 2, "b": 1, "c": 2}
    assert conn.execute("SELECT tenant_id, scopes FROM cluster_names").fetchall() == [
        (solo, str(users.first_viewer(conn, solo).private_scope))
    ]
    conn.close()


team_ops = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.sampled_from(["alice", "bob"]), st.booleans(), tag_lists),
        st.tuples(st.just("reply"), st.sampled_from(["alice", "bob"]), st.integers(0, 30), tag_lists),
        st.tuples(st.just("update"), st.integers(0, 30), tag_lists),
        st.tuples(st.just("forget"), st.integers(0, 30)),
        st.tuples(st.just("purge"), st.integers(0, 30)),
        st.tuples(st.just("share"), st.integers(0, 30)),
        st.tuples(st.just("unshare"), st.integers(0, 30)),
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=team_ops)
def test_counts_per_scope_match_a_recount_through_shares(conn, script):
    from arbiter.errors import ArbiterError
    from arbiter.graph import cascades, threads
    from arbiter.model import ReplyParams

    run = next(RUNS)
    with conn:
        tid, _ = tenants.create_tenant(conn, f"team{run}", now=1)
        ids = {n: users.create_user(conn, tid, n, now=1)[0] for n in ("alice", "bob")}
        core = users.create_team(conn, tid, "core", now=1)
        for n in ids:
            users.join(conn, core, ids[n], now=1)
    vs = {n: users.viewer(conn, tid, i, n) for n, i in ids.items()}
    core_scope = users.team_scope(conn, core)
    written: list[int] = []
    for now, op in enumerate(script, start=2):
        kind, target, owner = op[0], None, None
        if kind != "remember":
            if not written:
                continue
            target = written[op[2 if kind == "reply" else 1] % len(written)]
            author = conn.execute("SELECT author_id FROM entries WHERE id = ?", (target,)).fetchone()
            if author is None:
                continue  # purged
            owner = next(vs[n] for n, i in ids.items() if i == author[0])
        try:
            with conn:
                if kind == "remember":
                    p = RememberParams(type="user", title="t", content="c", tags=op[3], team="core" if op[2] else None)
                    written.append(entries.remember(conn, vs[op[1]], p, now=now))
                elif kind == "reply":
                    written.append(threads.reply(conn, vs[op[1]], ReplyParams(parent_id=target, content="r",
                                                                               tags=op[3]), now=now))
                elif kind == "update":
                    entries.update(conn, owner, UpdateParams(id=target, tags=op[2]), now=now)
                elif kind == "forget":
                    entries.forget(conn, owner, target, now=now)
                elif kind == "purge":
                    entries.purge(conn, owner, target)
                else:
                    cascades.share(conn, owner, target, core_scope if kind == "share" else None, now=now)
        except ArbiterError:
            continue  # refused (a retired parent, a reply shared by itself...): nothing changed
    assert stored_scopes(conn) == recount_scopes(conn)
