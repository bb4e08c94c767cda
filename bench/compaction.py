"""What idle merging costs on a file with many scopes (recall/maintain.py `compact`).

    python -m bench.compaction [--scopes 2000] [--writes 2]

Builds a fresh file in process: `--scopes` tenants (a scope each), each
given `--writes` entries in transactions of their own (a segment each, as a
burst of single writes leaves them). Then, on copies of that file, runs the
idle writer's pass to the end, one `compact` step per transaction as the
daemon does, two ways: each step going on from where the last stopped (what
the daemon does) and each step starting from the first scope (what it did
before). Prints steps, wall and CPU seconds for each, and what one step
costs when there is nothing left to merge (a quiet spell after writes that
left nothing to do). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from arbiter.model import RememberParams
from arbiter.recall.maintain import compact
from arbiter.store import entries, open_database, tenants, users

T0 = 1795168800 * 1_000_000


def build(path: Path, scopes: int, writes: int) -> None:
    conn = open_database(path, synchronous="OFF")
    for n in range(scopes):
        with conn:
            tid, _ = tenants.create_tenant(conn, f"t{n}", now=T0)
        viewer = users.first_viewer(conn, tid)
        for w in range(writes):
            with conn:
                entries.remember(conn, viewer, RememberParams(
                    type="context", title=f"entry {w} of tenant {n}", content=f"some words about topic {w}"), now=T0)
    conn.close()


def one_pass(path: Path, *, resume: bool) -> tuple[int, float, float, float]:
    conn = open_database(path)
    steps, step = 0, 1
    wall, cpu = time.perf_counter(), time.process_time()
    while True:
        with conn:
            step = compact(conn, start=step if resume else 1)
        steps += 1
        if not step:
            break
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    idle = []
    for _ in range(5):
        t = time.process_time()
        with conn:
            compact(conn)
        idle.append((time.process_time() - t) * 1000)
    conn.close()
    return steps, wall, cpu, statistics.median(idle)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scopes", type=int, default=2000)
    ap.add_argument("--writes", type=int, default=2, help="single writes per scope (a segment each)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="arb-compaction-") as tmp:
        built = Path(tmp) / "built.db"
        started = time.perf_counter()
        build(built, args.scopes, args.writes)
        print(f"built {args.scopes:,} scopes x {args.writes} writes in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        for label, resume in (("going on from the last step", True), ("from the first scope each step", False)):
            work = Path(tmp) / "work.db"
            shutil.copy(built, work)
            steps, wall, cpu, idle = one_pass(work, resume=resume)
            print(f"{label:32s} steps {steps:6,}  wall {wall:7.2f} s  CPU {cpu:7.2f} s  "
                  f"a step with nothing to merge {idle:6.2f} ms CPU")
            for suffix in ("", "-wal", "-shm"):
                Path(f"{work}{suffix}").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
