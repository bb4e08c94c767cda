"""Facts in recall on the three development sets: entries alone against entries with the facts recall returns.

    python -m bench.facts_recall --work /tmp/facts-devsets
    python -m bench.facts_recall --lme ../shared/data/longmemeval_s_dev.json.gz --locomo ../shared/data/locomo_dev.json.gz

The homes are `bench.devsets`' (the entries the LongMemEval harness writes,
one conversation per LongMemEval question or LoCoMo sample). Facts are then
drawn from every turn by the rule extractor (`bench/fact_rules.py`: no LLM
here) and proposed as an agent would: `facts_propose` with `apply`, one
batch per conversation and day, origin `extractor`, each triple with its
turn as source and the turn's time as `valid_from`, so the gate's
duplicates, supersessions and contradictions are part of what is measured.
The patterns' functional predicates that are not built in are declared
first (`predicate_declare`).

Each LongMemEval question is a different person's history, and all of them
share one tenant (the harness's protocol); recall's facts are not scoped to
a conversation. So each conversation's facts are shared with a team of its
own (the one user is in all of them), and each question is recalled by a
viewer that sees the private scope (all the entries) and that one team: the
facts of a question's own person, as one user's memory would hold them. The
entry ranking is the same as `bench.devsets`' (the extra team indexes are
empty).

Variants (R@K counts a fact hit through its source entries):

- **facts off**: `RecallResult.hits`, what every table so far measured (and
  what `recall` ranks today: facts come back in their own list).
- **facts first**: what the MCP `recall` tool shows: the fact hits (at most
  5) above the entry hits; each fact is one line, a hit at its rank when
  any of its sources is a ground-truth turn.
- **fused**: the fact hits' source entries merged into the entry ranking by
  the pipeline's own reciprocal-rank fusion (k=60): the entry hits as one
  list with the conversation pass's weight (1.5), each fact's sources (newest
  first) at that fact's rank as a second list with the tenant pass's weight
  (1.0); an entry in both gets both. At these weights a source that is not an
  entry hit never passes the tenth entry hit (1/61 < 1.5/70), so this
  reorders the entry hits; **fused, facts x1.5** puts both lists on an equal
  footing, so fact sources can enter.
- **..., predicate/object match**: the same, keeping only fact hits that share
  a query stem with their predicate or object: a fact matched by its subject
  alone ("the user", a speaker's name) is about whoever asks, not about the
  question.

Coverage: triples proposed and facts active per 1,000 turns, the gate's
findings, and the share of scored questions whose answer sessions (and
ground-truth turns) yield any triple.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import msgspec

from arbiter._time import format_time, now_us
from arbiter.facts import recall as fact_recall
from arbiter.facts import store as facts_store
from arbiter.facts import verbs as facts_verbs
from arbiter.facts.model import FactProposal, PredicateDeclareParams, ProposeParams
from arbiter.model import RecallParams
from arbiter.recall import recall, score
from arbiter.recall.query import STOPWORDS, analyze, tokenizer
from arbiter.store import connect, open_database, users
from arbiter.verb import Context
from bench import fact_rules
from bench.devsets import SETS, Row, _outcome, by_type, ensure_home, parser, table
from bench.longmemeval import harness
from bench.longmemeval.metrics import scored
from bench.longmemeval.phrasing import phrase

#: The pipeline's pass weights (score.CONVERSATION_WEIGHT, score.TENANT_WEIGHT): entries, then facts.
ENTRY_WEIGHT, FACT_WEIGHT = score.CONVERSATION_WEIGHT, score.TENANT_WEIGHT
#: Fused variants: the facts' list at the tenant pass's weight, and on an equal footing with the entries.
FUSIONS = (("fused", FACT_WEIGHT), ("fused, facts x1.5", ENTRY_WEIGHT))
VARIANTS = ("facts off", "facts first", "fused", "fused, facts x1.5", "facts first, predicate/object match",
            "fused, predicate/object match")
DAY_US = 86_400_000_000
MARK = "facts.json"


class Coverage(msgspec.Struct, kw_only=True):
    """What the extractor and the gate made of a home's turns."""

    digest: str
    turns: int
    person_turns: int
    proposed: int
    batches: int
    findings: dict[str, int]
    active: int
    by_predicate: dict[str, int]
    #: Entries that yielded at least one triple.
    yielding: list[int]
    seconds: float


def rules_digest() -> str:
    """Which extractor wrote a home's facts: a changed pattern list means a fresh home."""
    text = "\n".join(f"{p.predicate} {p.regex.pattern} {p.confidence} {p.functional} {p.proper}"
                     for p in fact_rules.PATTERNS)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def team_name(conversation_id: int) -> str:
    return f"c{conversation_id}"


def ensure_facts(home: Path, dataset: Path) -> tuple[harness.State, Coverage]:
    """A home with the dataset's entries and the rule extractor's facts applied through the gate (once a home)."""
    mark = home / MARK
    if mark.exists():
        cov = msgspec.json.decode(mark.read_bytes(), type=Coverage)
        if cov.digest == rules_digest():
            return ensure_home(home, dataset), cov
        shutil.rmtree(home)  # written by another pattern list
    state = ensure_home(home, dataset)
    conn = open_database(home / "arbiter.db", synchronous="NORMAL")
    now = now_us()
    started = time.perf_counter()
    tid = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
    me = users.first_viewer(conn, tid)
    with conn:
        for u in state.units:
            users.join(conn, users.create_team(conn, tid, team_name(u.conversation_id), now=now), me.user_id, now=now)
    me = users.first_viewer(conn, tid)
    ctx = Context(conn=conn, tenant_id=tid, tenant_name="default", now=now, seen_as=me)
    turns = person_turns = proposed = batches = 0
    findings: Counter[str] = Counter()
    by_predicate: Counter[str] = Counter()
    yielding: list[int] = []
    declared: set[str] = set()
    for u in state.units:
        rows = conn.execute(
            f"SELECT id, speaker, content, valid_from FROM entries WHERE id IN ({','.join(map(str, u.entry_ids))}) "
            "ORDER BY valid_from, id"
        ).fetchall()
        days: dict[int, list[FactProposal]] = {}
        for eid, speaker, content, valid_from in rows:
            turns += 1
            speaker = speaker or ""
            if speaker.strip().casefold() not in fact_rules.NOT_A_PERSON:
                person_turns += 1
            triples = fact_rules.extract(content, speaker)
            if triples:
                yielding.append(eid)
            for t in triples:
                if t.functional and t.predicate not in declared and not facts_store._builtin(t.predicate):
                    with conn:
                        facts_verbs.predicate_declare(ctx, PredicateDeclareParams(name=t.predicate, functional=True))
                    declared.add(t.predicate)
                by_predicate[t.predicate.split("_")[0] if t.predicate.startswith("favorite_") else t.predicate] += 1
                days.setdefault(valid_from // DAY_US, []).append(FactProposal(
                    subject=t.subject, predicate=t.predicate, object=t.object, confidence=t.confidence,
                    valid_from=format_time(valid_from), sources=[eid],
                ))
        for day in sorted(days):
            facts = days[day]
            for i in range(0, len(facts), 1000):
                ctx.notes.clear()
                with conn:
                    b = facts_verbs.facts_propose(ctx, ProposeParams(
                        facts=facts[i:i + 1000], origin="extractor", apply=True, team=team_name(u.conversation_id),
                    ))
                batches += 1
                proposed += len(facts[i:i + 1000])
                findings.update(f.finding or "none" for f in b.facts)
    active = conn.execute("SELECT count(*) FROM facts WHERE status = 'active' AND valid_to IS NULL").fetchone()[0]
    conn.close()
    cov = Coverage(
        digest=rules_digest(), turns=turns, person_turns=person_turns, proposed=proposed, batches=batches,
        findings=dict(findings), active=active, by_predicate=dict(by_predicate.most_common()), yielding=yielding,
        seconds=round(time.perf_counter() - started, 1),
    )
    mark.write_bytes(msgspec.json.encode(cov))
    return state, cov


def question_viewer(conn, me: users.Viewer, conversation_id: int) -> users.Viewer:
    """The one user, seeing the private scope (every entry) and the team of this conversation's facts."""
    team, scope = conn.execute(
        "SELECT t.id, s.id FROM teams t JOIN scopes s ON s.team_id = t.id WHERE t.tenant_id = ? AND t.name = ?",
        (me.tenant_id, team_name(conversation_id)),
    ).fetchone()
    return dataclasses.replace(me, teams=(team,), scopes=(me.private_scope, scope), left=())


def rank(conn, v: users.Viewer, p: RecallParams) -> tuple[dict[str, list[frozenset[int]]], int, float, float]:
    """Every variant's ranking as items (an entry, or a fact's sources), the fact hits' count, the two timings (ms).

    The timings are in-process: recall alone, and recall plus the fact search.
    """
    started = time.perf_counter()
    hits = [h.id for h in recall(conn, v, p).hits]
    entries_ms = (time.perf_counter() - started) * 1000
    facts = fact_recall.search(conn, v, p)
    total_ms = (time.perf_counter() - started) * 1000
    sources = sorted({s for f in facts for s in f.sources})
    when = dict(conn.execute(
        f"SELECT id, valid_from FROM entries WHERE id IN ({','.join(map(str, sources))})").fetchall()) if sources else {}
    tokenize = tokenizer(conn)
    asked = {t.stem for t in analyze(p.query, tokenize, stopwords=STOPWORDS).terms}
    # A fact matched by its subject alone ("user", a speaker's name) says nothing the question asks about.
    beyond = [any(stem in asked for _, stem in tokenize(f"{f.predicate.replace('_', ' ')} {f.object}")) for f in facts]
    all_sources = [sorted(f.sources, key=lambda s: (-when.get(s, 0), -s)) for f in facts]
    some_sources = [s for s, keep in zip(all_sources, beyond) if keep]
    out = {"facts off": [frozenset((h,)) for h in hits]}
    for suffix, chosen in (("", all_sources), (", predicate/object match", some_sources)):
        out["facts first" + suffix] = [frozenset(s) for s in chosen if s] + out["facts off"]
        for label, weight in FUSIONS:
            if suffix and weight != FACT_WEIGHT:
                continue
            out[label + suffix] = [frozenset((e,)) for e in _fuse(hits, chosen, weight)[: p.limit]]
    return out, len(facts), entries_ms, total_ms


def _fuse(hits: list[int], sources: list[list[int]], weight: float) -> list[int]:
    """The entry hits (conversation-pass weight) and each fact's sources at its rank (`weight`), by RRF, best first."""
    fused: dict[int, float] = {}
    order: dict[int, int] = {}
    for r, h in enumerate(hits, 1):
        fused[h] = fused.get(h, 0.0) + score.rrf(r, ENTRY_WEIGHT, k=score.RRF_K)
        order.setdefault(h, len(order))
    for r, srcs in enumerate(sources, 1):
        for s in srcs:
            fused[s] = fused.get(s, 0.0) + score.rrf(r, weight, k=score.RRF_K)
            order.setdefault(s, len(order))
    return sorted(fused, key=lambda e: (-fused[e], order[e]))


def _items_hit(items: Sequence[frozenset[int]], truth: set[int], k: int) -> bool:
    return any(i & truth for i in items[:k])


def _items_rr(items: Sequence[frozenset[int]], truth: set[int], k: int = 10) -> float:
    for r, i in enumerate(items[:k], 1):
        if i & truth:
            return 1.0 / r
    return 0.0


@dataclasses.dataclass
class SetResult:
    rows: dict[str, Row]
    #: Per question type, per variant: (R@1, R@5, R@10) and the count.
    types: dict[str, dict[str, tuple[float, float, float]]]
    counts: dict[str, int]
    with_facts: int  # scored questions with at least one fact hit
    fact_truth: int  # scored questions with a fact hit whose sources hold a ground-truth turn
    fact_truth_by_type: dict[str, int]
    answer_yield: int  # scored questions whose answer sessions yield a triple
    truth_yield: int  # scored questions whose ground-truth turns yield a triple
    scored: int


def measure(conn, me: users.Viewer, questions: Sequence[harness.QuestionState], phrasing: str,
            yielding: set[int]) -> SetResult:
    """Every variant over the questions the official rule scores."""
    sums = {v: [0.0, 0.0, 0.0, 0.0] for v in VARIANTS}
    per: dict[str, dict[str, list[list[float]]]] = {}
    off_ms, on_ms = [], []
    with_facts = fact_truth = answer_yield = truth_yield = n = 0
    truth_types: Counter[str] = Counter()
    for q in questions:
        p = RecallParams(query=phrase(q.question, phrasing), conversation_id=q.conversation_id, limit=10)
        with conn:
            ranked, n_facts, e_ms, t_ms = rank(conn, question_viewer(conn, me, q.conversation_id), p)
        off_ms.append(e_ms)
        on_ms.append(t_ms)
        if not scored(_outcome(q), "official"):
            continue
        truth = set(q.truth_ids)
        n += 1
        with_facts += n_facts > 0
        from_truth = any(i & truth for i in ranked["facts first"][:n_facts])
        fact_truth += from_truth
        truth_types[q.question_type] += from_truth
        answer_yield += any(e in yielding for e in q.answer_session_ids)
        truth_yield += any(e in yielding for e in truth)
        values = {v: [_items_hit(items, truth, k) for k in (1, 5, 10)] + [_items_rr(items, truth)]
                  for v, items in ranked.items()}
        for v, vals in values.items():
            sums[v] = [a + b for a, b in zip(sums[v], vals)]
            per.setdefault(q.question_type, {}).setdefault(v, []).append(vals[:3])
    p50 = {v: statistics.median(off_ms if v == "facts off" else on_ms) for v in VARIANTS}
    types = {t: {v: tuple(100 * sum(x[i] for x in xs) / len(xs) for i in range(3)) for v, xs in vs.items()}
             for t, vs in sorted(per.items())}
    rows = {
        v: Row(100 * s[0] / n, 100 * s[1] / n, 100 * s[2] / n, s[3] / n, p50[v],
               {t: types[t][v][1] for t in types})
        for v, s in sums.items()
    }
    counts = {t: len(vs["facts off"]) for t, vs in per.items()}
    return SetResult(rows, types, counts, with_facts, fact_truth, dict(truth_types), answer_yield, truth_yield, n)


def coverage_table(covs: dict[str, Coverage]) -> str:
    lines = ["| home | turns | person turns | triples proposed | per 1,000 turns | active facts | per 1,000 turns | "
             "findings | extraction s |", "|---|--:|--:|--:|--:|--:|--:|---|--:|"]
    for name, c in covs.items():
        found = ", ".join(f"{k} {v}" for k, v in sorted(c.findings.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {name} | {c.turns:,} | {c.person_turns:,} | {c.proposed:,} | {1000 * c.proposed / c.turns:.1f} | "
                     f"{c.active:,} | {1000 * c.active / c.turns:.1f} | {found} | {c.seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the homes with facts, run the three variants on the three sets, print the tables."""
    ap = parser(__doc__, work=Path("bench/results/facts-devsets"))
    args = ap.parse_args(argv)

    built = {"lme": ensure_facts(args.work / "lme", args.lme), "locomo": ensure_facts(args.work / "locomo", args.locomo)}
    print(coverage_table({k: c for k, (_, c) in built.items()}), flush=True)
    results: dict[str, SetResult] = {}
    for name, key, phrasing in SETS:
        conn = connect(args.work / key / "arbiter.db", readonly=True)
        tid = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
        state, cov = built[key]
        results[name] = measure(conn, users.first_viewer(conn, tid), state.questions, phrasing, set(cov.yielding))
        conn.close()
    print()
    print(table({v: [results[name].rows[v] for name, _, _ in SETS] for v in VARIANTS}), flush=True)
    print()
    print(by_type({v: [results[name].rows[v] for name, _, _ in SETS] for v in VARIANTS}), flush=True)
    print()
    print("| set | type | n | a fact hit drawn from a ground-truth turn | " + " | ".join(f"{v} R@1 / R@5 / R@10" for v in VARIANTS) + " |")
    print("|---|---|--:|--:|" + "---|" * len(VARIANTS))
    for name, res in results.items():
        if name == "LoCoMo":
            continue
        for t, vs in res.types.items():
            cells = " | ".join("{:.1f} / {:.1f} / {:.1f}".format(*vs[v]) for v in VARIANTS)
            print(f"| {name} | {t} | {res.counts[t]} | {res.fact_truth_by_type.get(t, 0)} | {cells} |")
    print()
    print("| set | scored | with a fact hit | a fact hit drawn from a ground-truth turn | answer sessions yield a triple "
          "| ground-truth turns yield a triple |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, res in results.items():
        pct = lambda x: f"{x} ({100 * x / res.scored:.1f}%)"  # noqa: E731
        print(f"| {name} | {res.scored} | {pct(res.with_facts)} | {pct(res.fact_truth)} | {pct(res.answer_yield)} | "
              f"{pct(res.truth_yield)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
