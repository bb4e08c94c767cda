"""Issue 31's scale run: 1,000 tenants and 2.5M entries on each engine, the largest tenant 250K, through the socket.

    python -m bench.pg_scale --pg postgresql://postgres@/postgres?host=/tmp/pgdev --work DIR
        [--others 999 --other-size 2250] [--sizes 10000,100000,250000] [--recalls 300] [--clients 8 --seconds 20]
        [--engines sqlite,postgresql] [--derive-wait 60] [--keep] [--out scale.json]
    python -m bench.pg_scale --pg URL --work DIR --reuse [--engines postgresql]   # the kept run, measured again
    python -m bench.pg_scale --pg URL --work DIR --tree OTHER_TREE               # the kept run, two trees in turn

Loading, once (kept as the database `pgscale_<others>x<other-size>` and the home --work/that name; a
later run reuses them): the --others tenants of --other-size entries each are written in process by
the store's own `remember_many` (one transaction a tenant, --workers processes at once on PostgreSQL;
SQLite's one writer alone), the daemon's bulk path without the socket. Their derived work (entities,
near-copy keys, associations) is not done: its queue rows are deleted, so no daemon spends the
measurement deriving 2.25M entries. Their full text is indexed in the write, as on every write.

Each run starts from a copy of that base (PostgreSQL: `CREATE DATABASE pgscale_run TEMPLATE ...`;
SQLite: the file copied), a daemon on it, and the big tenant written through the socket
(`remember_many` batches of --batch), growing to each of --sizes. At each size the daemon gets
--derive-wait seconds to derive what the batches queued, then the rest of its queue is dropped
(it derives ~150 entries/s here: the idle work of 250K entries would share the cores with recall
for most of an hour), and --recalls recalls of 2-4 mid-frequency words are timed one at a time,
after 20 untimed. At the largest size on PostgreSQL, --clients threads recall for --seconds
against one daemon, then spread over two daemons serving the same database. With --keep the
run's copy (database `pgscale_run`, home under --work) is kept for --reuse and --tree.

Targets (issue 31, PostgreSQL, 250K tenant): recall p50 <= 10 ms, p99 <= 50 ms; two daemons
>= 1.6x one. Numbers are reported, nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import shutil
import sys
import time
from pathlib import Path

from arbiter import __version__, paths
from arbiter.client import Client
from bench import report
from bench.engines import _queries, _timed, one_and_two_daemons
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile

T0 = 1795168800 * 1_000_000
RUN = "pgscale_run"


def _base(args) -> str:
    """The loaded others' name: one base per shape, so a smaller trial never stands in for the real one."""
    return f"pgscale_{args.others}x{args.other_size}"


def _db_url(admin: str, name: str) -> str:
    from tests import pg

    return pg.url_of(admin, name)


def _admin(admin: str, sql: str):
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else None


def _exists(admin: str, name: str) -> bool:
    return bool(_admin(admin, f"SELECT 1 FROM pg_database WHERE datname = '{name}'"))


def _load_tenants(target: str, first: int, last: int, size: int, seed: int) -> None:
    """Tenants other-`first` .. other-`last - 1`, `size` entries each, through the store in this process."""
    from arbiter.model import RememberParams
    from arbiter.store import entries, open_database, tenants, users

    conn = open_database(target)
    vocab = Vocabulary(random.Random(seed))
    try:
        for t in range(first, last):
            rng = random.Random(seed * 100_003 + t)
            vocab.rng = rng
            items = [RememberParams(**make_entry(vocab, rng, n)) for n in range(size)]
            with conn:
                tid, _ = tenants.create_tenant(conn, f"other-{t}", now=T0)
                entries.remember_many(conn, users.first_viewer(conn, tid), items, now=T0 + t)
                # Not derived: see the module's docstring.
                conn.execute("DELETE FROM derive_queue WHERE tenant_id = ?", (tid,))
            print(f"{target.rsplit('/', 1)[-1][:40]}: tenant {t + 1}", file=sys.stderr, flush=True)
    finally:
        conn.close()


def _load_base(engine: str, args) -> None:
    """The others, once: PostgreSQL's database `pgscale_<others>x<other-size>`, SQLite's home --work/<that name>."""
    from arbiter.store import open_database

    start = time.monotonic()
    name = _base(args)
    if engine == "postgresql":
        if _exists(args.pg, name):
            return
        _admin(args.pg, f'CREATE DATABASE "{name}_loading"')
        target = _db_url(args.pg, f"{name}_loading")
        open_database(target).close()
        ctx = multiprocessing.get_context("spawn")
        per = -(-args.others // args.workers)
        procs = [ctx.Process(target=_load_tenants, args=(target, w * per, min(args.others, (w + 1) * per),
                                                        args.other_size, args.seed))
                 for w in range(args.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            if p.exitcode:
                sys.exit(f"a loader failed (exit {p.exitcode}); {name}_loading left for a look")
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        _admin(args.pg, f'ALTER DATABASE "{name}_loading" RENAME TO "{name}"')
    else:
        base = args.work / name
        if paths.db_path(base).exists():
            return
        loading = args.work / f"{name}_loading"
        shutil.rmtree(loading, ignore_errors=True)
        loading.mkdir(parents=True)
        open_database(str(paths.db_path(loading))).close()
        _load_tenants(str(paths.db_path(loading)), 0, args.others, args.other_size, args.seed)
        loading.rename(base)
    print(f"{engine}: {args.others} tenants of {args.other_size} loaded in {time.monotonic() - start:.0f} s",
          file=sys.stderr)


def _fresh_run(engine: str, args) -> tuple[Path, tuple[str, ...]]:
    """The run's home and `serve` options: a copy of the base (or the kept run with --reuse)."""
    home = args.work / f"{engine}-run"
    if args.reuse:
        return home, (("--db", _db_url(args.pg, RUN)) if engine == "postgresql" else ())
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    if engine == "postgresql":
        _admin(args.pg, f'DROP DATABASE IF EXISTS "{RUN}" WITH (FORCE)')
        _admin(args.pg, f'CREATE DATABASE "{RUN}" TEMPLATE "{_base(args)}"')
        return home, ("--db", _db_url(args.pg, RUN))
    shutil.copyfile(paths.db_path(args.work / _base(args)), paths.db_path(home))
    return home, ()


def _queue(engine: str, home: Path, args, sql: str) -> int:
    """Run `sql` on the run's database beside the daemon (a count, or a DELETE's row count)."""
    if engine == "postgresql":
        import psycopg

        with psycopg.connect(_db_url(args.pg, RUN), autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchone()[0] if cur.description else cur.rowcount
    import apsw

    lite = apsw.Connection(str(paths.db_path(home)))
    lite.set_busy_timeout(60_000)
    try:
        with lite:
            rows = lite.execute(sql).fetchall()
            return rows[0][0] if rows else lite.changes()
    finally:
        lite.close()


def _settle_derivation(engine: str, home: Path, args) -> tuple[float, int]:
    """(seconds waited, queue rows dropped): the daemon derives its bulk writes idle (entities, near-copy keys,
    associations), ~150 entries/s here, work that would share the cores with recall for most of an hour at 250K.
    It gets --derive-wait seconds; the rest is dropped, so recall is measured with the daemon idle."""
    start = time.monotonic()
    while True:
        left = _queue(engine, home, args, "SELECT count(*) FROM derive_queue")
        if not left or time.monotonic() - start > args.derive_wait:
            break
        print(f"{engine}: {left:,} queued derivations", file=sys.stderr, end="\r")
        time.sleep(5)
    waited = time.monotonic() - start
    return waited, _queue(engine, home, args, "DELETE FROM derive_queue") if left else 0


def run_engine(engine: str, args) -> dict:
    _load_base(engine, args)
    home, serve = _fresh_run(engine, args)
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    out: dict = {"engine": engine, "by_size": {}}
    daemon = BenchDaemon(home, "FULL", args=serve)
    try:
        token_file = home / "big.token"
        if not args.reuse:
            with Client(paths.socket_path(home), paths.admin_token_path(home).read_text().strip(), timeout=600) as a:
                token_file.write_text(a.tenant_create("big").token)
        token = token_file.read_text().strip()
        with Client(paths.socket_path(home), token, timeout=600) as c:
            written = max(args.sizes) if args.reuse else 0
            for size in [max(args.sizes)] if args.reuse else args.sizes:
                start, before = time.perf_counter(), written
                while written < size:
                    n = min(args.batch, size - written)
                    c.remember_many([make_entry(vocab, rng, written + i) for i in range(n)])
                    written += n
                    print(f"{engine}: big tenant {written:,}", file=sys.stderr, end="\r")
                ingest = time.perf_counter() - start
                waited, left = _settle_derivation(engine, home, args)
                queries = _queries(vocab, rng, args.recalls)
                for q in queries[:20]:  # the caches a long-running daemon has warm
                    c.recall(q, limit=10)
                recall = _timed(lambda q=q: c.recall(q, limit=10) for q in queries)
                out["by_size"][size] = {"recall_p50_ms": percentile(recall, 50),
                                        "recall_p99_ms": percentile(recall, 99),
                                        "ingest_entries_per_s": (size - before) / ingest if size > before else 0.0,
                                        "derive_wait_s": waited, "derive_dropped": left}
                print(f"{engine} at {size:,}: recall p50 {out['by_size'][size]['recall_p50_ms']:.1f} ms, "
                      f"p99 {out['by_size'][size]['recall_p99_ms']:.1f} ms (derivation waited {waited:.0f} s, {left:,} dropped)",
                      file=sys.stderr)
        if engine == "postgresql" and args.clients:
            queries = _queries(vocab, rng, 200)
            home2 = args.work / "postgresql-second"
            shutil.rmtree(home2, ignore_errors=True)
            home2.mkdir(parents=True)
            out["one_daemon_recalls_per_s"], out["two_daemons_recalls_per_s"] = one_and_two_daemons(
                home, home2, serve, token, queries, args.clients, args.seconds)
    finally:
        daemon.stop()
    if engine == "postgresql":
        out["database_gb"] = _admin(args.pg, f"SELECT pg_database_size('{RUN}')")[0][0] / 1e9
    else:
        out["database_gb"] = paths.db_path(home).stat().st_size / 1e9
    if not (args.keep or args.reuse):  # a --reuse run measures the kept run: it stays kept
        shutil.rmtree(home, ignore_errors=True)
        if engine == "postgresql":
            _admin(args.pg, f'DROP DATABASE IF EXISTS "{RUN}" WITH (FORCE)')
    return out


def against_tree(args) -> str:
    """PostgreSQL, the kept run's big tenant: recall through a daemon of this tree and one of --tree on the same
    database, query by query in turn, so the machine's load weighs on both alike."""
    serve = ("--db", _db_url(args.pg, RUN))
    token = (args.work / "postgresql-run" / "big.token").read_text().strip()
    daemons, samples = {}, {"this": [], "other": []}
    try:
        for name, tree in (("this", None), ("other", args.tree.resolve())):
            home = args.work / f"postgresql-{name}-tree"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            daemons[name] = BenchDaemon(home, "FULL", tree=tree, args=serve)
        clients = {name: Client(paths.socket_path(d.home), token, timeout=600, check_code=d.tree is None)
                   for name, d in daemons.items()}
        queries = _queries(Vocabulary(random.Random(args.seed)), random.Random(args.seed + 1), args.recalls + 20)
        for i, q in enumerate(queries):
            for name in (("this", "other") if i % 2 else ("other", "this")):
                t = time.perf_counter_ns()
                clients[name].recall(q, limit=10)
                if i >= 20:  # the first warm both daemons' caches
                    samples[name].append(time.perf_counter_ns() - t)
        for c in clients.values():
            c.close()
    finally:
        for d in daemons.values():
            d.stop()
    return "\n".join(f"  {name:5}: recall p50 {percentile(s, 50):.1f} ms, p99 {percentile(s, 99):.1f} ms"
                     for name, s in samples.items())


def table(results: list[dict], args) -> str:
    lines = [f"arbiter {__version__}: {args.others} other tenants of {args.other_size} entries, one big tenant"]
    for r in results:
        lines.append(f"  {r['engine']}: {r['database_gb']:.1f} GB")
        for size, m in r["by_size"].items():
            lines.append(f"    {size:>9,}: recall p50 {m['recall_p50_ms']:.1f} ms, p99 {m['recall_p99_ms']:.1f} ms; "
                         f"ingest {m['ingest_entries_per_s']:,.0f} entries/s; derivation waited {m['derive_wait_s']:.0f} s"
                         f" ({m['derive_dropped']:,} dropped)")
        if r.get("one_daemon_recalls_per_s"):
            one, two = r["one_daemon_recalls_per_s"], r["two_daemons_recalls_per_s"]
            lines.append(f"    recalls/s: one daemon {one:.0f}, two daemons {two:.0f} ({two / one:.2f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.pg_scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", required=True, help="a PostgreSQL URL whose user may CREATE DATABASE")
    ap.add_argument("--work", type=Path, required=True, help="folder for the SQLite homes (kept between runs)")
    ap.add_argument("--others", type=int, default=999, help="tenants beside the big one (loaded once, kept as the base)")
    ap.add_argument("--other-size", type=int, default=2250, help="entries in each of the other tenants")
    ap.add_argument("--workers", type=int, default=2, help="PostgreSQL loader processes")
    ap.add_argument("--sizes", default="10000,100000,250000", type=lambda s: sorted(int(x) for x in s.split(",")),
                    help="sizes the big tenant is grown to, recall measured at each (comma-separated)")
    ap.add_argument("--batch", type=int, default=2000, help="entries a remember_many call while growing")
    ap.add_argument("--recalls", type=int, default=300, help="timed recalls at each size (after 20 untimed)")
    ap.add_argument("--clients", type=int, default=8, help="threads for one daemon against two (0: skip)")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long each of one and two daemons is driven")
    ap.add_argument("--derive-wait", type=float, default=60.0,
                    help="seconds the daemon may derive after each growth step before its queue is dropped")
    ap.add_argument("--engines", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    ap.add_argument("--load-only", action="store_true", help="load the bases and stop")
    ap.add_argument("--keep", action="store_true", help="keep the run's copy (home, database pgscale_run)")
    ap.add_argument("--reuse", action="store_true", help="measure the kept copy again, writing nothing")
    ap.add_argument("--tree", type=Path, help="with a kept run: recall through a daemon of this tree and one of "
                    "this other tree (a checkout or `git archive`), in turn (PostgreSQL)")
    ap.add_argument("--seed", type=int, default=20261129,
                    help="the entries' and queries' seed (a kept run answers only the queries of its own)")
    ap.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.tree:
        print(f"this tree and {args.tree}, in turn, on the kept big tenant:\n{against_tree(args)}")
        return
    if args.load_only:
        for engine in args.engines.split(","):
            _load_base(engine, args)
        return
    results = [run_engine(e, args) for e in args.engines.split(",")]
    report({"version": __version__, "scale": results}, args.out, text=table(results, args))


if __name__ == "__main__":
    main()
