"""PostgreSQL's full text kept in step with what it indexes, in the writing transaction, before it commits.

On SQLite, FTS5 triggers index an entry as it is written. Here a trigger
cannot: a document's terms are the stems of SQLite's FTS5 tokenizer, which
only Python has (store/pg/fulltext.py). So the triggers of
p004_fulltext_upkeep.sql queue what changed in `derive_queue` ('fulltext'
an entry, 'past_text' a revision, 'fact_text' a fact made active), and
`settle`, which the writer's connection runs before every COMMIT
(`Connection.before_commit`), indexes that transaction's queue: whoever
wrote (a verb, an import, `arbiter migrate`), a committed state never holds a
text that recall cannot find. Another session's queue rows are invisible
until it commits, and it settles its own first, so sessions never take each
other's work. The triggers also note which tenants the transaction queued
(p007), so that `settle` reads each tenant's queue by its tenant.

An entry's document is what its scope's FTS5 table indexes on SQLite
(store/fts.py `_columns`): title, content, tags (the stored JSON text),
source, and the scope tokens `c<conversation>` or `u<tenant>`, plus
`a<author>` in a team's scope. A revision's adds `t<tenant>` in front, as
`entry_revisions_fts` does; a fact's are subject, predicate (underscores as
spaces), object and `s<scope> u<author>`.
"""

from __future__ import annotations

from collections import defaultdict

from arbiter.store.pg import fulltext
from arbiter.store.pg.fulltext import ENTRIES, FACTS, REVISIONS, Index

#: The queue's names for what this module keeps.
QUEUED = ("fulltext", "past_text", "fact_text")


def _scope_tokens(tenant_id: int, conversation_id: int | None, author_id: int | None, shared: bool) -> str:
    where = f"u{tenant_id}" if conversation_id is None else f"c{conversation_id}"
    return f"{where} a{author_id}" if shared else where


def _entries(conn, tenant_id: int, rows: list[tuple]) -> None:
    # Each row (`_TAKE`'s) says what the index holds of an entry (to take out) and what it is now (to put in): a
    # deleted entry has only the first, a new one only the second.
    old: dict[int, list[int]] = defaultdict(list)
    new: dict[int, dict[int, tuple]] = defaultdict(dict)
    for eid, held_scope, scope_id, title, content, tags, source, conv, author, team in sorted(rows, key=lambda r: r[0]):
        if held_scope is not None:
            old[held_scope].append(eid)
        if scope_id is not None:
            new[scope_id][eid] = (title, content, tags, source, _scope_tokens(tenant_id, conv, author, team is not None))
    for scope_id, doc_ids in sorted(old.items()):
        fulltext.remove(conn, Index(tenant_id, ENTRIES, scope_id), doc_ids)
    for scope_id, docs in sorted(new.items()):
        fulltext.add_many(conn, Index(tenant_id, ENTRIES, scope_id), list(docs.items()))


def _revisions(conn, tenant_id: int, ids: list[int]) -> None:
    fulltext.remove(conn, Index(tenant_id, REVISIONS), ids)
    docs = [
        (rid, (title, content, tags, source, f"t{tenant_id} {_scope_tokens(tenant_id, conv, None, False)}"))
        for rid, title, content, tags, source, conv in conn.execute(
            "SELECT id, title, content, tags, source, conversation_id FROM entry_revisions "
            "WHERE tenant_id = ? AND id = ANY(?::bigint[])", (tenant_id, ids)
        )
    ]
    fulltext.add_many(conn, Index(tenant_id, REVISIONS), docs)


def _facts(conn, tenant_id: int, ids: list[int]) -> None:
    docs = [
        (fid, (subject, predicate.replace("_", " "), obj, f"s{scope_id} u{author_id}"))
        for fid, subject, predicate, obj, scope_id, author_id in conn.execute(
            "SELECT id, subject, predicate, object, scope_id, author_id FROM facts "
            "WHERE tenant_id = ? AND id = ANY(?::bigint[]) AND status = 'active'", (tenant_id, ids)
        )
    ]
    index = Index(tenant_id, FACTS)
    fulltext.remove(conn, index, [fid for fid, _ in docs])  # made active once; removing first keeps it idempotent
    fulltext.add_many(conn, index, docs)


_KEEPERS = {"past_text": _revisions, "fact_text": _facts}

# A tenant's queue, taken out, and for each entry queued what the index holds of it and what it is now: one round
# trip where a SELECT, a read of the entries and a DELETE were three (a revision's or fact's row probes nothing: its
# keeper reads its own table). Each lookup is a LATERAL subquery with a LIMIT, which the planner keeps as one
# probe of the key per queued row: as plain joins, a table never analysed yet (a database filled moments ago)
# was read whole once and matched against every row, 2.3 s for a batch of 2,000.
_TAKE = (
    "WITH q AS (DELETE FROM derive_queue WHERE tenant_id = ? AND deriver IN ('fulltext', 'past_text', 'fact_text') "
    "RETURNING deriver, entry_id) "
    "SELECT q.deriver, q.entry_id, d.scope_id, e.scope_id, e.title, e.content, e.tags, e.source, e.conversation_id, "
    "e.author_id, e.team_id FROM q "
    "LEFT JOIN LATERAL (SELECT d.scope_id FROM fulltext_docs d WHERE q.deriver = 'fulltext' AND d.tenant_id = ? "
    "AND d.kind = ? AND d.doc_id = q.entry_id LIMIT 1) d ON true "
    "LEFT JOIN LATERAL (SELECT e.scope_id, e.title, e.content, e.tags, e.source, e.conversation_id, e.author_id, "
    "s.team_id FROM entries e JOIN scopes s ON s.id = e.scope_id WHERE q.deriver = 'fulltext' AND e.tenant_id = ? "
    "AND e.id = q.entry_id LIMIT 1) e ON true"
)


# The tenants the transaction queued (p007), as one more row of the first tenant's `_TAKE` (its entry_id NULL).
_NOTED = " UNION ALL SELECT current_setting('arbiter.unsettled', true)" + ", NULL" * 10


def settle(conn) -> int:
    """Index what this transaction queued (see the module's docstring); returns how many queue rows it took."""
    # The tenants it queued, as the queue's triggers noted them (p007), are read with the queue of the tenant the
    # writer said it writes for (`engine.writing_for`), else of the one it settled last: one round trip for the
    # common `remember`, where a look at the tenants and then their queues were two. Each statement names its
    # tenant, so Citus sends it to that tenant's node (where the note stays behind: the writer's word finds its
    # queue). A transaction that settles twice (`arbiter migrate`) takes each noted tenant's queue again: what was
    # queued since.
    first = conn.settled_tenant
    taken = 0
    if first is None:
        noted = conn.execute("SELECT current_setting('arbiter.unsettled', true)").fetchone()[0]
    else:
        rows = conn.execute(_TAKE + _NOTED, (first, first, ENTRIES, first)).fetchall()
        noted = next(row[0] for row in rows if row[1] is None)
        taken += _index(conn, first, [row for row in rows if row[1] is not None])
    for tenant_id in sorted({int(t) for t in (noted or "").split(",") if t} - {first}):
        taken += _index(conn, tenant_id, conn.execute(_TAKE, (tenant_id, tenant_id, ENTRIES, tenant_id)).fetchall())
        conn.settled_tenant = tenant_id
    return taken


def _index(conn, tenant_id: int, rows: list[tuple]) -> int:
    """Index a tenant's queue rows as `_TAKE` read them; how many."""
    entries: list[tuple] = []
    queued: dict[str, list[int]] = defaultdict(list)
    for deriver, entry_id, *now in rows:
        if deriver == "fulltext":
            entries.append((entry_id, *now))
        else:
            queued[deriver].append(entry_id)
    if entries:
        _entries(conn, tenant_id, entries)
    for deriver, ids in sorted(queued.items()):
        _KEEPERS[deriver](conn, tenant_id, sorted(ids))
    return len(rows)


# -- what the full-text reads name ----------------------------------------------------------------------------
# SQLite's reads name an FTS5 table (`entries_fts_<scope>`, `entry_revisions_fts`, `facts_fts`); the same call on
# PostgreSQL names an index by tenant, kind and scope. A scope never changes tenant, so the session remembers it
# (per session, not per URL: a database emptied and filled again under one URL numbers its scopes anew).
def scope_index(conn, scope_id: int) -> Index:
    """The index of a visibility scope's entries (SQLite: `fts.table(scope_id)`)."""
    tenant_id = conn.scope_tenants.get(int(scope_id))
    if tenant_id is None:
        tenant_id = conn.execute("SELECT tenant_id FROM scopes WHERE id = ?", (scope_id,)).fetchone()[0]
        conn.scope_tenants[int(scope_id)] = tenant_id
    return Index(tenant_id, ENTRIES, int(scope_id))


def table_index(conn, table: str, tenant_id: int | None) -> Index:
    """The index SQLite's FTS5 `table` stands for, for `tenant_id` (needed for the tenant-wide ones)."""
    if table.startswith("entries_fts_"):
        return scope_index(conn, int(table.removeprefix("entries_fts_")))
    if tenant_id is None:
        raise ValueError(f"{table} on PostgreSQL is one index per tenant: name the tenant")
    return Index(tenant_id, {"entry_revisions_fts": REVISIONS, "facts_fts": FACTS}[table])


def entry_document(conn, entry_id: int, scope_id: int) -> tuple | None:
    """An entry's texts as its scope's index holds them (what a snippet is cut from)."""
    tenant_id = scope_index(conn, scope_id).tenant_id
    row = conn.execute(
        "SELECT e.title, e.content, e.tags, e.source, e.conversation_id, e.author_id, s.team_id "
        "FROM entries e JOIN scopes s ON s.id = e.scope_id WHERE e.tenant_id = ? AND e.id = ?", (tenant_id, entry_id)
    ).fetchone()
    if row is None:
        return None
    title, content, tags, source, conv, author, team = row
    return (title, content, tags, source, _scope_tokens(tenant_id, conv, author, team is not None))
