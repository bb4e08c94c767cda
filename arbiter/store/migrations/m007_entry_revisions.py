"""m007_entry_revisions: `entries.revised_at`, `entry_revisions` (each prior state with its record window) and
`entry_revisions_fts`, kept by triggers (see Time).

Record time (docs/architecture.md, "Time"). The entries row stays the current state, so the common read path
and its indexes cost nothing extra; `revised_at` is when that state was recorded (NULL: as first recorded, at
`recorded_at`). A write that changes an entry stamps `revised_at`, and the stamp files the state it replaces
in `entry_revisions` with its record window [recorded_from, recorded_to). A change that forgets the stamp is
refused, so no code path can rewrite history silently. Purge deletes the revisions with the entry.
`entry_revisions_fts` indexes past text alone (same columns and tokenizer as entries_fts), for recall with
`known_at`.
"""

SQL = """
        ALTER TABLE entries ADD COLUMN revised_at INTEGER;
        CREATE TABLE entry_revisions(
            id INTEGER PRIMARY KEY,
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            tenant_id INTEGER NOT NULL,
            conversation_id INTEGER,
            recorded_from INTEGER NOT NULL,
            recorded_to INTEGER NOT NULL,
            type TEXT NOT NULL,
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            source TEXT,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER,
            CHECK (recorded_from < recorded_to)
        );
        CREATE UNIQUE INDEX entry_revisions_entry ON entry_revisions(entry_id, recorded_to);
        CREATE INDEX entry_revisions_tenant ON entry_revisions(tenant_id, recorded_from);
        CREATE TRIGGER entries_revision_unstamped
        BEFORE UPDATE OF type, title, content, tags, source, valid_from, valid_to ON entries
        WHEN new.revised_at IS old.revised_at AND (
            new.type IS NOT old.type OR new.title IS NOT old.title OR new.content IS NOT old.content
            OR new.tags IS NOT old.tags OR new.source IS NOT old.source
            OR new.valid_from IS NOT old.valid_from OR new.valid_to IS NOT old.valid_to
        ) BEGIN
            SELECT RAISE(ABORT, 'a change to an entry must stamp revised_at (its record time)');
        END;
        CREATE TRIGGER entries_revision AFTER UPDATE OF revised_at ON entries
        WHEN new.revised_at IS NOT old.revised_at BEGIN
            INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                        type, title, content, tags, source, valid_from, valid_to)
            VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                    new.revised_at, old.type, old.title, old.content, old.tags, old.source,
                    old.valid_from, old.valid_to);
        END;
        CREATE VIEW entry_revisions_fts_rows AS
            SELECT id, title, content, tags, source, 't' || entry_revisions.tenant_id || ' ' || CASE WHEN entry_revisions.conversation_id IS NULL THEN 'u' || entry_revisions.tenant_id ELSE 'c' || entry_revisions.conversation_id END AS scope FROM entry_revisions;
        CREATE VIRTUAL TABLE entry_revisions_fts USING fts5(
            title, content, tags, source, scope,
            content='entry_revisions_fts_rows', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER entry_revisions_fts_insert AFTER INSERT ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(rowid, title, content, tags, source, scope)
            VALUES (new.id, new.title, new.content, new.tags, new.source, 't' || new.tenant_id || ' ' || CASE WHEN new.conversation_id IS NULL THEN 'u' || new.tenant_id ELSE 'c' || new.conversation_id END);
        END;
        CREATE TRIGGER entry_revisions_fts_delete AFTER DELETE ON entry_revisions BEGIN
            INSERT INTO entry_revisions_fts(entry_revisions_fts, rowid, title, content, tags, source, scope)
            VALUES ('delete', old.id, old.title, old.content, old.tags, old.source, 't' || old.tenant_id || ' ' || CASE WHEN old.conversation_id IS NULL THEN 'u' || old.tenant_id ELSE 'c' || old.conversation_id END);
        END;
        """
