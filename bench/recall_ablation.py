"""Recall ablation on a LongMemEval home: each pipeline stage off (or an optional one on), one table.

    python -m bench.longmemeval ingest --dataset longmemeval_s_dev.json.gz --home lme-home
    python -m bench.recall_ablation --home lme-home

Reads the harness's state file (questions, conversations, ground truth) and
the home's database, and runs `graduated` recall (the question's conversation
plus tenant fill) in this process, with the real pipeline: once as shipped,
then once per variant. Run it while no daemon serves the home. The latency
column is in-process (no socket), for comparing variants with each other; the
socket figures come from `bench.longmemeval` and `bench.recall_speed`.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import msgspec

from arbiter.model import RecallParams
from arbiter.recall import DEFAULT, recall
from arbiter.store import connect, users
from bench.longmemeval.harness import STATE_NAME, State
from bench.longmemeval.metrics import hit_at, reciprocal_rank

# (label, RecallParams overrides, Tuning overrides)
VARIANTS: list[tuple[str, dict, dict]] = [
    ("as shipped", {}, {}),
    ("bm25 only (no conversation scope)", {"conversation": False}, {}),
    ("- stopwords (stage 1)", {"disable": ["stopwords"]}, {}),
    ("+ phrase and NEAR branches (stage 2)", {}, {"phrase": True, "near": True}),
    ("- column weights (stage 3: all 1)", {"disable": ["weights"]}, {}),
    ("- intent routing (stage 5)", {"disable": ["intent"]}, {}),
    ("+ age decay (stage 6, off unless asked for)", {"decay": True}, {}),
    ("- voice", {"disable": ["voice"]}, {}),
    ("- quantity cue", {"disable": ["quantity"]}, {}),
    ("- number words (quantity cue counts digits only)", {"disable": ["number_words"]}, {}),
    ("- common-word drop (conversation pass)", {"disable": ["common"]}, {}),
    ("- tenant fill (stage 7: conversation only)", {"disable": ["tenant_fill"]}, {}),
    ("- episodes (shipped 0.2 since issue 11)", {"disable": ["episodes"]}, {}),
    ("+ length prior 0.1", {}, {"size_exponent": 0.1}),
    ("episodes 0.3 (10 min gap, best 3)", {}, {"episode_weight": 0.3}),
    ("episodes 0.5 (10 min gap, best 3)", {}, {"episode_weight": 0.5}),
    ("BM25 b = 0.75 (FTS5's)", {}, {"b": 0.75}),
    ("BM25 k1 = 0.8", {}, {"k1": 0.8}),
    ("weights 10/4/8/2 (the issue's start, FTS5's scale)", {}, {"weights": (10.0, 4.0, 8.0, 2.0, 0.0)}),
    ("weights 4/1/2/0.5 (title x4)", {}, {"weights": (4.0, 1.0, 2.0, 0.5, 0.0)}),
    ("weights 0/1/2/0.5 (no title)", {}, {"weights": (0.0, 1.0, 2.0, 0.5, 0.0)}),
    ("weights 1/1/2/0.5 (title x1)", {}, {"weights": (1.0, 1.0, 2.0, 0.5, 0.0)}),
    ("+ entities 0.1 (query names an entity the entry mentions)", {}, {"entity_boost": 0.1}),
    ("+ entities 0.3", {}, {"entity_boost": 0.3}),
    ("+ entity clusters 0.1 (associative)", {}, {"cluster_boost": 0.1}),
    ("+ entities 0.1 and clusters 0.05", {}, {"entity_boost": 0.1, "cluster_boost": 0.05}),
    ("+ salience 0.4 (MemoryGraph's share)", {}, {"salience_weight": 0.4}),
]


def main(argv: list[str] | None = None) -> int:
    """Run every variant (or `--only` some) and print the table as markdown."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, required=True, help="a home `bench.longmemeval ingest` filled")
    ap.add_argument("--only", help="comma-separated variant numbers (0 = as shipped)")
    ap.add_argument("--refresh-clusters", action="store_true",
                    help="first extract queued entities and compute the entity clusters (what maintenance does)")
    args = ap.parse_args(argv)
    if args.refresh_clusters:
        from arbiter._time import now_us
        from arbiter import derive
        from arbiter.entities import clusters

        writer = connect(args.home / "arbiter.db")
        with writer:
            tenant_id = writer.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
            print(f"entity backlog drained: {derive.drain(writer, now=now_us())}", flush=True)
            print(f"entity clusters: {clusters.refresh(writer, tenant_id)}", flush=True)
        writer.close()

    state = msgspec.json.decode((args.home / STATE_NAME).read_bytes(), type=State)
    conn = connect(args.home / "arbiter.db", readonly=True)
    tenant = users.first_viewer(conn, conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0])
    questions = [q for q in state.questions if q.truth_ids]
    chosen = range(len(VARIANTS)) if not args.only else [int(x) for x in args.only.split(",")]
    for q in questions:  # warm the page cache and the term statistics before timing anything
        with conn:
            recall(conn, tenant, RecallParams(query=q.question, conversation_id=q.conversation_id))
    print("| variant | R@1 | R@5 | R@10 | MRR | p50 ms (in-process) |")
    print("|---|--:|--:|--:|--:|--:|")
    for i in chosen:
        label, overrides, tuning_overrides = VARIANTS[i]
        tuning = dataclasses.replace(DEFAULT, **tuning_overrides)
        scoped = overrides.get("conversation", True)
        r1 = r5 = r10 = mrr = 0.0
        latencies = []
        for q in questions:
            p = RecallParams(query=q.question, conversation_id=q.conversation_id if scoped else None, limit=10,
                             disable=overrides.get("disable", []))
            started = time.perf_counter()
            with conn:
                ranked = [h.id for h in recall(conn, tenant, p, tuning=tuning).hits]
            latencies.append((time.perf_counter() - started) * 1000)
            truth = set(q.truth_ids)
            r1 += hit_at(ranked, truth, 1)
            r5 += hit_at(ranked, truth, 5)
            r10 += hit_at(ranked, truth, 10)
            mrr += reciprocal_rank(ranked, truth)
        n = len(questions)
        print(f"| {label} | {100 * r1 / n:.1f} | {100 * r5 / n:.1f} | {100 * r10 / n:.1f} | {mrr / n:.3f} "
              f"| {statistics.median(latencies):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
