"""m020_deferred_index: `deferred_scopes`; every scope's FTS insert trigger and the tag graph's insert trigger
stand aside for a scope listed there (an import indexes its rows after them, `store/deferred.py`).

An import indexes its entries after writing them, one statement per scope, instead of a trigger per row
(store/deferred.py): the insert triggers of the scopes' indexes and of the tag graph can stand aside.
"""

SQL = """
        CREATE TABLE deferred_scopes(scope_id INTEGER PRIMARY KEY);
        DROP TRIGGER entries_tags_insert;
        CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
        WHEN new.valid_to IS NULL AND new.tags != '[]'
            AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = new.scope_id)
        BEGIN
    INSERT OR IGNORE INTO entry_tags(entry_id, scope_id, tag)
        SELECT new.id, new.scope_id, value FROM json_each(new.tags) WHERE true;
    INSERT INTO tag_counts(scope_id, tag, n)
        SELECT new.scope_id, tag, 1 FROM entry_tags WHERE entry_id = new.id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT new.scope_id, p.*, 1 FROM (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = new.id) p WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(scope_id, version)
        SELECT new.scope_id, 1 WHERE EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = new.id)
        ON CONFLICT DO UPDATE SET version = version + 1;

        END;
        """


def apply(conn) -> None:
    """`deferred_scopes`, then each scope's insert trigger remade to stand aside for it."""
    conn.execute(SQL)
    for scope_id, team_id in conn.execute("SELECT id, team_id FROM scopes ORDER BY id").fetchall():
        t, n = f"entries_fts_{int(scope_id)}", int(scope_id)
        scope = "CASE WHEN new.conversation_id IS NULL THEN 'u' || new.tenant_id ELSE 'c' || new.conversation_id END"
        if team_id is not None:  # a team's index also holds each entry's author
            scope += " || ' a' || new.author_id"
        conn.execute(
            f"""
            DROP TRIGGER {t}_insert;
            CREATE TRIGGER {t}_insert AFTER INSERT ON entries WHEN new.scope_id = {n} AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = {n}) BEGIN
            INSERT INTO {t}(rowid, title, content, tags, source, scope) VALUES (new.id, new.title, new.content, new.tags, new.source, {scope});
        END;
            """
        )
