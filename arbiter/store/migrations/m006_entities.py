"""m006_entities: `entities`, `entity_names`, `entity_trigrams`, `entry_entities`, `entity_relations`,
`entity_events` (see Entities).

Entities (arbiter/entities): named things entries mention. Every name an entity answers to (its name, then
aliases) is a row of `entity_names` with its case-folded `key` (unique in the tenant) and normalised `norm`;
`entity_trigrams` indexes each name's trigrams for the similarity step of resolution. A merge or rename never
deletes: the merged entity keeps its row with `merged_into` and `retired_at`, and `entity_events` records what
moved. `entry_entities` links entries to what they mention (`how`: given, extracted, speaker, advisor);
`entity_relations` are the typed, weighted relations.
"""

SQL = """
        CREATE TABLE entities(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id INTEGER NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('person','organisation','project','concept','location','tool','event','other')),
            description TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            merged_into INTEGER REFERENCES entities(id),
            retired_at INTEGER
        );
        CREATE INDEX entities_tenant ON entities(tenant_id, type) WHERE merged_into IS NULL;
        CREATE TABLE entity_names(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            name TEXT NOT NULL,
            key TEXT NOT NULL,
            norm TEXT NOT NULL,
            grams INTEGER NOT NULL,
            is_alias INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            UNIQUE (tenant_id, key)
        );
        CREATE INDEX entity_names_norm ON entity_names(tenant_id, norm);
        CREATE INDEX entity_names_entity ON entity_names(entity_id);
        CREATE TABLE entity_trigrams(
            tenant_id INTEGER NOT NULL,
            gram TEXT NOT NULL,
            name_id INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, gram, name_id)
        ) WITHOUT ROWID;
        CREATE TABLE entry_entities(
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            tenant_id INTEGER NOT NULL,
            how TEXT NOT NULL CHECK (how IN ('given', 'extracted', 'speaker', 'advisor')),
            PRIMARY KEY (entry_id, entity_id)
        ) WITHOUT ROWID;
        CREATE INDEX entry_entities_entity ON entry_entities(entity_id, entry_id);
        CREATE TABLE entity_relations(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            source_id INTEGER NOT NULL REFERENCES entities(id),
            relation TEXT NOT NULL CHECK (relation IN ('related_to','works_on','part_of','depends_on','created_by','uses','knows','similar_to','caused_by','followed_by')),
            target_id INTEGER NOT NULL REFERENCES entities(id),
            weight REAL NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            CHECK (source_id != target_id),
            UNIQUE (source_id, target_id, relation)
        );
        CREATE INDEX entity_relations_target ON entity_relations(target_id);
        CREATE TABLE entity_events(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entity_id INTEGER NOT NULL REFERENCES entities(id),
            kind TEXT NOT NULL CHECK (kind IN ('merge', 'rename', 'retype')),
            detail TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX entity_events_entity ON entity_events(entity_id, at);
        """
