"""m002_fts_entries: the first FTS5 index (replaced by m004)."""

SQL = """
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, content, tags, source,
            content='entries', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
        END;
        CREATE TRIGGER entries_fts_update AFTER UPDATE OF title, content, tags, source ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source);
            INSERT INTO entries_fts(rowid, title, content, tags, source)
            VALUES (new.id, new.title, new.content, new.tags, new.source);
        END;
        """
