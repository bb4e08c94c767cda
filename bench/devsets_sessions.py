"""LongMemEval's official protocol at session level: sessions ranked as one text, or by their turns (issue 36 §4).

    python -m bench.devsets_sessions --lme ../shared/data/longmemeval_s_dev.json.gz

The official session protocol (`bench/longmemeval/official.py`) stores each
session as one unit (its user turns joined) and ranks the units. The
strongest lexical systems report ranking a session by its single
best-matching turn, with the session's total damped. This bench ranks the
same sessions both ways on the same questions (non-abstention questions
with a correct unit, "scored"): the session as one text (the official
harness's own ranking), and each session by the scores of its user turns,
stored one entry each in a fresh home per question and recalled with no
conversation (one pass over that haystack alone: the same rows and signals
as the conversation pass, with the pass's own scores rather than fused
ranks). A session is correct as the official code has it: an answer session
with a flagged user turn, whichever of its turns ranks.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from arbiter.model import CONTENT_MAX_BYTES, RecallParams, RememberParams
from arbiter.recall import recall
from arbiter.store import open_database
from arbiter.store.entries import remember_many
from arbiter.store.tenants import create_conversation, create_tenant
from arbiter.store.users import first_viewer
from bench.devsets import parser
from bench.longmemeval import dataset as ds
from bench.longmemeval import official
from bench.longmemeval.metrics import ndcg_at
from bench.longmemeval.phrasing import phrase


def _damped(w: float, count: int | None) -> Callable[[Sequence[float]], float]:
    """The best turn's score plus `w` x the next `count` turns' (all the rest when None)."""
    return lambda s: s[0] + w * sum(s[1:] if count is None else s[1 : 1 + count])


#: How a session's turn scores (best first) make its score.
AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "best turn": lambda s: s[0],
    "sum of turns": sum,
    **{f"best + {w} x the rest": _damped(w, None) for w in (0.03, 0.1, 0.3)},
    "best + log(1 + the rest)": lambda s: s[0] + math.log1p(sum(s[1:])),
    "best x (1 + 0.1 ln turns)": lambda s: s[0] * (1 + 0.1 * math.log(len(s))),
    **{f"best + {w} x the second": _damped(w, 1) for w in (0.3, 1.0)},
    "best + 0.2 x (2nd + 3rd)": _damped(0.2, 2),
}


def turn_scores(q: ds.Question, units: list[official.Unit], phrasing: str) -> dict[str, list[float]]:
    """Each session's user-turn scores, best first, from one recall over the question's turns alone."""
    home = Path(tempfile.mkdtemp(prefix="arbiter-sessions-"))
    try:
        conn = open_database(home / "arbiter.db", synchronous="OFF")
        now = int(time.time() * 1_000_000)
        stored = [i for i, u in enumerate(units) if u.text.strip()]
        with conn:
            tenant, _ = create_tenant(conn, "default", now=now)
            viewer = first_viewer(conn, tenant)
            conversation = create_conversation(conn, viewer, q.question_id, now=now).id
            ids = remember_many(conn, viewer, [
                RememberParams(type="context", title=ds.make_title(ds.cut_utf8(units[i].text, CONTENT_MAX_BYTES)),
                               content=ds.cut_utf8(units[i].text, CONTENT_MAX_BYTES), conversation_id=conversation,
                               valid_from=units[i].timestamp, speaker="user")
                for i in stored
            ], now=now)
            position = dict(zip(ids, stored))
        with conn:
            hits = recall(conn, viewer, RecallParams(query=phrase(q.question, phrasing), limit=official.DEPTH)).hits
        conn.close()
    finally:
        shutil.rmtree(home)
    out: dict[str, list[float]] = {}
    for h in hits:
        # An answer session's unflagged turns are still that session's (the official session unit holds them).
        out.setdefault(units[position[h.id]].session.split("#")[0], []).append(h.score)
    return out


def metrics(order: Sequence[str], gold: set[str]) -> dict[str, float]:
    """recall_any@1/3/5/10, recall_all@5 and ndcg_any@5 of a session order."""
    correct = {i for i, s in enumerate(order) if s in gold}
    out = {f"any@{k}": float(any(i < k for i in correct)) for k in (1, 3, 5, 10)}
    out["all@5"] = float(all(i < 5 for i in correct))
    out["ndcg@5"] = ndcg_at(list(range(len(order))), correct, 5)
    return out


def main(argv: list[str] | None = None) -> int:
    """Rank every scored question's sessions each way; print the table."""
    ap = parser(__doc__, work=Path("bench/results/devsets"))
    ap.add_argument("--phrasing", default="as-written")
    args = ap.parse_args(argv)
    rows: dict[str, list[dict[str, float]]] = {"session as one text": [], **{k: [] for k in AGGREGATES}}
    for q in ds.load(args.lme).questions:
        if q.abstention:
            continue
        sessions = official.corpus(q, "session")
        gold = {u.session for u in sessions if u.correct}
        if not gold:
            continue
        newest = {u.session: u.timestamp for u in sessions}
        ranking, _ = official.rank(q, sessions, phrasing=args.phrasing)
        rows["session as one text"].append(metrics([sessions[i].session for i in ranking], gold))
        scores = turn_scores(q, official.corpus(q, "turn"), args.phrasing)
        for name, aggregate in AGGREGATES.items():
            value = {s: aggregate(v) for s, v in scores.items()}
            order = sorted(value, key=lambda s: (-value[s], -newest[s]))
            # Sessions no turn of which matched: newest first, as the official harness's tail.
            order += sorted((s for s in newest if s not in value), key=lambda s: -newest[s])
            rows[name].append(metrics(order, gold))
    n = len(rows["session as one text"])
    keys = list(rows["session as one text"][0])
    print(f"LongMemEval, official protocol at session level, {args.phrasing}, {n} questions with a correct unit\n")
    print(f"| sessions ranked by | {' | '.join(keys)} |\n|---|" + "--:|" * len(keys))
    for name, per in rows.items():
        cells = [f"{100 * sum(m[k] for m in per) / n:.1f}" for k in keys]
        print(f"| {name} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
