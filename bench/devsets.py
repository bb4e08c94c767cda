"""The four development sets, every recall stage on and off, one table.

    python -m bench.devsets                      # ingest once into bench/results/devsets, then measure
    python -m bench.devsets --only "as shipped,- voice"
    python -m bench.devsets --graph              # homes with entity links and associations: as shipped vs graph=true
    python -m bench.devsets --graph --ideas --only "entities 0.1,salience 0.4"   # issue 12's stages on those homes
    python -m bench.devsets --ideas              # the ideas measured and not kept (or the shipped ones' neighbours)
    python -m bench.devsets --reach              # how many misses share no query word with their evidence
    python -m bench.devsets --keywords --only "as shipped"   # the questions as bare key words

The sets (issue 36's rule: a change is kept only if it raises the mean of
the four without costing any one more than 2 points of R@5):

- **LME**: LongMemEval-S dev as written (98 questions; 93 scored by the
  official rule), graduated protocol.
- **LME 3rd**: the same questions in the third person, as an agent asks
  its memory ("the user", "the assistant"; `bench/longmemeval/phrasing.py`).
- **LoCoMo**: LoCoMo dev in its own format (4 conversations, 582 questions
  of categories 1-4), each question recalled in its conversation.
- **Notes**: LoCoMo dev's observations as the notes an agent writes (issue
  36's protocol, `ensure_notes_home`): each conversation a tenant of its own,
  each observation a `learning` with no speaker, conversation or tags; the
  questions whose evidence has a note (480), asked with no conversation at
  the last session's date. Printed again by category beside plain FTS5 over
  the same notes.

Each home is written once with the entries the LongMemEval harness writes
(`python -m bench.longmemeval run`), then every variant runs `recall` in
this process on the home's database with the real pipeline. p50 is in-process (no socket): for comparing rows only.
`mean` is the mean over the four sets of their R@1, R@5 and R@10; `ΔR@5`
is each set's R@5 change against "as shipped"; `questions up/down` counts,
per set, the questions whose best evidence rank in the top 10 rose or fell
against "as shipped" (R@k sees only what crosses a cut-off: a change that
lifts two questions far and drops twenty by one rank shows here).

Facts in recall (entries alone against entries with the fact hits, counted
through their source entries) are measured on these homes by
`python -m bench.facts_recall`, which reuses this module's homes and tables.

`--graph` measures graph recall (`graph=true`) against "as shipped" on homes
of their own that also hold what a daemon derives after a bulk write:
entity links (the idle writer's backlog) and stored similarity associations
(the idle writer's `associations` deriver), and prints R@5 per question type beside the table.

`--reach` splits each set's misses at k = 1, 5, 10, 25, 50 (as shipped) by whether
any of the question's evidence entries holds a query term (stem) other than
a word of its own speaker's name (on the notes: other than a name the question holds): a miss whose evidence holds none is out
of reach of any ranking that scores an entry by its own words (only the
replies, follow-ups, antecedents and episodes signals, which lend a
neighbour's score, can bring it in). R@25 is the most the LLM rerank could make of R@5 and
R@10: it reorders the lexical top 25 (`recall.llm.RERANK_DEPTH`) and sees
nothing past them.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import apsw
import msgspec

from arbiter.model import Hit, RecallParams, RememberParams
from arbiter.recall import DEFAULT, recall
from arbiter.recall.query import analyze, quote, tokenizer
from arbiter._time import now_us
from arbiter import derive
from arbiter.entities.core import Linker
from arbiter.entities.link import ROLES
from arbiter.store import connect, entries, open_database, tenants, users
from bench.longmemeval import dataset as ds
from bench.longmemeval import harness, locomo
from bench.longmemeval.metrics import first_rank, hit_at, reciprocal_rank, scored
from bench.longmemeval.phrasing import phrase

#: (label, RecallParams overrides, Tuning overrides). Each stage that
#: `disable` can switch off has its row; measured-off ideas can be added here.
VARIANTS: list[tuple[str, dict, dict]] = [
    ("as shipped", {}, {}),
    ("- stopwords", {"disable": ["stopwords"]}, {}),
    ("- framing (memory-framing stopwords)", {"disable": ["framing"]}, {}),
    ("- weights", {"disable": ["weights"]}, {}),
    ("- intent", {"disable": ["intent"]}, {}),
    ("+ decay", {"decay": True}, {}),
    ("- voice", {"disable": ["voice"]}, {}),
    ("- quantity", {"disable": ["quantity"]}, {}),
    ("- number_words", {"disable": ["number_words"]}, {}),
    ("- common", {"disable": ["common"]}, {}),
    ("- tenant_fill", {"disable": ["tenant_fill"]}, {}),
    ("- replies", {"disable": ["replies"]}, {}),
    ("- threads", {"disable": ["threads"]}, {}),
    ("- speaker", {"disable": ["speaker"]}, {}),
    ("- dates", {"disable": ["dates"]}, {}),
    ("- followups", {"disable": ["followups"]}, {}),
    ("- when", {"disable": ["when"]}, {}),
    ("- episodes", {"disable": ["episodes"]}, {}),
    ("- antecedents", {"disable": ["antecedents"]}, {}),
    ("- parties", {"disable": ["parties"]}, {}),
    ("- names", {"disable": ["names"]}, {}),
]

_MIN = 60 * 1_000_000
#: Ideas measured against "as shipped" and not kept, or the shipped ones' neighbours:
#: `--ideas` runs them. Episodes (issue 11) group a pass's candidates by valid time
#: (both harnesses date a session's turns at its date + 60 s a turn); shipped at
#: weight 0.2, 10 min gap, best 3. The `context` and `coverage` forms were measured
#: at the commit "recall: episode coverage as a measured-off knob" (`--ideas` there)
#: and removed from the product.
IDEAS: list[tuple[str, dict, dict]] = [
    *((f"episodes {w}", {}, {"episode_weight": w}) for w in (0.1, 0.15, 0.25, 0.3, 0.5)),
    *((f"episodes, gap {g} min", {}, {"episode_gap_us": g * _MIN}) for g in (1, 5, 30, 120)),
    *((f"episodes, best {m}", {}, {"episode_members": m}) for m in (1, 5, 10)),
    ("replies weighed by the lender's factors", {}, {"reply_own_factors": False}),
    *((f"reply share {r}", {}, {"reply": r}) for r in (0.9, 0.99, 1.01, 1.1)),
    *((f"follow-up share {r}", {}, {"followup": r}) for r in (0.5, 0.6, 0.8, 0.9)),
    *((f"antecedent share {r}", {}, {"antecedent": r}) for r in (0.5, 0.6, 0.8, 0.9, 1.0)),
    *((f"date strength {d}", {}, {"date": d}) for d in (0.25, 0.5, 1.5, 2.0, 3.0)),
    # Issue 12's stages, shipped off; they need the entity links of the `--graph` homes.
    *((f"entities {b}", {}, {"entity_boost": b}) for b in (0.1, 0.3)),
    ("salience 0.4", {}, {"salience_weight": 0.4}),
    *((f"decay floor {f}", {"floor": f}, {}) for f in (0.7, 0.8, 0.9)),
    *((f"decay half-life {d} d", {"half_life_days": d}, {}) for d in (180, 365, 730)),
    # Issue 36, on notes: whom a note names first (shipped 1.0; coordination, measured and removed: docs/retrieval.md),
    # BM25's k1 and b, column weights.
    *((f"names {x}", {}, {"names": x}) for x in (0, 0.25, 0.5, 2.0)),
    ("names anywhere in the note", {}, {"names_first": False}),
    ("names anywhere x1.5 (shipped before)", {}, {"names_first": False, "names": 0.5}),
    *((f"names later x{1 + r}", {}, {"names_rest": r}) for r in (0.25, 0.5)),
    # Notes written together form episodes (shipped on, with the turns' weight, gap and members).
    ("- note episodes", {}, {"note_episodes": False}),
    ("k1 0.8", {}, {"k1": 0.8}),
    *((f"b {x}", {}, {"b": x}) for x in (0.5, 0.75)),
    ("weights 1/1/2/0.5 (title as content)", {}, {"weights": (1.0, 1.0, 2.0, 0.5, 0.0)}),
]

#: The transcript sets (one entry per turn, with its speaker): `--reach` and bench.facts_recall measure these.
SETS = (("LME", "lme", "as-written"), ("LME 3rd", "lme", "third-person"), ("LoCoMo", "locomo", "as-written"))
#: The four sets the rule answers to: the transcripts and the notes (issue 36).
ALL = (*SETS, ("Notes", "notes", "as-written"))
_WORDS = re.compile(r"\w+")


@dataclasses.dataclass
class Row:
    """One variant on one set."""

    r1: float
    r5: float
    r10: float
    mrr: float
    p50: float
    #: R@5 per question type (LongMemEval's types, LoCoMo's categories).
    by_type: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Each scored question's best evidence rank in the top 10 (11 past it), in question order.
    ranks: tuple[int, ...] = ()
    #: Each scored question's type, in the same order.
    types: tuple[str, ...] = ()


def ensure_home(home: Path, dataset: Path, *, db: str | None = None) -> harness.State:
    """Write `dataset` into a fresh `home` unless it already holds it; the harness's state file says which entries are which.

    `db`: the store's database (a PostgreSQL URL) instead of `home`'s own file; the state file stays in `home`.

    The entries are the ones `python -m bench.longmemeval run` writes
    (`harness.remember_params`), written by the store in this process: the
    daemon's `remember_many` also links entities per entry, which recall does
    not read and which takes minutes on 48K turns.
    """
    state_path = home / harness.STATE_NAME
    corpus = ds.load_corpus(dataset)
    if state_path.exists():
        state = harness.open_state(state_path, corpus)
        if len(state.units) == len(corpus.units):
            open_database(db or home / "arbiter.db").close()  # a home from an older schema is migrated first
            return state
        raise harness.HarnessError(f"{home}: a partial home; remove it and run again")
    state = harness.open_state(state_path, corpus)
    conn = open_database(db or home / "arbiter.db", synchronous="NORMAL")
    now = now_us()
    with conn:
        tenant, _ = tenants.create_tenant(conn, "default", now=now)
        viewer = users.first_viewer(conn, tenant)
        for u in corpus.units:
            conversation = tenants.create_conversation(conn, viewer, u.key, now=now).id
            harness.record(state, u, conversation, entries.remember_many(conn, viewer, harness.remember_params(u, conversation), now=now
            ))
    state.tenant_entries = sum(len(u.entry_ids) for u in state.units)
    conn.close()
    state.save(state_path)
    return state


def ensure_derived(home: Path) -> None:
    """Derive what a daemon has after `remember_many`: speaker and extracted entity links, stored associations (once a home)."""
    mark = home / "derived"
    if mark.exists():
        return
    conn = open_database(home / "arbiter.db", synchronous="NORMAL")
    now = now_us()
    started, cpu = time.perf_counter(), time.process_time()
    with conn:
        for (tid,) in conn.execute("SELECT id FROM tenants").fetchall():
            rows = conn.execute("SELECT id, speaker FROM entries WHERE tenant_id = ? ORDER BY id", (tid,)).fetchall()
            # `remember_many` links a named speaker before acknowledging (entities/link.py `given_in`).
            linker = Linker(conn, tid, now, users.first_viewer(conn, tid))
            for entry_id, speaker in rows:
                if speaker and speaker.strip() and speaker.strip().casefold() not in ROLES:
                    linker.link(entry_id, [(speaker.strip(), "person", "speaker")])
    more = True
    while more:  # the insert triggers queued every entry (arbiter/derive.py)
        with conn:
            more = derive.step(conn, now=now, urgent=True)
    linked = time.perf_counter() - started
    done = derive.pending(conn, names=("associations",))
    while True:
        with conn:
            if not derive.step(conn, now=now, urgent=False):
                break
    conn.close()
    print(f"{home.name}: entities {linked:.0f} s, associations for {done} entries {time.perf_counter() - started - linked:.0f} s "
          f"(wall; {time.process_time() - cpu:.0f} s CPU)", flush=True)
    mark.touch()


def asked_at(conn, q: harness.QuestionState) -> int:
    """When `q` is asked (µs), recall's `now` (what age decay, when asked for, counts from): LongMemEval's question
    date, else the end of its conversation (LoCoMo's questions are asked about a conversation that has ended, and
    carry no date; at the clock's now, years after the data, every entry would be equally old)."""
    if q.question_date:
        return ds.parse_date(q.question_date) * 1_000_000
    return conn.execute("SELECT max(valid_from) FROM entries WHERE conversation_id = ?", (q.conversation_id,)).fetchone()[0]


@dataclasses.dataclass(frozen=True)
class Ask:
    """One question as a set asks it: who asks, the text, in which conversation (if any), when, and what answers it."""

    viewer: users.Viewer
    query: str
    conversation_id: int | None
    asked: int
    truth: list[int]
    question_type: str
    #: Whether the official rule scores it (it is asked, and timed, either way).
    scored: bool


def transcript_asks(conn, tenant: int, questions: Sequence[harness.QuestionState], phrasing: str) -> list[Ask]:
    """A transcript set's questions, each in its own conversation, at its asker's time."""
    viewer = users.first_viewer(conn, tenant)
    return [Ask(viewer, phrase(q.question, phrasing), q.conversation_id, asked_at(conn, q), q.truth_ids,
                q.question_type, scored(_outcome(q), "official")) for q in questions]


def measure(conn, asks: Sequence[Ask], params: dict, tuning_changes: dict) -> Row:
    """R@1/5/10, MRR over the questions the official rule scores; p50 over all of them."""
    return graded(asks, rankings(conn, asks, params, tuning_changes))


def rankings(conn, asks: Sequence[Ask], params: dict, tuning_changes: dict) -> list[tuple[list[Hit], float]]:
    """Each ask's top 10 hits, best first, and its recall's latency (ms)."""
    tuning = dataclasses.replace(DEFAULT, **tuning_changes)
    out = []
    for a in asks:
        p = RecallParams(query=a.query, conversation_id=a.conversation_id, limit=10, **params)
        started = time.perf_counter()
        with conn:
            hits = recall(conn, a.viewer, p, now=a.asked, tuning=tuning).hits
        out.append((hits, (time.perf_counter() - started) * 1000))
    return out


def graded(asks: Sequence[Ask], ranked: Sequence[tuple[list[Hit], float]]) -> Row:
    """The Row of `rankings`' answers to `asks`: scored where the official rule scores the question, timed always."""
    return _row([([h.id for h in hits], set(a.truth), a.question_type, ms) if a.scored else (None, None, None, ms)
                 for a, (hits, ms) in zip(asks, ranked, strict=True)])


def _row(results: Sequence[tuple]) -> Row:
    """A Row from (ranked, truth, type, latency ms) per question; a None ranking is timed, not scored."""
    graded = [(r, t, k) for r, t, k, _ in results if r is not None]
    n = len(graded)
    types: dict[str, list[float]] = {}
    for r, t, k in graded:
        types.setdefault(k, []).append(hit_at(r, t, 5))
    return Row(
        100 * sum(hit_at(r, t, 1) for r, t, _ in graded) / n,
        100 * sum(hit_at(r, t, 5) for r, t, _ in graded) / n,
        100 * sum(hit_at(r, t, 10) for r, t, _ in graded) / n,
        sum(reciprocal_rank(r, t) for r, t, _ in graded) / n,
        statistics.median(x[3] for x in results),
        {k: 100 * sum(h) / len(h) for k, h in sorted(types.items())},
        tuple(first_rank(r, t) or 11 for r, t, _ in graded),
        tuple(k for _, _, k in graded),
    )


def _outcome(q: harness.QuestionState):
    from bench.longmemeval.metrics import Outcome

    return Outcome(
        question_id=q.question_id, question_type=q.question_type, ranked=[], truth=q.truth_ids,
        answer_sessions=[], latency_ms=0.0, abstention=q.abstention, truth_from=q.truth_from,
    )


def mean(rows: Sequence[Row]) -> float:
    """The mean over sets of (R@1 + R@5 + R@10) / 3: the number the rule asks to raise.

    With the four sets, LME and LME 3rd count half each: read for their
    parties, they ask the same 93 questions with the same cues (98 of 98
    analyse alike), so as two full sets they would give LongMemEval half the
    mean. Each keeps its own 2-point R@5 veto.
    """
    weights = (0.5, 0.5, 1.0, 1.0) if len(rows) == len(ALL) else (1.0,) * len(rows)
    return sum(w * (r.r1 + r.r5 + r.r10) / 3 for w, r in zip(weights, rows)) / sum(weights)


def moved(row: Row, base: Row) -> str:
    """"up/down": how many questions' best evidence rank in the top 10 rose and fell against `base`.

    R@k counts only what crosses a cut-off; a change that lifts a few
    questions far and drops many by one rank shows here.
    """
    if not row.ranks or len(row.ranks) != len(base.ranks):
        return "-"
    pairs = list(zip(row.ranks, base.ranks))
    return f"{sum(r < b for r, b in pairs)}/{sum(r > b for r, b in pairs)}"


def table(results: dict[str, list[Row]]) -> str:
    """The markdown table: per set R@1 / R@5 / R@10 and MRR, the mean, ΔR@5 and questions moved against the first row, p50."""
    base = next(iter(results.values()))
    sets = ALL[: len(base)]  # a bench that measures the transcript sets only passes three rows
    names = ", ".join(n for n, _, _ in sets)
    head = " | ".join(f"{name} R@1 / R@5 / R@10 | MRR" for name, _, _ in sets)
    lines = [
        f"| variant | {head} | mean | ΔR@5 ({names}) | questions up/down ({names}) | p50 ms |",
        "|---|" + "--:|--:|" * len(sets) + "--:|--:|--:|--:|",
    ]
    for label, rows in results.items():
        cells = [f"{r.r1:.1f} / {r.r5:.1f} / {r.r10:.1f} | {r.mrr:.3f}" for r in rows]
        delta = " / ".join(f"{r.r5 - b.r5:+.1f}" for r, b in zip(rows, base))
        moves = " · ".join(moved(r, b) for r, b in zip(rows, base))
        p50 = statistics.median(r.p50 for r in rows)
        lines.append(f"| {label} | {' | '.join(cells)} | {mean(rows):.1f} | {delta} | {moves} | {p50:.2f} |")
    return "\n".join(lines)


def parser(doc: str, *, work: Path) -> argparse.ArgumentParser:
    """A bench's arguments for the sets: where the data is, where its homes live; help from its docstring."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], epilog=doc.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lme", type=Path, default=Path("../shared/data/longmemeval_s_dev.json.gz"))
    ap.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json.gz"),
                    help="LoCoMo in its own format: its turns (the LoCoMo set) and its observations (the notes set)")
    ap.add_argument("--work", type=Path, default=work, help="where the homes live")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Ingest the homes if needed, run every variant (or `--only` some) on the four sets, print the tables."""
    ap = parser(__doc__, work=Path("bench/results/devsets"))
    ap.add_argument("--only", help="comma-separated variant labels")
    ap.add_argument("--graph", action="store_true", help="homes with derived edges: as shipped against graph=true, or the --ideas/--only asked for")
    ap.add_argument("--ideas", action="store_true", help="the measured ideas (IDEAS) instead of the stages")
    ap.add_argument("--reach", action="store_true", help="misses split by whether their evidence shares a query word")
    ap.add_argument("--keywords", action="store_true",
                    help="each set's questions as bare key words (phrasing '+keywords'), as an agent told to send them asks")
    args = ap.parse_args(argv)

    suffix = "-graph" if args.graph else ""
    homes = {"lme": args.work / f"lme{suffix}", "locomo": args.work / f"locomo{suffix}", "notes": args.work / f"notes{suffix}"}
    states = {"lme": ensure_home(homes["lme"], args.lme), "locomo": ensure_home(homes["locomo"], args.locomo)}
    notes = ensure_notes_home(homes["notes"], args.locomo)
    if args.graph:
        for home in homes.values():
            ensure_derived(home)
    conns = {k: connect(h / "arbiter.db", readonly=True) for k, h in homes.items()}
    tenants = {k: c.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()[0]
               for k, c in conns.items() if k != "notes"}
    wanted = None if not args.only else {x.strip() for x in args.only.split(",")}
    pool = [VARIANTS[0], *IDEAS] if args.ideas else VARIANTS
    chosen = [v for v in pool if wanted is None or v[0] in wanted or v[0] == "as shipped"]
    if args.graph and not (args.ideas or args.only):
        chosen = [VARIANTS[0], ("+ graph", {"graph": True}, {})]
    if args.reach:
        reached = {name: reach(conns[key], tenants[key], states[key].questions, phrasing) for name, key, phrasing in SETS}
        reached["Notes"] = notes_reach(conns["notes"], notes_asks(conns["notes"], notes, "as-written"))
        print(reach_table(reached), flush=True)
        return 0
    asked = "+keywords" if args.keywords else ""
    asks = {name: notes_asks(conns[key], notes, phrasing + asked) if key == "notes"
            else transcript_asks(conns[key], tenants[key], states[key].questions, phrasing + asked)
            for name, key, phrasing in ALL}
    for name, key, _ in ALL[1:]:  # warm the page cache and the term statistics before timing
        measure(conns[key], asks[name], {}, {})
    results: dict[str, list[Row]] = {}
    for label, params, tuning_changes in chosen:
        results[label] = [measure(conns[key], asks[name], params, tuning_changes) for name, key, _ in ALL]
    print(table(results), flush=True)
    if args.graph:
        print(by_type(results), flush=True)
    at = len(SETS)
    rows = {"plain FTS5, bm25 10/4": fts5_baseline(conns["notes"], asks["Notes"]),
            **{label: rows[at] for label, rows in results.items()}}
    print(notes_table(rows, notes), flush=True)
    agent, questions = agent_notes_asks(args.work / "agent-notes")
    voiced = {label: (params, tuning_changes) for label, params, tuning_changes in chosen}
    voiced.setdefault("- voice", ({"disable": ["voice"]}, {}))
    print(agent_notes_table({label: measure(agent, questions, p, t) for label, (p, t) in voiced.items()}), flush=True)
    return 0


#: 25 is the rerank head (`recall.llm.RERANK_DEPTH`): a perfect reranker's R@5 and R@10 are at most R@25.
KS = (1, 5, 10, 25, 50)


def reach(conn, tenant: int, questions: Sequence[harness.QuestionState], phrasing: str) -> dict[str, dict]:
    """Per k: hits and misses of the shipped ranking, each split by whether its evidence shares a query word.

    "Shares" means an evidence entry's title or content holds a stem of the
    analysed query's terms, not counting the words of that entry's own
    speaker's name (LoCoMo's turns begin with it, and a question naming a
    person would otherwise share a word with every turn that person said).
    """
    viewer = users.first_viewer(conn, tenant)
    tokenize = tokenizer(conn)
    stems = lambda text: {stem for _, stem in tokenize(text)}  # noqa: E731
    out = {k: {"hit, shares": 0, "hit, none": 0, "miss, shares": 0, "miss, none": 0} for k in KS}
    for q in questions:
        if not scored(_outcome(q), "official"):
            continue
        text = phrase(q.question, phrasing)
        wanted = {t.stem for t in analyze(text, tokenize).terms if not t.prefix}
        shares = False
        for title, content, speaker in conn.execute(
            f"SELECT title, content, speaker FROM entries WHERE id IN ({','.join('?' * len(q.truth_ids))})",
            tuple(q.truth_ids),
        ):
            own = stems(speaker or "")
            shares = shares or bool((wanted - own) & stems(f"{title} {content}"))
        with conn:
            params = RecallParams(query=text, conversation_id=q.conversation_id, limit=max(KS))
            ranked = [h.id for h in recall(conn, viewer, params, now=asked_at(conn, q)).hits]
        for k in KS:
            hit = hit_at(ranked, set(q.truth_ids), k)
            out[k][f"{'hit' if hit else 'miss'}, {'shares' if shares else 'none'}"] += 1
    return out


def notes_reach(conn, asks: Sequence[Ask]) -> dict[str, dict]:
    """`reach` for the notes: "shares" leaves out the names the question holds (the person is in most of their notes)."""
    tokenize = tokenizer(conn)
    out = {k: {"hit, shares": 0, "hit, none": 0, "miss, shares": 0, "miss, none": 0} for k in KS}
    for a in asks:
        query = analyze(a.query, tokenize)
        wanted = {t.stem for t in query.terms if not t.prefix} - query.names
        texts = conn.execute(f"SELECT title, content FROM entries WHERE id IN ({','.join('?' * len(a.truth))})",
                             tuple(a.truth)).fetchall()
        shares = any(wanted & {stem for _, stem in tokenize(f"{title} {content}")} for title, content in texts)
        with conn:
            ranked = [h.id for h in recall(conn, a.viewer, RecallParams(query=a.query, limit=max(KS)), now=a.asked).hits]
        for k in KS:
            out[k][f"{'hit' if hit_at(ranked, set(a.truth), k) else 'miss'}, {'shares' if shares else 'none'}"] += 1
    return out


def reach_table(results: dict[str, dict]) -> str:
    """Per set and k, the share of scored questions in each of the four cells."""
    lines = ["| set | k | R@k | misses, evidence shares a query word | misses, shares none | hits, shares none |",
             "|---|--:|--:|--:|--:|--:|"]
    for name, per_k in results.items():
        for k, c in per_k.items():
            n = sum(c.values())
            pct = lambda x: f"{100 * x / n:.1f}"  # noqa: E731
            lines.append(f"| {name} | {k} | {pct(c['hit, shares'] + c['hit, none'])} | {pct(c['miss, shares'])} "
                         f"| {pct(c['miss, none'])} | {pct(c['hit, none'])} |")
    return "\n".join(lines)


def by_type(results: dict[str, list[Row]]) -> str:
    """R@5 per question type of each set, one column per variant."""
    lines = [f"| set | type | {' | '.join(f'{label} R@5' for label in results)} |",
             "|---|---|" + "--:|" * len(results)]
    for i, (name, _, _) in enumerate(ALL[: len(next(iter(results.values())))]):
        for t in next(iter(results.values()))[i].by_type:
            cells = " | ".join(f"{rows[i].by_type[t]:.1f}" for rows in results.values())
            lines.append(f"| {name} | {t} | {cells} |")
    return "\n".join(lines)


# --- The fourth set: notes (issue 36) -------------------------------------------------------------

#: Notes' entries and questions live in their own home: one tenant per LoCoMo conversation (its own
#: index and term statistics, as a fresh home would have), named by the conversation's sample id.
NOTES_STATE = "notes-state.json"


class _Observations(msgspec.Struct):
    """What the notes set reads of a LoCoMo sample: its sessions' dates, observations and questions."""

    sample_id: str
    conversation: dict[str, msgspec.Raw]
    qa: list[locomo.QA]
    observation: dict[str, dict[str, list[list[str | list[str]]]]] = {}


class NoteQuestion(msgspec.Struct, kw_only=True):
    """One notes question: its tenant, when it is asked (µs), its category and the notes that answer it."""

    question_id: str
    question_type: str
    question: str
    tenant: str
    asked_us: int
    truth_ids: list[int]


class NotesState(msgspec.Struct, kw_only=True):
    """What a notes home holds: the dataset it was written from, and its questions."""

    dataset_sha256: str
    notes: int
    questions: list[NoteQuestion]
    #: Questions of categories 1-4 with evidence none of which has a note: counted, not asked.
    skipped: int


class Note(msgspec.Struct, kw_only=True):
    """One observation as an agent's note, and the dia_ids it was drawn from."""

    title: str
    content: str
    valid_from: int
    evidence: frozenset[str]


def note_title(text: str) -> str:
    """The issue's protocol: the first six words, followed by "…" when there are more."""
    words = text.split()
    return " ".join(words[:6]) + ("…" if len(words) > 6 else "")


def notes_of(sample: _Observations) -> list[Note]:
    """Every item of `observation[session_N_observation][speaker]`, in session order, dated at its session."""
    out = []
    for name in sorted(sample.observation, key=lambda k: int(k.split("_")[1])):
        number = name.split("_")[1]
        date = msgspec.json.decode(sample.conversation[f"session_{number}_date_time"], type=str)
        for items in sample.observation[name].values():
            for text, ids, *_ in items:
                cited = ids if isinstance(ids, list) else [ids]
                out.append(Note(title=note_title(text), content=text, valid_from=locomo.parse_date(date),
                                evidence=frozenset(d for item in cited for d in locomo._SPLIT.split(item) if d)))
    return out


def ensure_notes_home(home: Path, dataset: Path, *, db: str | None = None) -> NotesState:
    """Write LoCoMo's observations as notes into `home` (once; `db`: a PostgreSQL URL instead of its own file), and
    the questions they answer.

    The issue's protocol, exactly: each conversation one tenant; each
    observation a `learning` entry titled by its first six words, valid from
    its session's date, with no speaker, conversation or tags; questions of
    categories 1-4 with evidence, hit = a note whose evidence meets the
    question's; questions none of whose evidence has a note are skipped.
    """
    data = ds.read_bytes(dataset)
    sha = hashlib.sha256(data).hexdigest()
    state_path = home / NOTES_STATE
    if state_path.exists():
        state = msgspec.json.decode(state_path.read_bytes(), type=NotesState)
        if state.dataset_sha256 != sha:
            raise harness.HarnessError(f"{home}: notes from another dataset; use another --work")
        return state
    samples = msgspec.json.decode(data, type=list[_Observations])
    home.mkdir(parents=True, exist_ok=True)
    conn = open_database(db or home / "arbiter.db", synchronous="NORMAL")
    now = now_us()
    questions: list[NoteQuestion] = []
    written = skipped = 0
    with conn:
        for s in samples:
            tenant, _ = tenants.create_tenant(conn, s.sample_id, now=now)
            viewer = users.first_viewer(conn, tenant)
            notes = notes_of(s)
            ids = entries.remember_many(conn, viewer, [
                RememberParams(type="learning", title=n.title, content=n.content, valid_from=n.valid_from)
                for n in notes
            ], now=now)
            written += len(ids)
            last = locomo.sessions(locomo.Sample(s.sample_id, s.conversation, s.qa))[-1][1]
            for i, qa in enumerate(s.qa):
                if qa.category not in locomo.CATEGORIES or not qa.evidence:
                    continue
                cited = {d for item in qa.evidence for d in locomo._SPLIT.split(item) if d}
                truth = [eid for eid, n in zip(ids, notes) if n.evidence & cited]
                if not truth:
                    skipped += 1
                    continue
                questions.append(NoteQuestion(
                    question_id=f"{s.sample_id}:{i}", question_type=locomo.CATEGORIES[qa.category],
                    question=qa.question, tenant=s.sample_id, asked_us=locomo.parse_date(last) * 1_000_000,
                    truth_ids=truth,
                ))
    conn.close()
    state = NotesState(dataset_sha256=sha, notes=written, questions=questions, skipped=skipped)
    state_path.write_bytes(msgspec.json.encode(state))
    return state


def notes_asks(conn, state: NotesState, phrasing: str) -> list[Ask]:
    """The notes questions as asks: in their conversation's tenant, with no conversation, at its last session's date."""
    viewers = {name: users.first_viewer(conn, tid) for tid, name in conn.execute("SELECT id, name FROM tenants")}
    return [Ask(viewers[q.tenant], phrase(q.question, phrasing), None, q.asked_us, q.truth_ids, q.question_type, True)
            for q in state.questions]


def fts5_baseline(conn, asks: Sequence[Ask]) -> Row:
    """Plain SQLite FTS5 over the same notes and questions: the floor the issue compares against.

    One index per memory (`porter unicode61 remove_diacritics 2`), bm25 with
    title weight 10 and content 4, each word of the question quoted and OR-ed:
    no stopwords, nothing else.
    """
    base = apsw.Connection(":memory:")
    for (tid,) in conn.execute("SELECT id FROM tenants").fetchall():
        base.execute(f"CREATE VIRTUAL TABLE n{tid} USING fts5(title, content, "
                     "tokenize = 'porter unicode61 remove_diacritics 2')")
        base.executemany(f"INSERT INTO n{tid}(rowid, title, content) VALUES (?, ?, ?)",
                         conn.execute("SELECT id, title, content FROM entries WHERE tenant_id = ?", (tid,)).fetchall())

    def rank(a: Ask) -> list[int]:
        words = " OR ".join(quote(w) for w in dict.fromkeys(_WORDS.findall(a.query.lower())))
        t = f"n{a.viewer.tenant_id}"
        return [r for (r,) in base.execute(
            f"SELECT rowid FROM {t} WHERE {t} MATCH ? ORDER BY bm25({t}, 10.0, 4.0), rowid LIMIT 10", (words,)
        )] if words else []

    return _row([(rank(a), set(a.truth), a.question_type, 0.0) for a in asks])


def notes_table(rows: dict[str, Row], state: NotesState) -> str:
    """The notes set as the issue reports it: R@1/5/10 and MRR overall and per category, one line per ranking."""
    kinds = sorted(set(next(iter(rows.values())).types))
    head = " | ".join(f"{k} R@1 / R@5 / R@10 | MRR" for k in ["all", *kinds])
    lines = [f"Notes: {len(state.questions)} questions over {state.notes} notes ({state.skipped} whose evidence has "
             "no note skipped)", "", f"| ranking | {head} |", "|---|" + "--:|--:|" * (1 + len(kinds))]
    for label, r in rows.items():
        cells = []
        for k in [None, *kinds]:
            ranks = [x for x, t in zip(r.ranks, r.types) if k is None or t == k]
            at = lambda cut: 100 * sum(x <= cut for x in ranks) / len(ranks)  # noqa: E731
            rr = sum(1 / x for x in ranks if x <= 10) / len(ranks)
            cells.append(f"{at(1):.1f} / {at(5):.1f} / {at(10):.1f} | {rr:.3f}")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)



#: Notes an agent writes about its own actions ("I deployed v2 to staging"), the user's facts and the rules it
#: was given ("You must run the migrations first"), and questions it asks about them: hand-written (issue 36)
#: to see what the voice signal does where "I" is the agent. 28 notes, 16 questions: a direction, not a score.
AGENT_NOTES = Path(__file__).parent / "data" / "agent_notes.json"


def agent_notes_asks(home: Path) -> tuple[object, list[Ask]]:
    """The agent's notes as `learning` entries of one fresh tenant (no speaker, no conversation), and its questions."""
    data = msgspec.json.decode(AGENT_NOTES.read_bytes())
    if home.exists():
        for f in home.iterdir():
            f.unlink()
    home.mkdir(parents=True, exist_ok=True)
    conn = open_database(home / "arbiter.db")
    start = 1_700_000_000  # a day between notes, so no date or age signal separates them
    with conn:
        tenant, _ = tenants.create_tenant(conn, "agent", now=now_us())
        viewer = users.first_viewer(conn, tenant)
        ids = entries.remember_many(conn, viewer, [
            RememberParams(type="learning", title=note_title(text), content=text, valid_from=start + 86_400 * i)
            for i, text in enumerate(data["notes"])
        ], now=now_us())
    asked = (start + 86_400 * len(ids)) * 1_000_000
    return conn, [Ask(viewer, q, None, asked, [ids[i]], "agent", True) for q, i in data["questions"]]


def agent_notes_table(rows: dict[str, Row]) -> str:
    """R@1 / R@5 and MRR on the agent's own notes, one line per variant."""
    lines = ["Agent's own notes (voice where \"I\" is the agent; 16 questions):", "",
             "| variant | R@1 / R@5 | MRR |", "|---|--:|--:|"]
    lines += [f"| {label} | {r.r1:.1f} / {r.r5:.1f} | {r.mrr:.3f} |" for label, r in rows.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
