"""Entities: the named things entries mention, resolved lexically, linked, related and clustered.

The Python API other features build on (each call inside the caller's
transaction, scoped to one tenant):

    from arbiter import entities

    r = entities.resolve(conn, tenant_id, "Postgres", type="tool", now=now)
    r.entity_id, r.created, r.possibly_same_as     # int, bool, tuple of entity ids
    entities.lookup(conn, tenant_id, "postgres")   # (entity_id, step) or None: never creates
    entities.mentions(conn, tenant_id, entry_id)   # [EntityRef(id, name, type)] an entry mentions
    entities.entries_mentioning(conn, tenant_id, entity_id, limit=50)  # active entry ids, newest first
    entities.link_entry(conn, tenant_id, entry_id, params, now=now)    # what `remember` does

Names are one namespace per tenant, but an entity exists for a user only if
an entry or active fact they see names it: `visibility.visible_sql(v)` is that
rule as SQL, `core.require(conn, v, name, path)` finds a name the caller sees,
and the reads in `core` take a `Viewer`. Pass the writer as `v=` to
`resolve`/`link_entry` (or `Linker(..., viewer)`) so resolution considers
only their entities.

Entries written by `remember_many` are linked to their extracted entities
after the answer (the idle writer's `entities` deriver, arbiter/derive.py), so a
layer reading mentions of bulk-loaded entries may call
`derive.drain(conn, now=now)` first, or accept seconds of lag.

Resolution, in order: exact name (case-insensitive) → alias → normalised
form (`names.norm`) → trigram similarity ≥ 0.85 (the name becomes an alias)
→ a new entity, returned with `possibly_same_as` for names 0.6–0.85
similar. Extraction (`extract.extract`) is deterministic: patterns and a
dictionary, no LLM. Merges and renames never delete: see `core.merge`.
"""

from arbiter.entities.core import (
    Linker,
    Resolution,
    entries_mentioning,
    lookup,
    mentions,
    resolve,
)
from arbiter.entities.link import given_in, link_entry, named_in, unlink_speaker

__all__ = [
    "Linker", "Resolution", "entries_mentioning", "given_in", "link_entry", "lookup", "mentions", "named_in", "resolve",
    "unlink_speaker",
]
