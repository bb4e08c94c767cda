"""Evidence across the tenant that a lone capitalised word is a name: other notes write it so, mid-sentence.

One note's "we moved Falcon to the new queue" does not tell a project from
a word capitalised for emphasis; a tenant whose notes keep writing "Falcon"
with a capital where no sentence starts does. English capitalises a word in
mid-sentence almost only when it is a name, so a word written so in two
entries, and more often capitalised than not, becomes an entity, and the
entries that wrote it before are linked to it too: the first note to name
Dana is found by "Dana" as well as the tenth.

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
    """The other entries `v` sees that name `word`, if the tenant's text says it is a name; else None.

    Entry `entry_id` writes `word` with a capital, mid-sentence unless
    `initial`. It is a name if the other entries read write it capitalised
    more often than in lower case, and: mid-sentence, in at least one of
    them; or, for an `initial` word, mid-sentence in one of them or at a
    sentence's start in `INITIAL` of them and never in lower case ("Dana
    fixed it" in three notes; "Budget is tight" meets "the budget").
    The entries named are those writing it on its own: in "Helena Duarte"
    it is part of another name.
    """
    match = f"{{title content}} : {quote(word)}"
    ids: list[int] = []
    for scope, author in _indexes(conn, v):
        t = fts.table(scope)
        expr = match if author is None else f"({match}) AND {{scope}} : {quote(f'a{author}')}"
        ids += [r[0] for r in conn.execute(
            f"SELECT rowid FROM {t} WHERE {t} MATCH ? AND rowid != ? ORDER BY rowid DESC LIMIT ?",
            (expr, entry_id, DEPTH),
        )]
    if not ids:
        return None
    ids = sorted(ids, reverse=True)[:DEPTH]
    capital = re.compile(rf"(?<![\w'’-]){re.escape(word)}(?![\w-])")
    lower = re.compile(rf"(?<![\w'’-]){re.escape(word.lower())}(?![\w-])")
    named: list[int] = []
    written = mid = lowered = 0
    for other, text in conn.execute(
        f"SELECT id, title || char(10) || content FROM entries WHERE id IN ({','.join('?' * len(ids))}) "
        f"AND tenant_id = ? AND valid_to IS NULL",
        (*ids, v.tenant_id),
    ):
        spots = list(capital.finditer(text))
        if spots:
            written += 1
            mid += any(not sentence_start(text, m.start()) for m in spots)
            if any(_alone(text, m) for m in spots):
                named.append(other)
        elif lower.search(text):
            lowered += 1
    if written <= lowered:
        return None
    return named if mid or (initial and written >= INITIAL and not lowered) else None


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
