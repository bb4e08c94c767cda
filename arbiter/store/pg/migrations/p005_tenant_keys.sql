-- Arbiter on PostgreSQL, step 5: the keys Citus needs to distribute every tenant's table by tenant_id.
--
-- Citus places a distributed table's rows by one column and can enforce a primary, unique or foreign key only
-- if it holds that column (docs/architecture.md, "PostgreSQL"). So every such key of a table that holds a
-- tenant's rows now leads with tenant_id, and every foreign key between two of them carries it: with these,
-- `create_distributed_table(t, 'tenant_id', colocate_with => 'entries')` accepts each. The directory (tenants,
-- users, teams, team_members, scopes, settings, schema_version) stays as it is: it becomes reference tables,
-- and a key to a reference table needs no tenant_id. Ids stay global (their sequences are untouched): an id
-- still names one row in the whole database, so nothing that holds one changes meaning.
-- The triggers that write those tables are replaced to name the new keys in ON CONFLICT and to pin their
-- tenant in every statement, as the statements Arbiter sends do.

-- A table that holds a tenant's rows but had no tenant_id gets it from its owner row.
ALTER TABLE import_ids ADD COLUMN tenant_id bigint;
UPDATE import_ids x SET tenant_id = i.tenant_id FROM imports i WHERE i.id = x.import_id;
ALTER TABLE import_ids ALTER COLUMN tenant_id SET NOT NULL;

-- Primary and unique keys lead with tenant_id. CASCADE drops the foreign keys that lean on the old keys; all of
-- them are made again below, with tenant_id.
ALTER TABLE conversations DROP CONSTRAINT conversations_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entries DROP CONSTRAINT entries_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entry_revisions DROP CONSTRAINT entry_revisions_pkey, ADD PRIMARY KEY (tenant_id, id);
DROP INDEX entry_revisions_entry;
CREATE UNIQUE INDEX entry_revisions_entry ON entry_revisions(tenant_id, entry_id, recorded_to);
ALTER TABLE relations DROP CONSTRAINT relations_pkey, ADD PRIMARY KEY (tenant_id, id),
    DROP CONSTRAINT relations_source_id_target_id_relation_key, ADD UNIQUE (tenant_id, source_id, target_id, relation);
ALTER TABLE entry_retirements DROP CONSTRAINT entry_retirements_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entry_salience DROP CONSTRAINT entry_salience_pkey, ADD PRIMARY KEY (tenant_id, entry_id);
ALTER TABLE access_log DROP CONSTRAINT access_log_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE maintenance_runs DROP CONSTRAINT maintenance_runs_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE imports DROP CONSTRAINT imports_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE import_ids DROP CONSTRAINT import_ids_pkey, ADD PRIMARY KEY (tenant_id, import_id, kind, old_id);
ALTER TABLE derive_queue DROP CONSTRAINT derive_queue_pkey, ADD PRIMARY KEY (tenant_id, deriver, entry_id);
ALTER TABLE recall_entries DROP CONSTRAINT recall_entries_pkey, ADD PRIMARY KEY (tenant_id, entry_id);
ALTER TABLE entry_tags DROP CONSTRAINT entry_tags_pkey, ADD PRIMARY KEY (tenant_id, scope_id, tag, entry_id);
ALTER TABLE tag_counts DROP CONSTRAINT tag_counts_pkey, ADD PRIMARY KEY (tenant_id, scope_id, tag);
ALTER TABLE tag_pairs DROP CONSTRAINT tag_pairs_pkey, ADD PRIMARY KEY (tenant_id, scope_id, a, b);
ALTER TABLE tag_graph_version DROP CONSTRAINT tag_graph_version_pkey, ADD PRIMARY KEY (tenant_id, scope_id);
ALTER TABLE entities DROP CONSTRAINT entities_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entity_names DROP CONSTRAINT entity_names_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entity_relations DROP CONSTRAINT entity_relations_pkey, ADD PRIMARY KEY (tenant_id, id),
    DROP CONSTRAINT entity_relations_source_id_target_id_relation_key,
    ADD UNIQUE (tenant_id, source_id, target_id, relation);
ALTER TABLE entity_events DROP CONSTRAINT entity_events_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE entity_clusters DROP CONSTRAINT entity_clusters_pkey, ADD PRIMARY KEY (tenant_id, entity_id);
ALTER TABLE entry_entities DROP CONSTRAINT entry_entities_pkey, ADD PRIMARY KEY (tenant_id, entry_id, entity_id);
ALTER TABLE associations DROP CONSTRAINT associations_pkey, ADD PRIMARY KEY (tenant_id, a, b);
ALTER TABLE patch_batches DROP CONSTRAINT patch_batches_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE facts DROP CONSTRAINT facts_pkey CASCADE, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE fact_revisions DROP CONSTRAINT fact_revisions_pkey, ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE fact_sources DROP CONSTRAINT fact_sources_pkey, ADD PRIMARY KEY (tenant_id, fact_id, entry_id);
ALTER TABLE fact_aspects DROP CONSTRAINT fact_aspects_pkey, ADD PRIMARY KEY (tenant_id, fact_id, aspect);
-- Already keyed by tenant first: entry_sketches, cluster_names, fulltext_*, entity_trigrams, aspect_scores,
-- aspect_members, predicates (and imports' digest, entity_names' key).

-- Foreign keys between a tenant's tables carry tenant_id, so each stays within one node. A reference from a
-- child's own column alone (parent_id, merged_into) is set to NULL alone: its tenant_id stays.
ALTER TABLE entries
    ADD FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations(tenant_id, id),
    ADD FOREIGN KEY (tenant_id, parent_id) REFERENCES entries(tenant_id, id) ON DELETE SET NULL (parent_id);
ALTER TABLE entry_revisions
    ADD FOREIGN KEY (tenant_id, entry_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE relations
    ADD FOREIGN KEY (tenant_id, source_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE,
    ADD FOREIGN KEY (tenant_id, target_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE entry_retirements
    ADD FOREIGN KEY (tenant_id, entry_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE entry_salience
    ADD FOREIGN KEY (tenant_id, entry_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE import_ids
    ADD FOREIGN KEY (tenant_id, import_id) REFERENCES imports(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE entities
    ADD FOREIGN KEY (tenant_id, merged_into) REFERENCES entities(tenant_id, id);
ALTER TABLE entity_names
    ADD FOREIGN KEY (tenant_id, entity_id) REFERENCES entities(tenant_id, id);
ALTER TABLE entity_relations
    ADD FOREIGN KEY (tenant_id, source_id) REFERENCES entities(tenant_id, id),
    ADD FOREIGN KEY (tenant_id, target_id) REFERENCES entities(tenant_id, id);
ALTER TABLE entity_events
    ADD FOREIGN KEY (tenant_id, entity_id) REFERENCES entities(tenant_id, id);
ALTER TABLE entity_clusters
    ADD FOREIGN KEY (tenant_id, entity_id) REFERENCES entities(tenant_id, id);
ALTER TABLE entry_entities
    ADD FOREIGN KEY (tenant_id, entry_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE,
    ADD FOREIGN KEY (tenant_id, entity_id) REFERENCES entities(tenant_id, id);
ALTER TABLE associations
    ADD FOREIGN KEY (tenant_id, a) REFERENCES entries(tenant_id, id) ON DELETE CASCADE,
    ADD FOREIGN KEY (tenant_id, b) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE facts
    ADD FOREIGN KEY (tenant_id, batch_id) REFERENCES patch_batches(tenant_id, id),
    ADD FOREIGN KEY (tenant_id, supersedes_fact_id) REFERENCES facts(tenant_id, id);
ALTER TABLE fact_revisions
    ADD FOREIGN KEY (tenant_id, fact_id) REFERENCES facts(tenant_id, id);
ALTER TABLE fact_sources
    ADD FOREIGN KEY (tenant_id, fact_id) REFERENCES facts(tenant_id, id),
    ADD FOREIGN KEY (tenant_id, entry_id) REFERENCES entries(tenant_id, id) ON DELETE CASCADE;
ALTER TABLE fact_aspects
    ADD FOREIGN KEY (tenant_id, fact_id) REFERENCES facts(tenant_id, id);

-- entries_tenant and conversations_tenant were (tenant_id, id): their primary keys now. The indexes that served a lookup by another id
-- alone lead with tenant_id too, as every statement now pins it.
DROP INDEX entries_tenant;
DROP INDEX conversations_tenant;
DROP INDEX relations_target;
CREATE INDEX relations_target ON relations(tenant_id, target_id, relation);
DROP INDEX entry_retirements_entry;
CREATE INDEX entry_retirements_entry ON entry_retirements(tenant_id, entry_id);
DROP INDEX entity_names_entity;
CREATE INDEX entity_names_entity ON entity_names(tenant_id, entity_id);
DROP INDEX entity_relations_target;
CREATE INDEX entity_relations_target ON entity_relations(tenant_id, target_id);
DROP INDEX entity_events_entity;
CREATE INDEX entity_events_entity ON entity_events(tenant_id, entity_id, at);
DROP INDEX entry_entities_entity;
CREATE INDEX entry_entities_entity ON entry_entities(tenant_id, entity_id, entry_id);
DROP INDEX associations_b;
CREATE INDEX associations_b ON associations(tenant_id, b);
-- Entries, past states and facts are still read by id alone where the writer indexes its full text and cuts
-- snippets (store/pg/indexing.py, not yet pinned): with their keys led by tenant_id, only these keep those reads
-- from scanning the whole key. Plain indexes, which Citus takes on any column.
CREATE INDEX entries_id ON entries(id);
CREATE INDEX entry_revisions_id ON entry_revisions(id);
CREATE INDEX facts_id ON facts(id);
-- The queue's old key, kept as an index: the idle writer's one read across tenants, whose entry waits longest
-- (derive.py `step`), and the writer's look at its own queue (store/pg/indexing.py) read it in this order.
CREATE INDEX derive_queue_next ON derive_queue(deriver, entry_id);
DROP INDEX facts_batch;
CREATE INDEX facts_batch ON facts(tenant_id, batch_id);
DROP INDEX fact_revisions_fact;
CREATE INDEX fact_revisions_fact ON fact_revisions(tenant_id, fact_id, recorded_at);
DROP INDEX fact_sources_entry;
CREATE INDEX fact_sources_entry ON fact_sources(tenant_id, entry_id);

-- Every INSERT into fact_sources names its tenant now (facts/store.py `add_sources`): the trigger that filled it
-- from the fact goes, so one that does not is refused rather than routed nowhere.
DROP TRIGGER fact_sources_tenant ON fact_sources;
DROP FUNCTION arbiter_fact_tenant();

-- The tag graph and recall's rows are written under their new keys.
CREATE OR REPLACE FUNCTION arbiter_entries_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH t AS MATERIALIZED (
        SELECT DISTINCT a.scope_id, x.value AS tag, a.id AS entry_id, a.tenant_id
        FROM added a, jsonb_array_elements_text(a.tags::jsonb) x WHERE a.valid_to IS NULL AND a.tags != '[]'
    ), tagged AS (
        INSERT INTO entry_tags(scope_id, tag, entry_id, tenant_id)
            SELECT scope_id, tag, entry_id, tenant_id FROM t ORDER BY scope_id, tag, entry_id
            ON CONFLICT DO NOTHING
    ), counted AS (
        INSERT INTO tag_counts(scope_id, tag, n, tenant_id)
            SELECT scope_id, tag, count(*), min(tenant_id) FROM t GROUP BY scope_id, tag ORDER BY scope_id, tag
            ON CONFLICT (tenant_id, scope_id, tag) DO UPDATE SET n = tag_counts.n + excluded.n
    ), paired AS (
        INSERT INTO tag_pairs(scope_id, a, b, n, tenant_id)
            SELECT x.scope_id, x.tag, y.tag, count(*), min(x.tenant_id)
            FROM t x JOIN t y ON y.entry_id = x.entry_id AND x.tag < y.tag
            GROUP BY x.scope_id, x.tag, y.tag ORDER BY x.scope_id, x.tag, y.tag
            ON CONFLICT (tenant_id, scope_id, a, b) DO UPDATE SET n = tag_pairs.n + excluded.n
    )
    INSERT INTO tag_graph_version(scope_id, version, tenant_id)
        SELECT scope_id, 1, min(tenant_id) FROM t GROUP BY scope_id ORDER BY scope_id
        ON CONFLICT (tenant_id, scope_id) DO UPDATE SET version = tag_graph_version.version + 1;
    INSERT INTO recall_entries
        SELECT a.id, a.tenant_id, a.type, a.conversation_id, a.valid_from, a.valid_to, octet_length(a.content),
               r.self_refs, r.other_refs, arbiter_numerals(a.content)
        FROM added a, LATERAL arbiter_refs(a.content) r;
    INSERT INTO derive_queue(deriver, entry_id, tenant_id)
        SELECT d.deriver, a.id, a.tenant_id
        FROM added a CROSS JOIN (VALUES ('entities'), ('sketch'), ('associations')) d(deriver);
    RETURN NULL;
END
$$;

-- What a change to an entry, or its deletion, does to what is derived from it.

CREATE OR REPLACE FUNCTION arbiter_entries_after() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    -- The tag graph forgets the old state of a current entry.
    IF old.valid_to IS NULL AND old.tags != '[]' AND (TG_OP = 'DELETE' OR old.tags IS DISTINCT FROM new.tags
            OR old.valid_to IS DISTINCT FROM new.valid_to OR old.scope_id IS DISTINCT FROM new.scope_id) THEN
        UPDATE tag_graph_version SET version = version + 1 WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id;
        UPDATE tag_counts SET n = n - 1 WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id
            AND tag IN (SELECT DISTINCT value FROM jsonb_array_elements_text(old.tags::jsonb));
        DELETE FROM tag_counts WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id AND n <= 0;
        UPDATE tag_pairs SET n = n - 1 WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id AND (a, b) IN (
            SELECT DISTINCT x, y FROM jsonb_array_elements_text(old.tags::jsonb) x,
                                      jsonb_array_elements_text(old.tags::jsonb) y WHERE x < y);
        DELETE FROM tag_pairs WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id AND n <= 0;
        DELETE FROM entry_tags WHERE tenant_id = old.tenant_id AND scope_id = old.scope_id AND entry_id = old.id;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM recall_entries WHERE tenant_id = old.tenant_id AND entry_id = old.id;
        DELETE FROM derive_queue WHERE tenant_id = old.tenant_id AND entry_id = old.id AND deriver IN ('entities', 'sketch', 'associations');
        DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id;
        RETURN old;
    END IF;
    IF new.valid_to IS NULL AND new.tags != '[]' AND (old.tags IS DISTINCT FROM new.tags
            OR old.valid_to IS DISTINCT FROM new.valid_to OR old.scope_id IS DISTINCT FROM new.scope_id) THEN
        INSERT INTO entry_tags(scope_id, tag, entry_id, tenant_id)
            SELECT DISTINCT new.scope_id, value, new.id, new.tenant_id FROM jsonb_array_elements_text(new.tags::jsonb)
            ON CONFLICT DO NOTHING;
        INSERT INTO tag_counts(scope_id, tag, n, tenant_id)
            SELECT DISTINCT new.scope_id, value, 1, new.tenant_id FROM jsonb_array_elements_text(new.tags::jsonb)
            ON CONFLICT (tenant_id, scope_id, tag) DO UPDATE SET n = tag_counts.n + 1;
        INSERT INTO tag_pairs(scope_id, a, b, n, tenant_id)
            SELECT DISTINCT new.scope_id, x, y, 1, new.tenant_id FROM jsonb_array_elements_text(new.tags::jsonb) x,
                                                                   jsonb_array_elements_text(new.tags::jsonb) y
            WHERE x < y
            ON CONFLICT (tenant_id, scope_id, a, b) DO UPDATE SET n = tag_pairs.n + 1;
        INSERT INTO tag_graph_version(scope_id, version, tenant_id) VALUES (new.scope_id, 1, new.tenant_id)
            ON CONFLICT (tenant_id, scope_id) DO UPDATE SET version = tag_graph_version.version + 1;
    END IF;
    IF old.type IS DISTINCT FROM new.type OR old.content IS DISTINCT FROM new.content
            OR old.conversation_id IS DISTINCT FROM new.conversation_id OR old.valid_from IS DISTINCT FROM new.valid_from
            OR old.valid_to IS DISTINCT FROM new.valid_to THEN
        r := arbiter_refs(new.content);
        INSERT INTO recall_entries VALUES (new.id, new.tenant_id, new.type, new.conversation_id, new.valid_from,
                                           new.valid_to, octet_length(new.content), r.self_refs, r.other_refs,
                                           arbiter_numerals(new.content))
            ON CONFLICT (tenant_id, entry_id) DO UPDATE SET type = excluded.type, conversation_id = excluded.conversation_id,
                valid_from = excluded.valid_from, valid_to = excluded.valid_to, bytes = excluded.bytes,
                self_refs = excluded.self_refs, other_refs = excluded.other_refs, numerals = excluded.numerals;
    END IF;
    IF old.title IS DISTINCT FROM new.title OR old.content IS DISTINCT FROM new.content
            OR old.speaker IS DISTINCT FROM new.speaker THEN
        -- Every key goes, the fingerprint too: the sketch deriver writes them all again (duplicates.add).
        DELETE FROM entry_sketches WHERE tenant_id = old.tenant_id AND entry_id = old.id;
        INSERT INTO derive_queue(deriver, entry_id, tenant_id)
            VALUES ('entities', new.id, new.tenant_id), ('sketch', new.id, new.tenant_id)
            ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP = 'UPDATE' AND new.revised_at IS DISTINCT FROM old.revised_at THEN
        INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                    type, title, content, tags, source, speaker, valid_from, valid_to)
        VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                new.revised_at, old.type, old.title, old.content, old.tags, old.source, old.speaker,
                old.valid_from, old.valid_to);
    END IF;
    RETURN new;
END
$$;

-- The facts' triggers read their batch, their aspects and their fact within the tenant.
CREATE OR REPLACE FUNCTION arbiter_facts_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF new.status != 'candidate' THEN
            RAISE EXCEPTION 'facts are inserted as candidates: only applying an evaluated batch makes one active'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN new;
    END IF;
    IF old.author_id IS NOT NULL AND (old.author_id IS DISTINCT FROM new.author_id
            OR old.scope_id IS DISTINCT FROM new.scope_id) THEN
        RAISE EXCEPTION 'a fact keeps the author and scope of its batch'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF old.status = 'rejected' AND new.status != 'rejected' THEN
        RAISE EXCEPTION 'a rejected fact stays rejected' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF old.tenant_id IS DISTINCT FROM new.tenant_id OR old.batch_id IS DISTINCT FROM new.batch_id
            OR old.subject IS DISTINCT FROM new.subject OR old.subject_key IS DISTINCT FROM new.subject_key
            OR old.predicate IS DISTINCT FROM new.predicate OR old.object IS DISTINCT FROM new.object
            OR old.object_key IS DISTINCT FROM new.object_key OR old.valid_from IS DISTINCT FROM new.valid_from
            OR old.recorded_at IS DISTINCT FROM new.recorded_at THEN
        RAISE EXCEPTION 'a fact''s statement never changes: propose a new fact that supersedes it'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    -- coalesce: a finding set to NULL (or a batch not there) made the condition unknown, and IF on an unknown runs
    -- nothing, so a direct UPDATE could activate a fact no evaluation passed (SQLite's m028_fact_gate).
    IF new.status = 'active' AND old.status != 'active' AND NOT coalesce(
            old.status = 'candidate' AND new.finding IN ('accept', 'supersede')
            AND (SELECT status FROM patch_batches WHERE tenant_id = new.tenant_id AND id = new.batch_id) = 'evaluated',
            false) THEN
        RAISE EXCEPTION 'a fact becomes active only when its evaluated batch is applied'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN new;
END
$$;

-- A fact's history and the aspects' running counts (SQLite: facts_revision_insert, facts_revision_update,
-- facts_aspects_confidence, facts_aspects_retire).
CREATE OR REPLACE FUNCTION arbiter_facts_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO fact_revisions(fact_id, tenant_id, status, valid_to, confidence, recorded_at)
        VALUES (new.id, new.tenant_id, new.status, new.valid_to, new.confidence, new.recorded_at);
        RETURN new;
    END IF;
    IF old.status IS DISTINCT FROM new.status OR old.valid_to IS DISTINCT FROM new.valid_to
            OR old.confidence IS DISTINCT FROM new.confidence THEN
        INSERT INTO fact_revisions(fact_id, tenant_id, status, valid_to, confidence, recorded_at)
        VALUES (new.id, new.tenant_id, new.status, new.valid_to, new.confidence, new.changed_at);
    END IF;
    IF new.status = 'active' AND new.valid_to IS NULL AND old.valid_to IS NULL
            AND old.confidence != new.confidence THEN
        UPDATE aspect_scores SET confidence_sum = confidence_sum + new.confidence - old.confidence
            WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE tenant_id = new.tenant_id AND fact_id = new.id);
    END IF;
    IF old.valid_to IS NULL AND new.valid_to IS NOT NULL AND new.status = 'active' THEN
        UPDATE aspect_scores SET facts = facts - 1, confidence_sum = confidence_sum - old.confidence
            WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE tenant_id = new.tenant_id AND fact_id = new.id);
        UPDATE aspect_members SET n = n - 1
            WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE tenant_id = new.tenant_id AND fact_id = new.id)
            AND ((kind = 'predicate' AND value = new.predicate)
                 OR (kind = 'entity' AND value IN (coalesce('e' || new.subject_entity_id, 't' || new.subject_key),
                                                   coalesce('e' || new.object_entity_id, 't' || new.object_key))));
        DELETE FROM aspect_members
            WHERE tenant_id = new.tenant_id AND aspect IN (SELECT aspect FROM fact_aspects WHERE tenant_id = new.tenant_id AND fact_id = new.id)
            AND ((kind = 'predicate' AND value = new.predicate)
                 OR (kind = 'entity' AND value IN (coalesce('e' || new.subject_entity_id, 't' || new.subject_key),
                                                   coalesce('e' || new.object_entity_id, 't' || new.object_key))))
            AND n <= 0;
    END IF;
    RETURN new;
END
$$;


CREATE OR REPLACE FUNCTION arbiter_fact_aspects_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aspect_scores(tenant_id, aspect, facts, confidence_sum)
        SELECT new.tenant_id, new.aspect, 1, f.confidence FROM facts f WHERE f.tenant_id = new.tenant_id AND f.id = new.fact_id
        ON CONFLICT (tenant_id, aspect) DO UPDATE SET facts = aspect_scores.facts + 1,
            confidence_sum = aspect_scores.confidence_sum + excluded.confidence_sum;
    INSERT INTO aspect_members(tenant_id, aspect, kind, value, n)
        SELECT new.tenant_id, new.aspect, 'entity', v, 1 FROM (
            SELECT coalesce('e' || subject_entity_id, 't' || subject_key) AS v FROM facts WHERE tenant_id = new.tenant_id AND id = new.fact_id
            UNION SELECT coalesce('e' || object_entity_id, 't' || object_key) FROM facts WHERE tenant_id = new.tenant_id AND id = new.fact_id
        ) m
        ON CONFLICT (tenant_id, aspect, kind, value) DO UPDATE SET n = aspect_members.n + 1;
    INSERT INTO aspect_members(tenant_id, aspect, kind, value, n)
        SELECT new.tenant_id, new.aspect, 'predicate', predicate, 1 FROM facts WHERE tenant_id = new.tenant_id AND id = new.fact_id
        ON CONFLICT (tenant_id, aspect, kind, value) DO UPDATE SET n = aspect_members.n + 1;
    RETURN new;
END
$$;
