-- p006_fact_gate: the gate to `active` refuses what it cannot decide. A finding set to NULL (or a batch that is
-- not there) made its condition unknown, and IF on an unknown runs nothing: a direct UPDATE could activate a
-- fact no evaluation passed. The same step as SQLite's m028_fact_gate; the rest of the function is p005's.

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
