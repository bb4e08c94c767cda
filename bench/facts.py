"""Facts through the gate on a large tenant (targets: a 100-fact batch proposed, evaluated and
applied in at most 50 ms on a tenant with 100K active facts; facts-by-subject p50 at most 1 ms).

Seeds a tenant through the daemon with `--facts` active facts (100,000 by
default), every one through the gate (`facts_propose` with `apply`, 1,000 a
batch): 5,000 subjects ("person 17"), predicates drawn from the built-ins
(functional and multi-valued, so aspects get scored), objects from a word
list, confidence 0.6-1.0. Then it times, one request at a time:

- `propose+apply`: one `facts_propose` with `apply=true` of 100 facts on
  existing subjects (new objects for multi-valued predicates, newer values
  for functional ones: supersessions, and some duplicates: reinforcements);
- `propose, evaluate, apply`: the same kind of batch as three requests
  (`facts_propose`, `batch_evaluate`, `batch_apply`), their sum;
- `facts by subject`: `facts(subject)` round trips, and the store's read
  alone (in this process, on a second connection to the same file);
- the daemon's own CPU time (user + system, from /proc) over the
  one-request batches, their mean: what the apply costs without the waits;
- then, with the daemon stopped, the same 100-fact propose+apply run in
  this process as the daemon's writer runs it (one transaction, the verb
  function, synchronous=FULL), timed by wall clock and by CPU time: on a
  shared machine the CPU time says what the work costs without the wait
  for a core.

    python -m bench.facts
    python -m bench.facts --facts 20000 --runs 20 --home facts-bench

The home keeps the seeded tenant (a marker file records the count), so a
later run with the same `--home` only measures. Milliseconds.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from arbiter.facts import store as facts_store
from arbiter.facts import verbs as facts_verbs
from arbiter.facts import recall as fact_recall
from arbiter.facts.model import ProposeParams
from arbiter.model import RecallParams
from arbiter.server import writer_settings
from arbiter.server.runner import Caller, Runner
from arbiter.store import connect, open_database, users
from bench.load import cpu_s
from bench.longmemeval.daemon import Daemon
from bench.longmemeval.metrics import percentile

SUBJECTS = 5000
SEED_BATCH = 1000
FUNCTIONAL = ("works_at", "lives_in", "has_job_title", "prefers_drink", "prefers_editor")
MULTI = ("enjoys", "knows", "listens_to", "has_read", "has_watched", "studied_at", "practices", "believes",
         "values", "friend_of", "sibling_of", "has_skill", "speaks", "visited", "created", "plays")
WORDS = ("acme globex initech hooli jazz chess yoga tennis paris oslo berlin lisbon dune emacs vim tea coffee "
         "python rust piano guitar painting pottery stoicism kindness honesty hiking swimming sushi ramen "
         "marathon cello poetry sculpture cinema anime baking climbing sailing gardening").split()


def _fact(rng: random.Random, subject: int, functional_share: float) -> dict:
    if rng.random() < functional_share:
        predicate = rng.choice(FUNCTIONAL)
    else:
        predicate = rng.choice(MULTI)
    obj = f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(1000)}"
    return {"subject": f"person {subject}", "predicate": predicate, "object": obj,
            "confidence": round(rng.uniform(0.6, 1.0), 2)}


def seed(client, rng: random.Random, n: int) -> int:
    """Apply `n` facts through the gate; returns how many ended active and current."""
    start = time.perf_counter()
    for done in range(0, n, SEED_BATCH):
        batch = [_fact(rng, rng.randrange(SUBJECTS), 0.02) for _ in range(min(SEED_BATCH, n - done))]
        client.facts_propose(batch, origin="import", apply=True)
        if done and done % 20_000 == 0:
            print(f"  seeded {done:,} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    return len(client.facts(limit=1).facts)


def _batch(rng: random.Random) -> list[dict]:
    out = []
    for _ in range(100):
        f = _fact(rng, rng.randrange(SUBJECTS), 0.3)
        if rng.random() < 0.1:
            f["object"] = "jazz jazz 1"  # often a duplicate after a few runs: a reinforcement
        f["confidence"] = round(rng.uniform(0.75, 1.0), 2)
        out.append(f)
    return out


def _ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.1f} ms, p95 {percentile(values, 95):.1f} ms, max {max(values):.1f} ms"


def in_process(home: Path, rng: random.Random, runs: int) -> tuple[list[float], list[float]]:
    """The 100-fact propose+apply as the daemon's writer runs it, with the daemon stopped; (wall, CPU) ms."""
    conn = open_database(home / "arbiter.db")
    writer_settings(conn)
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
    runner, caller = Runner(conn, lambda lane: conn), Caller(tenant, "default", None)
    propose = facts_verbs.VERBS["facts_propose"]
    wall, cpu = [], []
    for _ in range(runs):
        params = msgspec.convert({"facts": _batch(rng), "apply": True}, ProposeParams)
        w, c = time.perf_counter(), time.process_time()
        runner.execute(propose, params, caller)  # the daemon's runner, its writer's page cache
        wall.append((time.perf_counter() - w) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    conn.close()
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--reads", type=int, default=1000)
    ap.add_argument("--home", type=Path, help="Keep the seeded tenant here (default: a temporary folder).")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"seed {args.seed}", file=sys.stderr)
    home = args.home or Path(tempfile.mkdtemp(prefix="arb-facts-"))
    marker = home / "facts-bench-seeded"
    try:
        with Daemon(home) as daemon:
            with daemon.client() as client:
                if not marker.exists():
                    t = time.perf_counter()
                    seed(client, rng, args.facts)
                    marker.write_text(str(args.facts))
                    print(f"seeded {args.facts:,} facts in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                conn = connect(home / "arbiter.db", readonly=True)
                active = conn.execute(
                    "SELECT count(*) FROM facts WHERE status = 'active' AND valid_to IS NULL").fetchone()[0]
                print(f"tenant: {active:,} current active facts, {SUBJECTS:,} subjects")

                one, three = [], []
                cpu = cpu_s(daemon._proc.pid) * 1000
                for _ in range(args.runs):
                    t = time.perf_counter()
                    client.facts_propose(_batch(rng), apply=True)
                    one.append((time.perf_counter() - t) * 1000)
                cpu = (cpu_s(daemon._proc.pid) * 1000 - cpu) / args.runs
                for _ in range(args.runs):
                    t = time.perf_counter()
                    b = client.facts_propose(_batch(rng))
                    client.batch_evaluate(b.id)
                    client.batch_apply(b.id)
                    three.append((time.perf_counter() - t) * 1000)
                print(f"propose+apply, 100 facts (1 request):            {_ms(one)}")
                print(f"  the daemon's CPU time, mean of those requests:  {cpu:.1f} ms")
                print(f"propose, evaluate, apply, 100 facts (3 requests): {_ms(three)}")

                subjects = [f"person {rng.randrange(SUBJECTS)}" for _ in range(args.reads)]
                trips, local, sizes = [], [], []
                tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
                viewer = users.first_viewer(conn, tenant)
                for s in subjects:
                    t = time.perf_counter()
                    sizes.append(len(client.facts(s).facts))
                    trips.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    facts_store.read(conn, viewer, subject=s)
                    local.append((time.perf_counter() - t) * 1000)
                print(f"facts by subject ({statistics.mean(sizes):.0f} facts each), round trip: {_ms(trips)}")
                print(f"facts by subject, store read alone:               {_ms(local)}")
                # Recall's fact hits alone: BM25 with the caller's statistics (facts/recall.py).
                searched = []
                for _ in range(args.reads):
                    q = RecallParams(query=f"{rng.choice(WORDS)} {rng.choice(WORDS)}")
                    t = time.perf_counter()
                    fact_recall.search(conn, viewer, q)
                    searched.append((time.perf_counter() - t) * 1000)
                print(f"recall's fact hits (two words), search alone:     {_ms(searched)}")
                conn.close()
        wall, cpu = in_process(home, rng, args.runs)
        print(f"propose+apply, 100 facts, in process, wall:        {_ms(wall)}")
        print(f"propose+apply, 100 facts, in process, CPU time:    {_ms(cpu)}")
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
