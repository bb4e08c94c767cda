"""The four development sets on both engines: the same questions, recall as shipped, SQLite against PostgreSQL.

    python -m bench.engine_parity --pg "postgresql://postgres@/postgres?host=/tmp/pgdev"
    python -m bench.engine_parity --pg URL --diff 3        # also each set's first 3 questions whose top 10 differ
    python -m bench.engine_parity --pg URL --moved         # PostgreSQL's homes moved from SQLite's by `arbiter migrate`

Issue 31: "the development sets rank the same on both engines". SQLite's
homes are bench.devsets' own (under --work, written once and shared with it).
PostgreSQL's are the same datasets written the same way, through the store
on a PostgreSQL connection (`ensure_home(..., db=URL)`), into a fresh
database per home (`arbiter_parity_lme`, `_locomo`, `_notes` on --pg's
cluster, dropped after unless --keep): that writes through PostgreSQL's own
path (its triggers, its derive queue, the full text a write indexes before
it commits) rather than copying SQLite's rows with `arbiter migrate`, so a
difference in what PostgreSQL derives from a write shows here too (`--moved`
measures the move instead: a user's home copied over ranks as it did). Every
question is recalled on both with the shipped settings (`bench.devsets.rankings`).

Per set: R@1/5/10 and MRR on each engine and the difference; the mean top-10
overlap (|A ∩ B| / max(|A|, |B|), PostgreSQL's ids mapped onto SQLite's by
write order) and the share of questions whose top 10 is the same list in the
same order, and among those the largest difference between the two engines'
scores of one hit. Exits 1 if a set's R@1, R@5 or R@10 differs by more than 0.5
points (the issue's bound).
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from arbiter.store import connect
from arbiter.transfer.migrate import migrate
from bench.devsets import (
    ALL,
    Ask,
    Row,
    ensure_home,
    ensure_notes_home,
    graded,
    notes_asks,
    parser,
    rankings,
    transcript_asks,
)
from bench.longmemeval.harness import HarnessError

#: The issue's bound on R@1, R@5 and R@10, in points.
BOUND = 0.5
#: bench.devsets' homes: two transcript homes (one tenant each) and the notes (a tenant per conversation).
HOMES = ("lme", "locomo", "notes")


@dataclasses.dataclass
class Parity:
    """One set on both engines."""

    name: str
    sqlite: Row
    postgresql: Row
    #: Mean over the questions of |top 10 on SQLite ∩ on PostgreSQL| / the longer list's length.
    overlap: float
    #: Share of questions whose top 10 is the same ids in the same order.
    same: float
    #: (ask, SQLite's top 10, PostgreSQL's mapped onto SQLite's ids) where they differ.
    differing: list[tuple[Ask, list[int], list[int]]]
    #: The largest difference between the two engines' scores of one hit, where the top 10s are the same.
    score_gap: float

    def deltas(self) -> tuple[float, float, float]:
        """PostgreSQL's R@1, R@5, R@10 minus SQLite's, in points."""
        a, b = self.sqlite, self.postgresql
        return b.r1 - a.r1, b.r5 - a.r5, b.r10 - a.r10

    @property
    def within(self) -> bool:
        """Whether R@1, R@5 and R@10 each differ by at most the issue's bound."""
        return all(abs(d) <= BOUND for d in self.deltas())


def write(work: Path, lme: Path, locomo: Path, dbs: dict[str, str] | None = None) -> dict:
    """bench.devsets' three homes under `work`: their states (each home's own SQLite file, or `dbs[home]`'s database)."""
    dbs = dbs or {}
    for key in HOMES:
        (work / key).mkdir(parents=True, exist_ok=True)
    return {"lme": ensure_home(work / "lme", lme, db=dbs.get("lme")),
            "locomo": ensure_home(work / "locomo", locomo, db=dbs.get("locomo")),
            "notes": ensure_notes_home(work / "notes", locomo, db=dbs.get("notes"))}


def asks(conns: dict, states: dict) -> dict[str, list[Ask]]:
    """Each of the four sets' questions as bench.devsets asks them, on the engine `conns` are of."""
    out = {}
    for name, key, phrasing in ALL:
        conn = conns[key]
        if key == "notes":
            out[name] = notes_asks(conn, states[key], phrasing)
        else:
            tenant = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
            out[name] = transcript_asks(conn, tenant, states[key].questions, phrasing)
    return out


def _ids(conn) -> list[int]:
    return [i for (i,) in conn.execute("SELECT id FROM entries ORDER BY id")]


def id_map(lite, pg) -> dict[int, int]:
    """PostgreSQL's entry ids onto SQLite's: both homes were written by the same calls in the same order."""
    a, b = _ids(lite), _ids(pg)
    if len(a) != len(b):
        raise HarnessError(f"the engines hold {len(a)} and {len(b)} entries: not the same home")
    return dict(zip(b, a))


def compare(name: str, lite, lite_asks: Sequence[Ask], pg, pg_asks: Sequence[Ask], ids: dict[int, int]) -> Parity:
    """Recall every question on both engines (as shipped) and set the answers side by side."""
    a, b = rankings(lite, lite_asks, {}, {}), rankings(pg, pg_asks, {}, {})
    overlaps, same, differing, gap = [], 0, [], 0.0
    for ask, (lite_hits, _), (pg_hits, _) in zip(lite_asks, a, b, strict=True):
        x, y = [h.id for h in lite_hits], [ids[h.id] for h in pg_hits]
        overlaps.append(len(set(x) & set(y)) / max(len(x), len(y)) if x or y else 1.0)
        if x == y:
            same += 1
            gap = max([gap, *(abs(h.score - k.score) for h, k in zip(lite_hits, pg_hits))])
        else:
            differing.append((ask, x, y))
    return Parity(name, graded(lite_asks, a), graded(pg_asks, b), statistics.fmean(overlaps),
                  same / len(lite_asks), differing, gap)


def table(results: Sequence[Parity]) -> str:
    """The markdown table: each engine's figures, the difference, the overlap."""
    lines = [("| set | SQLite R@1 / R@5 / R@10 | MRR | PostgreSQL R@1 / R@5 / R@10 | MRR | Δ R@1 / R@5 / R@10 | Δ MRR "
              "| top-10 overlap | same top 10 | largest score gap | p50 ms SQLite / PostgreSQL |"),
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for p in results:
        a, b = p.sqlite, p.postgresql
        lines.append(
            f"| {p.name} | {a.r1:.1f} / {a.r5:.1f} / {a.r10:.1f} | {a.mrr:.3f} | {b.r1:.1f} / {b.r5:.1f} / "
            f"{b.r10:.1f} | {b.mrr:.3f} | {' / '.join(f'{d:+.1f}' for d in p.deltas())} | {b.mrr - a.mrr:+.3f} "
            f"| {p.overlap:.3f} | {100 * p.same:.1f}% | {p.score_gap:.2g} | {a.p50:.1f} / {b.p50:.1f} |")
    return "\n".join(lines)


def differences(p: Parity, count: int) -> str:
    """The first `count` questions of a set whose top 10 differ: the query, both lists (SQLite's ids), the truth."""
    out = [f"{p.name}: {len(p.differing)} questions' top 10 differ"]
    for ask, x, y in p.differing[:count]:
        out.append(f"  {ask.query!r} (truth {sorted(ask.truth)})\n    SQLite     {x}\n    PostgreSQL {y}")
    return "\n".join(out)


def run(work: Path, lme: Path, locomo: Path, dbs: dict[str, str], *, moved: bool = False) -> list[Parity]:
    """The four sets on both engines: SQLite's homes under `work` (reused when there), PostgreSQL's written into
    `dbs` (a database per home, empty or freshly migrated; `moved`: SQLite's homes copied into empty ones by
    `arbiter migrate`), every question recalled on both."""
    lite_states = write(work, lme, locomo)
    if moved:
        for key, url in dbs.items():
            # Absolute: given a relative path, the move takes its lock twice (as named and resolved) and refuses itself.
            migrate((work / key / "arbiter.db").resolve(), url)
        pg_states = lite_states  # the move keeps every id
    else:
        with tempfile.TemporaryDirectory(prefix="parity-") as states:  # the PostgreSQL homes' state files
            pg_states = write(Path(states), lme, locomo, dbs)
    lite = {k: connect(work / k / "arbiter.db", readonly=True) for k in HOMES}
    pg = {k: connect(url) for k, url in dbs.items()}
    try:
        ids = {k: id_map(lite[k], pg[k]) for k in HOMES}
        lite_asks, pg_asks = asks(lite, lite_states), asks(pg, pg_states)
        return [compare(name, lite[key], lite_asks[name], pg[key], pg_asks[name], ids[key]) for name, key, _ in ALL]
    finally:
        for c in (*lite.values(), *pg.values()):
            c.close()


def _database(admin: str, name: str) -> str:
    """The URL of database `name` on `admin`'s cluster."""
    return urllib.parse.urlparse(admin)._replace(path="/" + name).geturl()


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, work=Path("bench/results/devsets"))
    ap.add_argument("--pg", required=True, help="URL of a PostgreSQL cluster where the bench may CREATE DATABASE")
    ap.add_argument("--keep", action="store_true", help="keep the PostgreSQL databases (arbiter_parity_*)")
    ap.add_argument("--diff", type=int, default=0, help="print each set's first N questions whose top 10 differ")
    ap.add_argument("--moved", action="store_true",
                    help="PostgreSQL's homes copied from SQLite's by `arbiter migrate` instead of written through the store")
    args = ap.parse_args(argv)

    import psycopg

    names = {key: f"arbiter_parity_{key}" for key in HOMES}
    with psycopg.connect(args.pg, autocommit=True) as admin:
        for name in names.values():
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        results = run(args.work, args.lme, args.locomo, {k: _database(args.pg, n) for k, n in names.items()},
                      moved=args.moved)
    finally:
        if not args.keep:
            with psycopg.connect(args.pg, autocommit=True) as admin:
                for name in names.values():
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(table(results), flush=True)
    for p in results:
        if args.diff and p.differing:
            print(differences(p, args.diff), flush=True)
    off = [p.name for p in results if not p.within]
    if off:
        print(f"differ by more than {BOUND} points: {', '.join(off)}", flush=True)
    return 1 if off else 0


if __name__ == "__main__":
    raise SystemExit(main())
