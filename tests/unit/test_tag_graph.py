"""The tag graph tables stay equal to a recount of active entries, whatever the writes."""

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

RUNS = itertools.count()
TAGS = ["a", "b", "c", "d", "area:x", "area:y", "p1", "p2"]
tag_lists = st.lists(st.sampled_from(TAGS), max_size=5)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("remember"), st.integers(1, 2), tag_lists),
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
    counts = {t.tag: t.count for t in tag_graph.counts(conn, tenant_id)}
    pairs = {(p.a, p.b): p.count for p in tag_graph.pairs(conn, tenant_id)}
    return counts, pairs


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    c = open_database(tmp_path_factory.mktemp("tg") / "a.db", synchronous="NORMAL")
    yield c
    c.close()


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
        assert stored(conn, tid) == recount(conn, tid)


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
    assert tag_graph.version(conn, tid) > 0
    conn.close()
