"""How the similarity thresholds were chosen: precision of lexical overlap against pairs a benchmark says belong together.

    python -m bench.associations [--dataset ../shared/data/locomo_dev.json.gz]

Every LoCoMo turn is written as an entry (one tenant, one conversation per
sample, in order); for each, the pairs `associations.core` would compare
(earlier turns sharing two of its most distinctive words) are scored by
Jaccard overlap of their stemmed word sets. A pair is *related* when some
question's evidence names both turns (the benchmark's own judgement that they
answer one question together), or, more loosely, when they are in one session.
The table is the share of related pairs per overlap band: a threshold is worth
auto-linking where most pairs above it are related, and worth a model's look
where a fair share are.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path

from arbiter.associations import core
from arbiter.model import RememberParams
from arbiter.store import entries, open_database, tenants, users

BANDS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/locomo_dev.json.gz")
    args = ap.parse_args(argv)
    samples = json.load(gzip.open(args.dataset) if args.dataset.suffix == ".gz" else open(args.dataset))
    db = open_database(Path(tempfile.mkdtemp()) / "assoc.db", synchronous="NORMAL")
    with db:
        tenant, _ = tenants.create_tenant(db, "bench", now=1)
    words = core.Words(db)
    total, together, same_session = Counter(), Counter(), Counter()
    for s in samples:
        conv = s["conversation"]
        pairs_of_evidence = set()
        for q in s["qa"]:
            ev = [e for e in q.get("evidence", []) if isinstance(e, str)]
            pairs_of_evidence |= {(a, b) for a in ev for b in ev if a != b}
        dia_of: dict[int, str] = {}
        n = 1
        while f"session_{n}" in conv:
            for turn in conv[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                with db:
                    eid = entries.remember(db, users.first_viewer(db, tenant), RememberParams(type="context", title=text[:80], content=text), now=n)
                dia_of[eid] = turn["dia_id"]
                row = core._row(db, tenant, eid)
                mine = words(row.text)
                for other, text2 in core._probe(db, tenant, row, mine):
                    if other not in dia_of:
                        continue
                    theirs = words(text2)
                    j = core.jaccard(mine, theirs) if len(theirs) >= core.MIN_WORDS else 0.0
                    band = max((b for b in BANDS if j >= b), default=0.0)
                    total[band] += 1
                    a, b = dia_of[eid], dia_of[other]
                    together[band] += (a, b) in pairs_of_evidence
                    same_session[band] += a.split(":")[0] == b.split(":")[0]
            n += 1
    print(f"{'jaccard >=':>10} {'pairs':>7} {'same evidence':>14} {'same session':>13}")
    for band in sorted(total):
        t = total[band]
        print(f"{band:>10.2f} {t:>7} {together[band] / t:>13.1%} {same_session[band] / t:>12.1%}")


if __name__ == "__main__":
    main()
