"""m010_tenant_fts: one FTS5 index per tenant (`store/fts.py`), replacing `entries_fts`; `recall_entries` keeps
its own triggers.

Tenant-private ranking statistics: the one index over every tenant becomes one per tenant (store/fts.py,
created with the tenant).
"""

# The one index over every tenant goes; `recall_entries` keeps its own triggers.
SQL = """
        DROP TRIGGER entries_fts_insert;
        DROP TRIGGER entries_fts_delete;
        DROP TRIGGER entries_fts_update;
        DROP TABLE entries_fts_vocab;
        DROP TABLE entries_fts;
        DROP VIEW entries_fts_rows;
        CREATE TRIGGER recall_entries_insert AFTER INSERT ON entries BEGIN
            INSERT INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from, new.valid_to, octet_length(new.content), (octet_length(new.content) - octet_length(replace(new.content, ' I ', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' I''', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' my ', ''))) / 4 + (octet_length(new.content) - octet_length(replace(new.content, ' me ', ''))) / 4 + (substr(new.content, 1, 2) IN ('I ', 'I''')), (octet_length(new.content) - octet_length(replace(new.content, 'you', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, 'You', ''))) / 3, arbiter_numerals(new.content));
        END;
        CREATE TRIGGER recall_entries_delete AFTER DELETE ON entries BEGIN
            DELETE FROM recall_entries WHERE entry_id = old.id;
        END;
        """


def apply(conn) -> None:
    """Drop the index over every tenant, then give each tenant its own."""
    conn.execute(SQL)
    for (tenant_id,) in conn.execute("SELECT id FROM tenants ORDER BY id").fetchall():
        index(conn, tenant_id)


def index(conn, n: int) -> None:
    """A tenant's index as m010 made it (m015 turns it into its first user's scope index)."""
    t = f"entries_fts_{int(n)}"
    cols = "title, content, tags, source, scope"

    def columns(row: str) -> str:
        where = f"CASE WHEN {row}.conversation_id IS NULL THEN 'u' || {row}.tenant_id ELSE 'c' || {row}.conversation_id END"
        return f"{row}.title, {row}.content, {row}.tags, {row}.source, {where}"

    conn.execute(
        f"""
        CREATE VIEW {t}_rows AS SELECT id, {columns("entries")} AS scope FROM entries WHERE tenant_id = {n};
        CREATE VIRTUAL TABLE {t} USING fts5(
            {cols}, content='{t}_rows', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE {t}_vocab USING fts5vocab({t}, row);
        CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        CREATE TRIGGER {t}_delete AFTER DELETE ON entries WHEN old.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
        END;
        CREATE TRIGGER {t}_update AFTER UPDATE OF title, content, tags, source, conversation_id ON entries
        WHEN new.tenant_id = {n} BEGIN
            INSERT INTO {t}({t}, rowid, {cols}) VALUES ('delete', old.id, {columns("old")});
            INSERT INTO {t}(rowid, {cols}) VALUES (new.id, {columns("new")});
        END;
        INSERT INTO {t}({t}, rank) VALUES ('hashsize', 16777216);
        INSERT INTO {t}({t}, rank) VALUES ('automerge', 16);
        INSERT INTO {t}({t}) VALUES ('rebuild');
        """
    )
