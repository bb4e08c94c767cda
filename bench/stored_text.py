"""What storing the text compressed costs, in process and in CPU time (issue 9 §7; store/text.py).

    python -m bench.stored_text [--entries 20000] [--batch 2000] [--reads 5000] [--runs 3]

On a fresh file each run: bench.load's entries written with
`entries.remember_many` in `--batch`-entry transactions (the daemon's bulk
path without the socket), then `--reads` `entries.get` of random ids and
`--reads` // 10 listings of 100 entries. CPU time (time.process_time), so
figures taken while the machine is shared stay comparable; wall time beside.
Also the codec alone on the same texts: bytes after / before, pack and
unpack microseconds a text. Run it with PYTHONPATH pointing at another tree
(one before m023) to compare: the store API it calls is the same; the codec
lines are skipped there. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from arbiter.model import ListParams, RememberParams
from arbiter.store import entries, open_database, tenants, users
from bench.load import Vocabulary, make_entry

T0 = 1795168800 * 1_000_000


def one_run(args, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    items = [RememberParams(**make_entry(vocab, rng, n)) for n in range(args.entries)]
    with tempfile.TemporaryDirectory(prefix="arb-text-") as tmp:
        conn = open_database(Path(tmp) / "arbiter.db", synchronous="NORMAL")
        with conn:
            tid, _ = tenants.create_tenant(conn, "bench", now=T0)
        v = users.first_viewer(conn, tid)
        cpu, wall = time.process_time(), time.perf_counter()
        ids: list[int] = []
        for at in range(0, len(items), args.batch):
            with conn:
                ids += entries.remember_many(conn, v, items[at:at + args.batch], now=T0 + at)
        write_cpu, write_wall = time.process_time() - cpu, time.perf_counter() - wall
        picks = rng.choices(ids, k=args.reads)
        cpu = time.process_time()
        for eid in picks:
            entries.get(conn, v, eid)
        get_cpu = time.process_time() - cpu
        cpu = time.process_time()
        for i in range(args.reads // 10):
            entries.list_entries(conn, v, ListParams(limit=100, before_id=rng.choice(ids) + 1))
        list_cpu = time.process_time() - cpu
        conn.close()
    return {
        "write_us_cpu": write_cpu / len(items) * 1e6,
        "write_us_wall": write_wall / len(items) * 1e6,
        "get_us_cpu": get_cpu / len(picks) * 1e6,
        "list100_ms_cpu": list_cpu / (args.reads // 10) * 1e3,
    }


def codec(args) -> None:
    try:
        from arbiter.store import text
    except ImportError:
        print("codec: this tree stores the text as it is", file=sys.stderr)
        return
    rng = random.Random(1)
    vocab = Vocabulary(rng)
    texts = [make_entry(vocab, rng, n)["content"] for n in range(min(args.entries, 20_000))]
    cpu = time.process_time()
    blobs = [text.pack(s) for s in texts]
    pack_us = (time.process_time() - cpu) / len(texts) * 1e6
    cpu = time.process_time()
    for b in blobs:
        text.unpack(b)
    unpack_us = (time.process_time() - cpu) / len(texts) * 1e6
    ratio = sum(map(len, blobs)) / sum(len(s.encode()) for s in texts)
    plain = sum(b[0] == text.PLAIN for b in blobs)
    print(f"codec: {ratio:.3f} of the bytes ({plain} of {len(texts)} stored as they are); "
          f"pack {pack_us:.1f} us, unpack {unpack_us:.1f} us a text (CPU)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.stored_text", description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--reads", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    codec(args)
    runs = [one_run(args, 20261120 + i) for i in range(args.runs)]
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key:16s} median {statistics.median(values):8.2f}  runs " + " ".join(f"{x:.2f}" for x in values))


if __name__ == "__main__":
    main()
