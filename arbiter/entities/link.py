"""What `remember` does with entities: the names an entry gives and mentions, resolved and linked."""

from __future__ import annotations

import apsw

from arbiter.entities.core import Linker, mentions_of
from arbiter.entities.extract import capitalised, extract
from arbiter.model import Mention, NamedEntity, RememberParams
from arbiter.store.users import Viewer


def named_in(p: RememberParams) -> list[tuple[str, str | None, str]]:
    """(name, type or None, how) for an entry: the caller's names and speaker first, then what its text mentions.

    `how` is given, speaker, extracted, known (a capitalised word linked
    only if it already names an entity: it never creates one), candidate (a
    word capitalised mid-sentence: it names an entity that exists, or a new
    one if the tenant's text says it is a name, `evidence.py`), initial (the
    same for a word capitalised at a sentence's start, on stronger evidence)
    or advisor
    (names the advisor added in `remember`'s prepare step: `advice.py`).
    """
    named = given_in(p)
    return named + extracted_in(p.title, p.content) + [
        (e.name, None if e.type == "other" else e.type, "advisor") for e in getattr(p, "advised", ())
    ]


#: Speakers that are roles in a conversation, not people: never made person entities.
ROLES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "agent", "model", "tool"})


def given_in(p: RememberParams) -> list[tuple[str, str | None, str]]:
    """Only the names the caller gave, then the speaker (what `remember_many` links before acknowledging).

    A speaker who is a name ("Caroline") is a person the entry is linked to
    with how='speaker'; a role ("user", "assistant") is not.
    """
    named = [(e.name, e.type, "given") if isinstance(e, NamedEntity) else (e, None, "given") for e in p.entities]
    if p.speaker and p.speaker.strip() and p.speaker.strip().casefold() not in ROLES:
        named.append((p.speaker.strip(), "person", "speaker"))
    return named


def extracted_in(title: str, content: str) -> list[tuple[str, str | None, str]]:
    """What extraction finds in an entry's text, as (name, type or None, how)."""
    text = f"{title}\n{content}"
    found = extract(text)
    named = [(f.name, None if f.type == "other" else f.type, "extracted") for f in found]
    named.extend((word, None, how) for word, how in capitalised(text, found))
    return named


def link_entry(conn: apsw.Connection, tenant_id: int, entry_id: int, p: RememberParams, *, now: int,
               linker: Linker | None = None, v: Viewer | None = None) -> list[Mention]:
    """Resolve and link what entry `entry_id` (written from `p`, by `v`) mentions; the `remember` result's `entities`."""
    linker = linker or Linker(conn, tenant_id, now, v)
    return mentions_of(conn, tenant_id, linker.link(entry_id, named_in(p)))


def unlink_speaker(conn: apsw.Connection, tenant_id: int, entry_id: int) -> None:
    """Forget who entry `entry_id` (of `tenant_id`) was linked to as its speaker, when `update` corrects the speaker.

    A mention of that person in the text is linked again with the new text's
    links, as `extracted`.
    """
    conn.execute("DELETE FROM entry_entities WHERE tenant_id = ? AND entry_id = ? AND how = 'speaker'",
                 (tenant_id, entry_id))
