"""m018_import_fact_ids: `import_ids` (an import's id map) also maps fact batches (`b`) and facts (`f`), for
facts in export files.

Imports carry facts (transfer/facts.py): the id map gains fact batches 'b' and facts 'f'.
"""

SQL = """
        CREATE TABLE import_ids_m018(
            import_id INTEGER NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
            kind TEXT NOT NULL CHECK (kind IN ('c', 'e', 'n', 'b', 'f')),
            old_id INTEGER NOT NULL,
            new_id INTEGER NOT NULL,
            PRIMARY KEY (import_id, kind, old_id)
        ) WITHOUT ROWID;
        INSERT INTO import_ids_m018 SELECT import_id, kind, old_id, new_id FROM import_ids;
        DROP TABLE import_ids;
        ALTER TABLE import_ids_m018 RENAME TO import_ids;
        """
