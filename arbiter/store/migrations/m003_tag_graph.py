"""m003_tag_graph: `entry_tags`, `tag_counts`, `tag_pairs`, `tag_graph_version` kept by triggers; `cluster_names`
cache; listing indexes.

The tag graph (graph/tags.py): one row per tag of each active entry, and per-tenant tag and tag-pair counts
kept by triggers, so co-occurrence and the briefing read a few hundred rows instead of self-joining every tag.
`tag_graph_version` bumps on every change: the cluster memo's key. Plus covering indexes for the briefing's
totals and threads, and the topic-cluster name cache (graph/clusters.py).
"""

SQL = """
        CREATE TABLE entry_tags(
            entry_id INTEGER NOT NULL,
            tenant_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            PRIMARY KEY (entry_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX entry_tags_tag ON entry_tags(tenant_id, tag, entry_id);
        CREATE TABLE tag_counts(
            tenant_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, tag)
        ) WITHOUT ROWID;
        CREATE TABLE tag_pairs(
            tenant_id INTEGER NOT NULL,
            a TEXT NOT NULL,
            b TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, a, b),
            CHECK (a < b)
        ) WITHOUT ROWID;
        CREATE TABLE tag_graph_version(
            tenant_id INTEGER PRIMARY KEY,
            version INTEGER NOT NULL
        );
        CREATE TRIGGER entries_tags_insert AFTER INSERT ON entries
        WHEN new.valid_to IS NULL AND new.tags != '[]' BEGIN
    INSERT OR IGNORE INTO entry_tags(entry_id, tenant_id, tag)
        SELECT new.id, new.tenant_id, value FROM json_each(new.tags) WHERE true;
    INSERT INTO tag_counts(tenant_id, tag, n)
        SELECT new.tenant_id, tag, 1 FROM entry_tags WHERE entry_id = new.id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(tenant_id, a, b, n)
        SELECT new.tenant_id, p.*, 1 FROM (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = new.id) p WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(tenant_id, version)
        SELECT new.tenant_id, 1 WHERE EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = new.id)
        ON CONFLICT DO UPDATE SET version = version + 1;

        END;
        CREATE TRIGGER entries_tags_update AFTER UPDATE OF tags, valid_to ON entries
        WHEN old.tags IS NOT new.tags OR old.valid_to IS NOT new.valid_to BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE tenant_id = old.tenant_id AND EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_counts SET n = n - 1
        WHERE tenant_id = old.tenant_id AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    DELETE FROM tag_counts
        WHERE tenant_id = old.tenant_id AND n <= 0 AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_pairs SET n = n - 1
        WHERE tenant_id = old.tenant_id AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM tag_pairs
        WHERE tenant_id = old.tenant_id AND n <= 0 AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM entry_tags WHERE entry_id = old.id;

    INSERT OR IGNORE INTO entry_tags(entry_id, tenant_id, tag)
        SELECT new.id, new.tenant_id, value FROM json_each(new.tags) WHERE new.valid_to IS NULL;
    INSERT INTO tag_counts(tenant_id, tag, n)
        SELECT new.tenant_id, tag, 1 FROM entry_tags WHERE entry_id = new.id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_pairs(tenant_id, a, b, n)
        SELECT new.tenant_id, p.*, 1 FROM (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = new.id) p WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO tag_graph_version(tenant_id, version)
        SELECT new.tenant_id, 1 WHERE EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = new.id)
        ON CONFLICT DO UPDATE SET version = version + 1;

        END;
        CREATE TRIGGER entries_tags_delete AFTER DELETE ON entries BEGIN
    UPDATE tag_graph_version SET version = version + 1
        WHERE tenant_id = old.tenant_id AND EXISTS (SELECT 1 FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_counts SET n = n - 1
        WHERE tenant_id = old.tenant_id AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    DELETE FROM tag_counts
        WHERE tenant_id = old.tenant_id AND n <= 0 AND tag IN (SELECT tag FROM entry_tags WHERE entry_id = old.id);
    UPDATE tag_pairs SET n = n - 1
        WHERE tenant_id = old.tenant_id AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM tag_pairs
        WHERE tenant_id = old.tenant_id AND n <= 0 AND (a, b) IN (SELECT x.tag, y.tag FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag WHERE x.entry_id = old.id);
    DELETE FROM entry_tags WHERE entry_id = old.id;

        END;
        INSERT OR IGNORE INTO entry_tags(entry_id, tenant_id, tag)
            SELECT e.id, e.tenant_id, j.value FROM entries e, json_each(e.tags) j WHERE e.valid_to IS NULL;
        INSERT INTO tag_counts(tenant_id, tag, n) SELECT tenant_id, tag, count(*) FROM entry_tags GROUP BY 1, 2;
        INSERT INTO tag_pairs(tenant_id, a, b, n)
            SELECT x.tenant_id, x.tag, y.tag, count(*)
            FROM entry_tags x JOIN entry_tags y ON y.entry_id = x.entry_id AND x.tag < y.tag GROUP BY 1, 2, 3;
        INSERT INTO tag_graph_version(tenant_id, version) SELECT DISTINCT tenant_id, 1 FROM entry_tags;
        CREATE INDEX entries_tenant_type ON entries(tenant_id, type, valid_to, recorded_at);
        CREATE INDEX entries_thread ON entries(tenant_id, parent_id, valid_to, recorded_at) WHERE parent_id IS NOT NULL;
        CREATE TABLE cluster_names(
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            tags_sha256 BLOB NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            named_at INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, tags_sha256)
        ) WITHOUT ROWID;
        """
