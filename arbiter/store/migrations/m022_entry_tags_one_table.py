"""m022_entry_tags_one_table: `entry_tags` is one B-tree keyed (scope, tag, entry) instead of a table keyed by
entry plus an index by tag: an entry's own tags are read from its `tags` column (it has rows exactly while
active); the triggers read `json_each(tags)` (0.06x of the text).

Rows keyed (scope_id, tag, entry_id), the order every reader seeks by. The table keyed by entry it replaces
was read only to find an entry's own tags, which its `tags` column already holds: an entry has rows exactly
while it is active (valid_to IS NULL), one per distinct tag, in its scope. Half the tag graph's bytes (0.06x of
the text, docs/benchmarks.md "Size").
"""

SQL = """
    DROP TRIGGER entries_tags_insert;
    DROP TRIGGER entries_tags_update;
    DROP TRIGGER entries_tags_delete;
    CREATE TABLE entry_tags_m022(
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        entry_id INTEGER NOT NULL,
        PRIMARY KEY (scope_id, tag, entry_id)
    ) WITHOUT ROWID;
    INSERT INTO entry_tags_m022(scope_id, tag, entry_id)
        SELECT scope_id, tag, entry_id FROM entry_tags ORDER BY scope_id, tag, entry_id;
    DROP TABLE entry_tags;
    ALTER TABLE entry_tags_m022 RENAME TO entry_tags;
    CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
    WHEN new.valid_to IS NULL AND new.tags != '[]'
        AND NOT EXISTS (SELECT 1 FROM deferred_scopes WHERE scope_id = new.scope_id)
    BEGIN
    INSERT OR IGNORE INTO entry_tags(scope_id, tag, entry_id)
        SELECT new.scope_id, value, new.id FROM json_each(new.tags) WHERE true;
    INSERT INTO tag_counts(scope_id, tag, n)
        SELECT new.scope_id, value, 1 FROM (SELECT DISTINCT value FROM json_each(new.tags)) WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT new.scope_id, p.*, 1 FROM (SELECT DISTINCT x.value, y.value FROM json_each(new.tags) x JOIN json_each(new.tags) y ON x.value < y.value) p WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(scope_id, version)
        SELECT new.scope_id, 1 WHERE true AND new.tags != '[]'
        ON CONFLICT DO UPDATE SET version = version + 1;

    END;
    CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to, scope_id ON entries
    WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to OR old.scope_id IS NOT new.scope_id
    BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND old.tags != '[]';
    UPDATE tag_counts SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags));
    DELETE FROM tag_counts
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND tag IN (SELECT value FROM json_each(old.tags));
    UPDATE tag_pairs SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND (a, b) IN (SELECT DISTINCT x.value, y.value FROM json_each(old.tags) x JOIN json_each(old.tags) y ON x.value < y.value);
    DELETE FROM tag_pairs
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND (a, b) IN (SELECT DISTINCT x.value, y.value FROM json_each(old.tags) x JOIN json_each(old.tags) y ON x.value < y.value);
    DELETE FROM entry_tags
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags))
          AND entry_id = old.id;

    INSERT OR IGNORE INTO entry_tags(scope_id, tag, entry_id)
        SELECT new.scope_id, value, new.id FROM json_each(new.tags) WHERE new.valid_to IS NULL;
    INSERT INTO tag_counts(scope_id, tag, n)
        SELECT new.scope_id, value, 1 FROM (SELECT DISTINCT value FROM json_each(new.tags)) WHERE new.valid_to IS NULL
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT new.scope_id, p.*, 1 FROM (SELECT DISTINCT x.value, y.value FROM json_each(new.tags) x JOIN json_each(new.tags) y ON x.value < y.value) p WHERE new.valid_to IS NULL
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(scope_id, version)
        SELECT new.scope_id, 1 WHERE new.valid_to IS NULL AND new.tags != '[]'
        ON CONFLICT DO UPDATE SET version = version + 1;

    END;
    CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND old.tags != '[]';
    UPDATE tag_counts SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags));
    DELETE FROM tag_counts
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND tag IN (SELECT value FROM json_each(old.tags));
    UPDATE tag_pairs SET n = n - 1
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND (a, b) IN (SELECT DISTINCT x.value, y.value FROM json_each(old.tags) x JOIN json_each(old.tags) y ON x.value < y.value);
    DELETE FROM tag_pairs
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND n <= 0
          AND (a, b) IN (SELECT DISTINCT x.value, y.value FROM json_each(old.tags) x JOIN json_each(old.tags) y ON x.value < y.value);
    DELETE FROM entry_tags
        WHERE scope_id = old.scope_id AND old.valid_to IS NULL AND tag IN (SELECT value FROM json_each(old.tags))
          AND entry_id = old.id;

    END;
"""
