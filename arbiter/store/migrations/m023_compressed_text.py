"""m023_compressed_text: `entries.content` and `entry_revisions.content` become VIRTUAL generated columns,
`arbiter_text(content_z)`, over the compressed text in `content_z` (docs/architecture.md, "Stored text");
converts a file in place, then `migrate` VACUUMs it.

SQLite cannot turn a column into a generated one, and cannot drop a column a view or trigger names: those are
dropped and made again, with `content_z` for `content` where a write must name what is stored (an UPDATE OF
list: SQLite fires it on the columns a statement sets, and writers set `content_z`). `content_z` is NOT NULL
with an empty default, which arbiter_text refuses, so a write that leaves it out fails in the insert triggers
that read `content`. The text is packed by this file's own codec (byte 0x00 the UTF-8 text, 0x01 a zlib
stream at level 6, whichever is smaller), the format store/text.py reads.
"""

import zlib

# What names `content` in a file at m022, in the order it was made, and each one's text from m023 on.
_NAMING = {
    "recall_entries_update": """
        CREATE TRIGGER recall_entries_update
        AFTER UPDATE OF type, content_z, conversation_id, tenant_id, valid_from, valid_to ON entries BEGIN
            INSERT OR REPLACE INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from, new.valid_to, octet_length(new.content), (octet_length(new.content) - octet_length(replace(new.content, ' I ', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' I''', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' my ', ''))) / 4 + (octet_length(new.content) - octet_length(replace(new.content, ' me ', ''))) / 4 + (substr(new.content, 1, 2) IN ('I ', 'I''')), (octet_length(new.content) - octet_length(replace(new.content, 'you', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, 'You', ''))) / 3, arbiter_numerals(new.content));
        END""",
    "entries_revision_unstamped": """
    CREATE TRIGGER entries_revision_unstamped
    BEFORE UPDATE OF type, title, content_z, tags, source, valid_from, valid_to ON entries
    WHEN new.revised_at IS old.revised_at AND (new.type IS NOT old.type OR new.title IS NOT old.title OR new.content_z IS NOT old.content_z OR new.tags IS NOT old.tags OR new.source IS NOT old.source OR new.valid_from IS NOT old.valid_from OR new.valid_to IS NOT old.valid_to) BEGIN
        SELECT RAISE(ABORT, 'a change to an entry must stamp revised_at (its record time)');
    END""",
    # The replaced state's text is filed as it is stored: the blob, not unpacked and packed again.
    "entries_revision": """
    CREATE TRIGGER entries_revision AFTER UPDATE OF revised_at ON entries
    WHEN new.revised_at IS NOT old.revised_at BEGIN
        INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                    type, title, content_z, tags, source, valid_from, valid_to)
        VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                new.revised_at, old.type, old.title, old.content_z, old.tags, old.source, old.valid_from, old.valid_to);
    END""",
    "entry_revisions_fts_rows": """
        CREATE VIEW entry_revisions_fts_rows AS
            SELECT id, title, content, tags, source, 't' || entry_revisions.tenant_id || ' ' || CASE WHEN entry_revisions.conversation_id IS NULL THEN 'u' || entry_revisions.tenant_id ELSE 'c' || entry_revisions.conversation_id END AS scope FROM entry_revisions""",
    "entry_revisions_fts_insert": """
        CREATE TRIGGER entry_revisions_fts_insert AFTER INSERT ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, 't' || new.tenant_id || ' ' || CASE WHEN new.conversation_id IS NULL THEN 'u' || new.tenant_id ELSE 'c' || new.conversation_id END);
        END""",
    "entry_revisions_fts_delete": """
        CREATE TRIGGER entry_revisions_fts_delete AFTER DELETE ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(entry_revisions_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, 't' || old.tenant_id || ' ' || CASE WHEN old.conversation_id IS NULL THEN 'u' || old.tenant_id ELSE 'c' || old.conversation_id END);
        END""",
    "recall_entries_insert": """
        CREATE TRIGGER recall_entries_insert AFTER INSERT ON entries BEGIN
            INSERT INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from, new.valid_to, octet_length(new.content), (octet_length(new.content) - octet_length(replace(new.content, ' I ', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' I''', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' my ', ''))) / 4 + (octet_length(new.content) - octet_length(replace(new.content, ' me ', ''))) / 4 + (substr(new.content, 1, 2) IN ('I ', 'I''')), (octet_length(new.content) - octet_length(replace(new.content, 'you', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, 'You', ''))) / 3, arbiter_numerals(new.content));
        END""",
}

_CONVERT = """
    ALTER TABLE {table} ADD COLUMN content_z BLOB NOT NULL DEFAULT x'';
    UPDATE {table} SET content_z = m023_pack(content);
    ALTER TABLE {table} DROP COLUMN content;
    ALTER TABLE {table} ADD COLUMN content TEXT GENERATED ALWAYS AS (arbiter_text(content_z)) VIRTUAL;
"""


def apply(conn) -> None:
    """Drop what names `content`, convert both tables' text, then remake what was dropped."""
    scopes = conn.execute("SELECT id, team_id FROM scopes ORDER BY id").fetchall()
    for name in _NAMING:
        conn.execute(f"DROP {'VIEW' if name.endswith('_rows') else 'TRIGGER'} {name}")
    for scope_id, _ in scopes:
        t = f"entries_fts_{int(scope_id)}"
        conn.execute(f"DROP VIEW {t}_rows; DROP TRIGGER {t}_insert; DROP TRIGGER {t}_delete; DROP TRIGGER {t}_update")
    conn.create_scalar_function("m023_pack", _pack, 1, deterministic=True)
    for table in ("entries", "entry_revisions"):
        conn.execute(_CONVERT.format(table=table))
    for sql in _NAMING.values():
        conn.execute(sql)
    for scope_id, team_id in scopes:
        conn.execute(_scope_index(scope_id, shared=team_id is not None))


def _pack(text: str | None) -> bytes | None:
    if text is None:
        return None
    data = text.encode("utf-8")
    packed = zlib.compress(data, 6)
    return b"\x01" + packed if len(packed) < len(data) else b"\x00" + data


def _scope_index(scope_id: int, *, shared: bool) -> str:
    """The view and triggers of scope N's index from m023 on (a team's also holds each entry's author)."""
    t, n = f"entries_fts_{int(scope_id)}", int(scope_id)
    cols = "title, content, tags, source, scope"

    def columns(row: str) -> str:
        where = f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
        if shared:
            where += f" || ' a' || {row}.author_id"
        return f"{row}.title, {row}.content, {row}.tags, {row}.source, {where}"

    return f"""
        CREATE VIEW {t}_rows AS SELECT id, {columns("entries")} AS scope FROM entries WHERE scope_id = {n};
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.scope_id = {n} AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = {n}) BEGIN
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, content_z, tags, source, conversation_id, scope_id ON entries
        WHEN old.scope_id = {n} OR new.scope_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) SELECT 'delete', old.id, {columns("old")}
                WHERE old.scope_id = {n};
            INSERT INTO {t}(rowid, {cols}) SELECT new.id, {columns("new")} WHERE new.scope_id = {n};
        END;
    """
