"""What `remember`'s duplicate and similar checks cost while a bulk write's keys are still unwritten.

    python -m bench.pending_duplicates                  # 1000 pending entries of 80 words, 200 checks
    python -m bench.pending_duplicates --pending 5000 --words 200

`remember_many` writes its entries' fingerprints at once (the insert trigger)
and leaves their word and band keys to the idle writer (arbiter/derive.py);
until it has written them, `remember`'s `similar` compares its text with the
newest `duplicates.PENDING_COMPARED` of them directly. This measures both
checks (`duplicate_of`, then `similar`) in this process on a fresh database,
with the queue full and after it is drained, in CPU and wall milliseconds a
`remember`; and the count its `note` gives of the pending entries left out
(`duplicates.not_compared`), which walks the whole queue.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from arbiter import duplicates
from arbiter._time import now_us
from arbiter import derive
from arbiter.model import RememberParams
from arbiter.store import entries, tenants, users
from arbiter.store.db import open_database


def _checks(conn, v, texts: list[str]) -> tuple[float, float]:
    """(CPU ms, wall ms) a `remember`'s two checks take, averaged over `texts`."""
    cpu, wall = time.process_time(), time.perf_counter()
    for text in texts:
        duplicates.duplicate_of(conn, v, "context", "t", text)
        duplicates.similar(conn, v, text)
    return ((time.process_time() - cpu) / len(texts) * 1e3, (time.perf_counter() - wall) / len(texts) * 1e3)


def _count(conn, v, runs: int = 20) -> float:
    """CPU ms of `remember`'s count of the pending entries it did not compare."""
    cpu = time.process_time()
    for _ in range(runs):
        duplicates.not_compared(conn, v)
    return (time.process_time() - cpu) / runs * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pending", type=int, default=1000, help="entries a bulk write left unindexed")
    ap.add_argument("--words", type=int, default=80, help="words an entry")
    ap.add_argument("--checks", type=int, default=200, help="remember checks timed")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"seed {args.seed}; {args.pending} pending entries of {args.words} words; "
          f"PENDING_COMPARED {duplicates.PENDING_COMPARED}")
    rnd = random.Random(args.seed)
    vocabulary = [f"w{i}" for i in range(3000)]

    def text() -> str:
        return " ".join(rnd.choice(vocabulary) for _ in range(args.words))

    with tempfile.TemporaryDirectory() as tmp:
        conn = open_database(Path(tmp) / "bench.db", synchronous="NORMAL")
        now = now_us()
        with conn:
            tenant, _ = tenants.create_tenant(conn, "default", now=now)
            v = users.first_viewer(conn, tenant)
            entries.remember_many(
                conn, v, [RememberParams(type="context", title="t", content=text()) for _ in range(args.pending)],
                now=now)
        probes = [text() for _ in range(args.checks)]
        cpu, wall = _checks(conn, v, probes)
        print(f"queue full:      {cpu:.2f} ms CPU, {wall:.2f} ms wall a remember")
        print(f"not compared:    {_count(conn, v):.2f} ms CPU a remember to count them")
        with conn:
            derive.drain(conn, now=now)
        cpu, wall = _checks(conn, v, probes)
        print(f"queue drained:   {cpu:.2f} ms CPU, {wall:.2f} ms wall a remember")
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
