"""m004_recall_index: `entries_fts` with a `scope` column over the `entries_fts_rows` view, `entries_fts_vocab`,
`recall_entries` (the narrow ranking copy).

Recall (arbiter/recall): the FTS index gains a `scope` column holding `t<tenant>` and `c<conversation>` (or
`u<tenant>` for unscoped rows), so a conversation pass ANDs its scope into the MATCH and FTS5 seeks to that
conversation's rows instead of ranking every tenant-wide match. External content comes from a view, since
`scope` is computed. A 16 MiB hash (FTS5's default is 1 MiB) flushes bulk writes in fewer, larger segments:
half the ingest time, and fewer segments to search. `entries_fts_vocab` gives document frequencies (idf, term
selection). `recall_entries` is a narrow copy of what ranking reads per candidate, so a pass never touches the
wide entries rows: visibility, type, conversation, size, and how often the text speaks in the first person
("I", "my") or addresses someone ("you"), counted by SQL at write time (counting at query time costs
milliseconds).
"""

SQL = """
        DROP TRIGGER entries_fts_insert;
        DROP TRIGGER entries_fts_delete;
        DROP TRIGGER entries_fts_update;
        DROP TABLE entries_fts;
        CREATE VIEW entries_fts_rows AS
            SELECT id, title, content, tags, source, 't' || entries.tenant_id || ' ' || CASE WHEN entries.conversation_id IS NULL THEN 'u' || entries.tenant_id ELSE 'c' || entries.conversation_id END AS scope FROM entries;
        CREATE VIRTUAL TABLE entries_fts USING fts5(
            title, content, tags, source, scope,
            content='entries_fts_rows', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, row);
        INSERT INTO entries_fts(entries_fts, rank) VALUES ('hashsize', 16777216);
        CREATE TABLE recall_entries(
            entry_id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            type TEXT NOT NULL,
            conversation_id INTEGER,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            bytes INTEGER NOT NULL,
            self_refs INTEGER NOT NULL,
            other_refs INTEGER NOT NULL,
            numerals INTEGER NOT NULL
        );
        CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
            INSERT INTO entries_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, 't' || new.tenant_id || ' ' || CASE WHEN new.conversation_id IS NULL THEN 'u' || new.tenant_id ELSE 'c' || new.conversation_id END);
            INSERT INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from, new.valid_to, octet_length(new.content), (octet_length(new.content) - octet_length(replace(new.content, ' I ', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' I''', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' my ', ''))) / 4 + (octet_length(new.content) - octet_length(replace(new.content, ' me ', ''))) / 4 + (substr(new.content, 1, 2) IN ('I ', 'I''')), (octet_length(new.content) - octet_length(replace(new.content, 'you', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, 'You', ''))) / 3, arbiter_numerals(new.content));
        END;
        CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, 't' || old.tenant_id || ' ' || CASE WHEN old.conversation_id IS NULL THEN 'u' || old.tenant_id ELSE 'c' || old.conversation_id END);
            DELETE FROM recall_entries WHERE entry_id = old.id;
        END;
        CREATE TRIGGER entries_fts_update
        AFTER UPDATE OF title, content, tags, source, conversation_id, tenant_id ON entries BEGIN
            INSERT INTO entries_fts(entries_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, 't' || old.tenant_id || ' ' || CASE WHEN old.conversation_id IS NULL THEN 'u' || old.tenant_id ELSE 'c' || old.conversation_id END);
            INSERT INTO entries_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, 't' || new.tenant_id || ' ' || CASE WHEN new.conversation_id IS NULL THEN 'u' || new.tenant_id ELSE 'c' || new.conversation_id END);
        END;
        CREATE TRIGGER recall_entries_update
        AFTER UPDATE OF type, content, conversation_id, tenant_id, valid_from, valid_to ON entries BEGIN
            INSERT OR REPLACE INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from, new.valid_to, octet_length(new.content), (octet_length(new.content) - octet_length(replace(new.content, ' I ', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' I''', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, ' my ', ''))) / 4 + (octet_length(new.content) - octet_length(replace(new.content, ' me ', ''))) / 4 + (substr(new.content, 1, 2) IN ('I ', 'I''')), (octet_length(new.content) - octet_length(replace(new.content, 'you', ''))) / 3 + (octet_length(new.content) - octet_length(replace(new.content, 'You', ''))) / 3, arbiter_numerals(new.content));
        END;
        INSERT INTO entries_fts(entries_fts) VALUES ('rebuild');
        INSERT INTO recall_entries SELECT entries.id, entries.tenant_id, entries.type, entries.conversation_id, entries.valid_from, entries.valid_to, octet_length(entries.content), (octet_length(entries.content) - octet_length(replace(entries.content, ' I ', ''))) / 3 + (octet_length(entries.content) - octet_length(replace(entries.content, ' I''', ''))) / 3 + (octet_length(entries.content) - octet_length(replace(entries.content, ' my ', ''))) / 4 + (octet_length(entries.content) - octet_length(replace(entries.content, ' me ', ''))) / 4 + (substr(entries.content, 1, 2) IN ('I ', 'I''')), (octet_length(entries.content) - octet_length(replace(entries.content, 'you', ''))) / 3 + (octet_length(entries.content) - octet_length(replace(entries.content, 'You', ''))) / 3, arbiter_numerals(entries.content) FROM entries;
        """
