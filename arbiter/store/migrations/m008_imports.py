"""m008_imports: `imports`, `import_ids` (see Export, backups).

Imports (arbiter/transfer): one row per (tenant, file sha256), so re-importing a file is a no-op that says so,
and an interrupted import resumes after its last committed batch. `import_ids` maps the file's ids to the new
ones while the import runs (dropped when it finishes): conversations 'c', entries 'e', entities 'n'.
"""

SQL = """
        CREATE TABLE imports(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            digest BLOB NOT NULL,
            source TEXT NOT NULL,
            lines INTEGER NOT NULL,
            lines_done INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            finished_at INTEGER,
            UNIQUE (tenant_id, digest)
        );
        CREATE TABLE import_ids(
            import_id INTEGER NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('c', 'e', 'n')),
            old_id INTEGER NOT NULL,
            new_id INTEGER NOT NULL,
            PRIMARY KEY (import_id, kind, old_id)
        ) WITHOUT ROWID;
        """
