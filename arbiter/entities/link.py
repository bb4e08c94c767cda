"""What `remember` does with entities: the names an entry gives and mentions, resolved and linked."""

from __future__ import annotations

import apsw

from arbiter.entities.core import Linker, mentions_of
from arbiter.entities.extract import capitalised, extract
from arbiter.model import Mention, NamedEntity, RememberParams


def named_in(p: RememberParams) -> list[tuple[str, str | None, str]]:
    """(name, type or None, how) for an entry: the caller's names first, then what its text mentions.

    `how` is given, extracted, or known: a capitalised word linked only if it
    already names an entity (it never creates one).
    """
    named = given_in(p)
    return named + extracted_in(p.title, p.content)


def given_in(p: RememberParams) -> list[tuple[str, str | None, str]]:
    """Only the names the caller gave (what `remember_many` links before acknowledging)."""
    return [
        (e.name, e.type, "given") if isinstance(e, NamedEntity) else (e, None, "given") for e in p.entities
    ]


def extracted_in(title: str, content: str) -> list[tuple[str, str | None, str]]:
    """What extraction finds in an entry's text, as (name, type or None, how)."""
    text = f"{title}\n{content}"
    found = extract(text)
    named = [(f.name, None if f.type == "other" else f.type, "extracted") for f in found]
    named.extend((word, None, "known") for word in capitalised(text, found))
    return named


def link_entry(conn: apsw.Connection, tenant_id: int, entry_id: int, p: RememberParams, *, now: int,
               linker: Linker | None = None) -> list[Mention]:
    """Resolve and link what entry `entry_id` (written from `p`) mentions; the `remember` result's `entities`."""
    linker = linker or Linker(conn, tenant_id, now)
    return mentions_of(conn, linker.link(entry_id, named_in(p)))
