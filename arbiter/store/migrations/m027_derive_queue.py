"""m027_derive_queue: one queue of what is derived from entries in Python, filled by the entries triggers
(arbiter/derive.py).

Before it, `remember` derived in the verb, `remember_many` queued its
entries in `entity_backlog`, the idle writer caught associations up past a
watermark (settings `associations_through`), and an import did neither: its
entries had no duplicate keys (they get their fingerprints here). Now an insert
queues the `sketch`, `entities` and `associations` derivers (the store writes
the new entry's fingerprint with it: from the text it holds, it costs a bulk
write a tenth of what the trigger's decompress-and-hash did); a change of title, text or speaker swaps the keys
and queues the first two again; a delete takes its keys and queue rows.
Frozen: the SQL functions are the ones `connect` registers
(arbiter/duplicates.py).
"""

import apsw


def apply(conn: apsw.Connection) -> None:
    through = conn.execute("SELECT value FROM settings WHERE key = 'associations_through'").fetchone()
    conn.execute("""
        CREATE TABLE derive_queue(
            deriver TEXT NOT NULL,
            entry_id INTEGER NOT NULL,
            tenant_id INTEGER NOT NULL,
            PRIMARY KEY (deriver, entry_id)
        ) WITHOUT ROWID;
        INSERT INTO derive_queue(deriver, entry_id, tenant_id)
            SELECT 'entities', entry_id, tenant_id FROM entity_backlog
            UNION ALL SELECT 'sketch', entry_id, tenant_id FROM entity_backlog;
        DROP TABLE entity_backlog;
        INSERT OR IGNORE INTO entry_sketches(tenant_id, key, entry_id)
            SELECT tenant_id, arbiter_fingerprint(content), id FROM entries;
        DELETE FROM settings WHERE key = 'associations_through';
        CREATE TRIGGER entries_derive_insert AFTER INSERT ON entries BEGIN
            INSERT INTO derive_queue(deriver, entry_id, tenant_id)
                VALUES ('entities', new.id, new.tenant_id), ('sketch', new.id, new.tenant_id),
                       ('associations', new.id, new.tenant_id);
        END;
        CREATE TRIGGER entries_derive_update AFTER UPDATE OF title, content_z, speaker ON entries BEGIN
            DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id
                AND key IN (SELECT value FROM json_each(arbiter_sketch_keys(old.content)));
            INSERT OR IGNORE INTO entry_sketches(tenant_id, key, entry_id)
                VALUES (new.tenant_id, arbiter_fingerprint(new.content), new.id);
            INSERT OR IGNORE INTO derive_queue(deriver, entry_id, tenant_id)
                VALUES ('entities', new.id, new.tenant_id), ('sketch', new.id, new.tenant_id);
        END;
        CREATE TRIGGER entries_derive_delete AFTER DELETE ON entries BEGIN
            DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id
                AND key IN (SELECT value FROM json_each(arbiter_sketch_keys(old.content)));
            DELETE FROM derive_queue WHERE deriver IN ('entities', 'sketch', 'associations') AND entry_id = old.id;
        END;
    """)
    conn.execute(
        "INSERT INTO derive_queue(deriver, entry_id, tenant_id) SELECT 'associations', id, tenant_id FROM entries "
        "WHERE id > ?", (int(through[0]) if through else 0,))
