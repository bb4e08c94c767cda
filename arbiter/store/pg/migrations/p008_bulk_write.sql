-- arbiter_refs (p001) as a set-returning SQL function, which the planner inlines where a FROM names it: an entries
-- INSERT's trigger called it once a row through the SQL-function executor, and that call cost twice its seven
-- replace()s (a 2,000-entry batch: ~65 ms of its server time, ~28 ms inlined). The expression stays in one place:
-- arbiter_refs, which a row trigger calls for one text (p005 `arbiter_entries_after`), reads it from here.
CREATE FUNCTION arbiter_refs_of(t text) RETURNS TABLE(self_refs bigint, other_refs bigint) LANGUAGE sql IMMUTABLE AS $$
    SELECT (octet_length(t) - octet_length(replace(t, ' I ', ''))) / 3
         + (octet_length(t) - octet_length(replace(t, ' I''', ''))) / 3
         + (octet_length(t) - octet_length(replace(t, ' my ', ''))) / 4
         + (octet_length(t) - octet_length(replace(t, ' me ', ''))) / 4
         + (substr(t, 1, 2) IN ('I ', 'I'''))::int,
           (octet_length(t) - octet_length(replace(t, 'you', ''))) / 3
         + (octet_length(t) - octet_length(replace(t, 'You', ''))) / 3
$$;

CREATE OR REPLACE FUNCTION arbiter_refs(t text, OUT self_refs bigint, OUT other_refs bigint) LANGUAGE sql IMMUTABLE
    AS 'SELECT * FROM arbiter_refs_of(t)';

-- p005's, reading the refs inlined, and writing the new entries' tags without ON CONFLICT: the rows are new (an
-- entry's id is new, `t` is DISTINCT, and entry_tags holds rows of current entries only, which the update and
-- delete trigger takes out), and the speculative insertion cost a third more than the insert (~20 ms a batch).
CREATE OR REPLACE FUNCTION arbiter_entries_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
END
$$;
