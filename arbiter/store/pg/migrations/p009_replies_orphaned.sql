-- Arbiter on PostgreSQL, step 9: a reply whose parent is deleted loses its parent by a trigger, not by the foreign
-- key's action, which Citus cannot distribute.
--
-- p005 made the key `(tenant_id, parent_id) REFERENCES entries (tenant_id, id) ON DELETE SET NULL (parent_id)`.
-- Citus refuses any SET NULL action on a key holding the distribution column (it would null tenant_id too; it does
-- not read the column list), so `create_distributed_table('entries', ...)` failed on it. The key stays, with no
-- action, and an AFTER DELETE trigger nulls the replies' parent_id as the action did, through the same UPDATE
-- (so the update triggers run as they did). An AFTER trigger, not a BEFORE one: a purge deletes a parent and its
-- replies in one statement, and a reply updated before the statement reaches it could not be deleted. Its name
-- sorts before the key's own check (`RI_ConstraintTrigger_...`): triggers on one event fire in name order, so the
-- replies are let go before the key looks for them.

ALTER TABLE entries DROP CONSTRAINT entries_tenant_id_parent_id_fkey,
    ADD CONSTRAINT entries_tenant_id_parent_id_fkey FOREIGN KEY (tenant_id, parent_id) REFERENCES entries(tenant_id, id);

CREATE FUNCTION arbiter_replies_orphaned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE entries SET parent_id = NULL WHERE tenant_id = old.tenant_id AND parent_id = old.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER "Entries_replies_orphaned" AFTER DELETE ON entries FOR EACH ROW EXECUTE FUNCTION arbiter_replies_orphaned();

-- Under Citus the insert triggers' writes read the inserted rows from a plain array, not from the transition table.
-- Citus plans a statement that writes a distributed table even inside a trigger on a shard, and the query it sends
-- on to the shard cannot see the trigger's transition table ("executor could not find named tuplestore"): every
-- remember failed. A statement that reads only the transition table stays plain PostgreSQL's, so there each
-- trigger takes the rows once into an array, and its writes read that (an INSERT ... SELECT from unnest(), which
-- Citus routes row by row by tenant_id); and the tag graph's four writes are four statements, since Citus refuses
-- writes in the WITH of a statement it cannot send to one shard whole. Without Citus (its library not loaded:
-- no `citus.version`) the triggers run p007's and p008's statements as they were: the array form cost a plain
-- server 2-11% more CPU a bulk write (docs/benchmarks.md "Citus").
CREATE OR REPLACE FUNCTION arbiter_fulltext_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    tenants bigint[];
BEGIN
    IF current_setting('citus.version', true) IS NULL THEN
        INSERT INTO derive_queue(deriver, entry_id, tenant_id)
            SELECT TG_ARGV[0], a.id, a.tenant_id FROM added a ORDER BY a.id
            ON CONFLICT DO NOTHING;
        PERFORM arbiter_unsettled(ARRAY(SELECT DISTINCT a.tenant_id FROM added a));
        RETURN NULL;
    END IF;
    SELECT array_agg(a.id ORDER BY a.id), array_agg(a.tenant_id ORDER BY a.id) INTO ids, tenants FROM added a;
    INSERT INTO derive_queue(deriver, entry_id, tenant_id)
        SELECT TG_ARGV[0], q.id, q.tenant_id FROM unnest(ids, tenants) q(id, tenant_id) ORDER BY q.id
        ON CONFLICT DO NOTHING;
    PERFORM arbiter_unsettled(ARRAY(SELECT DISTINCT t FROM unnest(tenants) t));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION arbiter_entries_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rows entries[];
    scopes bigint[];
    tags text[];
    ids bigint[];
    tenants bigint[];
BEGIN
    IF current_setting('citus.version', true) IS NULL THEN
        WITH t AS MATERIALIZED (
            SELECT DISTINCT a.scope_id, x.value AS tag, a.id AS entry_id, a.tenant_id
            FROM added a, jsonb_array_elements_text(a.tags::jsonb) x WHERE a.valid_to IS NULL AND a.tags != '[]'
        ), tagged AS (
            INSERT INTO entry_tags(scope_id, tag, entry_id, tenant_id)
                SELECT scope_id, tag, entry_id, tenant_id FROM t ORDER BY scope_id, tag, entry_id
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
            FROM added a, LATERAL arbiter_refs_of(a.content) r;
        INSERT INTO derive_queue(deriver, entry_id, tenant_id)
            SELECT d.deriver, a.id, a.tenant_id
            FROM added a CROSS JOIN (VALUES ('entities'), ('sketch'), ('associations')) d(deriver);
        RETURN NULL;
    END IF;
    rows := ARRAY(SELECT a FROM added a);
    SELECT array_agg(t.scope_id), array_agg(t.tag), array_agg(t.entry_id), array_agg(t.tenant_id)
        INTO scopes, tags, ids, tenants
        FROM (SELECT DISTINCT a.scope_id, x.value AS tag, a.id AS entry_id, a.tenant_id
              FROM unnest(rows) a, jsonb_array_elements_text(a.tags::jsonb) x
              WHERE a.valid_to IS NULL AND a.tags != '[]'
              ORDER BY 1, 2, 3) t;
    IF ids IS NOT NULL THEN
        INSERT INTO entry_tags(scope_id, tag, entry_id, tenant_id)
            SELECT * FROM unnest(scopes, tags, ids, tenants);
        INSERT INTO tag_counts(scope_id, tag, n, tenant_id)
            SELECT t.scope_id, t.tag, count(*), min(t.tenant_id) FROM unnest(scopes, tags, ids, tenants)
                t(scope_id, tag, entry_id, tenant_id) GROUP BY t.scope_id, t.tag ORDER BY t.scope_id, t.tag
            ON CONFLICT (tenant_id, scope_id, tag) DO UPDATE SET n = tag_counts.n + excluded.n;
        INSERT INTO tag_pairs(scope_id, a, b, n, tenant_id)
            SELECT x.scope_id, x.tag, y.tag, count(*), min(x.tenant_id)
            FROM unnest(scopes, tags, ids, tenants) x(scope_id, tag, entry_id, tenant_id)
            JOIN unnest(scopes, tags, ids, tenants) y(scope_id, tag, entry_id, tenant_id)
                ON y.entry_id = x.entry_id AND x.tag < y.tag
            GROUP BY x.scope_id, x.tag, y.tag ORDER BY x.scope_id, x.tag, y.tag
            ON CONFLICT (tenant_id, scope_id, a, b) DO UPDATE SET n = tag_pairs.n + excluded.n;
        INSERT INTO tag_graph_version(scope_id, version, tenant_id)
            SELECT t.scope_id, 1, min(t.tenant_id) FROM unnest(scopes, tenants) t(scope_id, tenant_id)
            GROUP BY t.scope_id ORDER BY t.scope_id
            ON CONFLICT (tenant_id, scope_id) DO UPDATE SET version = tag_graph_version.version + 1;
    END IF;
    INSERT INTO recall_entries
        SELECT a.id, a.tenant_id, a.type, a.conversation_id, a.valid_from, a.valid_to, octet_length(a.content),
               r.self_refs, r.other_refs, arbiter_numerals(a.content)
        FROM unnest(rows) a, LATERAL arbiter_refs_of(a.content) r;
    INSERT INTO derive_queue(deriver, entry_id, tenant_id)
        SELECT d.deriver, a.id, a.tenant_id
        FROM unnest(rows) a CROSS JOIN (VALUES ('entities'), ('sketch'), ('associations')) d(deriver);
    RETURN NULL;
END
$$;
