"""`arbiter migrate` benchmark: how fast a home moves to PostgreSQL and back.

    ARBITER_BENCH_PG=postgresql://postgres@/postgres?host=/tmp/pgdev \\
        python -m bench.migrate [--entries 100000] [--tenants 10] [--links 0.05] [--out migrate.json]

Fills a SQLite file in process (bench/load's generator: 300-800 bytes of Zipf
words, 0-4 tags; `remember_many` batches spread over --tenants tenants, a
relation per 1/--links entries, an update per 20 entries so a twentieth has an
earlier state), then times `transfer.migrate` into a fresh database on the
cluster ARBITER_BENCH_PG names (created and dropped here), and back into a new
SQLite file, reporting rows/s and entries/s each way. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path

from arbiter.model import RememberParams, UpdateParams
from arbiter.store import entries, open_database, relations, tenants, users
from arbiter.transfer import migrate
from bench import loadavg, report
from bench.load import Vocabulary, make_entry

ENV = "ARBITER_BENCH_PG"
T0 = 1_795_168_800_000_000


def fill(path: Path, args) -> int:
    """A SQLite home of `args.entries` entries; its size in bytes."""
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    conn = open_database(path, synchronous="NORMAL")
    try:
        with conn:
            viewers = [users.first_viewer(conn, tenants.create_tenant(conn, f"t{i}", now=T0)[0])
                       for i in range(args.tenants)]
        per = args.entries // args.tenants
        now = T0
        for v in viewers:
            ids: list[int] = []
            for start in range(0, per, 2000):
                items = [RememberParams(**make_entry(vocab, rng, n)) for n in range(start, min(per, start + 2000))]
                now += 1_000_000
                with conn:
                    ids += entries.remember_many(conn, v, items, now=now)
            with conn:
                for i in ids[::20]:
                    now += 1
                    entries.update(conn, v, UpdateParams(id=i, content=make_entry(vocab, rng, i)["content"]), now=now)
                for _ in range(int(len(ids) * args.links)):
                    a, b = rng.sample(ids, 2)
                    if not conn.execute("SELECT 1 FROM relations WHERE source_id = ? AND target_id = ?",
                                        (a, b)).fetchone():
                        relations.insert(conn, v.tenant_id, a, "relates_to", b, now=now)
    finally:
        conn.close()
    return path.stat().st_size


def timed(source, target) -> dict:
    t, cpu = time.perf_counter(), time.process_time()
    moved = migrate.migrate(source, target)
    seconds = time.perf_counter() - t
    rows = sum(moved.rows.values())
    return {"seconds": round(seconds, 2), "cpu_s": round(time.process_time() - cpu, 2), "rows": rows,
            "rows_per_s": round(rows / seconds), "entries_per_s": round(moved.rows["entries"] / seconds)}


def run(args) -> dict:
    import psycopg

    admin = os.environ.get(ENV, "")
    if not admin.startswith(("postgresql://", "postgres://")):
        raise SystemExit(f"{ENV} must be a postgresql:// URL of a cluster where this user may CREATE DATABASE")
    folder = Path(tempfile.mkdtemp(prefix="arb-mig-"))
    name = f"arbiter_bench_migrate_{os.getpid()}"
    try:
        t = time.perf_counter()
        size = fill(folder / "arbiter.db", args)
        fill_s = time.perf_counter() - t
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        url = urllib.parse.urlunsplit(urllib.parse.urlsplit(admin)._replace(path=f"/{name}"))
        out = {"entries": args.entries, "tenants": args.tenants, "sqlite_bytes": size, "fill_s": round(fill_s, 1),
               "to_postgresql": timed(folder / "arbiter.db", url),
               "to_sqlite": timed(url, folder / "back.db"), "loadavg": loadavg()}
        return out
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--tenants", type=int, default=10)
    ap.add_argument("--links", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    print(f"seed {args.seed}", flush=True)
    report(run(args), args.out)


if __name__ == "__main__":
    main()
