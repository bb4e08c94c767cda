"""m011_salience_maintenance: `entry_salience`, `access_log`, `entry_sketches`, `entry_retirements`,
`maintenance_runs`, `entity_clusters`, `entity_backlog`.

Salience, the access log, duplicates, maintenance, entity clusters (arbiter/salience.py, duplicates.py,
maintenance.py, entities/clusters.py). `entry_salience` holds a row only for an entry that departs from the
defaults (given a salience, permanent, reinforced or read). `entry_sketches` holds each entry's content
fingerprint and MinHash band keys. `entry_retirements` records why maintenance retired an entry, so it can be
restored. `maintenance_runs` keeps each run's report. `entity_backlog` queues bulk-written entries for
extraction after the answer.
"""

SQL = """
        CREATE TABLE entry_salience(
            entry_id INTEGER PRIMARY KEY REFERENCES entries(id) ON DELETE CASCADE,
            tenant_id INTEGER NOT NULL,
            initial REAL NOT NULL DEFAULT 0.5 CHECK (initial BETWEEN 0 AND 1),
            decay_rate REAL NOT NULL DEFAULT 0.01 CHECK (decay_rate >= 0),
            permanent INTEGER NOT NULL DEFAULT 0,
            accesses INTEGER NOT NULL DEFAULT 0,
            last_access INTEGER,
            reinforcements INTEGER NOT NULL DEFAULT 0,
            salience REAL,
            computed_at INTEGER
        );
        CREATE TABLE access_log(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entry_id INTEGER NOT NULL,
            verb TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX access_log_at ON access_log(at);
        CREATE TABLE entry_sketches(
            tenant_id INTEGER NOT NULL,
            key INTEGER NOT NULL,
            entry_id INTEGER NOT NULL,
            PRIMARY KEY (tenant_id, key, entry_id)
        ) WITHOUT ROWID;
        CREATE TABLE entry_retirements(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
            reason TEXT NOT NULL,
            salience REAL NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX entry_retirements_entry ON entry_retirements(entry_id);
        CREATE TABLE maintenance_runs(
            id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL,
            at INTEGER NOT NULL,
            report TEXT NOT NULL
        );
        CREATE INDEX maintenance_runs_tenant ON maintenance_runs(tenant_id, at);
        CREATE TABLE entity_clusters(
            entity_id INTEGER PRIMARY KEY REFERENCES entities(id),
            tenant_id INTEGER NOT NULL,
            cluster INTEGER NOT NULL
        );
        CREATE INDEX entity_clusters_cluster ON entity_clusters(tenant_id, cluster);
        CREATE TABLE entity_backlog(
            entry_id INTEGER PRIMARY KEY,
            tenant_id INTEGER NOT NULL
        );
        """
