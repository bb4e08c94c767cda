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
    named: list[tuple[str, str | None, str]] = []
    for e in p.entities:
        if isinstance(e, NamedEntity):
            named.append((e.name, e.type, "given"))
        else:
            named.append((e, None, "given"))
    text = f"{p.title}\n{p.content}"
    found = extract(text)
    for f in found:
        named.append((f.name, None if f.type == "other" else f.type, "extracted"))
    named.extend((word, None, "known") for word in capitalised(text, found))
    return named


def link_entry(conn: apsw.Connection, tenant_id: int, entry_id: int, p: RememberParams, *, now: int,
               linker: Linker | None = None) -> list[Mention]:
    """Resolve and link what entry `entry_id` (written from `p`) mentions; the `remember` result's `entities`."""
    linker = linker or Linker(conn, tenant_id, now)
    return mentions_of(conn, linker.link(entry_id, named_in(p)))
