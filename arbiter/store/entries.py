"""Entries: write, read, retire, restore and correct typed memory entries, on two time axes.

Valid time: validity is half-open, [valid_from, valid_to): a row with
valid_to = T is visible to `as_of` reads strictly before T. Default reads see
rows not yet retired (valid_to IS NULL). valid_from is never after the
instant the entry is written, so a default read is the same as `as_of=now`.

Record time: the `entries` row is the current state; `revised_at` is when it
was recorded. Every change stamps `revised_at` (`_STAMP`), and a trigger
(m007) files the state it replaces in `entry_revisions` with its record
window. A `known_at=T` read takes each entry's state whose window holds T
(`states_at`); both axes combine.
"""

from __future__ import annotations

import hashlib

import apsw
import msgspec

from arbiter import _time
from arbiter.duplicates import fingerprint
from arbiter._time import format_time, parse_time
from arbiter.errors import Conflict, Forbidden, InvalidParams, NotFound
from arbiter.model import Entry, ListParams, RememberParams, Revision, UpdateParams
from arbiter.store import engine, relations, tenants, text, users
from arbiter.store.deferred import deferred
from arbiter.store.users import Viewer

#: Who wrote an entry and the team it is shared with (null: private), by name.
_PEOPLE = (
    "(SELECT name FROM users WHERE id = e.author_id), "
    "(SELECT t.name FROM scopes s JOIN teams t ON t.id = s.team_id WHERE s.id = e.scope_id)"
)


def columns(v: Viewer, known_at: int | None = None) -> str:
    """The select list `entry_from_row` reads, for rows named `e` that `v` sees.

    `superseded_by` names only superseding entries `v` also sees: a teammate
    learns that a shared entry retired, never the id of the private entry that
    retired it. With `known_at`, only relations recorded by then count.
    """
    return (
        "e.id, e.type, e.title, e.content, e.tags, e.source, e.conversation_id, e.parent_id, "
        f"e.recorded_at, e.valid_from, e.valid_to, e.revised_at, {superseded_by(v, known_at)}, e.speaker, {_PEOPLE}"
    )


def superseded_by(v: Viewer, known_at: int | None = None) -> str:
    """SQL: the ids (comma-separated) of the entries `v` sees that supersede entry `e` (recorded by `known_at`)."""
    by = f" AND r.created_at <= {int(known_at)}" if known_at is not None else ""
    return (
        "(SELECT group_concat(r.source_id) FROM relations r JOIN entries s ON s.tenant_id = r.tenant_id "
        "AND s.id = r.source_id "
        f"WHERE r.target_id = e.id AND r.relation = 'supersedes' AND {v.sees('s')}{by})"
    )


#: SQL setting `revised_at` to a change's record instant (bind: now). Strictly
#: after the state it replaces, so every record window is non-empty even if
#: the clock steps back or two changes share a microsecond.
_STAMP = "revised_at = max(?, coalesce(revised_at, recorded_at) + 1)"

_tags_decoder = msgspec.json.Decoder(list[str])


def _state_arms(t: int, tenant_id: int) -> tuple[str, str]:
    """The two halves of `states_at(t)` in one tenant, each a FROM-clause text naming `e`: current rows, past
    states."""
    return (
        f"""(
        SELECT id, tenant_id, type, title, content, tags, source, conversation_id, parent_id,
               recorded_at, valid_from, valid_to, revised_at, speaker, author_id, scope_id
        FROM entries WHERE tenant_id = {tenant_id} AND coalesce(revised_at, recorded_at) <= {t}
    ) e""",
        f"""(
        SELECT r.entry_id AS id, r.tenant_id, r.type, r.title, r.content, r.tags, r.source, r.conversation_id,
               x.parent_id, x.recorded_at, r.valid_from, r.valid_to,
               nullif(r.recorded_from, x.recorded_at) AS revised_at, r.speaker, x.author_id, x.scope_id
        FROM entry_revisions r JOIN entries x ON x.tenant_id = r.tenant_id AND x.id = r.entry_id
        WHERE r.tenant_id = {tenant_id} AND r.recorded_from <= {t} AND r.recorded_to > {t}
    ) e""",
    )


def states_at(tenant_id: int, known_at: int | None) -> str:
    """FROM-clause text naming `e`: the tenant's entries as the store held them at `known_at` (None: now, the
    entries table).

    An entry's current row counts if it was recorded at or before T; else the
    revision whose record window holds T; an entry first written after T has
    neither. `known_at` is an int we parsed, so it is written into the SQL.
    Author and scope are always the current ones: visibility is today's.
    """
    if known_at is None:
        return "entries e"
    current, past = _state_arms(int(known_at), int(tenant_id))
    return f"(SELECT * FROM {current} UNION ALL SELECT * FROM {past}) e"


def visible(as_of: int | None, alias: str = "e") -> tuple[str, tuple]:
    """The SQL condition (and its bindings) for rows visible now or at `as_of`."""
    if as_of is None:
        return f"{alias}.valid_to IS NULL", ()
    return f"{alias}.valid_from <= ? AND ({alias}.valid_to IS NULL OR {alias}.valid_to > ?)", (as_of, as_of)


def entry_from_row(row: tuple) -> Entry:
    (eid, etype, title, content, tags, source, conv, parent, recorded, vfrom, vto, revised, sup, speaker,
     author, team) = row
    return Entry(
        id=eid,
        type=etype,
        title=title,
        content=content,
        tags=_tags_decoder.decode(tags),
        source=source,
        conversation_id=conv,
        parent_id=parent,
        # Computed when read, not stored (m021): the column was 0.06x of the text. sha256 of 550 bytes
        # is ~1.9 us in the daemon, which uses Python's builtin digest, not OpenSSL's (arbiter/_openssl.py).
        content_hash=content_hash(content).hex(),
        recorded_at=format_time(recorded),
        valid_from=format_time(vfrom),
        valid_to=format_time(vto),
        superseded_by=[int(x) for x in sup.split(",")] if sup else [],
        revised_at=format_time(revised),
        speaker=speaker,
        author=author,
        team=team,
    )


def content_hash(content: str) -> bytes:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).digest()


def _dedupe(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))


def _insert_columns(conn: apsw.Connection) -> str:
    return (f"tenant_id, author_id, scope_id, type, title, {text.column(conn)}, tags, source, conversation_id, "
            "parent_id, speaker, recorded_at, valid_from")


_SCOPE = 3  # scope_id's place in a `checked_row` (its first value, the id, is left to SQLite)
# Rows per multi-row INSERT in remember_many. Measured on 30K entries of ~550
# bytes: 1 row per statement 6K entries/s; 500 rows 11-13K/s for +6 MB peak
# RSS; 2000 rows no faster for +12 MB (the statement and FTS5's pending terms).
# 250 rows: SQLite's working memory during a 2000-entry batch 5.4 -> 4.2 MB,
# CPU time per entry within the noise of 500 (24K entries, 5 runs each, interleaved).
_ROWS_PER_INSERT = 250


def checked_row(conn: apsw.Connection, v: Viewer, p: RememberParams, *, now: int, path: str = "") -> list:
    """Check an entry's references (NotFound names the field) and build its row; the id (first) is left to SQLite.

    The author is the caller; the scope their private one, the team's they
    name (`team`), or a reply's thread's (a reply is seen by whoever sees
    its parent).
    """
    tenant_id = v.tenant_id
    valid_from = _time.valid_from(p.valid_from, now=now, path=f"{path}valid_from",
                                  what="an entry", plan="write a plan for later in its content")
    if p.conversation_id is not None:
        tenants.require_conversation(conn, v, p.conversation_id, path=f"{path}conversation_id")
    scope = v.private_scope
    if p.team is not None:
        scope = users.member_scope(conn, v, p.team, path=f"{path}team")
    if p.parent_id is not None:
        relations.require_entries(conn, v, [p.parent_id], f"{path}parent_id")
        thread = conn.execute("SELECT scope_id FROM entries WHERE tenant_id = ? AND id = ?",
                              (tenant_id, p.parent_id)).fetchone()[0]
        if p.team is not None and scope != thread:
            raise InvalidParams(
                f"a reply is seen by whoever sees its thread: leave out team, or share the thread's root with "
                f"team {p.team}",
                path=f"{path}team",
            )
        scope = thread
    for i, old in enumerate(p.supersedes_ids):  # missing says so before retired does
        relations.require_entries(conn, v, [old], f"{path}supersedes_ids[{i}]")
    for i, old in enumerate(p.supersedes_ids):
        relations.require_active(conn, v, old, f"{path}supersedes_ids[{i}]", "target")
        relations.require_own(conn, v, old, "supersede it", path=f"{path}supersedes_ids[{i}]")
    tags = msgspec.json.encode(_dedupe(p.tags)).decode()
    return [None, tenant_id, v.user_id, scope, p.type, p.title, text.stored(conn, p.content), tags, p.source, p.conversation_id,
            p.parent_id, p.speaker, now, valid_from]


def _supersede(
    conn: apsw.Connection, v: Viewer, new_id: int, p: RememberParams, row: list, *, now: int, path: str = ""
) -> None:
    # A new entry has no edges yet, so no cycle; but an earlier entry of the
    # same batch may have retired a target since `checked_row` checked it.
    for i, old in enumerate(p.supersedes_ids):
        if old in p.supersedes_ids[:i]:
            continue
        relations.require_active(conn, v, old, f"{path}supersedes_ids[{i}]", "target")
        relations.insert(conn, v.tenant_id, new_id, "supersedes", old, now=now, at=row[-1])


def remember(
    conn: apsw.Connection, v: Viewer, p: RememberParams, *, now: int, path: str = "", row: list | None = None
) -> int:
    """Insert one entry by `v`'s user (and its `supersedes` edges); the caller owns the transaction.

    `row`: `checked_row`'s for `p`, if the caller built it already (its references checked, its text packed).
    """
    row = row or checked_row(conn, v, p, now=now, path=path)
    insert = f"INSERT INTO entries({_insert_columns(conn)}) VALUES ({','.join('?' * (len(row) - 1))}) RETURNING id"
    if engine.writes_in_with(conn):  # the fingerprint in the same statement: a round trip is ~5% of a remember
        new_id = conn.execute(
            f"WITH e AS ({insert}), k AS (INSERT INTO entry_sketches(tenant_id, key, entry_id) "
            "SELECT ?, ?, e.id FROM e ON CONFLICT DO NOTHING) SELECT id FROM e",
            [*row[1:], v.tenant_id, fingerprint(p.content)],
        ).fetchall()[0][0]
    else:
        new_id = conn.execute(insert, row[1:]).fetchall()[0][0]
        _fingerprints(conn, v.tenant_id, [new_id], [fingerprint(p.content)])
    _supersede(conn, v, new_id, p, row, now=now, path=path)
    return new_id


def written(v: Viewer, entry_id: int, p: RememberParams, *, now: int) -> Entry | None:
    """The entry `remember` just wrote as `p` by `v`, as `get` reads it, built without reading it back.

    Nothing supersedes a new entry yet, it is not retired and has no revision.
    None for a reply or a team's entry: `get` looks up its team's name. Reading
    the row back cost `remember` ~0.1 ms (decompressing its text, the people
    and supersession subqueries).
    """
    if p.team is not None or p.parent_id is not None:
        return None
    valid_from = now if p.valid_from is None else parse_time(p.valid_from, path="valid_from")
    return Entry(
        id=entry_id, type=p.type, title=p.title, content=p.content, tags=_dedupe(p.tags), source=p.source,
        conversation_id=p.conversation_id, parent_id=None, content_hash=content_hash(p.content).hex(),
        recorded_at=format_time(now), valid_from=format_time(valid_from), valid_to=None, speaker=p.speaker,
        author=v.user_name,
    )


def remember_many(conn: apsw.Connection, v: Viewer, items: list[RememberParams], *, now: int,
                  same: list[int | None] | None = None, keys: list[int] | None = None) -> list[int]:
    """Insert many entries (and their `supersedes` edges); ids in the order given. The caller owns the transaction.

    `same`: `duplicates.identical`'s answer for `items`; an item it matched is checked but
    not written, and its id is the entry it repeats. `keys`: the items'
    fingerprints, if the caller has them (hashing a text costs what the
    rest of its write does). Every entry is checked
    before any is written. Rows go in as multi-row INSERTs (`insert_rows`).
    Nothing in the batch updates an entry it inserted (`supersedes` names
    entries that existed before it, and runs after the block).
    """
    same = same or [None] * len(items)
    keys = keys or [fingerprint(p.content) for p in items]
    with text.packing():
        rows = [checked_row(conn, v, p, now=now, path=f"entries[{i}].") for i, p in enumerate(items)]
        fresh = [i for i, found in enumerate(same) if found is None]
        new_ids = dict(zip(fresh, _insert_many(conn, v, [rows[i] for i in fresh], [keys[i] for i in fresh])))
    for i in fresh:
        if items[i].supersedes_ids:
            _supersede(conn, v, new_ids[i], items[i], rows[i], now=now, path=f"entries[{i}].")
    return [new_ids[i] if found is None else (new_ids[-found - 1] if found < 0 else found)
            for i, found in enumerate(same)]


def _insert_many(conn: apsw.Connection, v: Viewer, rows: list[list], keys: list[int]) -> list[int]:
    return insert_rows(conn, _insert_columns(conn), [row[1:] for row in rows], scopes={row[_SCOPE] for row in rows},
                       tenant_id=v.tenant_id, keys=keys)


def _fingerprints(conn: apsw.Connection, tenant_id: int, ids: list[int], keys: list[int]) -> None:
    """The new entries' duplicate fingerprints, written with them: the one key of theirs not a deriver's
    (arbiter/derive.py), since a batch's duplicate check must find the entries written just before it."""
    conn.executemany("INSERT INTO entry_sketches(tenant_id, key, entry_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                     list(zip([tenant_id] * len(ids), keys, ids)))


def insert_rows(conn: apsw.Connection, columns: str, rows: list[tuple | list], *, scopes: set[int],
                tenant_id: int, keys: list[int]) -> list[int]:
    """Insert new entries' rows of `columns` (a batch, an import) and their fingerprints (`keys`: each row's
    `duplicates.fingerprint`); their ids in order. The caller owns the transaction.

    The one multi-row INSERT of entries: one statement per `_ROWS_PER_INSERT` rows, inside `deferred` for
    `scopes` (every scope a row names), so their indexes and tag graph are written set-based after them.
    Nothing else in the block may touch the rows it inserts.
    """
    ids: list[int] = []
    if engine.is_postgresql(conn):
        return _insert_rows_numbered(conn, columns, rows, tenant_id=tenant_id, keys=keys)
    row = "(" + ",".join("?" * (columns.count(",") + 1)) + ")"
    with deferred(conn, scopes):
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start:start + _ROWS_PER_INSERT]
            conn.execute(
                f"INSERT INTO entries({columns}) VALUES " + ",".join([row] * len(chunk)),
                [value for r in chunk for value in r],
            )
            # AUTOINCREMENT numbers the VALUES rows in order, and the one writer
            # means nothing interleaves: the chunk's ids end at the last one.
            last = conn.last_insert_rowid()
            ids.extend(range(last - len(chunk) + 1, last + 1))
    _fingerprints(conn, tenant_id, ids, keys)
    return ids


def _insert_rows_numbered(conn: apsw.Connection, columns: str, rows: list[tuple | list], *, tenant_id: int,
                          keys: list[int]) -> list[int]:
    """`insert_rows` where other writers may interleave (PostgreSQL): ids are drawn first, then given.

    The rows go as one JSON array, typed by the table's own row type, in one statement: a multi-row VALUES of
    2,000 entries is 28,000 parameters that psycopg parses and adapts one by one (a fifth of a batch's time in
    the client), and its triggers then ran once per 250 rows instead of once.
    """
    ids = [r[0] for r in conn.execute(
        "SELECT nextval(pg_get_serial_sequence('entries', 'id')) FROM generate_series(1, ?)", (len(rows),)
    )]
    names = ("id", *(c.strip() for c in columns.split(",")))
    doc = msgspec.json.encode([dict(zip(names, (i, *r))) for i, r in zip(ids, rows)]).decode()
    conn.execute(f"INSERT INTO entries(id, {columns}) SELECT {', '.join(names)} "
                 "FROM json_populate_recordset(NULL::entries, ?::json)", (doc,))
    _fingerprints(conn, tenant_id, ids, keys)
    return ids


def get(
    conn: apsw.Connection, v: Viewer, entry_id: int, *, as_of: int | None = None, known_at: int | None = None
) -> Entry:
    """One entry visible now (or at `as_of`), as recorded now (or at `known_at`); else NotFound saying why."""
    cond, binds = visible(as_of)
    row = conn.execute(
        f"SELECT {columns(v, known_at)} FROM {states_at(v.tenant_id, known_at)} WHERE e.id = ? AND {v.sees()} "
        f"AND {cond}",
        (entry_id, *binds),
    ).fetchone()
    if row is None:
        raise _not_visible(conn, v, entry_id, as_of, known_at)
    return entry_from_row(row)


def _not_visible(conn: apsw.Connection, v: Viewer, entry_id: int, as_of: int | None, known_at: int | None):
    """The NotFound for an entry a read did not see: missing (or not the caller's to see), or retired, saying since when."""
    row = conn.execute(
        f"SELECT {columns(v, known_at)} FROM {states_at(v.tenant_id, known_at)} WHERE e.id = ? "
        f"AND {v.sees()}", (entry_id,)
    ).fetchone()
    if row is None:
        return relations.missing(entry_id, None, known_at=known_at)
    e = entry_from_row(row)
    by = f" by #{', #'.join(map(str, e.superseded_by))}" if e.superseded_by else ""
    if as_of is None:
        # In words, not `--as-of` nor `as_of`: the CLI, the protocol and MCP each spell the argument their own way.
        since = f"superseded{by} at {e.valid_to}" if by else f"since {e.valid_to}"
        return NotFound(f"entry {entry_id} is retired ({since}); read it as of an earlier instant")
    window = f"valid from {e.valid_from}" + (f" to {e.valid_to}" if e.valid_to else "")
    return NotFound(f"entry {entry_id} not found at {format_time(as_of)} (it is {window})")


def get_any(conn: apsw.Connection, v: Viewer, entry_ids: list[int], *, known_at: int | None = None) -> list[Entry]:
    """Entries by id whatever their validity, in the order given; ids `v` cannot see (or not yet written at `known_at`) are skipped."""
    if not entry_ids:
        return []
    marks = ",".join("?" * len(entry_ids))
    rows = conn.execute(
        f"SELECT {columns(v, known_at)} FROM {states_at(v.tenant_id, known_at)} WHERE {v.sees()} AND e.id IN ({marks})",
        entry_ids,
    )
    by_id = {e.id: e for e in map(entry_from_row, rows)}
    return [by_id[i] for i in entry_ids if i in by_id]


def list_entries(conn: apsw.Connection, v: Viewer, p: ListParams) -> list[Entry]:
    """Browse newest first; every filter is a hard filter."""
    as_of = None if p.as_of is None else parse_time(p.as_of, path="as_of")
    known_at = None if p.known_at is None else parse_time(p.known_at, path="known_at")
    cond, binds = visible(as_of)
    where = [v.sees(), cond]
    args: list = [*binds]
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
    cond = " AND ".join(where)
    if known_at is None:
        sql = f"SELECT {columns(v)} FROM entries e WHERE {cond} ORDER BY e.id DESC LIMIT ?"
        return [entry_from_row(r) for r in conn.execute(sql, (*args, p.limit))]
    # Newest first with a limit, per half: the current half walks the tenant's
    # id index and stops at `limit` (over the union, SQLite would build every
    # state of the tenant, with its relations, before sorting: 6x slower at 20K).
    ids = sorted(
        {r[0] for half in _state_arms(known_at, int(v.tenant_id)) for r in conn.execute(
            f"SELECT e.id FROM {half} WHERE {cond} ORDER BY e.id DESC LIMIT ?", (*args, p.limit)
        )},
        reverse=True,
    )[:p.limit]
    return get_any(conn, v, ids, known_at=known_at)


def own(conn: apsw.Connection, v: Viewer, ids: list[int]) -> list[int]:
    """Those of `ids` that `v`'s user wrote, in their order: the only entries `v` may change or retire."""
    if v.everyone or not ids:
        return list(ids)
    mine = {r[0] for r in conn.execute(
        f"SELECT id FROM entries WHERE tenant_id = ? AND author_id = ? AND id IN ({','.join('?' * len(ids))})",
        (v.tenant_id, v.user_id, *ids),
    )}
    return [i for i in ids if i in mine]


def require_author(conn: apsw.Connection, v: Viewer, entry_id: int, verb: str) -> None:
    """Forbidden unless `v`'s user wrote the entry (NotFound if they cannot see it)."""
    row = conn.execute(f"SELECT e.author_id FROM entries e WHERE e.id = ? AND {v.sees()}", (entry_id,)).fetchone()
    if row is None:
        raise relations.missing(entry_id, "id")
    if row[0] != v.user_id and not v.everyone:
        author = users.names(conn, [row[0]]).get(row[0], "another user")
        hint = {
            "update": "reply to it instead",
            "purge": "only its author can delete it",
            "forget": "only its author can retire it; reply to it instead",
            "restore": "only its author can restore it",
            "share": "only its author can share it",
        }[verb]
        raise Forbidden(f"entry {entry_id} is {author}'s, not yours to {verb}: {hint}", path="id")


def correctable(conn: apsw.Connection, v: Viewer, entry_id: int) -> Entry:
    """The active entry `update` would correct; NotFound if missing, or retired saying what to correct instead.

    (`get`'s NotFound for a retired entry points at as_of, which reads it, not corrects it.)
    """
    if (found := get_any(conn, v, [entry_id])) and (retired := found[0]).valid_to is not None:
        by = ", #".join(map(str, retired.superseded_by))
        why = (f"superseded by #{by}: correct the entry that replaced it" if by
               else "only an active entry is corrected: restore it first if retiring it was the mistake")
        raise NotFound(f"entry {entry_id} is retired ({why})")
    return get(conn, v, entry_id)


def update(conn: apsw.Connection, v: Viewer, p: UpdateParams, *, now: int) -> Entry:
    """Correct an active entry in place (typos, tags); a change in the world is a `supersedes`.

    The id stays; the state it replaces is kept on the record-time axis. An
    update that changes nothing records nothing.
    """
    current = correctable(conn, v, p.id)
    require_author(conn, v, p.id, "update")
    content = current.content if p.content is None else p.content
    new = (
        p.type or current.type,
        current.title if p.title is None else p.title,
        content,
        _dedupe(current.tags if p.tags is None else p.tags),
        current.source if p.source is None else (p.source or None),
        current.speaker if p.speaker is None else (p.speaker or None),
    )
    if new == (current.type, current.title, current.content, current.tags, current.source, current.speaker):
        return current
    etype, title, _, tags, source, speaker = new
    conn.execute(
        f"UPDATE entries SET type = ?, title = ?, {text.column(conn)} = ?, tags = ?, source = ?, speaker = ?, {_STAMP} "
        "WHERE tenant_id = ? AND id = ? AND valid_to IS NULL",
        (etype, title, text.stored(conn, content), msgspec.json.encode(tags).decode(), source, speaker, now,
         v.tenant_id, p.id),
    )
    return get(conn, v, p.id)


def forget(conn: apsw.Connection, v: Viewer, entry_id: int, *, now: int) -> bool:
    """Retire an entry `v`'s user wrote; False (and no change) if it was already retired."""
    require_author(conn, v, entry_id, "forget")
    return retire(conn, v.tenant_id, entry_id, now=now)


def retire(conn: apsw.Connection, tenant_id: int, entry_id: int, *, now: int) -> bool:
    """Retire an entry of `tenant_id` the caller has already checked; False if it was retired."""
    conn.execute(
        f"UPDATE entries SET valid_to = max(valid_from, ?), {_STAMP} WHERE tenant_id = ? AND id = ? "
        "AND valid_to IS NULL",
        (now, now, tenant_id, entry_id),
    )
    return conn.changes() > 0


def restore(conn: apsw.Connection, v: Viewer, entry_id: int, *, now: int) -> bool:
    """Reopen a retired entry (valid again, as if never retired); False if it was active.

    Refused (Conflict naming the relation) while a `supersedes` link from an
    entry `v` sees retires it: the newer entry would still claim to replace
    it. Unlink first. A link from an entry `v` cannot see is removed instead.
    """
    row = conn.execute(f"SELECT e.valid_to FROM entries e WHERE e.id = ? AND {v.sees()}", (entry_id,)).fetchone()
    if row is None:
        raise relations.missing(entry_id, "id")
    if row[0] is None:
        return False
    require_author(conn, v, entry_id, "restore")
    links = conn.execute(
        f"SELECT r.id, r.source_id, EXISTS (SELECT 1 FROM entries e WHERE e.id = r.source_id AND {v.sees()}) "
        "FROM relations r WHERE r.tenant_id = ? AND r.target_id = ? AND r.relation = 'supersedes' ORDER BY r.id",
        (v.tenant_id, entry_id),
    ).fetchall()
    if seen := [(rid, source) for rid, source, visible in links if visible]:
        rid, source = seen[0]
        raise Conflict(
            f"entry {entry_id} is retired by #{source}'s supersedes link (relation {rid}); "
            f"unlink {source} supersedes {entry_id} first",
            existing_id=rid,
        )
    # A link from an entry its author no longer sees (unshared, or a team they left) is as missing to them,
    # and they could neither see nor unlink it: it goes with the retirement it made.
    if links:
        conn.execute(f"DELETE FROM relations WHERE tenant_id = ? AND id IN ({','.join(str(int(rid)) for rid, _, _ in links)})",
                     (v.tenant_id,))
    conn.execute(f"UPDATE entries SET valid_to = NULL, {_STAMP} WHERE tenant_id = ? AND id = ?",
                 (now, v.tenant_id, entry_id))
    return True


def purge(conn: apsw.Connection, v: Viewer, entry_id: int) -> None:
    """Hard delete of an entry `v`'s user wrote: the row, its revisions and relations (cascade) and its index rows (triggers)."""
    require_author(conn, v, entry_id, "purge")
    conn.execute("DELETE FROM entries WHERE tenant_id = ? AND id = ?", (v.tenant_id, entry_id))


def history(
    conn: apsw.Connection, v: Viewer, entry_id: int, *, known_at: int | None = None
) -> tuple[list[Entry], list, list[Revision]]:
    """The supersession chain through an entry, both ways, oldest first, and every recorded state of each.

    With `known_at`, all three as the store held them then. The walk goes
    only through entries `v` sees: one they cannot see ends the chain there,
    as it would if it were missing.
    """
    if not get_any(conn, v, [entry_id], known_at=known_at):
        raise relations.missing(entry_id, "id", known_at=known_at)
    recorded = "" if known_at is None else f" AND r.created_at <= {int(known_at)}"
    rows = conn.execute(
        f"""
        WITH RECURSIVE chain(id) AS (
            SELECT ?
            UNION
            SELECT e.id
            FROM relations r JOIN chain ON r.source_id = chain.id OR r.target_id = chain.id
            JOIN entries e ON e.id = CASE WHEN r.source_id = chain.id THEN r.target_id ELSE r.source_id END
            WHERE r.relation = 'supersedes' AND r.tenant_id = ?{recorded} AND {v.sees()}
        )
        SELECT id FROM chain LIMIT 1000
        """,
        (entry_id, v.tenant_id),
    )
    entries = sorted(get_any(conn, v, [r[0] for r in rows], known_at=known_at), key=lambda e: (e.valid_from, e.id))
    ids = [e.id for e in entries]  # the chain as far as `v` can see it
    marks = ",".join("?" * len(ids))
    edges = [
        relations.relation_from_row(r)
        for r in conn.execute(
            f"SELECT {relations.RELATION_COLUMNS} FROM relations r WHERE tenant_id = ? AND relation = 'supersedes' "
            f"AND source_id IN ({marks}) AND target_id IN ({marks}){recorded} ORDER BY id",
            (v.tenant_id, *ids, *ids),
        )
    ]
    return entries, edges, revisions(conn, v, ids, edges, known_at=known_at)


_REVISION_FIELDS = ("type", "title", "content", "tags", "source", "speaker", "valid_from", "valid_to")


def revisions(
    conn: apsw.Connection, v: Viewer, ids: list[int], edges: list, *, known_at: int | None = None
) -> list[Revision]:
    """Every state of each entry recorded by `known_at` (default now), grouped by entry in `ids` order, oldest first.

    `edges` are the supersedes relations that may have retired them: a
    retirement recorded when one of them was made is `superseded`.
    """
    if not ids:
        return []
    t = None if known_at is None else int(known_at)
    marks = ",".join("?" * len(ids))
    past = f"AND r.recorded_from <= {t}" if t is not None else ""
    now_ = f"AND coalesce(e.revised_at, e.recorded_at) <= {t}" if t is not None else ""
    rows = conn.execute(
        f"""
        SELECT r.entry_id, r.recorded_from, r.recorded_to, r.type, r.title, r.content, r.tags, r.source,
               r.conversation_id, e.parent_id, e.recorded_at, r.valid_from, r.valid_to,
               nullif(r.recorded_from, e.recorded_at), r.speaker, {_PEOPLE}
        FROM entry_revisions r JOIN entries e ON e.tenant_id = r.tenant_id AND e.id = r.entry_id
        WHERE {v.sees()} AND r.entry_id IN ({marks}) {past}
        UNION ALL
        SELECT e.id, coalesce(e.revised_at, e.recorded_at), NULL, e.type, e.title, e.content, e.tags, e.source,
               e.conversation_id, e.parent_id, e.recorded_at, e.valid_from, e.valid_to, e.revised_at,
               e.speaker, {_PEOPLE}
        FROM entries e WHERE {v.sees()} AND e.id IN ({marks}) {now_}
        ORDER BY 1, 2
        """,
        (*ids, *ids),
    ).fetchall()
    states: dict[int, list[Revision]] = {}
    for eid, start, end, *fields, speaker, author, team in rows:
        sup = ",".join(str(r.source_id) for r in edges if r.target_id == eid and parse_time(r.created_at) <= start)
        entry = entry_from_row((eid, *fields, sup, speaker, author, team))
        before = states.setdefault(eid, [])
        changed = [f for f in _REVISION_FIELDS if before and getattr(before[-1].entry, f) != getattr(entry, f)]
        before.append(Revision(
            id=eid,
            recorded_from=format_time(start),
            recorded_to=format_time(end if end is None or t is None or end <= t else None),
            change=_change(before[-1].entry if before else None, entry, start, edges),
            fields=changed,
            entry=entry,
        ))
    return [r for eid in ids for r in states.get(eid, [])]


def _change(prev: Entry | None, entry: Entry, start: int, edges: list) -> str:
    if prev is None:
        return "remembered"
    if prev.valid_to is None and entry.valid_to is not None:
        made = {parse_time(r.created_at) for r in edges if r.target_id == entry.id}
        return "superseded" if start in made else "retired"
    if prev.valid_to is not None and entry.valid_to is None:
        return "restored"
    return "updated"


def type_totals(conn: apsw.Connection, v: Viewer) -> list[tuple[str, int, int, int | None]]:
    """(type, active, retired, last recorded_at) per entry type in use that `v` sees (a covering-index scan when solo)."""
    return conn.execute(
        "SELECT e.type, count(*) FILTER (WHERE e.valid_to IS NULL), count(*) FILTER (WHERE e.valid_to IS NOT NULL), "
        f"max(e.recorded_at) FROM entries e WHERE {v.sees()} GROUP BY e.type ORDER BY e.type"
    ).fetchall()


def recent(conn: apsw.Connection, v: Viewer, *, limit: int) -> list[tuple[int, str, str, int]]:
    """(id, type, title, recorded_at) of the newest active entries `v` sees."""
    return conn.execute(
        f"SELECT e.id, e.type, e.title, e.recorded_at FROM entries e WHERE {v.sees()} AND e.valid_to IS NULL "
        "ORDER BY e.id DESC LIMIT ?",
        (limit,),
    ).fetchall()
