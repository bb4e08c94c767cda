"""m009_facts: facts behind the evaluation gate: `patch_batches`, `facts`, `fact_revisions`, `fact_sources`,
`predicates`, `fact_aspects`, `aspect_scores`, `aspect_members`, `facts_fts`, and the gate's triggers (see
Facts).

Facts behind the evaluation gate (arbiter/facts): predicates, patch batches, facts with their revisions
(record time), sources, aspects and the facts' FTS index for recall. The gate's triggers live here too.

The gate is enforced by the database as well as by the code: a fact is inserted only as a candidate, becomes
active only while its batch is `evaluated` and its own finding passes (the apply step), never leaves
`rejected`, and never changes its subject, predicate, object or valid_from. Every change of status, valid_to
or confidence appends a `fact_revisions` row (record time), so no prior state is ever overwritten. Aspect
counts (facts, confidence sum, distinct entities and predicates per aspect) are kept by triggers as facts gain
aspects and retire, so scoring an aspect at apply reads a few rows instead of every fact in it.
"""

SQL = """
CREATE TABLE predicates(
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    functional INTEGER NOT NULL CHECK (functional IN (0, 1)),
    declared_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
) WITHOUT ROWID;
CREATE TABLE patch_batches(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    origin TEXT NOT NULL CHECK (origin IN ('agent', 'extractor', 'import')),
    status TEXT NOT NULL CHECK (status IN ('proposed', 'evaluated', 'applied', 'rejected')),
    threshold REAL NOT NULL,
    note TEXT,
    created_at INTEGER NOT NULL,
    evaluated_at INTEGER,
    decided_at INTEGER
);
CREATE INDEX patch_batches_tenant ON patch_batches(tenant_id, status, id);
CREATE TABLE facts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    batch_id INTEGER NOT NULL REFERENCES patch_batches(id),
    subject TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    subject_entity_id INTEGER,
    predicate TEXT NOT NULL,
    object TEXT NOT NULL,
    object_key TEXT NOT NULL,
    object_entity_id INTEGER,
    confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    status TEXT NOT NULL CHECK (status IN ('candidate', 'active', 'rejected')),
    valid_from INTEGER NOT NULL,
    valid_to INTEGER,
    supersedes_fact_id INTEGER REFERENCES facts(id),
    aspect_slugs TEXT NOT NULL DEFAULT '[]',
    finding TEXT,
    finding_fact_id INTEGER,
    reason TEXT,
    recorded_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL
);
CREATE INDEX facts_subject ON facts(tenant_id, subject_key, predicate, valid_to) WHERE status = 'active';
CREATE INDEX facts_tenant_status ON facts(tenant_id, status, id);
CREATE INDEX facts_batch ON facts(batch_id);
CREATE INDEX facts_supersedes ON facts(supersedes_fact_id) WHERE supersedes_fact_id IS NOT NULL;
CREATE TABLE fact_sources(
    fact_id INTEGER NOT NULL REFERENCES facts(id),
    entry_id INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    PRIMARY KEY (fact_id, entry_id)
) WITHOUT ROWID;
CREATE INDEX fact_sources_entry ON fact_sources(entry_id);
CREATE TABLE fact_aspects(
    fact_id INTEGER NOT NULL REFERENCES facts(id),
    aspect TEXT NOT NULL,
    tenant_id INTEGER NOT NULL,
    PRIMARY KEY (fact_id, aspect)
) WITHOUT ROWID;
CREATE INDEX fact_aspects_aspect ON fact_aspects(tenant_id, aspect, fact_id);
CREATE TABLE aspect_scores(
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    aspect TEXT NOT NULL,
    score INTEGER NOT NULL DEFAULT 0,
    facts INTEGER NOT NULL DEFAULT 0,
    confidence_sum REAL NOT NULL DEFAULT 0,
    entities INTEGER NOT NULL DEFAULT 0,
    predicates INTEGER NOT NULL DEFAULT 0,
    computed_at INTEGER,
    PRIMARY KEY (tenant_id, aspect)
) WITHOUT ROWID;
CREATE TABLE aspect_members(
    tenant_id INTEGER NOT NULL,
    aspect TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('entity', 'predicate')),
    value TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, aspect, kind, value)
) WITHOUT ROWID;
CREATE TABLE fact_revisions(
    id INTEGER PRIMARY KEY,
    fact_id INTEGER NOT NULL REFERENCES facts(id),
    status TEXT NOT NULL,
    valid_to INTEGER,
    confidence REAL NOT NULL,
    recorded_at INTEGER NOT NULL
);
CREATE INDEX fact_revisions_fact ON fact_revisions(fact_id, recorded_at);
CREATE TRIGGER facts_insert_candidate BEFORE INSERT ON facts WHEN new.status != 'candidate' BEGIN
    SELECT RAISE(ABORT, 'facts are inserted as candidates: only applying an evaluated batch makes one active');
END;
CREATE TRIGGER facts_gate BEFORE UPDATE OF status ON facts
WHEN new.status = 'active' AND old.status != 'active' AND NOT (
    old.status = 'candidate' AND new.finding IN ('accept', 'supersede')
    AND (SELECT status FROM patch_batches WHERE id = new.batch_id) = 'evaluated'
) BEGIN
    SELECT RAISE(ABORT, 'a fact becomes active only when its evaluated batch is applied');
END;
CREATE TRIGGER facts_rejected_final BEFORE UPDATE OF status ON facts
WHEN old.status = 'rejected' AND new.status != 'rejected' BEGIN
    SELECT RAISE(ABORT, 'a rejected fact stays rejected');
END;
CREATE TRIGGER facts_immutable BEFORE UPDATE OF tenant_id, batch_id, subject, subject_key, predicate, object,
    object_key, valid_from, recorded_at ON facts
WHEN old.tenant_id IS NOT new.tenant_id OR old.batch_id IS NOT new.batch_id OR old.subject IS NOT new.subject
    OR old.subject_key IS NOT new.subject_key OR old.predicate IS NOT new.predicate OR old.object IS NOT new.object
    OR old.object_key IS NOT new.object_key OR old.valid_from IS NOT new.valid_from
    OR old.recorded_at IS NOT new.recorded_at BEGIN
    SELECT RAISE(ABORT, 'a fact''s statement never changes: propose a new fact that supersedes it');
END;
CREATE TRIGGER facts_revision_insert AFTER INSERT ON facts BEGIN
    INSERT INTO fact_revisions(fact_id, status, valid_to, confidence, recorded_at)
    VALUES (new.id, new.status, new.valid_to, new.confidence, new.recorded_at);
END;
CREATE TRIGGER facts_revision_update AFTER UPDATE OF status, valid_to, confidence ON facts
WHEN old.status IS NOT new.status OR old.valid_to IS NOT new.valid_to OR old.confidence IS NOT new.confidence BEGIN
    INSERT INTO fact_revisions(fact_id, status, valid_to, confidence, recorded_at)
    VALUES (new.id, new.status, new.valid_to, new.confidence, new.changed_at);
END;
CREATE TRIGGER fact_aspects_count AFTER INSERT ON fact_aspects BEGIN
    INSERT INTO aspect_scores(tenant_id, aspect, facts, confidence_sum)
        SELECT new.tenant_id, new.aspect, 1, f.confidence FROM facts f WHERE f.id = new.fact_id
        ON CONFLICT DO UPDATE SET facts = facts + 1, confidence_sum = confidence_sum + excluded.confidence_sum;
    INSERT INTO aspect_members(tenant_id, aspect, kind, value, n)
        SELECT new.tenant_id, new.aspect, 'entity', v, 1 FROM (
            SELECT coalesce('e' || subject_entity_id, 't' || subject_key) AS v FROM facts WHERE id = new.fact_id
            UNION SELECT coalesce('e' || object_entity_id, 't' || object_key) FROM facts WHERE id = new.fact_id
        ) WHERE true
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO aspect_members(tenant_id, aspect, kind, value, n)
        SELECT new.tenant_id, new.aspect, 'predicate', predicate, 1 FROM facts WHERE id = new.fact_id
        ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER facts_aspects_retire AFTER UPDATE OF valid_to ON facts
WHEN old.valid_to IS NULL AND new.valid_to IS NOT NULL AND new.status = 'active' BEGIN
    UPDATE aspect_scores SET facts = facts - 1, confidence_sum = confidence_sum - old.confidence
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id);
    -- One statement per kind, each an equality on the primary key: an OR
    -- across kinds made SQLite scan every member of the aspect.
    UPDATE aspect_members SET n = n - 1
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id)
        AND kind = 'predicate' AND value = new.predicate;
    UPDATE aspect_members SET n = n - 1
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id)
        AND kind = 'entity' AND value IN (coalesce('e' || new.subject_entity_id, 't' || new.subject_key),
                                          coalesce('e' || new.object_entity_id, 't' || new.object_key));
    DELETE FROM aspect_members
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id)
        AND kind = 'predicate' AND value = new.predicate AND n <= 0;
    DELETE FROM aspect_members
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id)
        AND kind = 'entity' AND value IN (coalesce('e' || new.subject_entity_id, 't' || new.subject_key),
                                          coalesce('e' || new.object_entity_id, 't' || new.object_key))
        AND n <= 0;
END;
CREATE TRIGGER facts_aspects_confidence AFTER UPDATE OF confidence ON facts
WHEN new.status = 'active' AND new.valid_to IS NULL AND old.valid_to IS NULL AND old.confidence != new.confidence BEGIN
    UPDATE aspect_scores SET confidence_sum = confidence_sum + new.confidence - old.confidence
        WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE fact_id = new.id);
END;
CREATE VIRTUAL TABLE facts_fts USING fts5(
    subject, predicate, object, scope,
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER facts_fts_activate AFTER UPDATE OF status ON facts
WHEN new.status = 'active' AND old.status != 'active' BEGIN
    INSERT INTO facts_fts(rowid, subject, predicate, object, scope)
    VALUES (new.id, new.subject, replace(new.predicate, '_', ' '), new.object, 't' || new.tenant_id);
END;
"""
