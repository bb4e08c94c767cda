"""m017_fact_scopes: `patch_batches` and `facts` gain `author_id` and `scope_id` (a fact keeps its batch's),
`predicates.declared`; earlier batches and facts are the tenant's first user's, private (see Facts:
Visibility).

Reads show what the caller sees: a batch, and so each of its facts, has an author and a visibility scope like
an entry's (store/users.py). Facts carry the columns too, so `Viewer.sees("f")` reads a fact row as it reads
an entry row. Every batch before users was the tenant's, and m015 gave the tenant's first user, and that
user's private scope, the tenant's id. The facts' FTS rows get their scope and author as tokens ("s3 u7")
instead of the tenant ("t1"), so a search matches only what its caller sees. A predicate registered by
applying a fact (not declared) is marked, so the registry lists it only to whoever sees a fact using it.
"""

SQL = """
ALTER TABLE patch_batches ADD COLUMN author_id INTEGER REFERENCES users(id);
ALTER TABLE patch_batches ADD COLUMN scope_id INTEGER REFERENCES scopes(id);
ALTER TABLE facts ADD COLUMN author_id INTEGER REFERENCES users(id);
ALTER TABLE facts ADD COLUMN scope_id INTEGER REFERENCES scopes(id);
ALTER TABLE predicates ADD COLUMN declared INTEGER NOT NULL DEFAULT 1;
-- Everything earlier is the tenant's first user's, private (as m015 made every entry).
UPDATE patch_batches SET author_id = (SELECT min(u.id) FROM users u WHERE u.tenant_id = patch_batches.tenant_id);
UPDATE patch_batches SET scope_id = (SELECT s.id FROM scopes s WHERE s.user_id = patch_batches.author_id);
UPDATE facts SET author_id = (SELECT min(u.id) FROM users u WHERE u.tenant_id = facts.tenant_id);
UPDATE facts SET scope_id = (SELECT s.id FROM scopes s WHERE s.user_id = facts.author_id);
CREATE INDEX facts_subject_entity ON facts(subject_entity_id) WHERE subject_entity_id IS NOT NULL;
CREATE INDEX facts_object_entity ON facts(object_entity_id) WHERE object_entity_id IS NOT NULL;
CREATE TRIGGER facts_scope_immutable BEFORE UPDATE OF author_id, scope_id ON facts
WHEN old.author_id IS NOT NULL AND (old.author_id IS NOT new.author_id OR old.scope_id IS NOT new.scope_id) BEGIN
    SELECT RAISE(ABORT, 'a fact keeps the author and scope of its batch');
END;
DROP TRIGGER facts_fts_activate;
CREATE TRIGGER facts_fts_activate AFTER UPDATE OF status ON facts
WHEN new.status = 'active' AND old.status != 'active' BEGIN
    INSERT INTO facts_fts(rowid, subject, predicate, object, scope)
    VALUES (new.id, new.subject, replace(new.predicate, '_', ' '), new.object,
            's' || new.scope_id || ' u' || new.author_id);
END;
UPDATE facts_fts SET scope = (SELECT 's' || f.scope_id || ' u' || f.author_id FROM facts f WHERE f.id = facts_fts.rowid);
"""
