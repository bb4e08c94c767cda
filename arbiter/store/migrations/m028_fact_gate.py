"""m028_fact_gate: the gate to `active` refuses what it cannot decide.

A finding set to NULL (or a batch that is not there) made m009's condition
unknown rather than false, and a trigger's WHEN on an unknown does not fire: a
direct UPDATE could activate a fact no evaluation passed. PostgreSQL's is in
p005_tenant_keys.
"""

SQL = """
DROP TRIGGER facts_gate;
CREATE TRIGGER facts_gate BEFORE UPDATE OF status ON facts
WHEN new.status = 'active' AND old.status != 'active' AND NOT coalesce(
    old.status = 'candidate' AND new.finding IN ('accept', 'supersede')
    AND (SELECT status FROM patch_batches WHERE id = new.batch_id) = 'evaluated', 0
) BEGIN
    SELECT RAISE(ABORT, 'a fact becomes active only when its evaluated batch is applied');
END;
"""
