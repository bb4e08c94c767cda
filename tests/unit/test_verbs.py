"""The core verbs give the same answers on both engines: one script of calls, run on a SQLite file and on a
PostgreSQL database, answer for answer (issue #31: "the same answers")."""

from __future__ import annotations

import hashlib

import msgspec

from arbiter import verbs
from arbiter._time import US
from arbiter.errors import ArbiterError
from arbiter.store import open_database, tenants
from arbiter.transfer.model import KINDS, ExportPageParams, ImportBatchParams, Record
from arbiter.verb import Context
from tests import pg
from tests.unit.conftest import execute

T0 = 1_800_000_000 * US

#: The script's calls: (user, verb, params); ids are the store's, which both engines number alike.
SCRIPT: list[tuple[str, str, dict]] = [
    ("alice", "conversation_create", {"title": "Planning"}),
    ("alice", "remember", {"type": "project", "title": "Deploys", "content": "We deploy on Fridays after standup.",
                           "tags": ["deploy", "ops"], "conversation_id": 1, "salience": 0.7}),  # entry 1
    ("alice", "remember", {"type": "user", "title": "Editor", "content": "Alice writes in vim, 2 spaces.",
                           "tags": ["style"], "speaker": "Alice"}),  # 2
    ("alice", "remember_many", {"entries": [
        {"type": "project", "title": f"Ticket {i}", "content": f"Ticket {i} of the deploy queue.",
         "tags": ["ticket", "deploy", f"p{i % 2}"]} for i in range(4)]}),  # 3-6
    ("alice", "remember", {"type": "project", "title": "Deploys", "content": "We deploy on Thursdays now.",
                           "tags": ["deploy", "ops"], "supersedes_ids": [1]}),  # 7
    ("alice", "remember", {"type": "project", "title": "deploys", "content": "We deploy on  thursdays now."}),
    ("alice", "get", {"id": 1}),
    ("alice", "get", {"id": 1, "as_of": "2027-01-15T08:00:03Z"}),
    ("alice", "update", {"id": 2, "content": "Alice writes in neovim, 4 spaces.", "tags": ["style", "editor"]}),
    ("alice", "get", {"id": 2, "known_at": "2027-01-15T08:00:04Z"}),
    ("alice", "list", {}),
    ("alice", "list", {"types": ["project"], "tag": "deploy", "limit": 3, "before_id": 7}),
    ("alice", "list", {"conversation_id": 1, "as_of": "2027-01-15T08:00:03Z"}),
    ("alice", "history", {"id": 7}),
    ("alice", "link", {"source_id": 3, "relation": "causes", "target_id": 4, "qualifier": "enables"}),
    ("alice", "link", {"source_id": 3, "relation": "supports", "target_id": 7}),
    ("alice", "link", {"source_id": 3, "relation": "supports", "target_id": 7}),
    ("alice", "expand", {"id": 3, "depth": 2}),
    ("alice", "density", {"id": 3}),
    ("alice", "unlink", {"source_id": 3, "relation": "supports", "target_id": 7}),
    ("alice", "reply", {"parent_id": 3, "content": "Ticket 0 is blocked on review."}),  # 8
    ("alice", "reply", {"parent_id": 8, "content": "Review done.", "tags": ["done"]}),  # 9
    ("alice", "thread", {"id": 9}),
    ("alice", "open_threads", {}),
    ("alice", "tag_cooccurrence", {}),
    ("alice", "tag_cooccurrence", {"tag": "deploy", "limit": 2}),
    ("alice", "topic_clusters", {}),
    ("alice", "forget", {"id": 4}),
    ("alice", "restore", {"id": 4}),
    ("alice", "restore", {"id": 1}),
    ("alice", "reinforce", {"id": 3}),
    ("alice", "user_add", {"name": "bob"}),
    ("alice", "team_add", {"name": "core"}),
    ("alice", "team_join", {"team": "core", "user": "bob"}),
    ("alice", "share", {"id": 3, "team": "core"}),
    ("bob", "whoami", {}),
    ("bob", "list", {}),
    ("bob", "thread", {"id": 3}),
    ("bob", "reply", {"parent_id": 3, "content": "Bob saw it."}),  # 10
    ("bob", "get", {"id": 2}),
    ("bob", "changes", {"ids": [2, 3, 10]}),
    ("alice", "unshare", {"id": 3}),
    ("bob", "list", {}),
    ("alice", "team_leave", {"team": "core", "user": "bob"}),
    ("alice", "user_list", {}),
    ("alice", "team_list", {}),
    ("alice", "conversation_list", {}),
    ("alice", "conversation_get", {"id": 1}),
    ("alice", "export_page", {"kind": "entry"}),
    ("alice", "export_page", {"kind": "revision"}),
    ("alice", "export_page", {"kind": "relation"}),
    ("alice", "export_page", {"kind": "salience"}),
    ("alice", "remember", {"type": "project", "title": "Blocked", "content": "Blocked by #3 (not #30)."}),  # 11
    ("alice", "backlinks", {"id": 3}),
    ("alice", "around", {"id": 3}),
    ("alice", "density", {"id": 3}),
    ("alice", "topic_cluster", {"tag": "deploy"}),
    ("alice", "briefing", {}),
    ("alice", "maintain", {}),
    ("alice", "user_rotate", {"name": "bob"}),
    ("alice", "purge", {"id": 6}),
    ("alice", "get", {"id": 6}),
    ("alice", "status", {}),
    ("alice", "tenant_list", {}),
    # Entities and facts as read by a user who sees part of the tenant: their dates, counts and relations are
    # worked out from what that user sees (entities/visibility.py), in SQL the whole tenant's reads never run.
    ("alice", "remember", {"type": "project", "title": "Stack", "content": "Apollo runs on Zephyr.",
                           "entities": ["Apollo", "Zephyr"]}),  # 12
    ("alice", "entity_relate", {"source": "Apollo", "relation": "depends_on", "target": "Zephyr"}),
    ("bob", "remember", {"type": "project", "title": "Upgrade", "content": "Zephyr 2.1 is out for Apollo.",
                         "entities": ["Zephyr", "Apollo"]}),  # 13
    ("bob", "facts_propose", {"facts": [{"subject": "Zephyr", "predicate": "version", "object": "2.1",
                                         "sources": [13]}], "apply": True}),
    ("bob", "entities", {}),
    ("bob", "entity_show", {"name": "Apollo"}),
    ("bob", "graph_view", {"view": "entities"}),
    ("bob", "facts", {}),
    ("bob", "export_page", {"kind": "entity"}),
    ("bob", "export_page", {"kind": "entity_relation"}),
    ("bob", "export_page", {"kind": "fact"}),
]


def _answers(conn) -> list[bytes]:
    """Each call's answer (or error code and path), as JSON; a write commits as the daemon commits it."""
    with conn:
        tenant, _ = tenants.create_tenant(conn, "alice", now=T0)
    people = {"alice": None}
    out = []
    for step, (who, name, params) in enumerate(SCRIPT):
        try:
            answer = execute(conn, tenant, name, params, now=T0 + (step + 1) * US, user_id=people.get(who))
        except ArbiterError as e:
            answer = {"error": e.code, "path": e.path}
        if name == "user_add":
            people[params["name"]] = conn.execute("SELECT max(id) FROM users").fetchone()[0]
        out.append(msgspec.json.encode([name, _comparable(name, answer)]))
    return out


def _comparable(name: str, answer):
    """What must be equal: all of it, but for what names the engine (a new token, the database's size)."""
    if name in ("user_add", "user_rotate", "tenant_create"):
        return msgspec.structs.replace(answer, token="")
    if name == "tenant_list":
        return msgspec.structs.replace(answer, db_bytes=0)
    if name == "maintain":  # FTS5's merge and the WAL are SQLite's; the time taken is the machine's
        return msgspec.structs.replace(answer, fts_merged=False, wal_checkpointed=None, duration_ms=0)
    if name == "status":
        last = answer.last_maintenance and _comparable("maintain", answer.last_maintenance)
        return msgspec.structs.replace(answer, schema_version=0, last_maintenance=last)
    return answer


def test_every_core_verb_answers_alike_on_both_engines(tmp_path, pg_url):
    sqlite = open_database(tmp_path / "arbiter.db")
    postgresql = open_database(pg_url)
    try:
        expected, got = _answers(sqlite), _answers(postgresql)
    finally:
        sqlite.close()
        postgresql.close()
    for want, have in zip(expected, got):
        assert have == want
    assert len(got) == len(SCRIPT)


def _export(conn, tenant: int) -> list[bytes]:
    """Every record of the tenant, in the file's order, as its lines."""
    lines = []
    for kind in KINDS:
        after = 0
        while after is not None:
            page = execute(conn, tenant, "export_page", ExportPageParams(kind=kind, after=after, limit=3), now=T0)
            lines += [bytes(r) for r in page.records]
            after = page.next
    return lines


def _import(conn, lines: list[bytes]) -> int:
    """A new tenant holding the file's records, written in two batches as `arbiter import` sends them."""
    with conn:
        tenant, _ = tenants.create_tenant(conn, "copy", now=T0)
    records = [msgspec.json.decode(line, type=Record) for line in lines]
    digest = hashlib.sha256(b"\n".join(lines)).hexdigest()
    half = len(records) // 2
    for first, batch in ((1, records[:half]), (half + 1, records[half:])):
        execute(conn, tenant, "import_batch", ImportBatchParams(
            digest=digest, lines=len(records), first_line=first, records=batch), now=T0 + 10**9, tenant_name="copy")
    return tenant


def test_an_export_goes_into_either_engine_and_comes_out_the_same(tmp_path, pg_url):
    """What `arbiter migrate --to` relies on: a SQLite tenant's file imported into PostgreSQL (and into SQLite)
    exports the same records, ids renumbered alike."""
    home, sqlite, postgresql = (open_database(target) for target in (tmp_path / "home.db", tmp_path / "copy.db", pg_url))
    try:
        _answers(home)
        exported = _export(home, 1)
        assert len(exported) > 15
        copies = [_export(conn, _import(conn, exported)) for conn in (sqlite, postgresql)]
    finally:
        for conn in (home, sqlite, postgresql):
            conn.close()
    assert copies[1] == copies[0]
    assert [msgspec.json.decode(line)["kind"] for line in copies[1]] == \
        [msgspec.json.decode(line)["kind"] for line in exported]


def test_a_watcher_on_one_daemon_sees_a_write_made_through_another(pg_url):
    """`changes` on PostgreSQL: a write another daemon commits moves the memory version here, though this
    daemon's count of its own writes has not moved."""
    from arbiter.changes.core import Memo
    from arbiter.model import RememberParams
    from arbiter.store import connect, entries, users
    from arbiter.verb import Services

    here, there = open_database(pg_url), connect(pg_url)
    try:
        with here:
            tenant, _ = tenants.create_tenant(here, "alice", now=T0)
        services = Services(changes=Memo())

        def version() -> int:
            with here:
                return verbs.VERBS["changes"].run(Context(here, tenant, "alice", T0, services=services),
                                                  msgspec.convert({}, verbs.VERBS["changes"].params)).memory

        before = version()
        with there:
            entries.remember(there, users.first_viewer(there, tenant),
                             RememberParams(type="project", title="t", content="written elsewhere"), now=T0)
        assert version() != before
    finally:
        here.close()
        there.close()


def test_one_batch_sent_to_two_daemons_at_once_is_written_once(tmp_path, pg_url):
    """A client retrying a batch on another daemon while the first still writes it: the second waits for the
    first, then finds the lines done, and nothing is imported twice."""
    import threading

    from arbiter.store import connect

    home, first, second = open_database(tmp_path / "home.db"), open_database(pg_url), connect(pg_url)
    try:
        _answers(home)
        lines = _export(home, 1)
        with first:
            tenant, _ = tenants.create_tenant(first, "copy", now=T0)
        batch = ImportBatchParams(digest=hashlib.sha256(b"\n".join(lines)).hexdigest(), lines=len(lines),
                                  first_line=1, records=[msgspec.json.decode(line, type=Record) for line in lines])
        late = {}

        def send_again():
            with second:
                late["progress"] = verbs.VERBS["import_batch"].run(Context(second, tenant, "copy", T0), batch)

        with first:
            verbs.VERBS["import_batch"].run(Context(first, tenant, "copy", T0), batch)
            racer = threading.Thread(target=send_again)
            racer.start()
            pg.wait_until_blocked(first)
        racer.join()
        assert late["progress"].already and late["progress"].entries == 0
        once = open_database(tmp_path / "once.db")
        try:
            assert _export(first, tenant) == _export(once, _import(once, lines))
        finally:
            once.close()
    finally:
        for conn in (home, first, second):
            conn.close()
