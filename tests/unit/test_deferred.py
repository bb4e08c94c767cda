"""Deferred indexing: entries indexed after they are written leave the same indexes and tag graph as the triggers."""

from __future__ import annotations

import json
import random

import pytest

from arbiter.model import RememberParams
from arbiter.store import deferred, entries, fts, open_database, tenants, users

T0 = 1_790_000_000_000_000
WORDS = "alpha beta gamma delta omega release deploy budget kernel parser".split()


def _home(path):
    """A database with a tenant, its first user's private scope and a team scope: (conn, tenant, user, scopes)."""
    conn = open_database(path)
    with conn:
        tenant, _ = tenants.create_tenant(conn, "t", now=T0)
        user = users.first_user(conn, tenant)
        team = users.create_team(conn, tenant, "core", now=T0)
        users.join(conn, team, user, now=T0)
        private = conn.execute("SELECT id FROM scopes WHERE user_id = ?", (user,)).fetchone()[0]
        scopes = [private, users.team_scope(conn, team)]
    return conn, tenant, user, scopes


def _rows(rng: random.Random, tenant: int, user: int, scopes: list[int], n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        content = " ".join(rng.choices(WORDS, k=12))
        tags = json.dumps(rng.sample(WORDS[:6], rng.randint(0, 3)))
        retired = T0 + 1 if i % 9 == 0 else None  # a retired entry is indexed, but not in the tag graph
        rows.append((tenant, "project", f"title {i}", content, tags, None, None, None,
                     T0, T0, retired, user, rng.choice(scopes)))
    return rows


_INSERT = (
    "INSERT INTO entries(tenant_id, type, title, content_z, tags, source, conversation_id, parent_id, "
    "recorded_at, valid_from, valid_to, author_id, scope_id) VALUES (?,?,?,arbiter_pack(?),?,?,?,?,?,?,?,?,?)"
)


def _state(conn, scopes: list[int]) -> dict:
    """What the indexes say: each scope's matches per word (after FTS5's own integrity check), the tag graph."""
    out = {}
    for s in scopes:
        t = fts.table(s)
        conn.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 1)")
        out[s] = {w: [r[0] for r in conn.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH ? ORDER BY rowid", (w,))]
                  for w in WORDS + ["u1", "a1"]}
    for table in ("entry_tags", "tag_counts", "tag_pairs"):
        out[table] = sorted(conn.execute(f"SELECT * FROM {table}"))
    return out


def test_deferred_entries_are_indexed_as_the_triggers_index_them(tmp_path):
    rng = random.Random(7)
    a, tenant, user, scopes = _home(tmp_path / "a.db")
    b, *_ = _home(tmp_path / "b.db")
    rows = _rows(rng, tenant, user, scopes, 300)
    with a:
        a.executemany(_INSERT, rows)
    with b:
        b.executemany(_INSERT, rows[:100])  # through the triggers, then the rest deferred in two blocks
        with deferred.deferred(b, set(scopes)):
            b.executemany(_INSERT, rows[100:250])
        with deferred.deferred(b, {scopes[0]}):  # the team scope's rows go in through its trigger meanwhile
            b.executemany(_INSERT, rows[250:])
    assert b.execute("SELECT count(*) FROM deferred_scopes").fetchone()[0] == 0
    assert _state(b, scopes) == _state(a, scopes)
    assert sum(len(v) for v in _state(b, scopes)[scopes[1]].values()) > 0  # the team's index holds something


def test_a_failed_block_leaves_nothing_deferred_and_outside_a_transaction_it_refuses(tmp_path):
    conn, tenant, user, scopes = _home(tmp_path / "a.db")
    rows = _rows(random.Random(1), tenant, user, scopes, 5)
    with pytest.raises(ZeroDivisionError):
        with conn:
            with deferred.deferred(conn, set(scopes)):
                conn.executemany(_INSERT, rows)
                1 / 0
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM deferred_scopes").fetchone()[0] == 0
    with pytest.raises(RuntimeError):
        with deferred.deferred(conn, set(scopes)):
            pass
    with conn:  # and the triggers index as before
        conn.executemany(_INSERT, rows)
    assert _state(conn, scopes)["tag_counts"]


def test_remember_many_indexes_as_remember_does(tmp_path):
    # A batch indexes its rows set-based after inserting them; one by one, the triggers do: the same indexes.
    rng = random.Random(11)
    items = [RememberParams(type="project", title=f"title {i}", content=" ".join(rng.choices(WORDS, k=12)),
                            tags=rng.sample(WORDS[:6], rng.randint(0, 3)), team="core" if i % 3 == 0 else None)
             for i in range(120)]
    states = []
    for name, write in (("one.db", "one"), ("many.db", "many")):
        conn, tenant, user, scopes = _home(tmp_path / name)
        v = users.first_viewer(conn, tenant)
        with conn:
            if write == "one":
                for p in items:
                    entries.remember(conn, v, p, now=T0)
            else:
                entries.remember_many(conn, v, items[:50], now=T0)
                entries.remember_many(conn, v, items[50:], now=T0)
        assert conn.execute("SELECT count(*) FROM deferred_scopes").fetchone()[0] == 0
        states.append(_state(conn, scopes))
    assert states[0] == states[1]
    assert states[1]["tag_pairs"] and all(states[1][s]["alpha"] for s in scopes)
