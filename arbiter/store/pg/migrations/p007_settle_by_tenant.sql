-- The full-text queue's triggers (p004) also say which tenants a transaction queued, so that the session's
-- `settle` (store/pg/indexing.py) reads and empties the queue tenant by tenant: a statement that names its tenant,
-- which Citus routes to that tenant's node, where one that named none asked every node.
--
-- The tenants go in a transaction-local setting, `arbiter.unsettled`, as "7,12," (each id followed by a comma): it
-- ends with the transaction, and a savepoint rolled back takes back what its statements added (as it takes back
-- their queue rows). Reading it touches no table.

CREATE FUNCTION arbiter_unsettled(tenants bigint[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    held text := coalesce(current_setting('arbiter.unsettled', true), '');
    more text;
BEGIN
    SELECT string_agg(t::text || ',', '') INTO more
        FROM (SELECT DISTINCT t FROM unnest(tenants) t) u WHERE position(',' || t || ',' IN ',' || held) = 0;
    IF more IS NOT NULL THEN
        PERFORM set_config('arbiter.unsettled', held || more, true);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION arbiter_fulltext_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO derive_queue(deriver, entry_id, tenant_id)
        SELECT TG_ARGV[0], a.id, a.tenant_id FROM added a ORDER BY a.id
        ON CONFLICT DO NOTHING;
    PERFORM arbiter_unsettled(ARRAY(SELECT DISTINCT a.tenant_id FROM added a));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION arbiter_fulltext_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO derive_queue(deriver, entry_id, tenant_id) VALUES (TG_ARGV[0], old.id, old.tenant_id)
            ON CONFLICT DO NOTHING;
        PERFORM arbiter_unsettled(ARRAY[old.tenant_id]);
        RETURN old;
    END IF;
    INSERT INTO derive_queue(deriver, entry_id, tenant_id) VALUES (TG_ARGV[0], new.id, new.tenant_id)
        ON CONFLICT DO NOTHING;
    PERFORM arbiter_unsettled(ARRAY[new.tenant_id]);
    RETURN new;
END
$$;
