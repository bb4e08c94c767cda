"""SQLite and PostgreSQL side by side: one workload through the real socket on each engine, in one run.

    python -m bench.engines --pg postgresql://USER@/DB?host=/run/postgresql [--sizes 10000,100000,250000]
                            [--out engines.json]
    python -m bench.engines --pg URL --tree OTHER_TREE --pg-other URL2 [--sizes 4000] [--singles 300]

For each engine (a daemon on a fresh home; on PostgreSQL `serve --db URL` on
an empty database, which the bench empties first), and through
`arbiter.client.Client`:

- `remember` p50/p99 over single calls, and bulk ingest (remember_many batches) in entries/s;
- at each tenant size in --sizes: `recall` p50/p99 and `get` p50 on the largest tenant, once the daemon has
  derived what the writes queued (and so has had the quiet spells its upkeep waits for);
- PostgreSQL only: recalls per second from --clients threads against one daemon, then spread over two
  daemons serving the same database (the issue asks >= 1.6x).

The issue's 1,000 tenants and 2.5M entries are bench/pg_scale.py's: its other tenants load in process.

With --tree, PostgreSQL only: this tree's daemon and another tree's, each on its own database, called in
turn (`remember` call by call, `remember_many` batch by batch, recall query by query once both derivation
queues are empty): a before/after on a machine whose load moves the figures run to run.

Targets (issue #31, PostgreSQL): recall p50 <= 10 ms and p99 <= 50 ms at 250K; remember p50 <= 5 ms;
bulk >= 5K entries/s; two daemons >= 1.6x one. Numbers are reported, nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from arbiter import __version__, paths
from arbiter.client import Client
from bench import report
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile

TARGETS = {"recall_p50_ms": 10.0, "recall_p99_ms": 50.0, "remember_p50_ms": 5.0, "bulk_entries_per_s": 5000.0}


@dataclass
class Engine:
    name: str
    remember_p50_ms: float = 0.0
    remember_p99_ms: float = 0.0
    bulk_entries_per_s: float = 0.0
    by_size: dict[int, dict[str, float]] = field(default_factory=dict)
    one_daemon_recalls_per_s: float = 0.0
    two_daemons_recalls_per_s: float = 0.0


def _empty_pg(url: str) -> None:
    """Drop every table of the bench's PostgreSQL database, so each run starts from nothing."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


def _queued(db: str | None, home: Path) -> int:
    """Rows in the daemon's derivation queue (`db` its PostgreSQL URL, else the SQLite file in `home`)."""
    if db:
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            return conn.execute("SELECT count(*) FROM derive_queue").fetchone()[0]
    import apsw

    conn = apsw.Connection(str(paths.db_path(home)), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM derive_queue").fetchone()[0]
    finally:
        conn.close()


def _idle(daemons: list[tuple[str | None, Path]], timeout: float = 600) -> None:
    """Wait until every daemon's derivation queue is empty, so recall is timed on idle daemons, as bench.pg_scale
    does: right after a bulk load a PostgreSQL daemon has not yet refreshed the planner's statistics (it does at its
    first quiet spell), and recall at 4,000 entries took 30-50 ms, 5-7 after."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_queued(db, home) for db, home in daemons):
        time.sleep(2)


def _queries(vocab: Vocabulary, rng: random.Random, n: int) -> list[str]:
    return [" ".join(vocab.mid_frequency(rng.randint(2, 4))) for _ in range(n)]


def _timed(calls) -> list[int]:
    samples = []
    for call in calls:
        t = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - t)
    return samples


def _throughput(clients: list[Client], queries: list[str], seconds: float) -> float:
    """Recalls per second from one thread per client, for `seconds`."""
    done = [0] * len(clients)
    stop = time.monotonic() + seconds

    def work(i: int) -> None:
        rng = random.Random(i)
        while time.monotonic() < stop:
            clients[i].recall(rng.choice(queries), limit=10)
            done[i] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / seconds


def one_and_two_daemons(home: Path, home2: Path, serve: tuple[str, ...], token: str, queries: list[str], clients: int,
                        seconds: float) -> tuple[float, float]:
    """Recalls per second from `clients` threads against the daemon serving `home`, then spread over it and a second
    daemon started on `home2` with the same `serve` options (the same PostgreSQL database), stopped after."""
    ones = [Client(paths.socket_path(home), token, timeout=600) for _ in range(clients)]
    one = _throughput(ones, queries, seconds)
    second = BenchDaemon(home2, "FULL", args=serve)
    try:
        twos = [Client(paths.socket_path(home if i % 2 else home2), token, timeout=600) for i in range(clients)]
        two = _throughput(twos, queries, seconds)
        for client in ones + twos:
            client.close()
    finally:
        second.stop()
    return one, two


def run_engine(name: str, db: str | None, args) -> Engine:
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    res = Engine(name)
    home = Path(tempfile.mkdtemp(prefix=f"arb-engines-{name}-"))
    extra = ("--db", db) if db else ()
    if db:
        _empty_pg(db)
    daemon = BenchDaemon(home, "FULL", args=extra)
    try:
        with daemon.client() as c:
            samples = _timed(lambda e=make_entry(vocab, rng, n): c.remember(**e) for n in range(args.singles))
            res.remember_p50_ms, res.remember_p99_ms = percentile(samples, 50), percentile(samples, 99)
            written, bulk_ns, ids = args.singles, 0, []
            for size in args.sizes:
                while written < size:
                    batch = [make_entry(vocab, rng, written + i) for i in range(min(args.batch, size - written))]
                    t = time.perf_counter_ns()
                    ids += c.remember_many(batch)
                    bulk_ns += time.perf_counter_ns() - t
                    written += len(batch)
                    print(f"{name}: {written:,} entries", file=sys.stderr, end="\r")
                _idle([(db, home)])
                queries = _queries(vocab, rng, args.recalls)
                for q in queries[:20]:  # warm the caches a long-running daemon has warm
                    c.recall(q, limit=10)
                recall = _timed(lambda q=q: c.recall(q, limit=10) for q in queries)
                get = _timed(lambda i=i: c.get(i) for i in rng.choices(ids, k=args.recalls))
                res.by_size[size] = {"recall_p50_ms": percentile(recall, 50), "recall_p99_ms": percentile(recall, 99),
                                     "get_p50_ms": percentile(get, 50)}
                print(f"{name} at {size:,}: recall p50 {res.by_size[size]['recall_p50_ms']:.1f} ms", file=sys.stderr)
            res.bulk_entries_per_s = (written - args.singles) / (bulk_ns / 1e9) if bulk_ns else 0.0
            if db and args.clients:
                queries = _queries(vocab, rng, 200)
                token = paths.token_path(home, "default").read_text().strip()
                home2 = Path(tempfile.mkdtemp(prefix="arb-engines-second-"))
                try:
                    res.one_daemon_recalls_per_s, res.two_daemons_recalls_per_s = one_and_two_daemons(
                        home, home2, extra, token, queries, args.clients, args.seconds)
                finally:
                    shutil.rmtree(home2, ignore_errors=True)
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    return res


def interleaved(args) -> str:
    """PostgreSQL only: a daemon of this tree and one of `--tree`, each on its own emptied database (`--pg`,
    `--pg-other`), called in turn (`remember` call by call, `remember_many` batch by batch, recall query by query
    once both daemons' derivation queues are empty), so a busy machine weighs on both alike."""
    trees = {"this": None, "other": args.tree.resolve()}
    urls = {"this": args.pg, "other": args.pg_other}
    daemons: dict[str, BenchDaemon] = {}
    try:
        for name, tree in trees.items():
            _empty_pg(urls[name])
            home = Path(tempfile.mkdtemp(prefix=f"arb-engines-{name}-"))
            daemons[name] = BenchDaemon(home, "FULL", tree=tree, args=("--db", urls[name]))
        clients = {name: d.client() for name, d in daemons.items()}
        rngs = {name: random.Random(args.seed) for name in trees}
        vocabs = {name: Vocabulary(random.Random(args.seed)) for name in trees}
        singles: dict[str, list[int]] = {name: [] for name in trees}
        bulk: dict[str, list[float]] = {name: [] for name in trees}
        recalls: dict[str, list[int]] = {name: [] for name in trees}

        def turns(i: int) -> tuple[str, str]:
            return ("this", "other") if i % 2 else ("other", "this")

        for i in range(args.singles):
            for name in turns(i):
                entry = make_entry(vocabs[name], rngs[name], i)
                singles[name] += _timed([lambda c=clients[name], e=entry: c.remember(**e)])
        for b in range(max(0, (max(args.sizes) - args.singles) // args.batch)):
            for name in turns(b):
                batch = [make_entry(vocabs[name], rngs[name], args.singles + b * args.batch + i) for i in range(args.batch)]
                t = time.perf_counter()
                clients[name].remember_many(batch)
                bulk[name].append(args.batch / (time.perf_counter() - t))
        _idle([(urls[name], daemons[name].home) for name in trees])
        # The entries' vocabulary (its words come from the seed), so the queries' words are in the data.
        queries = _queries(Vocabulary(random.Random(args.seed)), random.Random(args.seed + 1), args.recalls)
        for i, q in enumerate(queries):
            for name in turns(i):
                recalls[name] += _timed([lambda c=clients[name], q=q: c.recall(q, limit=10)])
        for client in clients.values():
            client.close()
    finally:
        for d in daemons.values():
            d.stop()
            shutil.rmtree(d.home, ignore_errors=True)
    lines = [f"arbiter {__version__}: PostgreSQL, this tree and {args.tree} called in turn"]
    for name in trees:
        rates = sorted(bulk[name])
        lines.append(f"  {name:5}: remember p50 {percentile(singles[name], 50):.2f} ms (p99 "
                     f"{percentile(singles[name], 99):.2f}); bulk {rates[len(rates) // 2] if rates else 0:,.0f} entries/s "
                     f"(median batch); recall p50 {percentile(recalls[name], 50):.1f} ms, p99 "
                     f"{percentile(recalls[name], 99):.1f} at {args.singles + len(rates) * args.batch:,} entries")
    return "\n".join(lines)


def table(results: list[Engine]) -> str:
    lines = [f"arbiter {__version__}: engines side by side"]
    for r in results:
        lines.append(f"  {r.name}: remember p50 {r.remember_p50_ms:.2f} ms (p99 {r.remember_p99_ms:.2f}), "
                     f"bulk {r.bulk_entries_per_s:,.0f} entries/s")
        for size, m in r.by_size.items():
            lines.append(f"    {size:>9,} entries: recall p50 {m['recall_p50_ms']:.1f} ms, p99 {m['recall_p99_ms']:.1f} ms;"
                         f" get p50 {m['get_p50_ms']:.2f} ms")
        if r.one_daemon_recalls_per_s:
            lines.append(f"    recalls/s: one daemon {r.one_daemon_recalls_per_s:.0f}, two daemons "
                         f"{r.two_daemons_recalls_per_s:.0f} ({r.two_daemons_recalls_per_s / r.one_daemon_recalls_per_s:.2f}x)")
    lines.append("  targets (PostgreSQL): " + ", ".join(f"{k} {v:g}" for k, v in TARGETS.items()) + ", two daemons 1.6x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.engines", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", required=True, help="URL of an empty PostgreSQL database the bench may wipe")
    ap.add_argument("--sizes", default="10000,100000,250000",
                    type=lambda s: sorted(int(x) for x in s.split(",")), help="tenant sizes measured at (default 10K,100K,250K)")
    ap.add_argument("--singles", type=int, default=1000, help="single remember calls to time")
    ap.add_argument("--batch", type=int, default=2000, help="entries per remember_many call")
    ap.add_argument("--recalls", type=int, default=300, help="recall and get calls to time at each size")
    ap.add_argument("--clients", type=int, default=8, help="threads for the one-vs-two daemons run (0: skip)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each throughput run")
    ap.add_argument("--engines", default="sqlite,postgresql", help="which engines, in order")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    ap.add_argument("--tree", type=Path, help="PostgreSQL only: another tree's daemon, called in turn with this "
                    "tree's on --pg-other (remember, bulk and recall at the largest size)")
    ap.add_argument("--pg-other", help="with --tree: the URL of a second empty database the bench may wipe")
    args = ap.parse_args(argv)
    if args.tree is not None:
        if not args.pg_other:
            ap.error("--tree needs --pg-other")
        print(interleaved(args))
        return
    if min(args.sizes) <= args.singles:  # the `get`s sample the bulk-written ids: a size must leave some
        ap.error(f"every --sizes must exceed --singles ({args.singles})")
    results = [run_engine(e, args.pg if e == "postgresql" else None, args) for e in args.engines.split(",")]
    report({"version": __version__, "engines": [asdict(r) for r in results]}, args.out, text=table(results))


if __name__ == "__main__":
    main()
