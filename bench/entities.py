"""Entity-layer benchmark: a real daemon, the real socket, a tenant of N entries naming M entities.

    python -m bench.entities [--entries 250000] [--entities 50000] [--out entities.json]

Every entry is bench.load's realistic text (300-800 bytes of Zipf-distributed
words) plus 1-3 CamelCase names drawn uniformly from a pool of M, so
extraction and resolution run on every write and the tenant ends with about
M entities. Measures, through `arbiter.client.Client`:

- `remember_many` throughput (entries/s) up to --entries, in batches of --batch,
  then how long the idle writer takes to extract what the bulk load mentions;
- then `remember` latency p50/p99 over --singles calls, each naming 1-3
  entities, 70% known and 30% new (extraction + resolution + duplicate check);
- `get` latency p50/p99 over --gets calls (each logs an access);
- `recall` latency p50/p99 over --recalls queries (two mid-frequency words and
  one entity name), tenant-wide, with the entity stages as shipped and with
  them disabled (`entities`, `clusters`, `salience`), interleaved;
- the entity count at the end (from `status`);
- with --reads N: `entities` N times in a one-user tenant, then a second
  user joins the tenant (so the first one no longer
  sees all of it, and every entity read goes through the viewer's filters and
  dating, `entities.visibility.visible_sql`/`dated_sql`), then the first user's
  `entities` (the 50 most mentioned) and `entity show` of a random pool name
  that names an entity, N of each, p50/p99 wall time through the socket and the
  daemon's CPU time per call; and the web view's entity graph (limit 200)
  N times as the one user, as the first user once shared, and as the user
  who joined (who sees none of it; `entities` N times as them too).

--home DIR keeps the built home in DIR, and a later run given the same DIR
skips the load and only reads (--singles 0 --gets 0 --recalls 0 skip those).
The reads run on a copy of a kept home, so it stays one user's and every run
times every case (a home an older run shared is said so, and its one-user
timings skipped); --tree PATH runs the daemon from another checkout, so one
home is read by the code before and after a change.

Run it with PYTHONPATH pointing at another tree to compare (an Arbiter
without entities ignores the names: same text, same socket): that is how the
"bulk ingest loses at most 25%" and "the access log adds nothing to get"
figures in docs/benchmarks.md were taken. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from arbiter import paths
from arbiter.client import Client
from arbiter.entities import names as entity_names
from arbiter.store import connect
from bench import report
from bench.load import SYLLABLES, BenchDaemon, Vocabulary, cpu_s, make_entry, percentile


def names(rng: random.Random, m: int) -> list[str]:
    """M distinct CamelCase names ("DoramarTekzi"), which extraction picks up as entities."""
    out: set[str] = set()
    while len(out) < m:
        parts = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))).capitalize() for _ in range(2)]
        out.add("".join(parts))
    return sorted(out)


def entry(vocab: Vocabulary, rng: random.Random, n: int, pool: list[str]) -> dict:
    e = make_entry(vocab, rng, n)
    mentioned = rng.sample(pool, rng.randint(1, 3))
    e["content"] = (e["content"][:600] + " with " + " and ".join(mentioned))[:64_000]
    return e


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=250_000)
    ap.add_argument("--entities", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--singles", type=int, default=2000)
    ap.add_argument("--gets", type=int, default=3000)
    ap.add_argument("--recalls", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--reads", type=int, default=0, help="entities/entity show calls in a shared tenant")
    ap.add_argument("--home", type=Path, help="build the home here and keep it; reuse it if it is there")
    ap.add_argument("--tree", type=Path, help="run the daemon from this checkout")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"seed {args.seed}", file=sys.stderr)
    vocab = Vocabulary(rng)
    pool = names(rng, args.entities)
    home = args.home or Path(tempfile.mkdtemp(prefix="arb-ent-"))
    home.mkdir(parents=True, exist_ok=True)
    built = paths.db_path(home).exists()
    result: dict = ({"reused_home": True} if built else
                    {"entries": args.entries, "entity_pool": args.entities, "batch": args.batch})
    try:
        daemon = BenchDaemon(home, "FULL", tree=args.tree)
        try:
            with daemon.client() as c:
                c.ping()
                if not built:
                    load(c, home, args, rng, vocab, pool, result)
                result["entities"] = getattr(c.status(), "entities", None)
        finally:
            daemon.stop()
        if args.reads:
            result.update(reads(home, args, rng, pool))
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    report(result, args.out)
    return 0


def reads(home: Path, args, rng: random.Random, pool: list[str]) -> dict:
    """`shared_reads` on `home`, or on a copy of it when it is kept (`--home`): the reads make its tenant shared, and
    a kept home must stay one user's for the next run to time the one-user reads too."""
    copy = None if args.home is None else Path(tempfile.mkdtemp(prefix="arb-ent-reads-"))
    if copy is not None:
        shutil.copytree(home, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.sock", "*.lock", "*.log"))
    daemon = BenchDaemon(copy or home, "FULL", tree=args.tree)
    try:
        with daemon.client() as c:
            return shared_reads(daemon, c, rng, pool, args.reads)
    finally:
        daemon.stop()
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def shared_reads(daemon: BenchDaemon, c, rng: random.Random, pool: list[str], n: int) -> dict:
    """`entities` and the entity graph as the tenant's only user, then `entities`, `entity show` and the entity graph
    as its first user once another user shares the tenant, and `entities` and the graph as that other user."""
    out = {}
    users = [u.name for u in c.user_list().users]
    if len(users) == 1:
        out.update(timed(daemon, "solo_entities", n, lambda: c.entities(limit=50)))
        out.update(timed(daemon, "solo_entity_graph", n, lambda: c.graph_view(view="entities", limit=200)))
    else:  # a home an older run of this bench shared in place
        out["solo"] = f"not timed: the tenant already has {len(users)} users"
        print(f"solo reads not timed: the home's tenant already has users {users}", file=sys.stderr)
    other = c.user_rotate("bench-other") if "bench-other" in users else c.user_add("bench-other")
    out.update(timed(daemon, "shared_entities", n, lambda: c.entities(limit=50)))
    shown = iter(rng.choices(named(daemon.home, pool), k=n))
    out.update(timed(daemon, "shared_entity_show", n, lambda: c.entity_show(next(shown), limit=20)))
    out.update(timed(daemon, "shared_entity_graph", n, lambda: c.graph_view(view="entities", limit=200)))
    with Client(paths.socket_path(daemon.home), other.token, timeout=600, check_code=daemon.tree is None) as them:
        out.update(timed(daemon, "other_entities", n, lambda: them.entities(limit=50)))
        out.update(timed(daemon, "other_entity_graph", n, lambda: them.graph_view(view="entities", limit=200)))
    return out


def named(home: Path, pool: list[str]) -> list[str]:
    """The pool names that name an entity (as its name or an alias): extraction need not have met every one."""
    db = connect(paths.db_path(home), readonly=True)
    try:
        keys = {k for (k,) in db.execute("SELECT key FROM entity_names")}
    finally:
        db.close()
    return [name for name in pool if entity_names.key(name) in keys]


def timed(daemon: BenchDaemon, key: str, n: int, call) -> dict:
    """`call()` N times: p50/p99 wall time through the socket and the daemon's CPU time a call, under `key`."""
    samples, started = [], cpu_s(daemon.proc.pid)
    for _ in range(n):
        t = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - t)
    return {f"{key}_p50_ms": percentile(samples, 50), f"{key}_p99_ms": percentile(samples, 99),
            f"{key}_daemon_cpu_ms": round((cpu_s(daemon.proc.pid) - started) / n * 1000, 2)}


def load(c, home: Path, args, rng: random.Random, vocab: Vocabulary, pool: list[str], result: dict) -> None:
    """The bulk load, the wait for extraction, then single remembers, gets and recalls (those skipped at 0)."""
    ids: list[int] = []
    bulk_ns, n = 0, 0
    while n < args.entries:
        batch = [entry(vocab, rng, n + i, pool) for i in range(min(args.batch, args.entries - n))]
        t = time.perf_counter_ns()
        ids.extend(c.remember_many(batch))
        bulk_ns += time.perf_counter_ns() - t
        n += len(batch)
        if (n // args.batch) % 50 == 0:
            print(f"  ... {n} entries, {n / (bulk_ns / 1e9):,.0f}/s", file=sys.stderr)
    result["bulk_entries_per_s"] = round(n / (bulk_ns / 1e9))
    # The idle writer extracts the bulk load's entities after the answers: wait for it (polled from the
    # file, so the wait itself leaves the daemon idle), so `remember` then meets a tenant that knows them.
    started = time.monotonic()
    db = connect(paths.db_path(home), readonly=True)
    try:
        while db.execute("SELECT count(*) FROM derive_queue WHERE deriver = 'entities'").fetchone()[0]:
            time.sleep(0.5)
    finally:
        db.close()
    result["extraction_after_bulk_s"] = round(time.monotonic() - started, 1)
    fresh = names(random.Random(args.seed + 1), args.singles)
    samples = []
    for i in range(args.singles):
        e = entry(vocab, rng, i, pool)
        if rng.random() < 0.3:
            e["content"] += f" and {fresh[i]}"
        t = time.perf_counter_ns()
        ids.append(c.remember(**e).id)
        samples.append(time.perf_counter_ns() - t)
    if samples:
        result["remember_p50_ms"], result["remember_p99_ms"] = percentile(samples, 50), percentile(samples, 99)
    samples = []
    for eid in rng.choices(ids, k=args.gets):
        t = time.perf_counter_ns()
        c.get(eid)
        samples.append(time.perf_counter_ns() - t)
    if samples:
        result["get_p50_ms"], result["get_p99_ms"] = percentile(samples, 50), percentile(samples, 99)
    # Interleaved, so both variants meet the same load on a shared machine.
    timed: dict[str, list[int]] = {"recall": [], "recall_no_entity_stages": []}
    for _ in range(args.recalls):
        query = " ".join([*vocab.mid_frequency(2), rng.choice(pool)])
        for key, disable in (("recall", []), ("recall_no_entity_stages", ["entities", "clusters", "salience"])):
            t = time.perf_counter_ns()
            c.recall(query, disable=disable)
            timed[key].append(time.perf_counter_ns() - t)
    for key, samples in timed.items():
        if samples:
            result[f"{key}_p50_ms"], result[f"{key}_p99_ms"] = percentile(samples, 50), percentile(samples, 99)


if __name__ == "__main__":
    raise SystemExit(main())
