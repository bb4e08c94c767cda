"""Recall latency on a large tenant, through the daemon's socket.

Builds a tenant of about 250K entries by ingesting a LongMemEval file's
haystacks several times over (each copy in conversations of its own, as the
full benchmark's ~500 questions would), then times recall round trips for
every question: `graduated` (the question's conversation plus tenant fill),
`bm25` (tenant-wide) and any extra configurations given with `--disable`.

    python -m bench.recall_speed --dataset longmemeval_s_dev.json.gz --copies 5 --home speed-home
    python -m bench.recall_speed --home speed-home --compact --disable tenant_fill

The home keeps the ingested tenant (a state file records the conversations),
so later runs only query. Numbers are milliseconds per round trip, measured
one request at a time on one connection: `wall`, and `cpu`, the CPU the
daemon (all its threads, from /proc's per-thread schedstat, nanoseconds)
and the client's thread spent on it: on a shared machine the wall clock
measures the neighbours too, the CPU time much less so. `--compact` then stops the daemon,
merges the FTS index's segments with `arbiter.recall.maintain.compact` (what
an idle daemon should do) and measures again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from arbiter.model import RememberParams
from arbiter.recall import maintain
from arbiter.store import connect
from bench.longmemeval.daemon import Daemon
from bench.longmemeval.dataset import load, plan

STATE = "recall-speed-state.json"
BATCH = 2000


def ingest(client, dataset_path: str, copies: int, haystacks: int | None = None) -> dict:
    """Write the dataset's haystacks (the first `haystacks` questions') `copies` times; returns the state to keep."""
    ds = load(dataset_path)
    asked = ds.questions[:haystacks]
    questions = []
    buffer: list[RememberParams] = []
    written = 0
    started = time.perf_counter()

    def flush() -> None:
        nonlocal written
        for at in range(0, len(buffer), BATCH):
            client.remember_many(buffer[at : at + BATCH])
        written += len(buffer)
        buffer.clear()
        print(f"\r  {written} entries, {written / (time.perf_counter() - started):.0f}/s", end="", file=sys.stderr)

    for copy in range(copies):
        for q in asked:
            p = plan(q)
            conv = client.conversation_create(title=f"{q.question_id}#{copy}").id
            buffer.extend(
                RememberParams(
                    type="context", title=e.title, content=e.content, speaker=e.role,
                    conversation_id=conv, valid_from=e.valid_from,
                )
                for e in p.entries
            )
            if copy == copies - 1:
                questions.append({"question": q.question, "conversation_id": conv})
            if len(buffer) >= BATCH:
                flush()
    flush()
    seconds = time.perf_counter() - started
    print(file=sys.stderr)
    return {"dataset": dataset_path, "copies": copies, "entries": written, "ingest_s": round(seconds, 1),
            "questions": questions}


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99 of latency samples, in ms."""
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": round(statistics.median(samples), 3), "p95": round(q[94], 3), "p99": round(q[98], 3)}


def cpu_ns(pid: int | None) -> int | None:
    """CPU nanoseconds all of a process's threads have run (Linux's schedstat); None where /proc has none."""
    if pid is None:
        return None
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
    except FileNotFoundError:
        return None
    return total


def time_variant(client, questions: list[dict], *, scoped: bool, disable: list[str], rounds: int,
                 pid: int | None = None) -> dict:
    """Wall and CPU percentiles of `rounds` passes of one recall per question."""
    wall, cpu = [], []
    for _ in range(rounds):
        for q in questions:
            kwargs = {"limit": 10, "disable": disable}
            if scoped:
                kwargs["conversation_id"] = q["conversation_id"]
            served = cpu_ns(pid)
            own = time.thread_time_ns()
            started = time.perf_counter()
            client.recall(q["question"], **kwargs)
            wall.append((time.perf_counter() - started) * 1000)
            own = time.thread_time_ns() - own
            if served is not None:
                cpu.append((cpu_ns(pid) - served + own) / 1e6)
    out = {"wall": percentiles(wall)}
    if cpu:
        out["cpu"] = percentiles(cpu)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the home, then time the variants; prints a JSON report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", help="LongMemEval JSON (plain or .gz); needed the first time")
    ap.add_argument("--home", type=Path, required=True, help="daemon home to build or reuse")
    ap.add_argument("--copies", type=int, default=5,
                    help="times to ingest the dataset (default 5: ~241K entries from the dev split)")
    ap.add_argument("--haystacks", type=int,
                    help="ingest only the first N questions' haystacks (40 of the dev split: ~20K entries a copy)")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the questions per variant")
    ap.add_argument("--warm", action="store_true",
                    help="one untimed pass over every question first (default: five), so the figures are steady state")
    ap.add_argument("--no-wide", action="store_true", help="leave out the bm25 (tenant-wide) run")
    ap.add_argument("--disable", action="append", default=[],
                    help="extra graduated run with these stages off (comma-separated); repeatable")
    ap.add_argument("--wide-disable", action="append", default=[],
                    help="extra bm25 (tenant-wide) run with these stages off (comma-separated); repeatable")
    ap.add_argument("--compact", action="store_true",
                    help="then merge the index (as an idle daemon would) and measure again")
    args = ap.parse_args(argv)

    state_path = args.home / STATE
    runs = [("graduated", True, [])] + ([] if args.no_wide else [("bm25", False, [])])
    runs += [(f"graduated -{d}", True, d.split(",")) for d in args.disable]
    runs += [(f"bm25 -{d}", False, d.split(",")) for d in args.wide_disable]
    report: dict = {"variants": {}}

    def measure(label: str) -> None:
        with Daemon(args.home, timeout=120) as daemon, daemon.client() as client:
            questions = report["questions"]
            # One untimed pass warms the page cache and the daemon's term statistics: a word's
            # document count is read once (its whole doclist, ~1.4 ms a question at 250K) and cached.
            for q in questions if args.warm else questions[:5]:
                client.recall(q["question"], conversation_id=q["conversation_id"])
            for name, scoped, disable in runs:
                key = f"{name} ({label})"
                report["variants"][key] = time_variant(
                    client, questions, scoped=scoped, disable=disable, rounds=args.rounds, pid=daemon.pid
                )
                report["variants"][key]["loadavg"] = os.getloadavg()[0]
                print(f"{key:44s} {report['variants'][key]}", flush=True)

    if not state_path.exists():
        if not args.dataset:
            ap.error("--dataset is needed to build a new home")
        with Daemon(args.home, timeout=120) as daemon, daemon.client() as client:
            state_path.write_text(json.dumps(ingest(client, args.dataset, args.copies, args.haystacks)))
    state = json.loads(state_path.read_text())
    report.update(entries=state["entries"], ingest_s=state["ingest_s"], questions=state["questions"])
    db = args.home / "arbiter.db"
    conn = connect(db)
    report["segments"] = maintain.segments(conn)
    conn.close()
    measure(f"{report['segments']} segments")
    if args.compact:
        started = time.perf_counter()
        conn = connect(db)
        while maintain.compact(conn):  # each step its own transaction, as a daemon would run them
            pass
        report["compact_s"] = round(time.perf_counter() - started, 1)
        report["segments_after"] = maintain.segments(conn)
        conn.close()
        print(f"compacted in {report['compact_s']} s to {report['segments_after']} segment(s)", flush=True)
        measure(f"{report['segments_after']} segment(s)")
    report["questions"] = len(report["questions"])
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
