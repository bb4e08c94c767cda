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
other's work.

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


def _entries(conn, ids: list[int]) -> None:
    held = conn.execute(
        "SELECT d.tenant_id, d.scope_id, d.doc_id FROM derive_queue q JOIN fulltext_docs d "
        "ON d.tenant_id = q.tenant_id AND d.kind = ? AND d.doc_id = q.entry_id "
        "WHERE q.deriver = 'fulltext' AND q.entry_id = ANY(?::bigint[])", (ENTRIES, ids)
    ).fetchall()
    old: dict[tuple[int, int], list[int]] = defaultdict(list)
    for tenant_id, scope_id, doc_id in held:
        old[tenant_id, scope_id].append(doc_id)
    for (tenant_id, scope_id), doc_ids in sorted(old.items()):
        fulltext.remove(conn, Index(tenant_id, ENTRIES, scope_id), doc_ids)
    new: dict[tuple[int, int], list] = defaultdict(list)
    for eid, tenant_id, scope_id, title, content, tags, source, conv, author, team in conn.execute(
        "SELECT e.id, e.tenant_id, e.scope_id, e.title, e.content, e.tags, e.source, e.conversation_id, e.author_id, "
        "s.team_id FROM entries e JOIN scopes s ON s.id = e.scope_id WHERE e.id = ANY(?::bigint[])", (ids,)
    ):
        scope = _scope_tokens(tenant_id, conv, author, team is not None)
        new[tenant_id, scope_id].append((eid, (title, content, tags, source, scope)))
    for (tenant_id, scope_id), docs in sorted(new.items()):
        fulltext.add_many(conn, Index(tenant_id, ENTRIES, scope_id), docs)


def _revisions(conn, ids: list[int]) -> None:
    tenants = conn.execute(
        "SELECT DISTINCT tenant_id FROM derive_queue WHERE deriver = 'past_text' AND entry_id = ANY(?::bigint[])",
        (ids,),
    ).fetchall()
    for (tenant_id,) in tenants:
        fulltext.remove(conn, Index(tenant_id, REVISIONS), ids)
    docs: dict[int, list] = defaultdict(list)
    for rid, tenant_id, title, content, tags, source, conv in conn.execute(
        "SELECT id, tenant_id, title, content, tags, source, conversation_id FROM entry_revisions "
        "WHERE id = ANY(?::bigint[])", (ids,)
    ):
        scope = f"t{tenant_id} {_scope_tokens(tenant_id, conv, None, False)}"
        docs[tenant_id].append((rid, (title, content, tags, source, scope)))
    for tenant_id, rows in sorted(docs.items()):
        fulltext.add_many(conn, Index(tenant_id, REVISIONS), rows)


def _facts(conn, ids: list[int]) -> None:
    docs: dict[int, list] = defaultdict(list)
    for fid, tenant_id, subject, predicate, obj, scope_id, author_id in conn.execute(
        "SELECT id, tenant_id, subject, predicate, object, scope_id, author_id FROM facts "
        "WHERE id = ANY(?::bigint[]) AND status = 'active'", (ids,)
    ):
        docs[tenant_id].append((fid, (subject, predicate.replace("_", " "), obj, f"s{scope_id} u{author_id}")))
    for tenant_id, rows in sorted(docs.items()):
        index = Index(tenant_id, FACTS)
        fulltext.remove(conn, index, [fid for fid, _ in rows])  # made active once; removing first keeps it idempotent
        fulltext.add_many(conn, index, rows)


_KEEPERS = {"fulltext": _entries, "past_text": _revisions, "fact_text": _facts}


def settle(conn) -> int:
    """Index what this transaction queued (see the module's docstring); returns how many queue rows it took."""
    queued: dict[str, list[int]] = defaultdict(list)
    for deriver, entry_id in conn.execute(
        "SELECT deriver, entry_id FROM derive_queue WHERE deriver IN ('fulltext', 'past_text', 'fact_text') "
        "ORDER BY deriver, entry_id"
    ):
        queued[deriver].append(entry_id)
    for deriver, ids in queued.items():
        _KEEPERS[deriver](conn, ids)
        conn.execute("DELETE FROM derive_queue WHERE deriver = ? AND entry_id = ANY(?::bigint[])", (deriver, ids))
    return sum(map(len, queued.values()))


# -- what the full-text reads name ----------------------------------------------------------------------------
# SQLite's reads name an FTS5 table (`entries_fts_<scope>`, `entry_revisions_fts`, `facts_fts`); the same call on
# PostgreSQL names an index by tenant, kind and scope. A scope never changes tenant, so the session remembers it
# (per session, not per URL: a database emptied and filled again under one URL numbers its scopes anew).
FREQUENCIES = fulltext.Frequencies()


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


def entry_document(conn, entry_id: int) -> tuple | None:
    """An entry's texts as its scope's index holds them (what a snippet is cut from)."""
    row = conn.execute(
        "SELECT e.tenant_id, e.title, e.content, e.tags, e.source, e.conversation_id, e.author_id, s.team_id "
        "FROM entries e JOIN scopes s ON s.id = e.scope_id WHERE e.id = ?", (entry_id,)
    ).fetchone()
    if row is None:
        return None
    tenant_id, title, content, tags, source, conv, author, team = row
    return (title, content, tags, source, _scope_tokens(tenant_id, conv, author, team is not None))
