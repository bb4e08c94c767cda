"""The daemon on PostgreSQL: `serve --db postgresql://...`, several daemons on one database, and its faults.

Real daemons on real sockets, on throwaway databases of the cluster ARBITER_TEST_PG names (`pg_url`); the
restart test starts a cluster of its own, so that restarting it disturbs no one else's tests.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import InvalidParams, NotFound, Unauthorized, Unavailable
from arbiter.server.upkeep import Job, turn
from arbiter.model import RememberParams
from arbiter.store import connect, entries, open_database, tenants, users
from arbiter.store.pg.db import refresh_statistics
from tests.conftest import arbiter_cli, DaemonProcess, wait_for

pytestmark = pytest.mark.postgresql


@pytest.fixture
def homes():
    """A factory of fresh short homes (a socket path must fit in 108 bytes), removed after the test."""
    made: list[Path] = []

    def new() -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="arb-")))
        return made[-1]

    yield new
    for home in made:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def daemons():
    """Daemons a test starts (`daemons.append(...)`), stopped after it whatever happened."""
    started: list[DaemonProcess] = []
    yield started
    for d in started:
        d.stop()


def serve(daemons: list, home: Path, url: str, **kw) -> DaemonProcess:
    d = DaemonProcess(home, args=("--db", url), **kw).start()
    daemons.append(d)
    return d


def sql(url: str, statement: str, params=()) -> list[tuple]:
    """Run one statement on its own connection (the test's view of the database, beside the daemons')."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def arbiter(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return arbiter_cli(home, *args, env=env)


def _waiting(url: str, statement: str = "") -> int:
    """How many of the daemons' sessions wait on a lock (the test's, or one another's), sending `statement` (a
    prefix) if given."""
    return sql(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'arbiter' AND wait_event_type = 'Lock' AND starts_with(query, %s)",
               (statement,))[0][0]


def blocked_on_a_lock(url: str, statement: str) -> bool:
    """Whether a daemon's session waits on a lock sending `statement`: not any session (the idle statistics pass,
    reading a locked table's size after a write, waits too, before the request's statement is even sent)."""
    return _waiting(url, statement) > 0


# ---- serving a URL -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["option", "env"])
def test_serve_takes_a_postgresql_url_and_makes_no_file_for_it(homes, daemons, pg_url, how):
    home = homes()
    with_password = pg_url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")
    assert with_password != pg_url  # trust authentication ignores it; the log must not show it
    if how == "option":
        d = serve(daemons, home, with_password)
    else:
        d = DaemonProcess(home, extra_env={"ARBITER_DB": with_password}).start()
        daemons.append(d)
    with d.client() as c:
        made = c.conversation_create("on postgresql")
        assert c.conversation_get(made.id).title == "on postgresql"
        assert c.whoami().tenant == "default"
    assert d.stop() == 0
    # The socket's lock file stays, as on SQLite; no database file, nor a lock of one.
    assert sorted(p.name for p in home.iterdir()) == ["admin.token", "arbiter.sock.lock", "tenants"]
    assert "hunter2" not in d.log
    # What the log names is a URL to give `serve --db` again: the same database (the password left to PGPASSFILE).
    shown = re.search(r"serving (\S+) on ", d.log)[1]
    assert sql(shown, "SELECT name FROM tenants") == sql(pg_url, "SELECT name FROM tenants") == [("default",)]


@pytest.mark.parametrize("case", ["unreachable", "malformed", "another program's"])
def test_a_postgresql_url_the_daemon_cannot_use_is_one_line_and_changes_nothing(homes, tmp_path, pg_databases, case):
    home = homes()
    url = f"postgresql://postgres@/arbiter?host={tmp_path}/no-server-here"
    if case == "unreachable":
        said = "cannot reach PostgreSQL"
    elif case == "malformed":
        url, said = f"{url}&no_such_option=1", "not a PostgreSQL URL"
    else:
        url, said = pg_databases.create(empty=True), "another program's tables"
        sql(url, "CREATE TABLE invoices(id integer PRIMARY KEY)")
    try:
        done = arbiter(home, "serve", "--db", url)
        assert done.returncode == 1
        assert done.stderr.startswith("arbiter: error: ") and said in done.stderr and done.stderr.count("\n") == 1
        assert list(home.iterdir()) == []
        if case == "another program's":
            assert sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == [("invoices",)]
    finally:
        if case == "another program's":
            pg_databases.drop(url)


# ---- several daemons, one database ---------------------------------------------------------------------------


def test_a_write_one_daemon_acknowledges_the_other_reads_at_once(homes, daemons, pg_url):
    a = serve(daemons, homes(), pg_url)
    b = serve(daemons, homes(), pg_url)
    token = a.token  # the daemon that made the tenant holds its token; the other serves it as well
    assert not paths_token(b.home).exists()
    with Client(a.socket, token) as on_a, Client(b.socket, token) as on_b:
        for i in range(10):
            writer, reader = (on_a, on_b) if i % 2 == 0 else (on_b, on_a)
            made = writer.conversation_create(f"conversation {i}")
            assert reader.conversation_get(made.id).title == f"conversation {i}"
        alice = on_a.user_add("alice").token
        with Client(b.socket, alice) as alice_on_b:
            assert alice_on_b.whoami().user == "alice"
        # A rotation on one daemon ends the old token on the other at once, though the other had just used it.
        on_a.user_rotate("alice")
        with Client(b.socket, alice) as alice_on_b, pytest.raises(Unauthorized):
            alice_on_b.whoami()
    assert a.stop() == 0 and b.stop() == 0


def test_entries_one_daemon_writes_the_other_reads_at_once(homes, daemons, pg_url):
    a = serve(daemons, homes(), pg_url)
    b = serve(daemons, homes(), pg_url)
    with Client(a.socket, a.token) as on_a, Client(b.socket, a.token) as on_b:
        first = on_a.remember(type="project", title="Depot", content="the depot opens at six")
        assert on_b.get(first.id).content == "the depot opens at six"
        on_b.update(first.id, content="the depot opens at seven")
        assert on_a.get(first.id).content == "the depot opens at seven"
        second = on_b.remember(type="project", title="Parcels", content="parcels leave the depot at noon")
        assert [e.id for e in on_a.list()] == [second.id, first.id]
        on_a.link(second.id, "relates_to", first.id)
        assert on_b.unlink(second.id, "relates_to", first.id)  # the link one made, the other finds
        with pytest.raises(NotFound):
            on_a.unlink(second.id, "relates_to", first.id)
        assert on_b.forget(first.id)
        with pytest.raises(NotFound):
            on_a.get(first.id)
        assert [e.id for e in on_a.list()] == [second.id]


def test_daemons_started_at_once_on_a_new_database_make_one_tenant(homes, daemons, pg_url):
    pair = [DaemonProcess(homes(), args=("--db", pg_url)) for _ in range(2)]
    daemons.extend(pair)
    starts = [threading.Thread(target=d.start) for d in pair]
    # Held, the lock stops a first run's INSERT but not its count: both daemons get as far as they can.
    with psycopg.connect(pg_url) as holder:
        holder.execute("LOCK TABLE tenants IN EXCLUSIVE MODE")
        for t in starts:
            t.start()
        wait_for(lambda: _waiting(pg_url) == 2, timeout=30, what="both first runs to wait")
    for t in starts:
        t.join()
    assert sql(pg_url, "SELECT name FROM tenants") == [("default",)]
    holder = [d for d in pair if paths_token(d.home).exists()]
    assert len(holder) == 1
    for d in pair:
        with Client(d.socket, holder[0].token) as c:
            assert c.whoami().tenant == "default"
    for d in pair:
        assert d.stop() == 0
    assert sum("created tenant 'default'" in d.log for d in pair) == 1


def test_idle_jobs_are_taken_in_turns_and_a_session_that_dies_gives_its_turn_up(pg_url):
    a, b = connect(pg_url), connect(pg_url)
    try:
        with turn(a, Job.DERIVE) as a_has_it:
            with turn(b, Job.DERIVE) as b_has_it:
                assert a_has_it and not b_has_it
            with turn(b, Job.DERIVE_URGENT) as other_job, turn(b, Job.MAINTENANCE, 2) as a_tenant:
                assert other_job and a_tenant
        with turn(b, Job.DERIVE) as b_has_it:
            assert b_has_it  # given back when a's block ended
        held = turn(a, Job.MAINTENANCE, 7)
        assert held.__enter__()
        a.close()  # a daemon killed mid-job: its session, and its turn, end with it
        assert wait_for(lambda: _turn_free(b, Job.MAINTENANCE, 7), what="the dead session's lock to go")
    finally:
        a.close()
        b.close()


def _turn_free(conn, job: Job, tenant_id: int) -> bool:
    with turn(conn, job, tenant_id) as mine:
        return mine


def test_a_daemon_leaves_an_idle_job_to_the_session_that_holds_its_turn(homes, daemons, pg_url):
    d = serve(daemons, homes(), pg_url)
    with d.client() as c:
        tenant = sql(pg_url, "SELECT id FROM tenants")[0][0]
        holder = connect(pg_url)  # another daemon, mid-step
        try:
            with turn(holder, Job.DERIVE_URGENT) as urgent, turn(holder, Job.DERIVE) as rest:
                assert urgent and rest
                # Queued keys of an entry purged since: a step takes them off the queue and derives nothing.
                sql(pg_url, "INSERT INTO derive_queue(deriver, entry_id, tenant_id) VALUES ('sketch', 999999, %s)",
                    (tenant,))
                c.conversation_create("a write: idle work follows")
                mine = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
                wait_for(lambda: _tried_its_turn(pg_url, mine), what="the daemon's idle work to ask for its turn")
                assert sql(pg_url, "SELECT count(*) FROM derive_queue")[0][0] == 1
            c.conversation_create("another write: idle work again")
            wait_for(lambda: sql(pg_url, "SELECT count(*) FROM derive_queue")[0][0] == 0,
                     what="the daemon to take the job once it is free")
        finally:
            holder.close()
    assert d.stop() == 0


def _tried_its_turn(url: str, holder_pid: int) -> bool:
    """Whether the daemon's writer went idle after asking for an idle job's turn (a try that failed)."""
    return sql(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND application_name = 'arbiter' AND state = 'idle' AND pid <> %s "
                    "AND query LIKE 'SELECT pg_try_advisory_lock(%%'", (holder_pid,))[0][0] > 0


def test_a_batch_written_through_two_daemons_is_derived_once(homes, daemons, pg_url):
    """Both daemons go idle on one queue; every entry's keys and links are offered by one derivation.

    What it sees is what derivations offer to write: a daemon that derived again what another had just linked
    could find nothing left to offer. That a daemon leaves a job while another holds its turn, the test above
    shows directly.
    """
    # A BEFORE INSERT trigger fires for every row offered, even one ON CONFLICT then drops: it records which
    # transaction offered each entry's near-copy keys and entity links. The batch's own transaction (the entry
    # row's xmin) may write some; every other transaction that does is a derivation.
    sql(pg_url, "CREATE TABLE attempts(entry_id bigint NOT NULL, x xid NOT NULL, deriver text NOT NULL)")
    sql(pg_url, "CREATE FUNCTION count_attempt() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO attempts VALUES (new.entry_id, xid(pg_current_xact_id()), TG_ARGV[0]); RETURN new; END $$")
    for table, deriver in (("entry_sketches", "sketch"), ("entry_entities", "entities")):
        sql(pg_url, f"CREATE TRIGGER count_attempt BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION "
                    f"count_attempt('{deriver}')")
    a = serve(daemons, homes(), pg_url)
    b = serve(daemons, homes(), pg_url)
    items = [{"type": "project", "title": f"note {i}",
              "content": f"Mira Okafor sends parcel {i} from the Oslo depot to Kestrel Labs on dock {i % 7}"}
             for i in range(600)]
    with Client(a.socket, a.token) as on_a, Client(b.socket, a.token) as on_b:
        writes = [threading.Thread(target=c.remember_many, args=(half,))
                  for c, half in ((on_a, items[:300]), (on_b, items[300:]))]
        for t in writes:
            t.start()
        for t in writes:
            t.join()
    # The urgent derivers (entities, near-copy keys); associations, after them, read full text.
    wait_for(lambda: sql(pg_url, "SELECT count(*) FROM derive_queue WHERE deriver IN ('entities', 'sketch')")[0][0]
             == 0, timeout=60, what="the idle daemons to derive the batch")
    # Near-copy keys only: entity links are also offered later to earlier entries, by the name evidence a later
    # entry's derivation finds in them (entities/evidence.py), which is another derivation on purpose.
    for deriver in ("sketch",):
        derivations = dict(sql(pg_url, "SELECT a.entry_id, count(DISTINCT a.x::text) FROM attempts a "
                                       "JOIN entries e ON e.id = a.entry_id WHERE a.deriver = %s AND a.x <> e.xmin "
                                       "GROUP BY 1", (deriver,)))
        assert len(derivations) == 600 and set(derivations.values()) == {1}, deriver


def _loaded(daemons, home: Path, url: str, n: int, word: str) -> tuple[DaemonProcess, Client]:
    """A daemon on `url` and a client of it that has bulk-written `n` entries (1,000 a batch), with autovacuum off
    for the tables a bulk write grows most, so that only the daemon can have analyzed them; the entries pass the
    pages the daemon leaves to autovacuum (store/pg/db.py `_STATISTICS_PAGES`)."""
    for table in ("entries", "fulltext_postings"):
        sql(url, f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    d = serve(daemons, home, url)
    c = Client(d.socket, d.token)
    items = [{"type": "project", "title": f"{word} {i}",
              "content": " ".join(f"{word}{i}x{k} leaves the Oslo depot" for k in range(8))} for i in range(n)]
    for start in range(0, n, 1000):
        c.remember_many(items[start:start + 1000])
    return d, c


def _planned(url: str) -> dict:
    return dict(sql(url, "SELECT relname, reltuples FROM pg_class WHERE relname IN ('entries', 'fulltext_postings')"))


def test_a_bulk_load_is_planned_on_fresh_statistics_before_autovacuums_turn(homes, daemons, pg_url):
    _, c = _loaded(daemons, homes(), pg_url, 3000, "parcel")
    c.close()
    # A row a word and batch in the postings: several an entry.
    wait_for(lambda: min(_planned(pg_url).values()) >= 3000, timeout=30, what="the idle daemon to analyze what grew")


def test_a_load_read_at_once_is_planned_on_fresh_statistics_though_the_daemon_is_never_quiet(homes, daemons, pg_url):
    """A client that loads and then reads without a pause leaves the daemon no quiet spell: the statistics are
    refreshed within a second of the writes all the same, not at autovacuum's turn (off here)."""
    _, c = _loaded(daemons, homes(), pg_url, 2000, "crate")
    with c:
        deadline = time.monotonic() + 20
        while _planned(pg_url)["entries"] < 2000 and time.monotonic() < deadline:
            c.recall("crate Oslo")  # back to back: the idle loop's quiet spell never comes
    assert _planned(pg_url)["entries"] >= 2000


def test_the_statistics_pass_leaves_a_table_another_session_holds_locked(pg_url):
    """A table under another session's ACCESS EXCLUSIVE lock (a VACUUM FULL, a schema change) is left to the next
    pass: the writer would wait behind it, and every write with it."""
    sql(pg_url, "ALTER TABLE entries SET (autovacuum_enabled = false)")  # only the pass may analyze it
    conn = open_database(pg_url)
    try:
        with conn:
            tenant, _ = tenants.create_tenant(conn, "t", now=1)
            entries.remember_many(conn, users.first_viewer(conn, tenant),
                                  [RememberParams(type="project", title=f"Crate {i}", content="x" * 500)
                                   for i in range(1500)], now=2)
        analyzed: list = []
        with psycopg.connect(pg_url) as locker:
            locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            passing = threading.Thread(target=lambda: analyzed.append(refresh_statistics(conn)))
            passing.start()
            passing.join(10)
            waited = passing.is_alive()
        passing.join()  # the lock is gone: a pass that waited for it ends now
        assert not waited and "entries" not in analyzed[0]
        assert "entries" in refresh_statistics(conn)  # once the lock is gone
    finally:
        conn.close()


def test_two_daemons_maintain_a_tenant_once_an_interval(homes, daemons, pg_url):
    interval = 1.0
    args = ("--maintenance-interval", str(interval))
    for _ in range(2):
        daemons.append(DaemonProcess(homes(), args=("--db", pg_url, *args)).start())
    wait_for(lambda: sql(pg_url, "SELECT count(*) FROM maintenance_runs")[0][0] >= 4, timeout=20,
             what="four maintenance runs")
    runs = [at for (at,) in sql(pg_url, "SELECT at FROM maintenance_runs ORDER BY at")]
    # Each daemon runs it every interval; whichever comes second in an interval finds it done.
    assert min(later - earlier for earlier, later in zip(runs, runs[1:])) >= 0.95 * interval * 1e6


# ---- faults ---------------------------------------------------------------------------------------------------


def test_a_serialization_failure_is_tried_again(homes, daemons, pg_url):
    # At REPEATABLE READ, a write that finds its row changed since its snapshot fails with 40001.
    name = sql(pg_url, "SELECT current_database()")[0][0]
    sql(pg_url, f'ALTER DATABASE "{name}" SET default_transaction_isolation = \'repeatable read\'')
    d = serve(daemons, homes(), pg_url)
    with d.client() as c:
        c.user_add("alice")
        answer: list = []
        with psycopg.connect(pg_url) as other:  # a transaction of its own, as another daemon's
            other.execute("UPDATE users SET name = name WHERE name = 'alice'")
            rotating = threading.Thread(target=lambda: answer.append(_call(lambda: c.user_rotate("alice"))))
            rotating.start()
            wait_for(lambda: blocked_on_a_lock(pg_url, "UPDATE users"),
                     what="the rotation to wait on the test's row lock")
            other.commit()
        rotating.join()
        assert not isinstance(answer[0], Exception), answer[0]
        with Client(d.socket, answer[0].token) as alice:
            assert alice.whoami().user == "alice"
    assert d.stop() == 0


def _call(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the thread's outcome, asserted by the test
        return e


def test_every_acknowledged_write_is_there_after_kill_9(homes, daemons, pg_url):
    d = serve(daemons, homes(), pg_url)
    acked: list[int] = []
    stop = threading.Event()

    def write():
        with d.client() as c:
            while not stop.is_set():
                try:
                    acked.append(c.conversation_create("acknowledged").id)
                except Unavailable:  # the daemon is gone: what it acknowledged is what counts
                    return

    writers = [threading.Thread(target=write) for _ in range(4)]
    for t in writers:
        t.start()
    wait_for(lambda: len(acked) >= 200, timeout=60, what="200 acknowledged writes")
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(10)
    stop.set()
    for t in writers:
        t.join()
    stored = {r[0] for r in sql(pg_url, "SELECT id FROM conversations")}
    assert set(acked) <= stored and len(acked) >= 200
    # And a new daemon serves the database the killed one left.
    again = serve(daemons, d.home, pg_url)
    with again.client() as c:
        assert c.conversation_get(acked[-1]).title == "acknowledged"


@pytest.fixture
def own_cluster(request):
    """A PostgreSQL cluster of this test's own (initdb in a temporary folder, unix socket only), to restart.

    A test may pass it server settings (`@pytest.mark.parametrize("own_cluster", [...], indirect=True)`).
    """
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found and shutil.which("initdb") is None:
        pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    pgbin = Path(found[-1]).parent if found else Path(shutil.which("initdb")).parent
    folder = Path(tempfile.mkdtemp(prefix="arbpg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to the postgres user, as in .ci/run
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]

    def ctl(*args: str) -> None:
        subprocess.run([*as_user, str(pgbin / "pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "log"),
                        *args], check=True, capture_output=True, timeout=60)

    subprocess.run([*as_user, str(pgbin / "initdb"), "-D", str(folder / "data"), "-U", "postgres", "-A", "trust",
                    "-E", "UTF8", "--no-sync"], check=True, capture_output=True, timeout=120)
    options = " ".join([f"-k {folder} -c listen_addresses= -c fsync=off", *getattr(request, "param", [])])
    ctl("-w", "-o", options, "start")
    sql(f"postgresql://postgres@/postgres?host={folder}", "CREATE DATABASE arbiter")
    try:
        yield f"postgresql://postgres@/arbiter?host={folder}", lambda: ctl("-w", "-m", "fast", "-o", options,
                                                                          "restart")
    finally:
        subprocess.run([*as_user, str(pgbin / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_restart_of_postgresql_fails_the_request_in_flight_and_the_next_ones_work(homes, daemons, own_cluster):
    url, restart = own_cluster
    d = serve(daemons, homes(), url)
    with d.client() as c:
        first = c.conversation_create("before the restart")
        assert [x.id for x in c.conversation_list()] == [first.id]  # every lane has its connection now
        answer: list = []
        locker = psycopg.connect(url)
        locker.execute("LOCK TABLE conversations IN ACCESS EXCLUSIVE MODE")
        in_flight = threading.Thread(target=lambda: answer.append(_call(lambda: c.conversation_create("in flight"))))
        in_flight.start()
        wait_for(lambda: blocked_on_a_lock(url, "INSERT INTO conversations"),
                 what="the write to wait on the test's lock")
        restart()
        in_flight.join()
        locker.close()
        assert isinstance(answer[0], Unavailable), answer[0]
        # The next requests, on every lane (the writer, the readers, the token lookup), work the first time.
        assert c.whoami().tenant == "default"
        after = c.conversation_create("after the restart")
        assert c.conversation_get(first.id).title == "before the restart"
        assert {x.id for x in c.conversation_list()} == {first.id, after.id}
    assert d.stop() == 0
    assert "lost the connection to PostgreSQL" in d.log and "internal error" not in d.log


def test_a_database_down_when_a_request_comes_is_unavailable_and_not_an_internal_error(homes, daemons, own_cluster):
    url, restart = own_cluster
    d = serve(daemons, homes(), url)
    with d.client() as c:
        c.conversation_create("before")
        restart()  # with no request in flight: the daemon's idle sessions learn of it only when next used
        for _ in range(3):
            assert c.conversation_create("after").id > 0
            assert c.conversation_list()
    assert d.stop() == 0
    assert "internal error" not in d.log


@pytest.mark.parametrize("own_cluster", [["-c max_connections=8", "-c superuser_reserved_connections=0"]],
                         indirect=True)
def test_a_server_out_of_connections_is_unavailable_until_one_frees(homes, daemons, own_cluster):
    url, _ = own_cluster
    d = serve(daemons, homes(), url)
    with d.client() as c:
        c.conversation_create("before")
        taken = _take_every_session(url)
        # The daemon's sessions end (an operator's pg_terminate_backend), and the test takes the slots they free.
        taken[0].execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                         "WHERE application_name = 'arbiter'")
        taken += _take_every_session(url)
        for call in (c.conversation_list, lambda: c.conversation_create("refused")):
            with pytest.raises(Unavailable):
                call()
        for conn in taken:
            conn.close()
        c.conversation_create("after")
        assert [x.title for x in c.conversation_list()] == ["after", "before"]
    assert d.stop() == 0
    assert "internal error" not in d.log


def _take_every_session(url: str) -> list:
    """Connections to `url` until the server refuses one, as other daemons or clients would take them."""
    taken = []
    try:
        while True:
            taken.append(psycopg.connect(url, connect_timeout=5, autocommit=True))
    except psycopg.OperationalError:
        return taken


# ---- backups are the operator's -------------------------------------------------------------------------------


def test_backup_verify_and_restore_refuse_a_postgresql_store_and_write_nothing(homes, daemons, pg_url):
    d = serve(daemons, homes(), pg_url)
    target = d.home / "backup.db"
    created = arbiter(d.home, "backup", "create", str(target))
    assert created.returncode == 1 and "pg_dump" in created.stderr and "Traceback" not in created.stderr
    assert not target.exists() and not Path(f"{target}.partial").exists()
    with Client(d.socket, d.admin_token) as admin, pytest.raises(InvalidParams):
        admin.backup_create(target)
    verified = arbiter(d.home, "backup", "verify", pg_url)
    assert verified.returncode == 1 and "pg_dump" in verified.stderr
    before = sorted(p.name for p in d.home.rglob("*"))
    some_file = d.home / "some.db"
    some_file.touch()
    restored = arbiter(d.home, "backup", "restore", str(some_file), ARBITER_DB=pg_url)
    assert restored.returncode == 1 and "pg_dump" in restored.stderr
    assert sorted(p.name for p in d.home.rglob("*")) == sorted([*before, "some.db"])
    assert sql(pg_url, "SELECT count(*) FROM conversations")[0][0] == 0
    assert d.stop() == 0


def paths_token(home: Path) -> Path:
    return paths.token_path(home, "default")
