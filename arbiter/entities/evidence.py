"""Evidence across the tenant that a lone capitalised word is a name, and the entries that named it before.

English capitalises a word in mid-sentence almost only when it is a name
("asked Dana", "moved Falcon to the new queue"), so such a word is one
unless the tenant's other notes often write it in lower case (then it
is a word capitalised for emphasis or in a label: "the Growth plan" where
notes say "growth"). A word seen only at a sentence's start, where grammar
explains the capital ("Dana fixed it"), needs more: another note writing it
mid-sentence, or several starting sentences with it and none in lower case.
When a word becomes an entity, the entries that wrote it before are linked
to it too: the first note to name Dana is found by "Dana" as well as the
tenth.

Only entries the writer sees count, so no one's private notes decide (or
reveal) what another user's note names. The work is bounded: one full-text
query per index the writer searches and one read of at most `DEPTH`
entries, for each capitalised word of a note not yet an entity.
"""

from __future__ import annotations

import re

import apsw

from arbiter.entities.extract import sentence_start
from arbiter.recall.query import quote
from arbiter.store import fts
from arbiter.store.users import Viewer

#: Entries read per word: the most recent ones holding it in any case.
DEPTH = 30


def _indexes(conn: apsw.Connection, v: Viewer) -> list[tuple[int, int | None]]:
    if v.solo or v.everyone:
        return [(r[0], None) for r in conn.execute("SELECT id FROM scopes WHERE tenant_id = ?", (v.tenant_id,))]
    return v.indexes()


def recurring(conn: apsw.Connection, v: Viewer, word: str, entry_id: int, *, initial: bool = False) -> list[int] | None:
    """The other entries `v` sees that name `word`, if it is a name as the tenant writes it; else None.

    Entry `entry_id` writes `word` with a capital, mid-sentence unless
    `initial`. Mid-sentence, it is a name unless the entries read write it in
    lower case more than once for every two writing it with a capital: "the
    Growth plan" in a tenant that writes "growth" is a word. At a sentence's start
    it is a name if another entry writes it capitalised mid-sentence (and
    more often so than not), or `INITIAL` other entries start a sentence with
    it (not a title: "Weekly sync") and none writes it in lower case: "Dana
    fixed it" in three notes, where "Budget is tight" meets "the budget".
    The entries named are those writing it on its own: in "Helena Duarte" it
    is part of another name.
    """
    match = f"{{title content}} : {quote(word)}"
    ids: list[int] = []
    for scope, author in _indexes(conn, v):
        expr = match if author is None else f"({match}) AND {{scope}} : {quote(f'a{author}')}"
        ids += fts.newest_matches(conn, scope, expr, DEPTH, other_than=entry_id)
    if not ids:
        return None if initial else []
    ids = sorted(ids, reverse=True)[:DEPTH]
    capital = re.compile(rf"(?<![\w'’-]){re.escape(word)}(?![\w-])")
    # The word in lower case, inflected too: "joined" and "joins" show "Join" is a verb, as the index's stems do.
    lower = re.compile(rf"(?<![\w'’-]){re.escape(word.lower())}(?:s|es|d|ed|ing)?(?![\w-])")
    named: list[int] = []
    written = mid = starts = lowered = 0
    for other, text in conn.execute(
        f"SELECT id, title || '\n' || content FROM entries WHERE id IN ({','.join('?' * len(ids))}) "
        f"AND tenant_id = ? AND valid_to IS NULL",
        (*ids, v.tenant_id),
    ):
        spots = list(capital.finditer(text))
        if spots:
            written += 1
            mid += any(not sentence_start(text, m.start()) for m in spots)
            starts += any(m.start() > 0 for m in spots)  # the title's first word says least
            if any(_alone(text, m) for m in spots):
                named.append(other)
        lowered += lower.search(text) is not None
    # A name is seldom written in lower case: at most once for every two entries writing it with a capital.
    rare = 2 * lowered <= written
    if not initial:
        return named if rare else None
    if (mid and rare) or (starts >= INITIAL and not lowered):
        return named
    return None


#: Other entries that must start a sentence with a word (and none write it in lower case) for it to be a name.
INITIAL = 2
_NEXT_CAPITAL = re.compile(r"[ \t]+(?:&[ \t]+)?[A-Z]")
_PREV_CAPITAL = re.compile(r"[A-Z][\w'’.-]*[ \t]+(?:&[ \t]+)?$")


def _alone(text: str, m: re.Match) -> bool:
    """Whether the word at `m` stands on its own, not as a part of a longer capitalised name."""
    if _NEXT_CAPITAL.match(text, m.end()):
        return False
    before = text[max(0, m.start() - 40):m.start()]
    return not (_PREV_CAPITAL.search(before) and not sentence_start(text, m.start()))
