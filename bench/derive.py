"""Idle derivation after a bulk load: entries derived per second, per deriver, on both engines.

    python -m bench.derive [--batches 6] [--batch 2000] [--window 20] [--rounds 2]
                           [--tree BEFORE_TREE] [--pg postgresql://...] [--engines sqlite,postgresql]
                           [--digest]

A real daemon (bench.load's `BenchDaemon`) on a fresh home (and, for
PostgreSQL, a fresh database `derive_bench` on the cluster --pg names) takes
--batches `remember_many` calls of --batch bench.load entries (`make_entry`,
one seed: the same writes every run), leaving their entities, near-copy keys
and associations to the idle writer. The queue (`derive_queue`) is then read
every 0.2 s for --window seconds, and for each deriver the bench prints the
rows it took out and its rate over the time it was being derived (from the
first read where its count fell to the last, or the window's end), and when
the whole queue was empty (seconds after the load): the
derivers run one after another (entities, sketch, the full-text merge,
associations), so one window shows each deriver's own pace. Beside each
rate, the rows it derived per CPU second of the daemon and (PostgreSQL) of
the server processes serving it, over the same span: on a shared machine
that figure moves less than the wall time. On PostgreSQL a fresh database's
statistics are what its planner saw before the load until autovacuum analyzes
it (within a minute or so, whenever its turn comes): the same tree ran 2-5x
slower or faster by that turn alone. --analyze runs ANALYZE once the load is
written, so both trees derive on the same plans.

--tree runs the same rounds with another checkout's daemon (BEFORE_TREE),
alternated with this tree's round by round: other benches share the machine,
and only alternated figures compare. --digest waits until the queue is empty
(up to --drain seconds) and prints a hash of what was derived (entities,
names, trigrams, links, near-copy keys, associations; without times, which
are the clock's), to check that a change derives the same thing. bench.load's
text has few names and no near copies: `--texts lme` writes LongMemEval's dev
turns instead (--lme FILE), every fifth one followed by a near copy of the
turn three before it, so that entities, their evidence, near-copy keys and
similarity edges are all derived.

--in-process N measures without a daemon, so with less of the shared
machine's noise: a fresh SQLite file, N bench.load entries written by the
store's `remember_many`, then `derive.step` until each deriver's queue is
empty, and the CPU microseconds an entry each deriver took (this process's
CPU: SQLite's work included). With --tree, a child process for each tree in
turn, round by round. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import random
import shutil
import tempfile
import time
from pathlib import Path

from bench.load import BenchDaemon, Vocabulary, cpu_s, make_entry

DERIVERS = ("entities", "sketch", "associations")
PG_DB = "derive_bench"

#: What the derivers write, without the clock's columns: equal digests mean the same derived state.
DERIVED = {
    "entities": "SELECT tenant_id, id, name, type, merged_into FROM entities",
    "entity_names": "SELECT tenant_id, id, entity_id, name, key, norm, grams, is_alias FROM entity_names",
    "entity_trigrams": "SELECT tenant_id, gram, name_id FROM entity_trigrams",
    "entry_entities": "SELECT tenant_id, entry_id, entity_id, how, name_id FROM entry_entities",
    "entry_sketches": "SELECT tenant_id, key, entry_id FROM entry_sketches",
    "associations": "SELECT tenant_id, a, b, weight FROM associations",
}


class Store:
    """Read-only counts and digests of one bench home's database, whichever the engine."""

    def __init__(self, home: Path, pg: str | None):
        self.pg = pg
        if pg:
            import psycopg

            self.conn = psycopg.connect(pg, autocommit=True)
        else:
            import apsw

            self.conn = apsw.Connection(str(home / "arbiter.db"), flags=apsw.SQLITE_OPEN_READONLY)
            self.conn.set_busy_timeout(5000)

    def rows(self, sql: str) -> list[tuple]:
        return [tuple(r) for r in self.conn.execute(sql).fetchall()]

    def cpu(self, daemon_pid: int) -> float:
        """CPU seconds so far of the daemon and (PostgreSQL) of the server processes serving it: a deriver's cost,
        which the other benches sharing the machine move less than its wall time."""
        total = cpu_s(daemon_pid)
        if self.pg:
            for (pid,) in self.rows("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                    "AND pid <> pg_backend_pid()"):
                try:
                    total += cpu_s(pid)
                except OSError:
                    pass  # a backend that ended between the two reads
        return total

    def queue(self) -> dict[str, int]:
        counts = dict.fromkeys(DERIVERS, 0)
        counts.update(dict(self.rows("SELECT deriver, count(*) FROM derive_queue GROUP BY deriver")))
        return counts

    def digest(self) -> tuple[str, dict[str, int]]:
        h, sizes = hashlib.sha256(), {}
        for table, sql in DERIVED.items():
            rows = sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in self.rows(sql))
            sizes[table] = len(rows)
            h.update(repr(rows).encode())
        return h.hexdigest()[:16], sizes

    def close(self) -> None:
        self.conn.close()


def fresh_pg(url: str) -> str:
    """A fresh empty database `derive_bench` on `url`'s cluster; its URL."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {PG_DB}")
    return urlunsplit(urlsplit(url)._replace(path=f"/{PG_DB}"))


def lme_entries(path: Path, count: int) -> list[dict]:
    """`count` entries from LongMemEval's turns in file order, every fifth followed by a near copy of the turn three
    before it (one word more)."""
    with gzip.open(path) if path.suffix == ".gz" else open(path) as f:
        questions = json.load(f)
    seen: set[str] = set()
    turns: list[str] = []
    for q in questions:
        for session in q["haystack_sessions"]:
            for turn in session:
                text = turn["content"].strip()
                if len(text) > 40 and text not in seen:
                    seen.add(text)
                    turns.append(text[:4000])
    out: list[dict] = []
    for i, text in enumerate(turns):
        if len(out) >= count:
            break
        out.append({"type": "context", "title": " ".join(text.split()[:8])[:200], "content": text})
        if i % 5 == 4:
            out.append({"type": "context", "title": out[-4]["title"], "content": out[-4]["content"] + " indeed"})
    return out[:count]


def one_round(args, engine: str, tree: Path | None) -> dict:
    home = Path(tempfile.mkdtemp(prefix="bench-derive-"))
    pg = fresh_pg(args.pg) if engine == "postgresql" else None
    daemon = BenchDaemon(home, "NORMAL", tree=tree, args=("--db", pg) if pg else ())
    try:
        rng = random.Random(args.seed)
        vocab = Vocabulary(rng)
        t0 = time.monotonic()
        lme = lme_entries(args.lme, args.batches * args.batch) if args.texts == "lme" else []
        with daemon.client() as c:
            for b in range(args.batches):
                c.remember_many(lme[b * args.batch:(b + 1) * args.batch] if lme else
                                [make_entry(vocab, rng, b * args.batch + i) for i in range(args.batch)])
        load_s = time.monotonic() - t0
        store = Store(home, pg)
        try:
            if pg and args.analyze:
                store.conn.execute("ANALYZE")
            start = time.monotonic()
            pid = daemon.proc.pid
            timeline = [(0.0, store.queue(), store.cpu(pid))]
            while time.monotonic() - start < args.window:
                time.sleep(0.2)
                timeline.append((time.monotonic() - start, store.queue(), store.cpu(pid)))
            empty = next((t for t, q, _ in timeline if not any(q.values())), None)
            out = {"load_s": load_s, "queued": timeline[0][1], "left": timeline[-1][1], "rates": {}, "empty": empty}
            for name in DERIVERS:
                falls = [i for i in range(1, len(timeline)) if timeline[i][1][name] < timeline[i - 1][1][name]]
                if not falls:
                    out["rates"][name] = (0, 0.0, 0.0)
                    continue
                # From the read before its first fall to its last fall (or the window's end while rows remain).
                first = timeline[falls[0] - 1]
                last = timeline[falls[-1]] if timeline[-1][1][name] == 0 else timeline[-1]
                done = timeline[0][1][name] - timeline[-1][1][name]
                out["rates"][name] = (done, done / max(last[0] - first[0], 1e-9),
                                      done / max(last[2] - first[2], 1e-9))
            if args.digest:
                deadline = time.monotonic() + args.drain
                while any(store.queue().values()) and time.monotonic() < deadline:
                    time.sleep(0.5)
                out["drained"] = not any(store.queue().values())
                out["digest"] = store.digest()
            return out
        finally:
            store.close()
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


#: What --in-process runs in a child process with a tree's code: only names both trees have.
_IN_PROCESS = """
import random, sys, tempfile, time
from arbiter import derive
from arbiter.model import RememberParams
from arbiter.store import db, entries, tenants, users
from bench.load import Vocabulary, make_entry
n = int(sys.argv[1])
conn = db.open_database(tempfile.mktemp(suffix='.db', prefix='bench-derive-'))
rng = random.Random(1)
vocab = Vocabulary(rng)
with conn:
    tenant = tenants.create_tenant(conn, 'bench', now=1)[0]
    entries.remember_many(conn, users.first_viewer(conn, tenant), [
        RememberParams(**{k: e[k] for k in ('type', 'title', 'content', 'tags')})
        for e in (make_entry(vocab, rng, i) for i in range(n))], now=1)
for name, d in derive.DERIVERS.items():
    start = time.process_time()
    while derive.pending(conn, tenant, names=(name,)):
        with conn:
            derive.step(conn, now=2, urgent=d.urgent, tenant_id=tenant)
    print(name, (time.process_time() - start) / n * 1e6)
conn.close()
"""


def in_process(args, trees) -> None:
    print(f"in process: {args.in_process} entries, SQLite; CPU us an entry")
    for r in range(args.rounds):
        for label, tree in (trees if r % 2 == 0 else trees[::-1]):
            code = tree or Path(__file__).resolve().parent.parent
            # `-c` puts the working directory first on the path: the tree's, as for BenchDaemon.
            out = subprocess.run([sys.executable, "-c", _IN_PROCESS, str(args.in_process)], cwd=code, check=True,
                                 env=dict(os.environ, PYTHONPATH=str(code)), capture_output=True,
                                 text=True).stdout.split()
            print(f"round {r} {label:6} " + "  ".join(f"{n} {float(us):5.0f}" for n, us in zip(out[::2], out[1::2])),
                  flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--window", type=float, default=20.0, help="seconds the queue is watched after the load")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tree", type=Path, help="another checkout (BEFORE_TREE), alternated with this one")
    ap.add_argument("--pg", help="a PostgreSQL URL: its cluster gets the database derive_bench")
    ap.add_argument("--engines", default="sqlite,postgresql")
    ap.add_argument("--texts", choices=("load", "lme"), default="load", help="bench.load's text, or LongMemEval's turns")
    ap.add_argument("--lme", type=Path, default=Path("../shared/data/longmemeval_s_dev.json.gz"))
    ap.add_argument("--digest", action="store_true", help="drain the queue and print a digest of what was derived")
    ap.add_argument("--drain", type=float, default=600.0, help="seconds --digest waits for the queue to empty")
    ap.add_argument("--analyze", action="store_true",
                    help="PostgreSQL: ANALYZE once the load is written, as autovacuum does within a minute or so")
    ap.add_argument("--in-process", type=int, default=0, metavar="N",
                    help="derive N entries in process on SQLite, CPU an entry (no daemon)")
    args = ap.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e != "postgresql" or args.pg]
    trees = [("after", None)] + ([("before", args.tree.resolve())] if args.tree else [])
    if args.in_process:
        return in_process(args, trees)
    print(f"{args.batches} x {args.batch} entries ({args.texts}), window {args.window:.0f} s, seed {args.seed}")
    for r in range(args.rounds):
        for engine in engines:
            # Alternate which tree goes first, round by round.
            for label, tree in (trees if r % 2 == 0 else trees[::-1]):
                res = one_round(args, engine, tree)
                rates = "  ".join(f"{n} {res['rates'][n][1]:5.0f}/s {res['rates'][n][2]:5.0f}/cpu-s ({res['rates'][n][0]:>5})"
                                  for n in DERIVERS)
                empty = "-" if res["empty"] is None else f"{res['empty']:.0f} s"
                print(f"round {r} {engine:10} {label:6} load {res['load_s']:5.1f} s  {rates}  "
                      f"left {sum(res['left'].values())}, queue empty after {empty}", flush=True)
                if args.digest:
                    digest, sizes = res["digest"]
                    print(f"    digest {digest} drained={res['drained']} {sizes}", flush=True)


if __name__ == "__main__":
    main()
