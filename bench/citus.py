"""Arbiter on a real Citus cluster: the layout placed, the verbs answered, each verb on one node, and how fast.

    python -m bench.citus --coordinator 'postgresql://postgres@/postgres?host=/tmp/citus/run&port=9700'
        [--name citus_bench] [--entries 2000] [--calls 200] [--plain 'postgresql://postgres@/postgres?host=/tmp/pgdev']

--coordinator is any database on a Citus coordinator whose workers are added (`citus_add_node`): the bench reads
the nodes there, makes the database --name on the coordinator and every worker (dropped first if it exists), with
the citus extension and the same nodes, and then, as a user would:

1. `arbiter distribute --db URL` (a child process): the schema set up and every table placed.
2. The core verbs' script of tests/unit/test_verbs.py, in this process at fixed instants, on a SQLite file and on
   Citus: each answer compared. Every statement is planned with `citus.multi_task_query_log_level = warning`, so
   a statement Citus would send to every shard says so, and is printed with where in arbiter/ it was sent. Then
   that SQLite file moved into Citus as a user would (`arbiter migrate --to`, then `arbiter distribute`), and
   its tenant's export compared with the file's.
3. `arbiter serve --db URL` and the verbs through its socket (arbiter.client.Client): what worked; 8 more tenants
   each writing and recalling a word of its own (and the others'); then --entries
   entries loaded by remember_many, --calls remembers and --calls recalls timed one at a time. Citus's own
   counters (`citus_stat_counters`, each node) say how many statements ran on one shard and how many on several
   while the daemon served. With --plain (an admin URL of a plain PostgreSQL), the same timings on a database
   there, for scale.

The Citus databases are dropped at the end (each holds a background worker of its node's few), unless --keep.
Nothing is asserted: it prints. CI has no Citus; this is run by hand (docs/benchmarks.md "Citus").
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from arbiter.transfer.model import KINDS
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile
from tests import pg


def _run(conninfo: str, *sql: str) -> list:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = []
        for statement in sql:
            cur = conn.execute(statement)
            rows = cur.fetchall() if cur.description else []
        return rows


def _nodes(coordinator: str) -> list[tuple[str, int]]:
    """The cluster's nodes as the coordinator knows them, the coordinator first (where it did not register itself
    with citus_set_coordinator_host, as its URL names it)."""
    rows = _run(coordinator, "SELECT nodename, nodeport, groupid FROM pg_dist_node WHERE noderole = 'primary' "
                             "AND isactive ORDER BY groupid, nodeid")
    workers = [(host, port) for host, port, group in rows if group != 0]
    own = [(host, port) for host, port, group in rows if group == 0]
    if not own:
        parts = conninfo_to_dict(coordinator)
        own = [(parts.get("host", "localhost"), int(parts.get("port", 5432)))]
    return own[:1] + workers


def _at(coordinator: str, node: tuple[str, int], dbname: str) -> str:
    parts = conninfo_to_dict(coordinator)
    return make_conninfo(**{**parts, "host": node[0], "port": str(node[1]), "dbname": dbname})


def drop_database(coordinator: str, name: str) -> None:
    """`name` dropped on every node (each Citus database holds a background worker of its node's few)."""
    for node in _nodes(coordinator):
        _run(_at(coordinator, node, "postgres"), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_database(coordinator: str, name: str) -> str:
    """A new database `name` on every node, with citus and the coordinator's nodes; its coordinator URL."""
    nodes = _nodes(coordinator)
    if len(nodes) < 2:
        raise SystemExit(f"{coordinator}: no workers in pg_dist_node (citus_add_node them first)")
    for node in nodes:
        _run(_at(coordinator, node, "postgres"), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
             f'CREATE DATABASE "{name}"')
        # The counters the routing check reads, for this database only.
        _run(_at(coordinator, node, name), "CREATE EXTENSION citus",
             f'ALTER DATABASE "{name}" SET citus.enable_stat_counters = on')
    (host, port), workers = nodes[0], nodes[1:]
    _run(_at(coordinator, nodes[0], name), f"SELECT citus_set_coordinator_host('{host}', {port})",
         *(f"SELECT citus_add_node('{h}', {p})" for h, p in workers))
    return pg.url_of(coordinator, name)


def counters(coordinator: str, name: str) -> list[tuple[int, int]]:
    """(single-shard, multi-shard) statements each node has run in `name` so far."""
    return [tuple(_run(_at(coordinator, node, name), "SELECT query_execution_single_shard, "
                       "query_execution_multi_shard FROM citus_stat_counters WHERE name = current_database()")[0])
            for node in _nodes(coordinator)]


# -- 2: the verbs' script in process -------------------------------------------------------------------------
def script_answers(url: str, sqlite_file: Path) -> dict:
    """The test script's answers on SQLite (written to `sqlite_file`) and on Citus, which differ, and which statements
    fanned out."""
    from arbiter.store import open_database
    from arbiter.store.pg.connection import Connection
    from tests.tenancy import _sender
    from tests.unit import test_verbs

    sent: list[tuple[str, str | None]] = [("", None)]
    fanned: dict[str, str | None] = {}

    def trace(sql: str) -> None:
        sent[0] = (sql, _sender())

    def notice(diag) -> None:
        if "multi-task query" in (diag.message_primary or ""):
            fanned.setdefault(" ".join(sent[0][0].split()), sent[0][1])

    citus = open_database(url)
    citus._pg.add_notice_handler(notice)
    citus.execute("SET citus.multi_task_query_log_level = 'warning'")
    Connection.trace = staticmethod(trace)
    sqlite = open_database(sqlite_file)
    try:
        want = test_verbs._answers(sqlite)
        try:
            got = test_verbs._answers(citus)
        except Exception as e:  # noqa: BLE001: a bench reports what broke, with what it was running
            return {"failed": f"{type(e).__name__}: {e}".splitlines()[0], "statement": sent[0][0][:300],
                    "where": sent[0][1], "fanned_out": fanned, "seen": None}
        # The check can see a statement that fans out: one that reads every tenant's entries.
        probe = "SELECT count(*) FROM entries"
        citus.execute(probe).fetchone()
        seen = fanned.pop(probe, False) is not False
    finally:
        Connection.trace = None
        sqlite.close()
        citus.close()
    differ = [(test_verbs.SCRIPT[i][1], w.decode()[:300], g.decode()[:300])
              for i, (w, g) in enumerate(zip(want, got)) if w != g]
    return {"calls": len(got), "differ": differ, "fanned_out": fanned, "seen": seen}


def move(coordinator: str, name: str, home_db: Path, home: Path) -> str:
    """The script's SQLite home moved into Citus as a user would: `arbiter migrate --to` a new database on the
    coordinator, then `arbiter distribute`; the tenant's export there against the file's."""
    from arbiter.store import open_database
    from tests.unit import test_verbs

    url = make_database(coordinator, name)
    home.mkdir(parents=True, exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}, "ARBITER_HOME": str(home)}
    for args in (["migrate", "--from", str(home_db), "--to", url, "--no-progress"], ["distribute", "--db", url]):
        done = subprocess.run([sys.executable, "-m", "arbiter", *args], capture_output=True, text=True, env=env)
        if done.returncode:
            return f"FAILED at {args[0]}: {done.stderr.strip().splitlines()[-1]}"
    sqlite, citus = open_database(home_db), open_database(url)
    try:
        want, got = test_verbs._export(sqlite, 1), test_verbs._export(citus, 1)
    finally:
        sqlite.close()
        citus.close()
    return f"{len(got)} records exported, {'the same as' if got == want else 'NOT the same as'} the file's"


# -- 3: through the daemon -----------------------------------------------------------------------------------
def verbs_through_socket(c) -> list[tuple[str, str]]:
    """The core verbs once each through the socket: (verb, "ok" or the error)."""
    out: list[tuple[str, str]] = []
    state: dict = {}

    def step(name, call):
        try:
            state[name] = call()
            out.append((name, "ok"))
        except Exception as e:  # noqa: BLE001: reported, not raised: the next verb still runs
            out.append((name, f"{type(e).__name__}: {e}".splitlines()[0][:200]))

    step("remember", lambda: c.remember(type="project", title="Deploys", content="We deploy on Fridays.",
                                        tags=["deploy", "ops"], entities=["Alice"]))
    step("remember_many", lambda: c.remember_many([
        {"type": "project", "title": f"Ticket {i}", "content": f"Ticket {i} waits on the deploy.",
         "tags": ["ticket", "deploy"]} for i in range(5)]))
    first = state.get("remember")
    fid = first.id if first else 1
    step("recall", lambda: c.recall("deploy fridays"))
    step("get", lambda: c.get(fid))
    step("update", lambda: c.update(fid, content="We deploy on Fridays after standup."))
    step("remember (supersedes)", lambda: c.remember(type="project", title="Deploys", content="We deploy on "
                                                     "Thursdays now.", tags=["deploy"], supersedes_ids=[fid]))
    step("get (as_of)", lambda: c.get(fid, as_of=first.recorded_at) if first else None)
    step("history", lambda: c.history(fid))
    step("reply", lambda: c.reply((state.get("remember_many") or [fid])[2], "Ticket 2 is done."))
    step("forget", lambda: c.forget((state.get("remember_many") or [fid])[0]))
    step("restore", lambda: c.restore((state.get("remember_many") or [fid])[0]))
    step("link", lambda: c.link(fid, "causes", (state.get("remember_many") or [fid])[1]))
    step("entities", lambda: c.entities())
    step("entity_show", lambda: c.entity_show("Alice"))
    step("export_page", lambda: c.export_page("entry"))
    step("user_add", lambda: c.user_add("bob"))
    step("team_add", lambda: c.team_add("core"))
    step("team_join", lambda: c.team_join("core", "bob"))
    step("export_page (every kind)", lambda: [c.export_page(kind) for kind in KINDS])
    step("share", lambda: c.share(fid, "core"))
    step("unshare", lambda: c.unshare(fid))
    step("briefing", lambda: c.briefing())
    now = state["remember (supersedes)"].id if "remember (supersedes)" in state else fid
    step("expand", lambda: c.expand(now, depth=2))
    step("density", lambda: c.density(now))
    step("thread", lambda: c.thread((state.get("remember_many") or [fid])[2]))
    step("backlinks", lambda: c.backlinks(now))
    step("around", lambda: c.around(now))
    step("tag_cooccurrence", lambda: c.tag_cooccurrence())
    step("topic_clusters", lambda: c.topic_clusters())
    step("graph_view", lambda: c.graph_view())
    step("graph_view (entities)", lambda: c.graph_view(view="entities"))
    step("conversation_create", lambda: c.conversation_create("Standup"))
    turns = [("Alice", "When do we deploy the billing service?"), ("Bob", "Billing deploys on Thursday after standup.")]
    step("remember (turns)", lambda: [c.remember(type="context", title=f"turn {i}", content=text, speaker=who,
                                                 conversation_id=state["conversation_create"].id)
                                      for i, (who, text) in enumerate(turns)])
    step("recall (turns)", lambda: c.recall("when does billing deploy"))
    step("associations", lambda: c.associations(now))
    step("facts_propose", lambda: c.facts_propose([
        {"subject": "Alice", "predicate": "works_at", "object": "Acme", "confidence": 0.9, "sources": [now]}],
        apply=True))
    step("facts", lambda: c.facts("Alice"))
    step("fact_history", lambda: c.fact_history(state["facts_propose"].facts[0].id))
    step("aspects", lambda: c.aspects())
    step("maintain", lambda: c.maintain())
    step("purge", lambda: c.purge((state.get("remember_many") or [fid])[-1]))
    step("status", lambda: c.status())
    step("whoami", lambda: c.whoami())
    return out


def tenants_spread(home: Path, n: int = 8) -> str:
    """`n` more tenants (as the admin), each writing a word of its own and recalling it and the others': their shards
    fall on both workers (the node counters), and no tenant finds another's word."""
    from arbiter import paths
    from arbiter.client import Client

    socket = paths.socket_path(home)
    with Client(socket, paths.read_secret(paths.admin_token_path(home), "admin")) as admin:
        tokens = [admin.tenant_create(f"spread-{i}").token for i in range(n)]
    words = [f"quokka{i}zeta" for i in range(n)]
    found_own, found_other = 0, 0
    for i, token in enumerate(tokens):
        with Client(socket, token) as c:
            c.remember(type="project", title=f"Tenant {i}", content=f"Our codeword is {words[i]}.")
            found_own += any(h.title == f"Tenant {i}" for h in c.recall(words[i]).hits)
            found_other += sum(bool(c.recall(w).hits) for j, w in enumerate(words) if j != i)
    return (f"{n} tenants: {found_own} found their own word, {found_other} recalls found another tenant's "
            f"(of {n * (n - 1)})")


def timings(c, entries: int, calls: int, seed: int = 7) -> dict:
    """Load `entries` by remember_many, then `calls` remembers and recalls one at a time: p50/p99 in ms."""
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    t0 = time.perf_counter()
    for start in range(0, entries, 500):
        c.remember_many([make_entry(vocab, rng, i) for i in range(start, min(entries, start + 500))])
    load_s = time.perf_counter() - t0
    return {"bulk_entries_per_s": round(entries / load_s), **timed(c, vocab, rng, calls, entries)}


def timed(c, vocab, rng, calls: int, first: int) -> dict:
    """`calls` remembers (new entries numbered from `first`), then `calls` recalls, one at a time."""
    remember, recall = [], []
    for i in range(calls):
        entry = make_entry(vocab, rng, first + i)
        t = time.perf_counter_ns()
        c.remember(**entry)
        remember.append(time.perf_counter_ns() - t)
    for _ in range(calls):
        words = " ".join(vocab.mid_frequency(rng.randint(2, 4)))
        t = time.perf_counter_ns()
        c.recall(words)
        recall.append(time.perf_counter_ns() - t)
    return {"remember_p50_ms": percentile(remember, 50), "remember_p99_ms": percentile(remember, 99),
            "recall_p50_ms": percentile(recall, 50), "recall_p99_ms": percentile(recall, 99)}


def serve(url: str, home: Path, *, entries: int, calls: int, verbs: bool, analyzed: bool = False) -> dict:
    """The daemon on `url`: the verbs once each (`verbs`), the load and timings; with `analyzed`, timed again after
    an ANALYZE (under Citus the daemon's own refresh of statistics reads the coordinator's empty shells, and the
    shards are analyzed by each worker's autovacuum, at its next turn)."""
    home.mkdir(parents=True, exist_ok=True)
    daemon = BenchDaemon(home, "NORMAL", args=("--db", url))
    try:
        with daemon.client() as c:
            worked = verbs_through_socket(c) if verbs else []
            spread = tenants_spread(home) if verbs else ""
            out = {"verbs": worked, "tenants": spread, **timings(c, entries, calls)}
            if analyzed:
                _run(url, "ANALYZE")
                rng = random.Random(8)
                out["analyzed"] = timed(c, Vocabulary(random.Random(7)), rng, calls, 2 * entries)
            return out
    finally:
        daemon.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.citus", description=__doc__.split("\n\n")[0])
    ap.add_argument("--coordinator", required=True, help="a database URL on the Citus coordinator, workers added")
    ap.add_argument("--name", default="citus_bench", help="the database made on every node (dropped first)")
    ap.add_argument("--entries", type=int, default=2000, help="entries loaded before the timings")
    ap.add_argument("--calls", type=int, default=200, help="remembers, then recalls, timed one at a time")
    ap.add_argument("--plain", help="an admin URL of a plain PostgreSQL: the same timings there, for scale")
    ap.add_argument("--keep", action="store_true",
                    help="keep the Citus databases (NAME, NAME_script, NAME_moved) to look into")
    args = ap.parse_args(argv)

    version = _run(args.coordinator, "SELECT citus_version()")[0][0]
    print(f"{version}; nodes: {', '.join(f'{h}:{p}' for h, p in _nodes(args.coordinator))}")
    url = make_database(args.coordinator, args.name)
    try:
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "arbiter", "distribute", "--db", url, "--json"],
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"arbiter distribute failed:\n{done.stderr}")
        placed = msgspec.json.decode(done.stdout)
        print(f"distribute: {len(placed['reference'])} reference tables, {len(placed['distributed'])} distributed "
              f"({time.perf_counter() - t:.1f} s)")

        with tempfile.TemporaryDirectory(prefix="bench-citus-") as work:
            # A database of its own: the script numbers its tenant and ids from 1, as on SQLite.
            script_url = make_database(args.coordinator, f"{args.name}_script")
            subprocess.run([sys.executable, "-m", "arbiter", "distribute", "--db", script_url], capture_output=True,
                           check=True)
            script = script_answers(script_url, Path(work) / "script.db")
            if "failed" in script:
                print(f"script: FAILED {script['failed']}\n    at {script['where']}: {script['statement']}")
            else:
                print(f"script: {script['calls']} calls, {len(script['differ'])} answers differ from SQLite's")
                for verb, want, got in script["differ"]:
                    print(f"  {verb}:\n    SQLite: {want}\n    Citus:  {got}")
            print(f"script: {len(script['fanned_out'])} statements sent to every shard (a probe that reads every "
                  f"tenant was {'seen' if script['seen'] else 'NOT seen: the check is blind'})")
            for sql, where in script["fanned_out"].items():
                print(f"  {where}: {sql[:240]}")

            moved = move(args.coordinator, f"{args.name}_moved", Path(work) / "script.db", Path(work) / "move")
            print(f"move: arbiter migrate --to, then distribute: {moved}")

            before = counters(args.coordinator, args.name)
            served = serve(url, Path(work) / "citus", entries=args.entries, calls=args.calls, verbs=True, analyzed=True)
            after = counters(args.coordinator, args.name)
            print("through the socket, ok:", ", ".join(v for v, r in served["verbs"] if r == "ok") or "-")
            for verb, result in served["verbs"]:
                if result != "ok":
                    print(f"  {verb}: {result}")
            print(f"  {served['tenants']}")
            for i, (b, a) in enumerate(zip(before, after)):
                print(f"  node {i} ({'coordinator' if i == 0 else 'worker'}): {a[0] - b[0]} single-shard, "
                      f"{a[1] - b[1]} multi-shard statements while serving")
            rows = [("citus", served)]
            if args.plain:
                plain = pg.url_of(args.plain, args.name)
                _run(args.plain, f'DROP DATABASE IF EXISTS "{args.name}" WITH (FORCE)',
                     f'CREATE DATABASE "{args.name}"')
                try:
                    rows.append(("plain", serve(plain, Path(work) / "plain", entries=args.entries, calls=args.calls,
                                                verbs=False)))
                finally:
                    _run(args.plain, f'DROP DATABASE IF EXISTS "{args.name}" WITH (FORCE)')
            print(f"{'':8} {'bulk/s':>7} {'remember p50':>13} {'p99':>7} {'recall p50':>11} {'p99':>7}  (ms; "
                  f"{args.entries} entries, {args.calls} calls)")
            rows.insert(1, ("analyzed", {"bulk_entries_per_s": "", **served["analyzed"]}))
            for label, r in rows:
                print(f"{label:8} {r['bulk_entries_per_s']:>7} {r['remember_p50_ms']:>13.2f} "
                      f"{r['remember_p99_ms']:>7.2f} {r['recall_p50_ms']:>11.2f} {r['recall_p99_ms']:>7.2f}")
            print("analyzed: Citus again after an ANALYZE through the coordinator (the shards' statistics)")

    finally:
        if not args.keep:
            for name in (args.name, f"{args.name}_script", f"{args.name}_moved"):
                drop_database(args.coordinator, name)

if __name__ == "__main__":
    main()
