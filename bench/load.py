"""Load benchmark: a real daemon, the real socket, a tenant of N entries.

    python -m bench.load [--entries 250000] [--home DIR] [--out load.json]

Starts its own `arbiter serve` (a subprocess on a temporary home unless --home
names one) and measures, through `arbiter.client.Client`:

- `remember` latency, p50/p99 over single calls;
- `remember_many` throughput, entries/s, in batches of realistic entries
  (300-800 bytes of varied words) up to --entries;
- how long the daemon's idle compaction takes to merge the FTS index after the
  load (polled read-only from the database file; --no-settle skips the wait);
- `get` and `recall` latency, p50/p99, on that full tenant;
- the daemon's peak RSS (VmHWM) and the database size against the raw text it holds.

Numbers are reported against the targets in issue 2; nothing is asserted.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from arbiter import __version__, paths
from arbiter.client import Client
from arbiter.errors import Unavailable
from bench import report
from bench.longmemeval.daemon import isolated_env

TARGETS = {
    "remember_p50_ms": ("<=", 1.0),
    "bulk_entries_per_s": (">=", 20_000),
    "get_p50_ms": ("<=", 0.3),
    "peak_rss_mb": ("<=", 40.0),
    "db_to_text_ratio": ("<=", 1.5),
}

TYPES = ["user", "feedback", "project", "reference", "learning", "context"]

# Common English to give the text real stopwords and stems; the rest of the
# vocabulary is synthetic so that the index has a realistic long tail.
COMMON = """the of and to in is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so no will more can out up about who them some
could what into than other time only its then like over also new these two may first after any where most should
use work make project team release deploy server client database query index memory agent user feedback meeting
review schedule deadline budget design test build bug fix issue branch merge config setting option install update
backup restore migrate schema table column latency throughput cache queue worker thread process socket network
customer contract invoice payment report metric dashboard alert incident outage postmortem runbook oncall rotation
friday monday morning evening week month quarter year plan goal risk decision owner status blocked done progress
python rust golang javascript typescript docker kubernetes linux kernel compiler parser token model prompt context
""".split()
SYLLABLES = "ka ri to mo na shi lu ve dor pan tek zi qua bel mar sen fo gri lin ost ur ax em pol"
SYLLABLES = SYLLABLES.split()


class Vocabulary:
    """Words with Zipf-like frequencies: a few very common, a long tail of rare ones."""

    def __init__(self, rng: random.Random, size: int = 30_000):
        synthetic = {
            "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size * 2)
        }
        self.words = COMMON + sorted(synthetic - set(COMMON))[: size - len(COMMON)]
        self.cum = list(itertools.accumulate(1.0 / (rank + 1) ** 1.07 for rank in range(len(self.words))))
        self.rng = rng

    def sample(self, k: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=k)

    def mid_frequency(self, k: int) -> list[str]:
        """Words that are neither stopword-common nor unseen: good query terms."""
        return self.rng.sample(self.words[200:5000], k)


def make_entry(vocab: Vocabulary, rng: random.Random, n: int) -> dict:
    target = rng.randint(300, 800)
    words: list[str] = []
    size = 0
    while size < target:
        chunk = vocab.sample(16)
        words.extend(chunk)
        size += sum(map(len, chunk)) + len(chunk)
    content = " ".join(words)[:target].rstrip()
    title = " ".join(vocab.sample(rng.randint(3, 8))).capitalize()[:200]
    tags = list(dict.fromkeys(rng.sample(vocab.words[:400], rng.randint(0, 4))))
    entry = {"type": rng.choice(TYPES), "title": title, "content": content, "tags": tags}
    if n % 7 == 0:
        entry["source"] = f"session-{n // 1000}"
    return entry


def text_bytes(entry: dict) -> int:
    """The raw text an entry holds: title, content, tags and source, in UTF-8."""
    parts = [entry["title"], entry["content"], *entry["tags"], entry.get("source") or ""]
    return sum(len(p.encode()) for p in parts)


def percentile(samples_ns: list[int], q: float) -> float:
    """The q-th percentile in milliseconds (nearest rank)."""
    ordered = sorted(samples_ns)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank] / 1e6


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (/proc/PID/stat; Linux): its own work, without its waits."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_kb(pid: int, field_name: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise KeyError(field_name)


class BenchDaemon:
    """`python -m arbiter serve` on `home`, stopped with SIGTERM."""

    def __init__(self, home: Path, synchronous: str, *, tree: Path | None = None, args: tuple[str, ...] = ()):
        """`tree`: run another checkout's code (its folder on PYTHONPATH and as the working directory); `args`:
        more `serve` options (`--db URL`)."""
        self.home = home
        self.tree = tree
        env = isolated_env(home, ARBITER_SYNCHRONOUS=synchronous)
        if tree is not None:
            env["PYTHONPATH"] = str(tree)
        self.log = open(home / "bench-daemon.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "arbiter", "serve", *args], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=tree)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                self.log.close()
                raise SystemExit(f"daemon exited: {(home / 'bench-daemon.log').read_text()[-2000:]}")
            try:
                with Client(paths.socket_path(home), None, timeout=1, check_code=tree is None) as c:
                    c.ping()
                break
            except Unavailable:
                if time.monotonic() > deadline:
                    self.stop()  # never leave a half-started daemon behind
                    raise SystemExit("daemon did not answer ping within 30 s") from None
                time.sleep(0.02)

    def client(self) -> Client:
        return Client.from_home(self.home, timeout=600, check_code=self.tree is None)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(120)
        self.log.close()
        return code


@dataclass
class Result:
    version: str
    entries: int
    synchronous: str
    remember_calls: int = 0
    remember_p50_ms: float = 0.0
    remember_p99_ms: float = 0.0
    bulk_batch: int = 0
    bulk_entries_per_s: float = 0.0
    segments_after_load: int = 0
    segments_settled: int = 0
    get_calls: int = 0
    get_p50_ms: float = 0.0
    get_p99_ms: float = 0.0
    recall_calls: int = 0
    recall_p50_ms: float = 0.0
    recall_p99_ms: float = 0.0
    recall_hit_rate: float = 0.0
    peak_rss_mb: float = 0.0
    idle_rss_mb: float = 0.0
    rss_after_load_mb: float = 0.0
    hwm_after_load_mb: float = 0.0
    hwm_after_gets_mb: float = 0.0
    db_bytes: int = 0
    text_bytes: int = 0
    db_to_text_ratio: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)


def run(args) -> Result:
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    res = Result(version=__version__, entries=args.entries, synchronous=args.synchronous)
    own_home = args.home is None
    home = Path(tempfile.mkdtemp(prefix="arb-load-")) if own_home else Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    held = 0
    ids: list[int] = []
    queries_from: list[list[str]] = []  # words of some stored entries, for queries that should hit
    daemon = None
    try:
        daemon = BenchDaemon(home, args.synchronous)
        pid = daemon.proc.pid
        res.idle_rss_mb = vm_kb(pid, "VmRSS") / 1024
        with daemon.client() as c:
            c.ping()
            # remember: single calls
            singles = min(args.singles, args.entries)
            samples = []
            for n in range(singles):
                entry = make_entry(vocab, rng, n)
                t = time.perf_counter_ns()
                ids.append(c.remember(**entry).id)
                samples.append(time.perf_counter_ns() - t)
                held += text_bytes(entry)
            res.remember_calls = singles
            res.remember_p50_ms, res.remember_p99_ms = percentile(samples, 50), percentile(samples, 99)
            print(f"remember: {singles} calls, p50 {res.remember_p50_ms:.3f} ms", file=sys.stderr)

            # remember_many: batches up to --entries
            res.bulk_batch = args.batch
            bulk_ns, bulk_n, n = 0, 0, singles
            while n < args.entries:
                batch = [make_entry(vocab, rng, n + i) for i in range(min(args.batch, args.entries - n))]
                t = time.perf_counter_ns()
                ids.extend(c.remember_many(batch))
                bulk_ns += time.perf_counter_ns() - t
                bulk_n += len(batch)
                held += sum(map(text_bytes, batch))
                if rng.random() < 0.2:
                    queries_from.append(batch[0]["content"].split())
                n += len(batch)
                if (n // args.batch) % 25 == 0:
                    print(f"  ... {n} entries, {bulk_n / (bulk_ns / 1e9):,.0f}/s", file=sys.stderr)
            res.bulk_entries_per_s = bulk_n / (bulk_ns / 1e9) if bulk_n else 0.0
            res.seconds["bulk"] = bulk_ns / 1e9
            res.rss_after_load_mb = vm_kb(pid, "VmRSS") / 1024
            res.hwm_after_load_mb = vm_kb(pid, "VmHWM") / 1024
            settle(res, paths.db_path(home), wait=args.settle)

            # get: random ids over the whole tenant
            samples = []
            for eid in rng.choices(ids, k=args.gets):
                t = time.perf_counter_ns()
                c.get(eid)
                samples.append(time.perf_counter_ns() - t)
            res.get_calls = len(samples)
            res.get_p50_ms, res.get_p99_ms = percentile(samples, 50), percentile(samples, 99)
            res.hwm_after_gets_mb = vm_kb(pid, "VmHWM") / 1024

            # recall: varied queries (rare words, mixed, phrases lifted from stored text)
            queries = []
            for i in range(args.recalls):
                kind = i % 4
                if kind == 0:
                    queries.append(" ".join(vocab.mid_frequency(rng.randint(1, 3))))
                elif kind == 1:
                    queries.append(" ".join(vocab.sample(rng.randint(3, 8))))
                elif kind == 2 and queries_from:
                    words = rng.choice(queries_from)
                    at = rng.randrange(max(1, len(words) - 4))
                    queries.append(" ".join(words[at:at + rng.randint(2, 4)]))
                else:
                    queries.append(f"what did we decide about {' '.join(vocab.mid_frequency(2))}?")
            samples, hits = [], 0
            for q in queries:
                t = time.perf_counter_ns()
                r = c.recall(q, limit=10)
                samples.append(time.perf_counter_ns() - t)
                hits += bool(r.hits)
            res.recall_calls = len(samples)
            res.recall_p50_ms, res.recall_p99_ms = percentile(samples, 50), percentile(samples, 99)
            res.recall_hit_rate = hits / len(samples)
            res.peak_rss_mb = vm_kb(pid, "VmHWM") / 1024
        code = daemon.stop()  # checkpoints the WAL into the main file
        if code != 0:
            print(f"warning: daemon exited {code}", file=sys.stderr)
        db = paths.db_path(home)
        res.db_bytes = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
        res.text_bytes = held
        res.db_to_text_ratio = res.db_bytes / held if held else 0.0
    finally:
        if daemon is not None and daemon.proc.poll() is None:
            daemon.stop()
        if own_home and not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    return res


def settle(res: Result, db: Path, *, wait: bool) -> None:
    """Wait (up to 10 minutes) for the daemon's idle upkeep: the FTS index in one segment, no free pages."""
    from arbiter.recall.maintain import segments
    from arbiter.store import connect

    conn = connect(db, readonly=True)
    try:
        res.segments_after_load = res.segments_settled = segments(conn)
        t = time.monotonic()

        def busy() -> bool:  # idle upkeep merges the index, then gives freed pages back
            return res.segments_settled > 1 or bool(conn.pragma("auto_vacuum") == 2 and conn.pragma("freelist_count"))

        while wait and busy() and time.monotonic() - t < 600:
            time.sleep(0.5)
            res.segments_settled = segments(conn)
        res.seconds["settle"] = time.monotonic() - t
    finally:
        conn.close()
    print(f"index: {res.segments_after_load} segments after load, {res.segments_settled} "
          f"after {res.seconds['settle']:.1f} s idle", file=sys.stderr)


def table(res: Result) -> str:
    def verdict(key: str) -> str:
        if key not in TARGETS:
            return ""
        op, bound = TARGETS[key]
        value = getattr(res, key)
        good = value <= bound if op == "<=" else value >= bound
        return f"{op} {bound:g}  {'ok' if good else 'MISSED'}"

    rows = [
        ("remember p50 / p99", f"{res.remember_p50_ms:.3f} / {res.remember_p99_ms:.3f} ms", verdict("remember_p50_ms")),
        (f"remember_many (batches of {res.bulk_batch})", f"{res.bulk_entries_per_s:,.0f} entries/s",
         verdict("bulk_entries_per_s")),
        ("FTS segments after load / idle", f"{res.segments_after_load} / {res.segments_settled} "
                                           f"({res.seconds.get('settle', 0):.1f} s)", ""),
        ("get p50 / p99", f"{res.get_p50_ms:.3f} / {res.get_p99_ms:.3f} ms", verdict("get_p50_ms")),
        ("recall p50 / p99", f"{res.recall_p50_ms:.2f} / {res.recall_p99_ms:.2f} ms  "
                             f"({res.recall_hit_rate:.0%} with hits)", ""),
        ("daemon RSS idle / loaded / peak", f"{res.idle_rss_mb:.1f} / {res.rss_after_load_mb:.1f} / "
                                            f"{res.peak_rss_mb:.1f} MB", verdict("peak_rss_mb")),
        ("  peak after load / gets / recalls", f"{res.hwm_after_load_mb:.1f} / {res.hwm_after_gets_mb:.1f} / "
                                               f"{res.peak_rss_mb:.1f} MB", ""),
        ("database / raw text", f"{res.db_bytes / 2**20:,.1f} MB / {res.text_bytes / 2**20:,.1f} MB "
                                f"= {res.db_to_text_ratio:.2f}x", verdict("db_to_text_ratio")),
    ]
    head = f"arbiter {res.version} load: {res.entries:,} entries, synchronous={res.synchronous}"
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    return "\n".join([head] + [f"  {a:<{width}}  {b:<{vwidth}}  {c}" for a, b, c in rows])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=250_000, help="entries in the tenant (default 250000)")
    ap.add_argument("--home", help="daemon home (default: a fresh temporary folder, removed afterwards)")
    ap.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    ap.add_argument("--singles", type=int, default=3000, help="single remember calls to time (default 3000)")
    ap.add_argument("--batch", type=int, default=2000, help="entries per remember_many call (default 2000)")
    ap.add_argument("--gets", type=int, default=5000, help="get calls to time (default 5000)")
    ap.add_argument("--recalls", type=int, default=400, help="recall calls to time (default 400)")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="measure get/recall right after the load, before idle compaction merges the index")
    ap.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    ap.add_argument("--seed", type=int, default=20261120)
    ap.add_argument("--keep", action="store_true", help="keep the temporary home")
    args = ap.parse_args(argv)
    res = run(args)
    report(asdict(res), args.out, text=table(res))


if __name__ == "__main__":
    main()
