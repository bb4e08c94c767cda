"""Many clients at once: do cheap reads wait behind expensive ones, and how fast is recall among writes?
(targets: `get` p99 <= 10 ms; recall p50 <= 100 ms and p99 <= 300 ms (issue 32); no error)

    python -m bench.concurrent [--clients 32] [--seconds 60] [--entries 70000] [--home DIR]
                               [--against TREE --rounds 2] [--out concurrent.json]
    python -m bench.concurrent --home DIR --cpu 200 [--against TREE --rounds 3]

Loads `--entries` entries (the generated text of bench.load; 70,000 is issue
32's tenant) into a home of its own, in batches, and waits for the index to
settle; with `--home` the loaded home is kept there and reused by later runs.
Each run starts `arbiter serve` on a fresh copy of it and runs `--clients`
client processes at once, each with its own connection, for `--seconds`.
With `--against TREE`, runs alternate between this checkout and TREE (another
checkout's code), `--rounds` times each, so both meet the same machine load. Each client loops without pause over a mix of verbs drawn at
random (weights in MIX): `get` and `list` of the loaded entries, `recall` of
varied queries, `remember` of new entries, `link` between loaded entries, and
`forget` of entries the client itself wrote. Every call is timed by the client
around the full round trip.

With `--cpu N`, no clients: the CPU of one recall alone, the cost the 32
clients' latencies multiply. N queries drawn as the mix draws them are
recalled in a process of each tree's code on the loaded file (read-only),
once to warm the page cache and the term statistics, then `--repeat` times,
timed by the process's CPU clock; reported per run: CPU ms a recall, the
least and the median of the repeats (the least is the one a busy machine
disturbs least).

Errors are any exception a call raises; `conflict` on a `link` that already
exists is an answer, not an error, and is counted apart. Reported per verb:
calls, p50, p99 and max latency, errors; plus the daemon's peak RSS.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from arbiter import __version__, paths
from arbiter.client import Client
from arbiter.errors import ArbiterError, Conflict
from arbiter.store import connect
from bench import report
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile, settle, vm_kb
from bench.load import Result as LoadResult

MIX = {"get": 35, "recall": 20, "list": 15, "remember": 15, "link": 10, "forget": 5}
TARGETS = {"get_p99_ms": 10.0, "recall_p50_ms": 100.0, "recall_p99_ms": 300.0}


@dataclass
class VerbStats:
    calls: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    errors: int = 0


@dataclass
class Result:
    version: str
    tree: str
    clients: int
    seconds: float
    entries: int
    verbs: dict[str, VerbStats] = field(default_factory=dict)
    calls_per_s: float = 0.0
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    rss_after_load_mb: float = 0.0


def _query(vocab: Vocabulary, rng: random.Random) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        return " ".join(vocab.mid_frequency(rng.randint(1, 3)))
    if kind == 1:
        return " ".join(vocab.sample(rng.randint(3, 8)))
    return f"what did we decide about {' '.join(vocab.mid_frequency(2))}?"


def client_loop(n: int, home: str, ids: list[int], seconds: float, seed: int, start_at: float, out,
                other: bool = False) -> None:
    """One client process: mixed verbs until the deadline; puts (latencies by verb, errors, conflicts) on `out`."""
    rng = random.Random(seed * 1000 + n)
    vocab = Vocabulary(random.Random(seed))
    verbs, weights = zip(*MIX.items())
    samples: dict[str, list[int]] = {v: [] for v in verbs}
    errors: list[str] = []
    conflicts = 0
    mine: list[int] = []
    with Client.from_home(Path(home), timeout=60, check_code=not other) as c:
        while time.time() < start_at:  # every client starts together
            time.sleep(0.001)
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            verb = rng.choices(verbs, weights)[0]
            if verb == "forget" and not mine:
                verb = "remember"
            t = time.perf_counter_ns()
            try:
                if verb == "get":
                    c.get(rng.choice(ids))
                elif verb == "recall":
                    c.recall(_query(vocab, rng), limit=10)
                elif verb == "list":
                    c.list(limit=20, before_id=rng.choice(ids))
                elif verb == "remember":
                    mine.append(c.remember(**make_entry(vocab, rng, i)).id)
                elif verb == "link":
                    a, b = rng.sample(ids, 2)
                    c.link(a, rng.choice(["relates_to", "supports", "refines"]), b)
                else:
                    c.forget(mine.pop(rng.randrange(len(mine))))
            except Conflict:
                conflicts += 1
            except (ArbiterError, OSError) as e:
                errors.append(f"{verb}: {type(e).__name__}: {e}")
            samples[verb].append(time.perf_counter_ns() - t)
            i += 1
    out.put((samples, errors, conflicts))


def load(home: Path, entries: int, seed: int) -> list[int]:
    """The entry ids of `home`'s loaded tenant: loaded now (and settled) unless `home` holds it already."""
    if not paths.db_path(home).exists():
        home.mkdir(parents=True, exist_ok=True)
        daemon = BenchDaemon(home, "FULL")
        try:
            rng = random.Random(seed)
            vocab = Vocabulary(rng)
            with daemon.client() as c:
                for start in range(0, entries, 2000):
                    c.remember_many([make_entry(vocab, rng, start + i) for i in range(min(2000, entries - start))])
            settle(LoadResult(version=__version__, entries=entries, synchronous="FULL"), paths.db_path(home),
                   wait=True)
        finally:
            daemon.stop()
    conn = connect(paths.db_path(home), readonly=True)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY id")]
    finally:
        conn.close()


#: Runs in a process of the tree measured (its code on PYTHONPATH), so it uses only what both trees have:
#: stdin gives (home, queries, repeats); stdout gets the CPU seconds of each repeat.
_CPU_WORKER = """
import json, sys, time
from pathlib import Path
from arbiter import paths
from arbiter.model import RecallParams
from arbiter.recall import recall
from arbiter.store import connect, users
home, queries, repeats = json.load(sys.stdin)
conn = connect(paths.db_path(Path(home)), readonly=True)
viewer = users.first_viewer(conn, conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0])
def run():
    for q in queries:
        with conn:
            recall(conn, viewer, RecallParams(query=q, limit=10))
run()
times = []
for _ in range(repeats):
    started = time.process_time()
    run()
    times.append(time.process_time() - started)
print(json.dumps(times))
"""


@dataclass
class CpuResult:
    version: str
    tree: str
    recalls: int
    repeats: int
    least_ms: float
    median_ms: float


def cpu(args, loaded: Path, tree: Path | None) -> CpuResult:
    """CPU ms a recall of `args.cpu` queries of the mix, in a process of `tree`'s code (None: this checkout)."""
    rng = random.Random(args.seed)
    vocab = Vocabulary(random.Random(args.seed))
    queries = [_query(vocab, rng) for _ in range(args.cpu)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}
    env["PYTHONPATH"] = str(tree or Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", _CPU_WORKER], input=json.dumps([str(loaded), queries, args.repeat]),
                          capture_output=True, text=True, env=env, cwd=tree, check=True)
    per = sorted(t * 1000 / args.cpu for t in json.loads(done.stdout))
    return CpuResult(version=__version__, tree=str(tree or "."), recalls=args.cpu, repeats=args.repeat,
                     least_ms=per[0], median_ms=per[len(per) // 2])


def run(args, loaded: Path, ids: list[int], tree: Path | None) -> Result:
    """One run of the clients against a daemon of `tree` (None: this checkout) on a copy of `loaded`."""
    res = Result(version=__version__, tree=str(tree or "."), clients=args.clients, seconds=args.seconds,
                 entries=len(ids))
    home = Path(tempfile.mkdtemp(prefix="arb-conc-")) / "home"
    shutil.copytree(loaded, home, ignore=shutil.ignore_patterns("*.sock", "*.lock", "*.log"))
    daemon = None
    try:
        daemon = BenchDaemon(home, "FULL", tree=tree)
        with daemon.client() as c:
            c.ping()
        res.rss_after_load_mb = vm_kb(daemon.proc.pid, "VmRSS") / 1024
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        start_at = time.time() + 2.0
        procs = [ctx.Process(target=client_loop,
                             args=(n, str(home), ids, args.seconds, args.seed, start_at, out, tree is not None))
                 for n in range(args.clients)]
        for p in procs:
            p.start()
        print(f"{res.tree}: {args.clients} clients for {args.seconds:g} s on {len(ids):,} entries ...",
              file=sys.stderr)
        merged: dict[str, list[int]] = {v: [] for v in MIX}
        errors: list[str] = []
        for _ in procs:
            samples, errs, conflicts = out.get(timeout=args.seconds + 600)
            for verb, ns in samples.items():
                merged[verb] += ns
            errors += errs
            res.conflicts += conflicts
        for p in procs:
            p.join()
        res.peak_rss_mb = vm_kb(daemon.proc.pid, "VmHWM") / 1024
        by_verb = Counter(e.split(":", 1)[0] for e in errors)
        for verb, ns in merged.items():
            if ns:
                res.verbs[verb] = VerbStats(calls=len(ns), p50_ms=percentile(ns, 50), p99_ms=percentile(ns, 99),
                                            max_ms=max(ns) / 1e6, errors=by_verb[verb])
        res.calls_per_s = sum(len(ns) for ns in merged.values()) / args.seconds
        res.errors = sorted(Counter(errors).keys())[:20]
        daemon.stop()
    finally:
        if daemon is not None and daemon.proc.poll() is None:
            daemon.stop()
        shutil.rmtree(home.parent, ignore_errors=True)
    return res


def table(res: Result) -> str:
    lines = [(f"arbiter {res.version} ({res.tree}): {res.clients} clients x {res.seconds:g} s, {res.entries:,} entries, "
              f"{res.calls_per_s:,.0f} calls/s"),
             f"  {'verb':<9} {'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6}"]
    for verb, s in res.verbs.items():
        mark = ""
        for q in ("p50", "p99"):
            if (bound := TARGETS.get(f"{verb}_{q}_ms")) is not None:
                mark += f"  {q} <= {bound:g}: {'ok' if getattr(s, f'{q}_ms') <= bound else 'MISSED'}"
        lines.append(f"  {verb:<9} {s.calls:>7} {s.p50_ms:>8.2f} {s.p99_ms:>8.2f} {s.max_ms:>8.1f} {s.errors:>6}{mark}")
    lines.append(f"  link conflicts (answers, not errors): {res.conflicts}")
    lines.append(f"  daemon RSS after load / peak: {res.rss_after_load_mb:.1f} / {res.peak_rss_mb:.1f} MB")
    lines += [f"  error: {e}" for e in res.errors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.concurrent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--entries", type=int, default=70_000, help="entries loaded before the run (default 70000)")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--home", type=Path, help="keep the loaded home here and reuse it (default: a temporary one)")
    ap.add_argument("--against", type=Path, help="another checkout: runs alternate between it and this one")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each tree (default 1)")
    ap.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    ap.add_argument("--cpu", type=int, metavar="N", help="no clients: CPU ms a recall of N of the mix's queries, in process")
    ap.add_argument("--repeat", type=int, default=5, help="with --cpu: timed passes over the N queries (default 5)")
    args = ap.parse_args(argv)
    loaded = args.home or Path(tempfile.mkdtemp(prefix="arb-conc-load-")) / "home"
    try:
        ids = load(loaded, args.entries, args.seed)
        trees = [None] if args.against is None else [None, args.against.resolve()]
        if args.cpu:
            runs = [cpu(args, loaded, tree) for _ in range(args.rounds) for tree in trees]
            report({"cpu": [asdict(r) for r in runs]}, args.out, text="\n".join(
                f"{r.tree}: {r.recalls} recalls x {r.repeats}: CPU {r.least_ms:.3f} ms a recall (least), "
                f"{r.median_ms:.3f} (median)" for r in runs))
            return
        results = []
        for _ in range(args.rounds):
            for tree in trees:
                results.append(run(args, loaded, ids, tree))
                print(table(results[-1]), file=sys.stderr)
    finally:
        if args.home is None:
            shutil.rmtree(loaded.parent, ignore_errors=True)
    report({"runs": [asdict(r) for r in results]}, args.out, text="\n".join(table(r) for r in results))


if __name__ == "__main__":
    main()
