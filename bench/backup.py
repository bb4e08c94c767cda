"""Backup benchmark: `backup create` of a large database while 8 clients write.

    python -m bench.backup [--mb 500] [--writers 8] [--pages-per-step 256] [--out backup.json]

Starts its own `arbiter serve` on a temporary home, fills it through
`remember_many` until the database file reaches --mb, then starts --writers
processes that each `remember` one entry after another over their own
connection, and takes a backup through the daemon meanwhile. Reported: the
longest and p99 `remember` round trip of the writes that overlapped the
backup (target: none over 100 ms), the same before it (the baseline), the
backup's time and steps, and its verification. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import tempfile
import time
from pathlib import Path

from arbiter import __version__, paths
from arbiter.backup import core as backup
from arbiter.client import Client
from bench import report
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile

TARGET_MAX_WAIT_MS = 100.0


def _writer(home: str, stop, out, seed: int) -> None:
    rng = random.Random(seed)
    samples: list[tuple[float, int]] = []
    with Client.from_home(Path(home), timeout=60) as c:
        n = 0
        while not stop.is_set():
            t0 = time.monotonic()
            t = time.perf_counter_ns()
            c.remember(type="context", title=f"live write {seed}-{n}", content=f"written during the bench {rng.random()}")
            samples.append((t0, time.perf_counter_ns() - t))
            n += 1
    out.put(samples)


def _fill(home: Path, mb: int, seed: int) -> int:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    db = paths.db_path(home)
    n = 0
    with Client.from_home(home, timeout=600) as c:
        while db.stat().st_size + _wal(db) < mb * 1_000_000:
            batch = []
            for _ in range(2000):
                e = make_entry(vocab, rng, n)
                e["content"] = " ".join([e["content"]] * 3)  # ~1-2.4 KB: fewer rows to reach the size
                batch.append(e)
                n += 1
            c.remember_many(batch)
    return n


def _wal(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def run(args) -> dict:
    home = Path(tempfile.mkdtemp(prefix="arb-bk-"))
    daemon = BenchDaemon(home, "FULL")
    try:
        t = time.perf_counter()
        entries = _fill(home, args.mb, args.seed)
        fill_s = time.perf_counter() - t
        db = paths.db_path(home)
        db_bytes = db.stat().st_size + _wal(db)
        ctx = mp.get_context("spawn")
        stop, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(str(home), stop, out, i)) for i in range(args.writers)]
        for p in procs:
            p.start()
        time.sleep(args.warmup_s)  # a baseline of writes before the backup starts
        admin = Client(paths.socket_path(home), paths.read_secret(paths.admin_token_path(home), "admin"), timeout=600)
        with admin:
            b0 = time.monotonic()
            done = admin.backup_create(home / "backup.db", pages_per_step=args.pages_per_step)
            b1 = time.monotonic()
        time.sleep(args.warmup_s / 2)
        stop.set()
        samples = [s for _ in procs for s in out.get()]
        for p in procs:
            p.join()
        check = backup.verify(home / "backup.db")
        during = [ns for t0, ns in samples if t0 + ns / 1e9 >= b0 and t0 <= b1]
        before = [ns for t0, ns in samples if t0 + ns / 1e9 < b0]
        return {
            "version": __version__,
            "entries": entries,
            "db_mb": round(db_bytes / 1e6, 1),
            "fill_s": round(fill_s, 1),
            "writers": args.writers,
            "pages_per_step": args.pages_per_step,
            "backup_s": done.seconds,
            "backup_steps": done.steps,
            "backup_longest_step_ms": done.longest_step_ms,
            "backup_mb": round(done.bytes / 1e6, 1),
            "backup_verified": check.ok,
            "writes_during": len(during),
            "write_max_ms_during": round(max(during) / 1e6, 1) if during else None,
            "write_p99_ms_during": round(percentile(during, 99), 2) if during else None,
            "write_p50_ms_during": round(percentile(during, 50), 2) if during else None,
            "writes_before": len(before),
            "write_max_ms_before": round(max(before) / 1e6, 1) if before else None,
            "write_p99_ms_before": round(percentile(before, 99), 2) if before else None,
            "target_max_wait_ms": TARGET_MAX_WAIT_MS,
        }
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--pages-per-step", type=int, default=256)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report(run(args), args.out)


if __name__ == "__main__":
    main()
