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
