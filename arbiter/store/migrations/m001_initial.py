"""m001_initial: `tenants` (token stored hashed), `conversations`, `entries`, `relations`, `settings` (admin
token hash).
"""

SQL = """
        CREATE TABLE tenants(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            token_hash BLOB NOT NULL UNIQUE,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE conversations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            title TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX conversations_tenant ON conversations(tenant_id, id);
        -- AUTOINCREMENT: a purged id is never handed to a new entry, so an old
        -- `#ID` reference can go dangling but never points at something else.
        CREATE TABLE entries(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            type TEXT NOT NULL CHECK (type IN ('user','feedback','project','reference','learning','context')),
            title TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            conversation_id INTEGER REFERENCES conversations(id),
            parent_id INTEGER REFERENCES entries(id) ON DELETE SET NULL,
            content_hash BLOB NOT NULL,
            recorded_at INTEGER NOT NULL,
            valid_from INTEGER NOT NULL,
            valid_to INTEGER
        );
        CREATE INDEX entries_tenant ON entries(tenant_id, id);
        CREATE INDEX entries_conversation ON entries(conversation_id) WHERE conversation_id IS NOT NULL;
        CREATE INDEX entries_parent ON entries(parent_id) WHERE parent_id IS NOT NULL;
        CREATE TABLE relations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            source_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN ('relates_to','refines','contradicts','supersedes','supports')),
            created_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        CREATE INDEX relations_target ON relations(target_id, relation);
        CREATE TABLE settings(key TEXT PRIMARY KEY, value BLOB NOT NULL);
        """
