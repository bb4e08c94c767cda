"""Bulk writes through the store on both engines, side by side (issue 31: bulk ingest >= 5K entries/s).

    python -m bench.store_engines --pg URL [--entries 10000] [--batch 2000] [--rounds 3] [--tree DIR]

`remember_many` of bench.load's entries, in `--batch`-entry transactions (the
daemon's bulk path without the socket), on a fresh SQLite file and on a fresh
PostgreSQL database of the cluster `--pg` names (a URL whose user may CREATE
DATABASE; its database is only used to create and drop the bench's own).
Each run is a child process with a tree's code on its path: this tree, and
with `--tree` another (a checkout or `git archive` of an earlier commit), the
runs alternating tree by tree and engine by engine so a busy machine weighs
on both alike. Wall time: PostgreSQL's work is in its server process, not
ours. The table gives each (tree, engine)'s median entries/s, and the CPU
time a 1,000 entries took in this process and (PostgreSQL, a server on this
machine) in its server process, read from /proc: on a machine shared with
other work, wall time moves with their load, CPU time far less. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = 1795168800 * 1_000_000
HERE = Path(__file__).resolve().parent.parent
_CHILD = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"


def _cpu_s(pid: int) -> float | None:
    """`bench.load.cpu_s`, or None where /proc does not show the process (a server on another machine)."""
    from bench.load import cpu_s

    try:
        return cpu_s(pid)
    except OSError:
        return None


def child(engine: str, pg: str, entries_n: int, batch: int, seed: int) -> dict[str, float | None]:
    """One run in this process (whatever tree is on its path): entries/s, and CPU ms a 1,000 entries here and in
    PostgreSQL's server process (None for SQLite, or a server /proc does not show)."""
    from arbiter.model import RememberParams
    from arbiter.store import entries, open_database, tenants, users
    from bench.load import Vocabulary, make_entry

    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    items = [RememberParams(**make_entry(vocab, rng, n)) for n in range(entries_n)]
    with tempfile.TemporaryDirectory(prefix="arb-engines-") as tmp:
        if engine == "sqlite":
            target, drop = str(Path(tmp) / "arbiter.db"), None
        else:
            from tests import pg as pg_databases

            databases = pg_databases.Databases(pg)
            target = databases.create(empty=True)
            drop = databases
        conn = open_database(target)
        try:
            with conn:
                tid, _ = tenants.create_tenant(conn, "bench", now=T0)
            v = users.first_viewer(conn, tid)
            server = conn.execute("SELECT pg_backend_pid()").fetchone()[0] if drop is not None else None
            server_at = _cpu_s(server) if server else None
            start, cpu_at = time.perf_counter(), time.process_time()
            for at in range(0, len(items), batch):
                with conn:
                    entries.remember_many(conn, v, items[at:at + batch], now=T0 + at)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu_at
            server_s = _cpu_s(server) - server_at if server_at is not None else None
            per = 1000 * 1000 / entries_n  # seconds for the run -> ms a 1,000 entries
            return {"rate": entries_n / wall, "cpu_ms": cpu * per,
                    "server_ms": server_s * per if server_s is not None else None}
        finally:
            conn.close()
            if drop is not None:
                drop.drop(target)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.store_engines", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", required=True, help="a PostgreSQL URL whose user may CREATE DATABASE")
    ap.add_argument("--entries", type=int, default=10_000, help="entries a run writes (default 10000)")
    ap.add_argument("--batch", type=int, default=2000, help="entries per remember_many (default 2000)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per tree and engine (default 3)")
    ap.add_argument("--tree", type=Path, help="another tree to run beside this one (its code, this bench)")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--child", choices=["sqlite", "postgresql"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.pg, args.entries, args.batch, args.seed)))
        return
    trees = {"this": HERE} | ({"other": args.tree.resolve()} if args.tree else {})
    runs: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for label, tree in trees.items():
            for engine in ("sqlite", "postgresql"):
                # This file runs by path from inside `tree`, so the code under test (and bench.load) is `tree`'s
                # (as a script its folder would come first on the path, and bench/concurrent.py hide the stdlib's).
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, __file__, "--child", engine, "--pg", args.pg, "--entries", str(args.entries), "--batch", str(args.batch),
                     "--seed", str(args.seed + r)],
                    env=env, cwd=tree, capture_output=True, text=True,
                )
                if out.returncode:
                    sys.exit(f"the {engine} run of {tree} failed:\n{out.stderr}")
                runs.setdefault((label, engine), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"remember_many, {args.entries} entries in batches of {args.batch}, {args.rounds} rounds (medians: entries/s; "
          "CPU ms a 1,000 entries here + in the server)")
    for (label, engine), got in runs.items():
        rates = [g["rate"] for g in got]
        cpu = statistics.median(g["cpu_ms"] for g in got)
        servers = [g["server_ms"] for g in got if g["server_ms"] is not None]
        server = f" + {statistics.median(servers):4.0f}" if servers else ""
        print(f"  {label:5} {engine:10} {statistics.median(rates):9.0f}   CPU {cpu:4.0f}{server:7}   runs: "
              f"{', '.join(f'{x:.0f}' for x in rates)}")


if __name__ == "__main__":
    main()
