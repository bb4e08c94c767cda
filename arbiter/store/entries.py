"""Entries: write, read, retire and correct typed memory entries.

Validity is half-open, [valid_from, valid_to): a row with valid_to = T is
visible to `as_of` reads strictly before T. Default reads see rows not yet
retired (valid_to IS NULL).
"""

from __future__ import annotations

import hashlib

import apsw
import msgspec

from arbiter._time import format_time, parse_time
from arbiter.errors import NotFound
from arbiter.model import Entry, ListParams, RememberParams, UpdateParams
from arbiter.store import relations

ENTRY_COLUMNS = (
    "e.id, e.type, e.title, e.content, e.tags, e.source, e.conversation_id, e.parent_id, "
    "e.content_hash, e.recorded_at, e.valid_from, e.valid_to, "
    "(SELECT group_concat(r.source_id) FROM relations r WHERE r.target_id = e.id AND r.relation = 'supersedes')"
)

_tags_decoder = msgspec.json.Decoder(list[str])


def visible(as_of: int | None, alias: str = "e") -> tuple[str, tuple]:
    """The SQL condition (and its bindings) for rows visible now or at `as_of`."""
    if as_of is None:
        return f"{alias}.valid_to IS NULL", ()
    return f"{alias}.valid_from <= ? AND ({alias}.valid_to IS NULL OR {alias}.valid_to > ?)", (as_of, as_of)


def entry_from_row(row: tuple) -> Entry:
    (eid, etype, title, content, tags, source, conv, parent, chash, recorded, vfrom, vto, sup) = row
    return Entry(
        id=eid,
        type=etype,
        title=title,
        content=content,
        tags=_tags_decoder.decode(tags),
        source=source,
        conversation_id=conv,
        parent_id=parent,
        content_hash=chash.hex(),
        recorded_at=format_time(recorded),
        valid_from=format_time(vfrom),
        valid_to=format_time(vto),
        superseded_by=[int(x) for x in sup.split(",")] if sup else [],
    )


def content_hash(content: str) -> bytes:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest()


def _dedupe(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))


def _require_conversation(conn: apsw.Connection, tenant_id: int, conv_id: int, path: str) -> None:
    if not conn.execute("SELECT 1 FROM conversations WHERE id = ? AND tenant_id = ?", (conv_id, tenant_id)).fetchone():
        raise NotFound(f"conversation {conv_id} not found", path=path)


_INSERT_COLUMNS = (
    "id, tenant_id, type, title, content, tags, source, conversation_id, parent_id, content_hash, recorded_at, valid_from"
)
_ROW = "(" + ",".join("?" * 12) + ")"
# Rows per multi-row INSERT in remember_many. Measured on 30K entries of ~550
# bytes: 1 row per statement 6K entries/s; 500 rows 11-13K/s for +6 MB peak
# RSS; 2000 rows no faster for +12 MB (the statement and FTS5's pending terms).
_ROWS_PER_INSERT = 500


def _row(conn: apsw.Connection, tenant_id: int, p: RememberParams, *, now: int, path: str) -> list:
    """Check an entry's references (NotFound names the field) and build its row; the id (first) is left to SQLite."""
    valid_from = now if p.valid_from is None else parse_time(p.valid_from, path=f"{path}valid_from")
    if p.conversation_id is not None:
        _require_conversation(conn, tenant_id, p.conversation_id, f"{path}conversation_id")
    if p.parent_id is not None:
        relations._require_entries(conn, tenant_id, [p.parent_id], f"{path}parent_id")
    for i, old in enumerate(p.supersedes_ids):
        relations._require_entries(conn, tenant_id, [old], f"{path}supersedes_ids[{i}]")
    tags = msgspec.json.encode(_dedupe(p.tags)).decode()
    return [None, tenant_id, p.type, p.title, p.content, tags, p.source, p.conversation_id, p.parent_id,
            content_hash(p.content), now, valid_from]


def _supersede(conn: apsw.Connection, tenant_id: int, new_id: int, p: RememberParams, row: list, *, now: int) -> None:
    # `_row` checked every target, and a new entry has no edges yet: insert directly.
    for old in dict.fromkeys(p.supersedes_ids):
        relations.insert(conn, tenant_id, new_id, "supersedes", old, now=now, at=row[-1])


def remember(conn: apsw.Connection, tenant_id: int, p: RememberParams, *, now: int, path: str = "") -> int:
    """Insert one entry (and its `supersedes` edges); the caller owns the transaction."""
    row = _row(conn, tenant_id, p, now=now, path=path)
    conn.execute(f"INSERT INTO entries({_INSERT_COLUMNS}) VALUES {_ROW}", row)
    new_id = conn.last_insert_rowid()
    _supersede(conn, tenant_id, new_id, p, row, now=now)
    return new_id


def remember_many(conn: apsw.Connection, tenant_id: int, items: list[RememberParams], *, now: int) -> list[int]:
    """Insert many entries (and their `supersedes` edges); ids in order. The caller owns the transaction.

    Every entry is checked before any is written. Rows go in as one multi-row
    INSERT per 500, not one statement each: a statement that fires the FTS
    trigger makes FTS5 flush its pending terms (the statement savepoint), so
    one statement per entry writes one tiny index segment per entry. Measured:
    twice the entries per second.
    """
    rows = [_row(conn, tenant_id, p, now=now, path=f"entries[{i}].") for i, p in enumerate(items)]
    ids: list[int] = []
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start:start + _ROWS_PER_INSERT]
        conn.execute(
            f"INSERT INTO entries({_INSERT_COLUMNS}) VALUES " + ",".join([_ROW] * len(chunk)),
            [value for row in chunk for value in row],
        )
        # AUTOINCREMENT numbers the VALUES rows in order, and the one writer
        # means nothing interleaves: the chunk's ids end at the last one.
        last = conn.last_insert_rowid()
        ids.extend(range(last - len(chunk) + 1, last + 1))
    for new_id, p, row in zip(ids, items, rows):
        _supersede(conn, tenant_id, new_id, p, row, now=now)
    return ids


def get(conn: apsw.Connection, tenant_id: int, entry_id: int, *, as_of: int | None = None) -> Entry:
    """One entry visible now (or at `as_of`), else NotFound."""
    cond, binds = visible(as_of)
    row = conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.id = ? AND e.tenant_id = ? AND {cond}",
        (entry_id, tenant_id, *binds),
    ).fetchone()
    if row is None:
        raise NotFound(f"entry {entry_id} not found" + (" at that time" if as_of is not None else ""))
    return entry_from_row(row)


def get_any(conn: apsw.Connection, tenant_id: int, entry_ids: list[int]) -> list[Entry]:
    """Entries by id whatever their state, in the order given; ids not in the tenant are skipped."""
    if not entry_ids:
        return []
    marks = ",".join("?" * len(entry_ids))
    rows = conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE e.tenant_id = ? AND e.id IN ({marks})", (tenant_id, *entry_ids)
    )
    by_id = {e.id: e for e in map(entry_from_row, rows)}
    return [by_id[i] for i in entry_ids if i in by_id]


def list_entries(conn: apsw.Connection, tenant_id: int, p: ListParams) -> list[Entry]:
    """Browse newest first; every filter is a hard filter."""
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    cond, binds = visible(as_of)
    where = ["e.tenant_id = ?", cond]
    args: list = [tenant_id, *binds]
    if p.types:
        where.append(f"e.type IN ({','.join('?' * len(p.types))})")
        args.extend(p.types)
    if p.tag is not None:
        where.append("EXISTS (SELECT 1 FROM json_each(e.tags) WHERE value = ?)")
        args.append(p.tag)
    if p.conversation_id is not None:
        where.append("e.conversation_id = ?")
        args.append(p.conversation_id)
    if p.before_id is not None:
        where.append("e.id < ?")
        args.append(p.before_id)
    sql = f"SELECT {ENTRY_COLUMNS} FROM entries e WHERE {' AND '.join(where)} ORDER BY e.id DESC LIMIT ?"
    return [entry_from_row(r) for r in conn.execute(sql, (*args, p.limit))]


def update(conn: apsw.Connection, tenant_id: int, p: UpdateParams) -> Entry:
    """Correct an active entry in place (typos, tags); a change in the world is a `supersedes`."""
    current = get(conn, tenant_id, p.id)
    content = current.content if p.content is None else p.content
    conn.execute(
        "UPDATE entries SET type = ?, title = ?, content = ?, tags = ?, source = ?, content_hash = ? "
        "WHERE id = ? AND tenant_id = ? AND valid_to IS NULL",
        (
            p.type or current.type,
            current.title if p.title is None else p.title,
            content,
            msgspec.json.encode(_dedupe(current.tags if p.tags is None else p.tags)).decode(),
            current.source if p.source is None else (p.source or None),
            content_hash(content),
            p.id,
            tenant_id,
        ),
    )
    return get(conn, tenant_id, p.id)


def forget(conn: apsw.Connection, tenant_id: int, entry_id: int, *, now: int) -> bool:
    """Retire an entry; False (and no change) if it was already retired."""
    conn.execute(
        "UPDATE entries SET valid_to = max(valid_from, ?) WHERE id = ? AND tenant_id = ? AND valid_to IS NULL",
        (now, entry_id, tenant_id),
    )
    if conn.changes():
        return True
    relations._require_entries(conn, tenant_id, [entry_id], "id")
    return False


def purge(conn: apsw.Connection, tenant_id: int, entry_id: int) -> None:
    """Hard delete: the row, its relations (cascade) and its index rows (trigger)."""
    conn.execute("DELETE FROM entries WHERE id = ? AND tenant_id = ?", (entry_id, tenant_id))
    if conn.changes() == 0:
        raise NotFound(f"entry {entry_id} not found")


def history(conn: apsw.Connection, tenant_id: int, entry_id: int) -> tuple[list[Entry], list]:
    """The supersession chain through an entry, both ways, oldest first."""
    relations._require_entries(conn, tenant_id, [entry_id], "id")
    rows = conn.execute(
        """
        WITH RECURSIVE chain(id) AS (
            SELECT ?
            UNION
            SELECT CASE WHEN r.source_id = chain.id THEN r.target_id ELSE r.source_id END
            FROM relations r JOIN chain ON r.source_id = chain.id OR r.target_id = chain.id
            WHERE r.relation = 'supersedes' AND r.tenant_id = ?
        )
        SELECT id FROM chain LIMIT 1000
        """,
        (entry_id, tenant_id),
    )
    ids = [r[0] for r in rows]
    entries = sorted(get_any(conn, tenant_id, ids), key=lambda e: (e.valid_from, e.id))
    marks = ",".join("?" * len(ids))
    edges = conn.execute(
        f"SELECT {relations.RELATION_COLUMNS} FROM relations WHERE relation = 'supersedes' "
        f"AND source_id IN ({marks}) AND target_id IN ({marks}) ORDER BY id",
        (*ids, *ids),
    )
    return entries, [relations.relation_from_row(r) for r in edges]


def type_totals(conn: apsw.Connection, tenant_id: int) -> list[tuple[str, int, int, int | None]]:
    """(type, active, retired, last recorded_at) per entry type in use (a covering-index scan)."""
    return conn.execute(
        "SELECT type, count(*) FILTER (WHERE valid_to IS NULL), count(*) FILTER (WHERE valid_to IS NOT NULL), "
        "max(recorded_at) FROM entries WHERE tenant_id = ? GROUP BY type ORDER BY type",
        (tenant_id,),
    ).fetchall()


def recent(conn: apsw.Connection, tenant_id: int, *, limit: int) -> list[tuple[int, str, str, int]]:
    """(id, type, title, recorded_at) of the newest active entries."""
    return conn.execute(
        "SELECT id, type, title, recorded_at FROM entries WHERE tenant_id = ? AND valid_to IS NULL "
        "ORDER BY id DESC LIMIT ?",
        (tenant_id, limit),
    ).fetchall()
