"""m016_tag_scopes: `entry_tags`, `tag_counts`, `tag_pairs`, `tag_graph_version` rebuilt per visibility scope
(`scope_id`), their triggers also moving counts when an entry changes scope; `cluster_names` gains `scopes`
(what a name was made from).

The tag graph and cluster-name cache per visibility scope (graph/tags.py): a viewer adds up the scopes they
see, so no count tells of an entry they cannot see. `cluster_names` gains `scopes`: the scopes whose titles
made the name, so a name is shown only to whoever sees all of them. The upkeep is m003's, keyed by
`scope_id` instead of `tenant_id`; an entry that changes scope (share, unshare) is untagged from the old scope
and tagged into the new one, so counts move with it and both scopes' versions change.
"""

SQL = """
    DROP TRIGGER entries_tags_insert;
    DROP TRIGGER entries_tags_update;
    DROP TRIGGER entries_tags_delete;
    DROP TABLE entry_tags;
    DROP TABLE tag_counts;
    DROP TABLE tag_pairs;
    DROP TABLE tag_graph_version;
    CREATE TABLE entry_tags(
        entry_id INTEGER NOT NULL,
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        PRIMARY KEY (entry_id, tag)
    ) WITHOUT ROWID;
    CREATE INDEX entry_tags_tag ON entry_tags(scope_id, tag, entry_id);
    CREATE TABLE tag_counts(
        scope_id INTEGER NOT NULL,
        tag TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (scope_id, tag)
    ) WITHOUT ROWID;
    CREATE TABLE tag_pairs(
        scope_id INTEGER NOT NULL,
        a TEXT NOT NULL,
        b TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (scope_id, a, b),
        CHECK (a < b)
    ) WITHOUT ROWID;
    CREATE TABLE tag_graph_version(
        scope_id INTEGER PRIMARY KEY,
        version INTEGER NOT NULL
    );
    CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
    WHEN new.valid_to IS NULL AND new.tags != '[]' BEGIN
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
    CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to, scope_id ON entries
    WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to OR old.scope_id IS NOT new.scope_id
    BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE scope_id = old.scope_id AND EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_counts SET n = n - 1
        WHERE scope_id = old.scope_id AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    DELETE FROM tag_counts
        WHERE scope_id = old.scope_id AND n <= 0 AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_pairs SET n = n - 1
        WHERE scope_id = old.scope_id AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM tag_pairs
        WHERE scope_id = old.scope_id AND n <= 0 AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM entry_tags WHERE entry_id = old.id;

    INSERT OR IGNORE INTO entry_tags(entry_id, scope_id, tag)
        SELECT new.id, new.scope_id, value FROM json_each(new.tags) WHERE new.valid_to IS NULL;
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
    CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE scope_id = old.scope_id AND EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_counts SET n = n - 1
        WHERE scope_id = old.scope_id AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    DELETE FROM tag_counts
        WHERE scope_id = old.scope_id AND n <= 0 AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_pairs SET n = n - 1
        WHERE scope_id = old.scope_id AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM tag_pairs
        WHERE scope_id = old.scope_id AND n <= 0 AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM entry_tags WHERE entry_id = old.id;

    END;
    INSERT OR IGNORE INTO entry_tags(entry_id, scope_id, tag)
        SELECT e.id, e.scope_id, j.value FROM entries e, json_each(e.tags) j WHERE e.valid_to IS NULL;
    INSERT INTO tag_counts(scope_id, tag, n) SELECT scope_id, tag, count(*) FROM entry_tags GROUP BY 1, 2;
    INSERT INTO tag_pairs(scope_id, a, b, n)
        SELECT x.scope_id, x.tag, y.tag, count(*)
        FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag GROUP BY 1, 2, 3;
    INSERT INTO tag_graph_version(scope_id, version) SELECT DISTINCT scope_id, 1 FROM entry_tags;
    CREATE TABLE cluster_names_m016(
        tenant_id INTEGER NOT NULL REFERENCES tenants(id),
        tags_sha256 BLOB NOT NULL,
        scopes TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        named_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, tags_sha256, scopes)
    ) WITHOUT ROWID;
    -- A name cached before scopes was made from the whole tenant's titles: it
    -- stays only where the tenant is one scope (its first user's, see m015).
    INSERT INTO cluster_names_m016
        SELECT c.tenant_id, c.tags_sha256, (SELECT s.id FROM scopes s WHERE s.tenant_id = c.tenant_id),
               c.name, c.description, c.named_at
        FROM cluster_names c WHERE (SELECT count(*) FROM scopes s WHERE s.tenant_id = c.tenant_id) = 1;
    DROP TABLE cluster_names;
    ALTER TABLE cluster_names_m016 RENAME TO cluster_names;
"""
