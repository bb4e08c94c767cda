"""m012_associations: stored similarity edges (`associations`), the `entries_time` index for temporal neighbours,
`causes` in the relation vocabulary (see Associations).

The association graph (arbiter/associations): stored similarity edges (a < b, one row a pair; deleted with
either entry), an index for the temporal proximity neighbours (entries near a `valid_from`), and `causes` in
the relation vocabulary so a confirmed causal candidate can be said (SQLite cannot alter a CHECK: the table is
rebuilt as is).
"""

SQL = """
        CREATE TABLE associations(
            tenant_id INTEGER NOT NULL,
            a INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            b INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            weight REAL NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (a, b),
            CHECK (a < b)
        ) WITHOUT ROWID;
        CREATE INDEX associations_b ON associations(b);
        CREATE INDEX entries_time ON entries(tenant_id, valid_from);
        CREATE TABLE relations_m012(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            source_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN ('relates_to','refines','contradicts','supersedes','supports','causes')),
            created_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        INSERT INTO relations_m012 SELECT id, tenant_id, source_id, target_id, relation, created_at FROM relations;
        DROP TABLE relations;
        ALTER TABLE relations_m012 RENAME TO relations;
        CREATE INDEX relations_target ON relations(target_id, relation);
        """
