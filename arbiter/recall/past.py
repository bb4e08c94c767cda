"""Recall over the record-time axis: the candidates of a `known_at` recall.

A `known_at=T` recall searches the memory as it was recorded at T. The
caller's scope indexes (store/fts.py) hold each entry's current text and
`entry_revisions_fts` (migration m007) its past texts, so a pass runs the same
expression and rank function over both and keeps, per entry, the one state
whose record window holds T:

- a current row, if it was recorded at or before T (its text then is its text now);
- a past state, if its window [recorded_from, recorded_to) holds T.

Visibility (`as_of`, else not retired) is judged on that state's validity.
Both rankings share one `Spec`, so one idf and one average length (those of
the caller's scopes, read first): scores from the indexes compare, and no
statistic of the past-text index (which holds every tenant) reaches a score.
Past states are seen by whoever sees the entry today.

This is where recall knows about record time; `search` swaps its pass
function for `ranked_visible` below when `known_at` is given (and the "when"
signal reads the candidates' texts at `known_at`, `_sql.at`).
"""

from __future__ import annotations

import apsw

from arbiter.recall import _rank, _sql
from arbiter.store import entries, fts
from arbiter.store.users import Viewer

#: Past states live here, every tenant's; the same columns and tokenizer as a tenant's index.
TABLE = "entry_revisions_fts"
_REFILL = 4


def recall_row(row: str) -> str:
    """SQL for a `recall_entries` row of an entries row: its ranking fields and text signals.

    The recall_entries triggers (migrations m004, m010, m023) hold the same SQL for `new`, frozen as they
    shipped; this is the live copy that ranks past states, and tests/unit/test_store.py checks the two agree.

    Signals: UTF-8 size, first-person words (" I ", " I'", " my ", " me ", a
    leading "I"), second-person words ("you", "You", which also count "your")
    and `numerals`: 1 if the text holds a digit, else 2 if it holds a
    cardinal number word from two up ("two weeks", "five days"), else 0 (the
    words are looked for only without a digit: long texts mostly hold one).
    "one" is left out: it is more often a pronoun ("the one I bought") than a
    count.
    """
    content = f"{row}.content"

    def count(needle: str, size: int) -> str:
        return f"(octet_length({content}) - octet_length(replace({content}, '{needle}', ''))) / {size}"

    first = " + ".join(count(n, k) for n, k in ((" I ", 3), (" I''", 3), (" my ", 4), (" me ", 4)))
    first += f" + CAST(substr({content}, 1, 2) IN ('I ', 'I''') AS INTEGER)"  # a text that opens with "I"
    second = " + ".join(count(n, 3) for n in ("you", "You"))
    return (
        f"{row}.id, {row}.tenant_id, {row}.type, {row}.conversation_id, {row}.valid_from, {row}.valid_to, "
        f"octet_length({content}), {first}, {second}, arbiter_numerals({content})"
    )


def ranked_visible(
    conn: apsw.Connection,
    v: Viewer,
    match: str,
    spec: _rank.Spec,
    depth: int,
    as_of: int | None,
    *,
    known_at: int,
) -> list[tuple[int, float, tuple]]:
    """`_sql.ranked_visible` as the store held the memory at `known_at`: (entry id, score, ranking row), best first."""
    want = depth
    while True:
        now_hits = sorted(
            (hit for scope, scoped in _sql.searched(v, match)
             for hit in _rank.ranked(conn, fts.table(scope), scoped, spec, want)),
            key=lambda h: (-h[1], h[0]),
        )[:want]
        # The past-text index holds every tenant: its rows are the tenant's by its tenant token.
        past_hits = _rank.ranked(conn, TABLE, f"({match}) AND {_sql.tenant_scope(v.tenant_id)}", spec, want,
                                  tenant_id=v.tenant_id)
        current = _current(conn, v, [i for i, _ in now_hits], as_of, known_at)
        past = _past(conn, v, [i for i, _ in past_hits], as_of, known_at)
        kept = [(i, s, current[i]) for i, s in now_hits if i in current]
        kept += [(past[r][0], s, past[r][1]) for r, s in past_hits if r in past]
        kept.sort(key=lambda k: (-k[1], k[0]))
        if len(kept) >= depth or (len(now_hits) < want and len(past_hits) < want):
            return kept[:depth]
        want *= _REFILL


def _current(conn: apsw.Connection, v: Viewer, ids: list[int], as_of: int | None, known_at: int) -> dict:
    """Ranking rows of the entries among `ids` whose current state was recorded by `known_at` and is visible."""
    rows = _sql.candidates(conn, v, ids, as_of)
    if not rows:
        return {}
    settled = {
        r[0]
        for r in conn.execute(
            f"SELECT id FROM entries WHERE tenant_id = ? AND id IN ({','.join('?' * len(rows))}) "
            "AND coalesce(revised_at, recorded_at) <= ?",
            (v.tenant_id, *rows, known_at),
        )
    }
    return {i: row for i, row in rows.items() if i in settled}


def _past(
    conn: apsw.Connection, v: Viewer, revision_ids: list[int], as_of: int | None, known_at: int
) -> dict[int, tuple[int, tuple]]:
    """revision id -> (entry id, ranking row) for the past states among `revision_ids` that held at `known_at` and are visible.

    The ranking row is computed from the past text by the same SQL that
    fills `recall_entries` for current rows.
    """
    if not revision_ids:
        return {}
    cond, binds = entries.visible(as_of, alias="r")
    rows = conn.execute(
        f"""
        SELECT s.rid, {recall_row("s")} FROM (
            SELECT r.id AS rid, r.entry_id AS id, r.tenant_id, r.type, r.conversation_id, r.valid_from, r.valid_to,
                   r.content
            FROM entry_revisions r
            WHERE r.id IN ({','.join('?' * len(revision_ids))}) AND r.tenant_id = ?
              AND r.recorded_from <= ? AND r.recorded_to > ? AND {cond} AND {_sql.seen(v, "r.entry_id")}
        ) s
        """,
        (*revision_ids, v.tenant_id, known_at, known_at, *binds),
    )
    # A recall_entries row is (entry_id, tenant_id, type, conversation_id, valid_from, valid_to, bytes, ...);
    # `_sql.candidates` gives it without entry_id, tenant_id and valid_to.
    return {rid: (eid, (etype, conv, vfrom, *signals)) for rid, eid, _, etype, conv, vfrom, _, *signals in rows}
