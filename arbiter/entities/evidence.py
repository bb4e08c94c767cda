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
from arbiter.store import fts, users
from arbiter.store.users import Viewer

#: Entries read per word: the most recent ones holding it in any case.
DEPTH = 30


def _indexes(conn: apsw.Connection, v: Viewer) -> list[tuple[int, int | None]]:
    if v.solo or v.everyone:
        return [(s, None) for s in users.tenant_scopes(conn, v.tenant_id)]
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
    ask = (word, entry_id, initial)
    return recurring_many(conn, v, [ask])[ask]


def recurring_many(conn: apsw.Connection, v: Viewer,
                   asks: list[tuple[str, int, bool]]) -> dict[tuple[str, int, bool], list[int] | None]:
    """`recurring` of each (word, entry id, initial), by ask: the scopes and the entries read once for all (an idle
    step's words were three round trips each)."""
    indexes = _indexes(conn, v) if asks else []
    found: dict[tuple[str, int, bool], list[int]] = {}
    for word, entry_id, initial in asks:
        match = f"{{title content}} : {quote(word)}"
        ids: list[int] = []
        for scope, author in indexes:
            expr = match if author is None else f"({match}) AND {{scope}} : {quote(f'a{author}')}"
            ids += fts.newest_matches(conn, scope, expr, DEPTH, other_than=entry_id)
        found[word, entry_id, initial] = sorted(ids, reverse=True)[:DEPTH]
    wanted = sorted({i for ids in found.values() for i in ids})
    texts: dict[int, str] = {}
    for start in range(0, len(wanted), 500):  # within both engines' limits on parameters
        chunk = wanted[start:start + 500]
        texts.update(conn.execute(
            f"SELECT id, title || '\n' || content FROM entries WHERE id IN ({','.join('?' * len(chunk))}) "
            f"AND tenant_id = ? AND valid_to IS NULL",
            (*chunk, v.tenant_id),
        ))
    return {ask: _judge(ask[0], ask[2], ids, texts) for ask, ids in found.items()}


def _judge(word: str, initial: bool, ids: list[int], texts: dict[int, str]) -> list[int] | None:
    """`recurring`'s verdict on `word` from the newest entries holding it (`ids`, their `texts` where still current)."""
    if not ids:
        return None if initial else []
    low = word.lower()
    named: list[int] = []
    written = mid = starts = lowered = 0
    for read, other in enumerate((i for i in ids if i in texts), start=1):
        text = texts[other]
        spots = _spots(text, word, ("",))
        if spots:
            written += 1
            mid += any(not sentence_start(text, at) for at in spots)
            starts += any(at > 0 for at in spots)  # the title's first word says least
            if any(_alone(text, at, at + len(word)) for at in spots):
                named.append(other)
        # The word in lower case, inflected too: "joined" and "joins" show "Join" is a verb, as the index's stems do.
        lowered += bool(_spots(text, low, _INFLECTIONS, first=True))
        if 2 * lowered > written + len(ids) - read:
            return None  # not rare even if every entry left writes it with a capital: a word, whatever else they say
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


_INFLECTIONS = ("s", "es", "d", "ed", "ing", "")


def _joins(c: str, also: str) -> bool:
    """Whether `c` joins a word to what is beside it: what `\\w` matches (str.isalnum is the same set, less
    the underscore), or one of `also`."""
    return c.isalnum() or c == "_" or c in also


def _spots(text: str, word: str, endings: tuple[str, ...], *, first: bool = False) -> list[int]:
    """Where `word` (then one of `endings`) is a word of its own: not after a letter, digit, _, ' or -, nor
    before a letter, digit, _ or -. Only the first such place with `first`.

    What `re.finditer(r"(?<![\\w'’-])WORD(?:ENDINGS)(?![\\w-])")` finds, without compiling a pattern per word:
    the compile and a scan that tries every position (the lookbehind comes first) were half of a
    `remember`'s evidence (benchmarks.md "`remember`").
    """
    out: list[int] = []
    at = text.find(word)
    while at >= 0:
        after = None if at and _joins(text[at - 1], "'’-") else _ended(text, at + len(word), endings)
        if after is None:
            at = text.find(word, at + 1)
            continue
        out.append(at)
        if first:
            break
        at = text.find(word, after)  # matches do not overlap
    return out


def _ended(text: str, end: int, endings: tuple[str, ...]) -> int | None:
    """Where the first of `endings` that ends a word at `end` ends, else None."""
    for ending in endings:
        after = end + len(ending)
        if text.startswith(ending, end) and (after == len(text) or not _joins(text[after], "-")):
            return after
    return None


def _alone(text: str, start: int, end: int) -> bool:
    """Whether the word at `start:end` stands on its own, not as a part of a longer capitalised name."""
    if _NEXT_CAPITAL.match(text, end):
        return False
    before = text[max(0, start - 40):start]
    return not (_PREV_CAPITAL.search(before) and not sentence_start(text, start))
