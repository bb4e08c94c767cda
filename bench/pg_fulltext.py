"""Full text on PostgreSQL (arbiter/store/pg/fulltext.py): indexing speed and ranked-search latency by tenant size.

    python -m bench.pg_fulltext --pg "host=/tmp/pgdev user=postgres" [--sizes 10000,100000] [--queries 200]

For each size, a fresh database (dropped after; --keep keeps it) gets N entries
of bench.load's generator in one tenant's scope index, plus a second tenant
of N/4 that the searches must not see; then recall's tenant pass is timed
for queries of three to five mid-frequency words, as recall runs it: term
selection (`select_terms`), the newest-`rank_budget` floor when the words
are common (`newest`), then `ranked` at depth 30. `conversation` is a conversation pass (all the words, the
conversation's scope filter ANDed on, depth 50). `stats` is what recall reads
first (document frequencies, uncached here, and totals). The same documents
in an FTS5 table give `_rank.ranked`'s figures beside them. Milliseconds per
call, p50 and p99 of wall time, and `cpu`: the client thread's plus the
PostgreSQL backend's (/proc schedstat), which a busy machine's neighbours
move much less. The last size prints EXPLAIN ANALYZE of a typical query.

Numbers are for docs/benchmarks.md; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import apsw

from arbiter.recall import DEFAULT, _rank, _sql, select_terms
from arbiter.recall.query import analyze, expression, tokenizer
from arbiter.store.pg import fulltext as ft
from bench.load import Vocabulary, make_entry

MIGRATION = Path(ft.__file__).parent / "migrations" / "p002_fulltext.sql"
TENANT, OTHER, SCOPE = 1, 2, 1
BATCH = 1000
COLS = "title, content, tags, source, scope"


class Qmark:
    """`execute(sql, params)` in qmark style over psycopg, as the store's PostgreSQL wrapper speaks it."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql: str, params=()):
        return self.conn.execute(sql.replace("?", "%s"), params)


def _cpu_ns(pid: int | None = None) -> int:
    """CPU time of a process (or this thread) in nanoseconds, from schedstat."""
    path = f"/proc/{pid}/schedstat" if pid else f"/proc/self/task/{threading.get_native_id()}/schedstat"
    return int(Path(path).read_text().split()[0])


def _entries(n: int, seed: int, first: int = 1) -> list[tuple[int, tuple]]:
    rng = random.Random(seed)
    vocab = Vocabulary(random.Random(7))
    out = []
    for i in range(n):
        e = make_entry(vocab, rng, i)
        scope = f"c{i // 400 + 1}" if i % 5 else f"u{TENANT}"
        out.append((first + i, (e["title"], e["content"], " ".join(e["tags"]), e.get("source"), scope)))
    return out


def _queries(k: int) -> list[str]:
    rng = random.Random(5)
    vocab = Vocabulary(random.Random(7))
    return [" ".join(vocab.mid_frequency(rng.randint(3, 5))) for _ in range(k)]


def _ms(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))] * 1e3


def run(pg_conninfo: str, n: int, queries: int, *, keep: bool, explain: bool, sqlite: bool,
        reuse: str | None = None) -> dict:
    import psycopg

    name = reuse or f"pgfts_bench_{uuid.uuid4().hex[:10]}"
    if not reuse:
        with psycopg.connect(pg_conninfo, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    raw = psycopg.connect(f"{pg_conninfo} dbname={name}", autocommit=True)
    out: dict = {"entries": n}
    try:
        conn = Qmark(raw)
        backend = raw.execute("SELECT pg_backend_pid()").fetchone()[0]
        index = ft.Index(TENANT, ft.ENTRIES, SCOPE)
        docs = _entries(n, seed=1) if sqlite or not reuse else []
        if reuse:
            out["entries"] = n = ft.totals(conn, index)[0] - 200  # the 200 one-entry writes below
        else:
            _load(raw, conn, index, docs, n, out)
        out.update(_measure(raw, conn, index, backend, n, queries, docs if sqlite else None, explain))
    finally:
        raw.close()
        if not keep and not reuse:
            with psycopg.connect(pg_conninfo, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        elif not reuse:
            print(f"kept database {name}")
    return out


def _load(raw, conn, index, docs, n: int, out: dict) -> None:
    """The tenant's `n` entries in writes of BATCH, 200 one-entry writes, and the other tenant's n/4."""
    raw.execute(MIGRATION.read_text())
    backend = raw.execute("SELECT pg_backend_pid()").fetchone()[0]
    start, c0, b0 = time.perf_counter(), _cpu_ns(), _cpu_ns(backend)
    for i in range(0, n, BATCH):
        with raw.transaction():
            ft.add_many(conn, index, docs[i : i + BATCH])
    out["index_entries_per_s"] = n / (time.perf_counter() - start)
    out["index_entries_per_cpu_s"] = n / ((_cpu_ns() - c0 + _cpu_ns(backend) - b0) / 1e9)
    # One entry a write, as `remember` indexes it.
    singles = _entries(200, seed=3, first=10 * n + 1)
    samples = []
    for doc_id, cols in singles:
        t = time.perf_counter()
        with raw.transaction():
            ft.add(conn, index, doc_id, cols)
        samples.append(time.perf_counter() - t)
    out["add_one_p50_ms"] = _ms(samples, 50)
    others = _entries(n // 4, seed=2, first=n + 1)
    for i in range(0, len(others), BATCH):
        with raw.transaction():
            ft.add_many(conn, ft.Index(OTHER, ft.ENTRIES, SCOPE), others[i : i + BATCH])
    raw.execute("VACUUM ANALYZE")
    out["tables_mb"] = raw.execute(
        "SELECT (pg_total_relation_size('fulltext_postings') + pg_total_relation_size('fulltext_docs')) / 1e6"
    ).fetchone()[0]


def _measure(raw, conn, index, backend: int, n: int, queries: int, docs, explain: bool) -> dict:
    """The passes' timings (and FTS5's beside them when `docs` are given)."""
    out: dict = {}
    lite = apsw.Connection(":memory:")
    tok = tokenizer(lite)
    passes = []
    for text in _queries(queries):
        terms = analyze(text, tok).terms
        passes.append(terms)

    times: dict[str, list[float]] = {"stats": [], "newest": [], "ranked": [], "pass": [], "pass_cpu": [],
                                     "conversation": [], "conversation_cpu": []}
    conversations = random.Random(11)
    chats = []
    plans = []
    for terms in passes:
        t0, c0, b0 = time.perf_counter(), _cpu_ns(), _cpu_ns(backend)
        stems = [s for t in terms for s in t.stem.split(" ")]
        df = ft.frequencies(conn, index, stems)
        rows, tokens = ft.totals(conn, index)
        t1 = time.perf_counter()
        chosen = select_terms(terms, df, rows, DEFAULT.df_max_share, DEFAULT.tenant_budget,
                              floor=DEFAULT.common_floor)
        expr = expression(chosen, phrase=DEFAULT.phrase, near=DEFAULT.near)
        match = _sql.text_match(expr.text)
        spec = _rank.Spec(idf=[sum(_rank.idf(df[s], rows) for s in st) for _, st in expr.slots],
                          weights=DEFAULT.weights, avgdl=tokens / max(rows, 1))
        floor = 0
        if sum(df[t.stem] for t in chosen) > DEFAULT.rank_budget:
            floor = ft.newest(conn, index, match, DEFAULT.rank_budget)
        t2 = time.perf_counter()
        ft.ranked(conn, index, match, spec, DEFAULT.tenant_depth, min_rowid=floor)
        t3 = time.perf_counter()
        cpu = (_cpu_ns() - c0) + (_cpu_ns(backend) - b0)
        times["stats"].append(t1 - t0)
        times["newest"].append(t2 - t1)
        times["ranked"].append(t3 - t2)
        times["pass"].append(t3 - t0)
        times["pass_cpu"].append(cpu / 1e9)
        plans.append((match, spec, floor))
        # A conversation pass (recall's first when the caller names a conversation): all the words, the scope
        # filter ANDed on.
        conv = conversations.randint(1, max(1, n // 400))
        # As recall writes it, with the shipped settings (a bag of words; no phrase or NEAR branch).
        bag = expression(terms, phrase=DEFAULT.phrase, near=DEFAULT.near)
        scoped = _sql.scoped(_sql.text_match(bag.text), TENANT, conversation_id=conv)
        spec_all = _rank.Spec(idf=[sum(_rank.idf(df[s], rows) for s in st) for _, st in bag.slots],
                              weights=DEFAULT.weights, avgdl=tokens / max(rows, 1))
        t4, c4, b4 = time.perf_counter(), _cpu_ns(), _cpu_ns(backend)
        ft.ranked(conn, index, scoped, spec_all, DEFAULT.conversation_depth)
        times["conversation"].append(time.perf_counter() - t4)
        times["conversation_cpu"].append(((_cpu_ns() - c4) + (_cpu_ns(backend) - b4)) / 1e9)
        chats.append((scoped, spec_all))
    for key, samples in times.items():
        out[f"{key}_p50_ms"] = _ms(samples, 50)
        out[f"{key}_p99_ms"] = _ms(samples, 99)
    out["mean_matches"] = statistics.mean(ft.count(conn, index, m) for m, _, _ in plans[:20])

    if docs is not None:
        out.update(_sqlite(docs, plans, chats))
    if explain:
        match, spec, floor = plans[len(plans) // 2]
        _explain(raw, conn, index, match, spec, floor)
        scoped, spec_all = chats[len(chats) // 2]
        _explain(raw, conn, index, scoped, spec_all, 0, depth=DEFAULT.conversation_depth)
    return out


def _sqlite(docs, plans, chats) -> dict:
    """The same documents and calls on FTS5 with recall's own `_rank.ranked` (one index, in a temporary file)."""
    with tempfile.TemporaryDirectory() as tmp:
        lite = apsw.Connection(str(Path(tmp) / "bench.db"))
        lite.execute(f"CREATE VIRTUAL TABLE e USING fts5({COLS}, tokenize='porter unicode61 remove_diacritics 2')")
        with lite:
            lite.executemany(f"INSERT INTO e(rowid, {COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                             [(i, *cols) for i, cols in docs])
        lite.execute("INSERT INTO e(e) VALUES ('optimize')")
        samples = []
        for match, spec, floor in plans:
            t = time.perf_counter()
            _rank.ranked(lite, "e", match, spec, DEFAULT.tenant_depth, min_rowid=floor)
            samples.append(time.perf_counter() - t)
        chat = []
        for match, spec in chats:
            t = time.perf_counter()
            _rank.ranked(lite, "e", match, spec, DEFAULT.conversation_depth)
            chat.append(time.perf_counter() - t)
        lite.close()
    return {"sqlite_ranked_p50_ms": _ms(samples, 50), "sqlite_ranked_p99_ms": _ms(samples, 99),
            "sqlite_conversation_p50_ms": _ms(chat, 50), "sqlite_conversation_p99_ms": _ms(chat, 99)}


def _explain(raw, conn, index, match, spec, floor, depth: int = DEFAULT.tenant_depth) -> None:
    """EXPLAIN ANALYZE of `ranked`'s statement for one query (captured from the wrapper)."""
    seen: list[tuple[str, tuple]] = []

    class Capture(Qmark):
        def execute(self, sql, params=()):
            seen.append((sql, params))
            return super().execute(sql, params)

    ft.ranked(Capture(raw), index, match, spec, depth, min_rowid=floor)
    sql, params = seen[-1]
    print(f"EXPLAIN ANALYZE of ranked() for {match[:100]}")
    for (line,) in raw.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql.replace("?", "%s"), params):
        print("   ", line)


def against(pg_conninfo: str, db: str, other: Path, tenant: int, scope: int, queries: int, rounds: int) -> str:
    """This `fulltext.py` and another tree's (`other`, the file) in one process on a kept database, query by query
    in turn: the tenant pass's `ranked` (as recall writes it, with no floor) on `Index(tenant, ENTRIES, scope)`,
    PostgreSQL backend CPU per call; the two rankings must be equal to the bit."""
    import importlib.util
    import sys

    import psycopg

    spec = importlib.util.spec_from_file_location("other_fulltext", other)
    theirs = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = theirs  # dataclasses look their module up
    spec.loader.exec_module(theirs)
    raw = psycopg.connect(f"{pg_conninfo} dbname={db}", autocommit=True)
    conn, backend = Qmark(raw), raw.execute("SELECT pg_backend_pid()").fetchone()[0]
    mods = {"this": (ft, ft.Index(tenant, ft.ENTRIES, scope)),
            "other": (theirs, theirs.Index(tenant, theirs.ENTRIES, scope))}
    rows, tokens = ft.totals(conn, mods["this"][1])
    tok = tokenizer(apsw.Connection(":memory:"))
    plans = []
    for text in _queries(queries):
        terms = analyze(text, tok).terms
        df = ft.frequencies(conn, mods["this"][1], [s for t in terms for s in t.stem.split(" ")])
        expr = expression(terms, phrase=DEFAULT.phrase, near=DEFAULT.near)
        plans.append((_sql.text_match(expr.text), _rank.Spec(
            idf=[sum(_rank.idf(df[s], rows) for s in st) for _, st in expr.slots], weights=DEFAULT.weights,
            avgdl=tokens / max(rows, 1))))
    cpu: dict[str, list[float]] = {"this": [], "other": []}
    for _ in range(rounds):
        for i, (match, spec) in enumerate(plans):
            got = {}
            for name in ("this", "other") if i % 2 else ("other", "this"):
                mod, index = mods[name]
                b0 = _cpu_ns(backend)
                got[name] = mod.ranked(conn, index, match, spec, DEFAULT.tenant_depth)
                cpu[name].append((_cpu_ns(backend) - b0) / 1e9)
            if got["this"] != got["other"]:
                raise SystemExit(f"the two rankings differ for {match}")
    raw.close()
    return "\n".join(f"  {name:5}: ranked, PostgreSQL backend CPU p50 {_ms(v, 50):.2f} ms, mean "
                     f"{statistics.mean(v) * 1e3:.2f}, p90 {_ms(v, 90):.2f} ({len(v)} calls)" for name, v in cpu.items())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default=os.environ.get("ARBITER_TEST_PG"),
                    help="libpq conninfo of a cluster where the bench may CREATE DATABASE (default: $ARBITER_TEST_PG)")
    ap.add_argument("--sizes", default="10000,100000", help="tenant sizes, comma-separated")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep each size's database")
    ap.add_argument("--no-sqlite", action="store_true", help="skip the FTS5 figures")
    ap.add_argument("--reuse", help="measure this database kept by --keep again, writing nothing (one size)")
    ap.add_argument("--no-explain", action="store_true")
    ap.add_argument("--against", type=Path, help="with --reuse: another tree's arbiter/store/pg/fulltext.py, whose "
                    "`ranked` is timed in turn with this one's on the kept database")
    ap.add_argument("--index", default=f"{TENANT},{SCOPE}", help="with --against: the tenant and scope ids ranked")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: passes over the queries")
    args = ap.parse_args(argv)
    if not args.pg:
        ap.error("--pg (or ARBITER_TEST_PG) must name a PostgreSQL cluster")
    if args.against:
        if not args.reuse:
            ap.error("--against needs --reuse")
        tenant, scope = (int(x) for x in args.index.split(","))
        print(f"this fulltext.py and {args.against}, in turn:")
        print(against(args.pg, args.reuse, args.against, tenant, scope, args.queries, args.rounds))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    sizes = sizes[-1:] if args.reuse else sizes  # a kept database is measured at the size it holds
    results = [run(args.pg, n, args.queries, keep=args.keep, explain=n == sizes[-1] and not args.no_explain,
                   sqlite=not args.no_sqlite, reuse=args.reuse) for n in sizes]
    keys = [k for k in results[0] if k != "entries"]
    print(f"{'entries':>24}" + "".join(f"{r['entries']:>12,}" for r in results))
    for k in keys:
        print(f"{k:>24}" + "".join(f"{r[k]:>12.2f}" for r in results))


if __name__ == "__main__":
    main()
