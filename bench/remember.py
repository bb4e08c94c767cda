"""Where a single `remember` spends its time (issue 12: p50 ≤ 1.5 ms), part by part and through the socket.

    python -m bench.remember --home remember-bench [--entries 20000] [--entities 5000] [--singles 750]

The home is built once (a marker file records it) as bench.entities builds
its tenant: `remember_many` of bench.load's text, each entry naming 1-3
CamelCase names from a pool of `--entities`, through a real daemon, then a
wait until the idle writer has extracted their entities and derived their
association edges. Each measurement then runs on a fresh copy of that file,
so runs compare like with like:

- `parts`: `--singles` calls of the `remember` verb in this process, as the
  daemon's writer runs it (its transaction and page cache, synchronous=FULL),
  each naming 1-3 entities (30% a new one); the CPU time of each part of
  the verb (the functions `remember` calls, wrapped here) and of the commit,
  p50 per call, and the whole call's CPU and wall time;
- `socket`: the same calls through a real daemon on the copy, the round trip
  (wall) and the daemon's own CPU time per call (user + system, from /proc);
  then, since a `remember` that asks for no candidates leaves its similarity
  edges to the idle writer, how long after the last answer the idle writer
  has derived the burst's edges, and the daemon's CPU for the whole (writes
  and catching up) per call;
- `pages`: the first `--page-writes` calls again in this process, with the
  WAL never checkpointed, reading the frames each commit appends: pages
  written (WAL bytes) per `remember`, and which table or index each page
  belongs to (SQLite's `dbstat`, after each commit);
- `lag`: one write at a time on a quiet daemon (`QUIET_S` after the last),
  each followed by a wait until the idle writer has derived its edges (and
  its round trip, as an agent writing now and then meets it): how long after
  its answer (polled
  on a read-only connection to the file, every 2 ms: a request would restart
  the daemon's quiet spell).

`--against TREE` runs `socket` and `lag` on this tree's daemon and TREE's (another
checkout, e.g. a `git worktree` of the commit before) at once, each write
sent to both in turn, so that both meet the same load on a shared machine.

`--candidates` asks every write for its link candidates (what the MCP tool
does): the association step then runs inside the write, as before.

To compare trees on the same home, run it from the other checkout (`cd`
there as well as PYTHONPATH: `python -m` puts the working directory first
on the path, so PYTHONPATH alone runs the code of the folder you are in),
or use `--against`. Milliseconds; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import apsw
import msgspec

from arbiter import derive, paths, verbs
from arbiter.model import RememberParams
from arbiter.server import writer_settings
from arbiter.server.runner import Caller, Runner
from arbiter.store import connect, open_database, users
from bench import loadavg
from bench.entities import entry, names
from bench.load import BenchDaemon, Vocabulary, cpu_s

#: The parts of `remember`, as (label, object whose attribute is called, attribute). Wrapped only in this process.
PARTS = (
    ("reference checks", verbs.entries, "checked_row"),
    ("exact duplicate", verbs.duplicates, "duplicate_of"),
    ("row + FTS insert + triggers", verbs.entries, "remember"),
    ("entities", derive, "link_entry"),
    ("near duplicates + keys", verbs.duplicates, "add_new"),
    ("salience", verbs.salience_mod, "set_initial"),
    ("associations", derive.associations, "derive"),
    ("result (get, get_any)", verbs.entries, "get"),
    ("result (get, get_any)", verbs.entries, "get_any"),
)


def _tenant(seed: int, entities: int) -> tuple[random.Random, Vocabulary, list[str]]:
    """The generator, vocabulary and entity names the home is built from (the writes name the same entities)."""
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    return rng, vocab, names(rng, entities)


def build(home: Path, entries: int, entities: int, seed: int) -> None:
    rng, vocab, pool = _tenant(seed, entities)
    daemon = BenchDaemon(home, "FULL")
    try:
        with daemon.client() as c:
            c.ping()
            for n in range(0, entries, 1000):
                c.remember_many([entry(vocab, rng, n + i, pool) for i in range(min(1000, entries - n))])
        # The idle writer extracts the bulk load's entities and derives its edges after the answers: wait for both.
        db = connect(paths.db_path(home), readonly=True)
        try:
            while True:
                if not db.execute("SELECT count(*) FROM derive_queue").fetchone()[0]:
                    break
                time.sleep(1)
        finally:
            db.close()
    finally:
        daemon.stop()


def calls(n: int, seed: int, entities: int) -> list[dict]:
    """`n` single writes of bench.entities text: 1-3 known names each, 30% one new name besides."""
    _, vocab, pool = _tenant(seed, entities)
    rng = random.Random(seed + 2)
    fresh = names(random.Random(seed + 1), n)
    out = []
    for i in range(n):
        e = entry(vocab, rng, i, pool)
        if rng.random() < 0.3:
            e["content"] += f" and {fresh[i]}"
        out.append(e)
    return out


def _derived_through(db) -> int:
    """The id below which every entry has its stored edges (the `associations` deriver's queue, arbiter/derive.py)."""
    row = db.execute("SELECT min(entry_id) FROM derive_queue WHERE deriver = 'associations'").fetchone()
    return row[0] - 1 if row[0] is not None else db.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]


def _wait_derived(db, entry_id: int, poll_s: float = 0.002) -> float:
    """Seconds until the idle writer has derived the edges of every entry up to `entry_id`."""
    t = time.perf_counter()
    while _derived_through(db) < entry_id:
        time.sleep(poll_s)
    return time.perf_counter() - t


def _copy(home: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="arb-remember-")) / "home"
    shutil.copytree(home, work, ignore=shutil.ignore_patterns("*.sock", "*.lock", "*.log"))
    return work


def _runner(conn) -> tuple[Runner, Caller]:
    """The daemon's verb runner on `conn` (as writer and reader), and the default tenant's first user."""
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
    return Runner(conn, lambda lane: conn), Caller(tenant, "default", users.first_user(conn, tenant))


def parts(home: Path, writes: list[dict]) -> dict[str, float]:
    """p50 CPU ms per part, per call, and the whole call's CPU and wall p50."""
    work = _copy(home)
    spent: dict[str, float] = defaultdict(float)
    originals = []

    inside: list[str] = []  # a part called from within another (entries.remember calls checked_row) counts to the outer

    def timed(label, fn):
        @functools.wraps(fn)
        def run(*a, **k):
            if inside:
                return fn(*a, **k)
            inside.append(label)
            t = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.process_time() - t
                inside.pop()
        return run

    for label, owner, name in PARTS:
        originals.append((owner, name, getattr(owner, name)))
        setattr(owner, name, timed(label, getattr(owner, name)))
    per_part: dict[str, list[float]] = defaultdict(list)
    whole, wall = [], []
    try:
        conn = open_database(paths.db_path(work))
        writer_settings(conn)
        runner, caller = _runner(conn)
        verb_done = 0.0

        def run_then_mark(ctx, params):
            nonlocal verb_done
            try:
                return verbs.remember(ctx, params)
            finally:
                verb_done = time.process_time()

        verb = dataclasses.replace(verbs.VERBS["remember"], run=run_then_mark)
        for e in writes:
            p = msgspec.convert(e, RememberParams)
            spent.clear()
            w, t = time.perf_counter(), time.process_time()
            runner.execute(verb, p, caller)  # the daemon's runner, on its writer's settings
            done = time.process_time()
            whole.append((done - t) * 1000)
            wall.append((time.perf_counter() - w) * 1000)
            spent["commit"] = done - verb_done
            for label in dict.fromkeys([label for label, _, _ in PARTS] + ["commit"]):
                per_part[label].append(spent.get(label, 0.0) * 1000)
        conn.close()
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)
        shutil.rmtree(work.parent, ignore_errors=True)
    out = {label: statistics.median(v) for label, v in per_part.items()}
    out["whole call, CPU"] = statistics.median(whole)
    out["whole call, wall"] = statistics.median(wall)
    return out


_WAL_HEADER, _FRAME_HEADER = 32, 24


def _owners(conn) -> dict[int, str]:
    """Every page's table or index (dbstat); pointer-map pages and page 1 by their place in the file."""
    owner = {pageno: name for name, pageno in conn.execute("SELECT name, pageno FROM dbstat")}
    owner[1] = "page 1 (header)"
    per_map = conn.pragma("page_size") // 5
    for pageno in range(2, conn.pragma("page_count") + 1, per_map + 1):
        owner[pageno] = "pointer map (auto_vacuum)"
    return owner


def pages(home: Path, writes: list[dict]) -> dict[str, float]:
    """Pages each `remember`'s commit appends to the WAL (mean per call), by the object they belong to."""
    work = _copy(home)
    try:
        path = paths.db_path(work)
        conn = open_database(path)
        writer_settings(conn)
        conn.pragma("wal_autocheckpoint", 0)  # every commit's frames stay in the WAL to be read
        conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
        page_size = conn.pragma("page_size")
        runner, caller = _runner(conn)
        wal = Path(f"{path}-wal")
        by_object: dict[str, int] = defaultdict(int)
        frames = []
        for e in writes:
            start = max(wal.stat().st_size, _WAL_HEADER) if wal.exists() else _WAL_HEADER
            runner.execute(verbs.VERBS["remember"], msgspec.convert(e, RememberParams), caller)
            with open(wal, "rb") as f:
                f.seek(start)
                data = f.read()
            step = _FRAME_HEADER + page_size
            written = [struct.unpack_from(">I", data, at)[0] for at in range(0, len(data) - step + 1, step)]
            frames.append(len(written))
            owner = _owners(conn)
            for pageno in written:
                by_object[owner.get(pageno, "freelist")] += 1
        conn.close()
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
    out = {"pages per call (p50)": statistics.median(frames), "pages per call (mean)": statistics.mean(frames),
           "WAL KiB per call (mean)": statistics.mean(frames) * (page_size + _FRAME_HEADER) / 1024}
    for name, n in sorted(by_object.items(), key=lambda kv: -kv[1]):
        out[f"  {name}"] = n / len(writes)
    return out


@contextlib.contextmanager
def _daemon_on_copy(home: Path, tree: Path | None = None):
    """A real daemon on a fresh copy of the home (`tree`'s code, if given): (daemon, a connected client, a read-only connection)."""
    work = _copy(home)
    daemon = BenchDaemon(work, "FULL", tree=tree)
    db = connect(paths.db_path(work), readonly=True)
    try:
        with daemon.client() as c:
            c.ping()
            yield daemon, c, db
    finally:
        db.close()
        daemon.stop()
        shutil.rmtree(work.parent, ignore_errors=True)


def socket(home: Path, writes: list[dict]) -> dict[str, float]:
    """The round trip p50/p95 and the daemon's mean CPU per call, on a copy of the home."""
    with _daemon_on_copy(home) as (daemon, c, db):
        samples = []
        cpu = 1000 * cpu_s(daemon.proc.pid)
        for e in writes:
            t = time.perf_counter()
            last = c.remember(**e).id
            samples.append((time.perf_counter() - t) * 1000)
        writing = 1000 * cpu_s(daemon.proc.pid) - cpu
        settle = _wait_derived(db, last)
        total = 1000 * cpu_s(daemon.proc.pid) - cpu
    samples.sort()
    return {"round trip p50": statistics.median(samples), "round trip p95": samples[int(len(samples) * 0.95)],
            "daemon CPU per call (mean)": writing / len(writes),
            "edges derived, after the last answer": settle * 1000,
            "daemon CPU per call, with catching up": total / len(writes)}


#: Seconds `lag` waits before each write, once the last one's edges are derived: the rest of the idle
#: writer's work (its WAL checkpoint) is done by then, so the write meets a quiet daemon.
QUIET_S = 1.0


def interleaved(home: Path, writes: list[dict], against: Path) -> dict[str, float]:
    """`socket` for this tree and `against` at once, each on its own copy: every write goes to both in turn
    (which first alternates), so both meet the same load on a shared machine."""
    with _daemon_on_copy(home) as (ours, c, _), _daemon_on_copy(home, against) as (theirs, d, _):
        trips: dict[str, list[float]] = {"this tree": [], "against": []}
        cpu = {"this tree": 1000 * cpu_s(ours.proc.pid), "against": 1000 * cpu_s(theirs.proc.pid)}
        for i, e in enumerate(writes):
            pair = [("this tree", c), ("against", d)]
            for label, client in pair if i % 2 == 0 else pair[::-1]:
                t = time.perf_counter()
                client.remember(**e)
                trips[label].append((time.perf_counter() - t) * 1000)
        cpu = {"this tree": 1000 * cpu_s(ours.proc.pid) - cpu["this tree"],
               "against": 1000 * cpu_s(theirs.proc.pid) - cpu["against"]}
    out = {}
    for label, samples in trips.items():
        samples.sort()
        out[f"{label}: round trip p50"] = statistics.median(samples)
        out[f"{label}: round trip p95"] = samples[int(len(samples) * 0.95)]
        out[f"{label}: daemon CPU per call"] = cpu[label] / len(writes)
    return out


def lag(home: Path, writes: list[dict], against: Path | None = None) -> dict[str, float]:
    """One write at a time on a quiet daemon: its round trip, and how long after its answer its similarity
    edges are derived. With `against`, that checkout's daemon too, each write sent to both in turn."""
    with contextlib.ExitStack() as stack:
        daemons = {"": stack.enter_context(_daemon_on_copy(home))}
        if against is not None:
            daemons = {"this tree: ": daemons[""], "against: ": stack.enter_context(_daemon_on_copy(home, against))}
        for _, _, db in daemons.values():
            _wait_derived(db, db.execute("SELECT max(id) FROM entries").fetchone()[0])
        samples = {label: [] for label in daemons}
        trips = {label: [] for label in daemons}
        for i, e in enumerate(writes):
            order = list(daemons.items())
            for label, (_, c, db) in order if i % 2 == 0 else order[::-1]:
                time.sleep(QUIET_S)  # the idle writer's work after the last write (its checkpoint) is done
                t = time.perf_counter()
                entry_id = c.remember(**e).id
                trips[label].append((time.perf_counter() - t) * 1000)
                samples[label].append(_wait_derived(db, entry_id) * 1000)
    out = {}
    for label in daemons:
        lags = sorted(samples[label])
        out |= {f"{label}edge lag p50": statistics.median(lags), f"{label}edge lag p95": lags[int(len(lags) * 0.95)],
                f"{label}edge lag max": lags[-1], f"{label}round trip p50, a write at a time": statistics.median(trips[label])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True, help="Where the tenant is built once and kept.")
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--entities", type=int, default=5_000)
    ap.add_argument("--singles", type=int, default=750)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", choices=("parts", "socket", "pages", "lag"))
    ap.add_argument("--page-writes", type=int, default=50, help="writes whose WAL frames `pages` reads")
    ap.add_argument("--lags", type=int, default=40, help="writes timed one at a time for `lag`")
    ap.add_argument("--candidates", action="store_true", help="every write asks for its link candidates")
    ap.add_argument("--against", type=Path, help="another checkout: `socket` and `lag` run its daemon and ours interleaved")
    args = ap.parse_args(argv)
    print(f"seed {args.seed}", file=sys.stderr)
    marker = args.home / "remember-bench-built"
    if not marker.exists():
        args.home.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        build(args.home, args.entries, args.entities, args.seed)
        marker.write_text(f"{args.entries} {args.entities}\n")
        print(f"built {args.entries:,} entries in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    writes = [{**w, "candidates": args.candidates} for w in calls(args.singles, args.seed, args.entities)]
    print(f"load average before: {loadavg()}")
    if args.only in (None, "parts"):
        for label, ms in parts(args.home, writes).items():
            print(f"{label:32} {ms:7.3f} ms")
    if args.only in (None, "socket"):
        measured = interleaved(args.home, writes, args.against) if args.against else socket(args.home, writes)
        for label, ms in measured.items():
            print(f"{label:32} {ms:7.3f} ms")
    if args.only in (None, "pages") and args.page_writes:
        for label, n in pages(args.home, writes[:args.page_writes]).items():
            print(f"{label:32} {n:7.2f}")
    if args.only in (None, "lag") and not args.candidates:
        for label, ms in lag(args.home, writes[:args.lags], args.against).items():
            print(f"{label:32} {ms:7.3f} ms")
    print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
