"""Visibility cost: recall and get as one user of a many-user tenant against a single-user tenant.

    python -m bench.people [--entries 250000] [--out people.json]

One real daemon (`arbiter serve`, synchronous=FULL, a temporary home) holds
two tenants built from the same --entries entries (bench/load's generator,
same seed, same order), each written through `remember_many` in batches:

- `solo`: the home's default tenant, one user, who wrote everything;
- `people`: 20 users (the tenant's first user and 19 added) and 5 teams of
  6 members each (every user in one or two teams). Half the entries are
  private to one of the 20 users, half are shared with one of the 5 teams
  (written by one of its members with `team`), round-robin.

Then, one request at a time on one connection, it times `recall` (limit 10,
the same queries in both tenants) and `get` (ids the caller can see), as the
solo tenant's user and as `u01` of the people tenant, a member of two teams
(who sees their own private entries and two teams' shares: about 22% of the
tenant). Each is measured in alternating rounds so that drift on a shared
machine falls on both sides alike. Issue 15's target: the people tenant's
p50s within 10% of the solo tenant's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from arbiter import __version__, paths
from arbiter.client import Client
from arbiter.recall.maintain import segments
from arbiter.store import connect, fts
from bench import report
from bench.load import BenchDaemon, Vocabulary, make_entry, percentile

USERS = 20
TEAMS = 5
MEASURED = "u01"


@dataclass(frozen=True)
class Layout:
    """Who writes entry n of the people tenant, and where: half private, half team-shared."""

    users: list[str]  # users[0] is the tenant's first user
    teams: dict[str, list[str]]  # team -> members

    def writer(self, n: int) -> tuple[str, str | None]:
        if n % 2 == 0:
            return self.users[(n // 2) % len(self.users)], None
        names = sorted(self.teams)
        team = names[(n // 2) % len(names)]
        members = self.teams[team]
        return members[(n // 2 // len(names)) % len(members)], team


def layout() -> Layout:
    """20 users, 5 teams of 6: user i is in team i % 5, and users 0-9 also in team (i + 1) % 5."""
    users = [f"u{i:02d}" for i in range(USERS)]
    teams: dict[str, list[str]] = {f"team{t}": [] for t in range(TEAMS)}
    for i, u in enumerate(users):
        teams[f"team{i % TEAMS}"].append(u)
        if i < USERS // 2:
            teams[f"team{(i + 1) % TEAMS}"].append(u)
    return Layout(users, teams)


def build_people(home: Path, sock: Path) -> tuple[Layout, dict[str, Client]]:
    """The people tenant, its users and teams; returns a client per user."""
    lay = layout()
    admin = paths.read_secret(paths.admin_token_path(home), "admin")
    with Client(sock, admin, timeout=600) as c:
        first = c.tenant_create(lay.users[0]).token  # the tenant's first user has its name
    clients = {lay.users[0]: Client(sock, first, timeout=600)}
    for u in lay.users[1:]:
        clients[u] = Client(sock, clients[lay.users[0]].user_add(u).token, timeout=600)
    for team, members in lay.teams.items():
        founder = clients[members[0]]
        founder.team_add(team)
        for m in members[1:]:
            founder.team_join(team, m)
    return lay, clients


def fill(args, solo: Client, lay: Layout, people: dict[str, Client]) -> tuple[list[int], list[int], list[str]]:
    """Write the same entries into both tenants; returns (solo ids, ids u01 sees, text to lift queries from)."""
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    solo_ids: list[int] = []
    seen_ids: list[int] = []
    lifted: list[str] = []
    measured_teams = {t for t, m in lay.teams.items() if MEASURED in m}
    t0 = time.perf_counter()
    for start in range(0, args.entries, args.batch):
        batch = [make_entry(vocab, rng, n) for n in range(start, min(args.entries, start + args.batch))]
        solo_ids += solo.remember_many(batch)
        by_writer: dict[str, list[tuple[int, dict]]] = {}
        for n, entry in enumerate(batch, start):
            user, team = lay.writer(n)
            by_writer.setdefault(user, []).append((n, entry | {"team": team} if team else entry))
        for user, items in by_writer.items():
            ids = people[user].remember_many([e for _, e in items])
            for (_, entry), eid in zip(items, ids):
                if user == MEASURED or entry.get("team") in measured_teams:
                    seen_ids.append(eid)
        lifted.append(batch[0]["content"])
        done = min(args.entries, start + args.batch)
        if (done // args.batch) % 10 == 0 or done == args.entries:
            print(f"  ... {done} entries in each tenant, {2 * done / (time.perf_counter() - t0):,.0f}/s",
                  file=sys.stderr)
    return solo_ids, seen_ids, lifted


def queries(args, lifted: list[str]) -> list[str]:
    """The same mix as bench/load: rare words, common words, phrases lifted from stored text, questions."""
    rng = random.Random(args.seed + 1)
    vocab = Vocabulary(random.Random(args.seed))
    out = []
    for i in range(args.recalls):
        kind = i % 4
        if kind == 0:
            out.append(" ".join(rng.sample(vocab.words[200:5000], rng.randint(1, 3))))
        elif kind == 1:
            out.append(" ".join(rng.choices(vocab.words, cum_weights=vocab.cum, k=rng.randint(3, 8))))
        elif kind == 2:
            words = rng.choice(lifted).split()
            at = rng.randrange(max(1, len(words) - 4))
            out.append(" ".join(words[at:at + rng.randint(2, 4)]))
        else:
            out.append(f"what did we decide about {' '.join(rng.sample(vocab.words[200:5000], 2))}?")
    return out


def settle(db: Path) -> float:
    """Wait (up to 10 minutes) for the daemon's idle upkeep to merge every scope's index into one segment."""
    conn = connect(db, readonly=True)
    t = time.monotonic()
    try:
        while any(segments(conn, s) > 1 for s in fts.scopes(conn)) and time.monotonic() - t < 600:
            time.sleep(0.5)
    finally:
        conn.close()
    return time.monotonic() - t


def timed(fn, args_list: list) -> tuple[list[int], int]:
    samples, hits = [], 0
    for a in args_list:
        t = time.perf_counter_ns()
        r = fn(a)
        samples.append(time.perf_counter_ns() - t)
        hits += bool(getattr(r, "hits", True))
    return samples, hits


def run(args) -> dict:
    home = Path(tempfile.mkdtemp(prefix="arb-people-"))
    daemon = BenchDaemon(home, "FULL")
    try:
        sock = paths.socket_path(home)
        solo = daemon.client().connect()
        lay, people = build_people(home, sock)
        t = time.perf_counter()
        solo_ids, seen_ids, lifted = fill(args, solo, lay, people)
        fill_s = time.perf_counter() - t
        for c in people.values():
            if c is not people[MEASURED]:
                c.close()
        settle_s = settle(paths.db_path(home)) if args.settle else 0.0
        me = people[MEASURED]
        who = me.whoami()
        qs = queries(args, lifted)
        rng = random.Random(args.seed + 2)
        gets = {"solo": rng.choices(solo_ids, k=args.gets), "people": rng.choices(seen_ids, k=args.gets)}
        for q in qs[:20]:  # warm the page cache and each daemon-side statistics cache
            solo.recall(q, limit=10)
            me.recall(q, limit=10)
        samples: dict[str, list[int]] = {k: [] for k in ("solo recall", "people recall", "solo get", "people get")}
        hits = {"solo": 0, "people": 0}
        rounds = args.rounds
        for r in range(rounds):
            part = qs[r::rounds]
            for side, client in (("solo", solo), ("people", me)) if r % 2 == 0 else (("people", me), ("solo", solo)):
                s, h = timed(lambda q, c=client: c.recall(q, limit=10), part)
                samples[f"{side} recall"] += s
                hits[side] += h
                s, _ = timed(client.get, gets[side][r::rounds])
                samples[f"{side} get"] += s
        figures = {
            k: {"calls": len(v), "p50_ms": round(percentile(v, 50), 3), "p95_ms": round(percentile(v, 95), 3)}
            for k, v in samples.items()
        }
        ratio = {op: round(figures[f"people {op}"]["p50_ms"] / figures[f"solo {op}"]["p50_ms"], 3)
                 for op in ("recall", "get")}
        return {
            "version": __version__,
            "entries_per_tenant": args.entries,
            "users": USERS,
            "teams": TEAMS,
            "measured_user": who.user,
            "measured_teams": who.teams,
            "visible_to_measured": len(seen_ids),
            "fill_s": round(fill_s, 1),
            "settle_s": round(settle_s, 1),
            "recall_hit_rate": {k: round(v / len(qs), 3) for k, v in hits.items()},
            "figures": figures,
            "people_over_solo_p50": ratio,
            "target_ratio": 1.10,
        }
    finally:
        daemon.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
        else:
            print(f"home kept: {home}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.people", description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=250_000, help="entries in each tenant (default 250000)")
    ap.add_argument("--batch", type=int, default=2000, help="entries per remember_many round (default 2000)")
    ap.add_argument("--recalls", type=int, default=800, help="recall calls per tenant (default 800)")
    ap.add_argument("--gets", type=int, default=5000, help="get calls per tenant (default 5000)")
    ap.add_argument("--rounds", type=int, default=4, help="alternating rounds the calls are split into")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="measure right after the load, before idle compaction merges the indexes")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--keep", action="store_true", help="keep the temporary home")
    ap.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    args = ap.parse_args(argv)
    report(run(args), args.out)


if __name__ == "__main__":
    main()
