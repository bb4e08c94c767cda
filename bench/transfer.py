"""Export and import benchmark: entries/s each way between two real daemons.

    python -m bench.transfer [--entries 100000] [--links 0.2] [--out transfer.json]

Fills a tenant of --entries entries (bench/load's generator: 300-800 bytes of
Zipf words, 0-4 tags) through `remember_many`, plus links between random
pairs (--links per entry), on a daemon at synchronous=FULL; then times
`arbiter.transfer.files.export` to a file, stops that daemon, and times
`files.run_import` of the file into a second daemon on a fresh home (the
whole-file check included), and checks the second export equals the first,
ids aside. Targets: ≥ 10,000 entries/s each way. Nothing is asserted.

The first daemon is stopped before the import because after a bulk fill it
spends minutes of idle upkeep (merging the index, deriving associations) on
the same cores, which is not the import's cost. Beside wall time it reports
the CPU time of the importing daemon and of this process, and the load average.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from arbiter import __version__
from arbiter.client import Client
from arbiter.errors import Conflict
from arbiter.transfer import files
from bench import loadavg, report
from bench.load import BenchDaemon, Vocabulary, cpu_s, make_entry

TARGET = 10_000


def run(args) -> dict:
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    homes = [Path(tempfile.mkdtemp(prefix="arb-tr-")) for _ in range(2)]
    source, target = BenchDaemon(homes[0], "FULL"), BenchDaemon(homes[1], "FULL")
    try:
        with Client.from_home(homes[0], timeout=600) as c:
            t = time.perf_counter()
            ids: list[int] = []
            for start in range(0, args.entries, 2000):
                ids += c.remember_many([make_entry(vocab, rng, n) for n in range(start, min(args.entries, start + 2000))])
            links = 0
            for _ in range(int(args.entries * args.links)):
                a, b = rng.sample(ids, 2)
                try:
                    c.link(a, "relates_to", b)
                    links += 1
                except Conflict:
                    pass
            fill_s = time.perf_counter() - t
            out = homes[0] / "export.jsonl"
            t = time.perf_counter()
            with open(out, "wb") as f:
                exported = files.export(c, f)
            export_s = time.perf_counter() - t
        source.stop()
        load_before = loadavg()
        cpu = time.process_time()
        t = time.perf_counter()
        checked = files.check(out)
        check_s = time.perf_counter() - t
        daemon_cpu = cpu_s(target.proc.pid)
        t = time.perf_counter()
        files.run_import(lambda tenant: Client.from_home(homes[1], timeout=600), out, checked=checked)
        import_s = time.perf_counter() - t + check_s
        daemon_cpu = cpu_s(target.proc.pid) - daemon_cpu
        client_cpu = time.process_time() - cpu
        load_after = loadavg()
        with Client.from_home(homes[1], timeout=600) as c, open(homes[1] / "again.jsonl", "wb") as f:
            files.export(c, f)
        same = _records(out) == _records(homes[1] / "again.jsonl")
        return {
            "version": __version__,
            "entries": exported.entries,
            "relations": exported.relations,
            "file_mb": round(out.stat().st_size / 1e6, 1),
            "fill_s": round(fill_s, 1),
            "export_s": round(export_s, 2),
            "export_entries_per_s": round(exported.entries / export_s),
            "import_s": round(import_s, 2),
            "import_check_s": round(check_s, 2),
            "import_entries_per_s": round(exported.entries / import_s),
            "import_daemon_cpu_s": round(daemon_cpu, 2),
            "import_client_cpu_s": round(client_cpu, 2),
            "import_entries_per_cpu_s": round(exported.entries / (daemon_cpu + client_cpu)),
            "loadavg_before_after_import": [load_before, load_after],
            "round_trip_equal": same,
            "target_entries_per_s": TARGET,
        }
    finally:
        if source.proc.poll() is None:
            source.stop()
        target.stop()
        for h in homes:
            shutil.rmtree(h, ignore_errors=True)


def _records(path: Path) -> list[bytes]:
    """The records with ids dropped (both files number them in the same order)."""
    import re

    ids = re.compile(rb'"(id|source_id|target_id|parent_id|conversation_id)":\d+')
    return [ids.sub(b"", line) for line in path.read_bytes().splitlines()[1:]]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--links", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    report(run(args), args.out)


if __name__ == "__main__":
    main()
