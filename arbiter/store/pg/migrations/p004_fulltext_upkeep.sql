-- What keeps PostgreSQL's full text (p002) in step with entries, past states and facts.
--
-- A document's terms are the stems of SQLite's FTS5 tokenizer, which only Python has, so no trigger can write
-- them. The triggers queue what changed in derive_queue instead ('fulltext' an entry, 'past_text' a revision,
-- 'fact_text' a fact made active), and the writing session indexes its own queue before it commits
-- (store/pg/indexing.py): whoever writes, no committed state holds a text recall cannot find.

CREATE INDEX fulltext_docs_doc ON fulltext_docs(tenant_id, kind, doc_id);

CREATE FUNCTION arbiter_fulltext_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO derive_queue(deriver, entry_id, tenant_id)
        SELECT TG_ARGV[0], a.id, a.tenant_id FROM added a ORDER BY a.id
        ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE FUNCTION arbiter_fulltext_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO derive_queue(deriver, entry_id, tenant_id) VALUES (TG_ARGV[0], old.id, old.tenant_id)
            ON CONFLICT DO NOTHING;
        RETURN old;
    END IF;
    INSERT INTO derive_queue(deriver, entry_id, tenant_id) VALUES (TG_ARGV[0], new.id, new.tenant_id)
        ON CONFLICT DO NOTHING;
    RETURN new;
END
$$;

CREATE TRIGGER entries_fulltext_added AFTER INSERT ON entries REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION arbiter_fulltext_added('fulltext');
CREATE TRIGGER entries_fulltext_changed AFTER UPDATE OF title, content, tags, source, conversation_id, scope_id,
    author_id ON entries FOR EACH ROW
    WHEN (old.title IS DISTINCT FROM new.title OR old.content IS DISTINCT FROM new.content
          OR old.tags IS DISTINCT FROM new.tags OR old.source IS DISTINCT FROM new.source
          OR old.conversation_id IS DISTINCT FROM new.conversation_id OR old.scope_id IS DISTINCT FROM new.scope_id
          OR old.author_id IS DISTINCT FROM new.author_id)
    EXECUTE FUNCTION arbiter_fulltext_changed('fulltext');
CREATE TRIGGER entries_fulltext_deleted AFTER DELETE ON entries FOR EACH ROW
    EXECUTE FUNCTION arbiter_fulltext_changed('fulltext');

CREATE TRIGGER entry_revisions_fulltext_added AFTER INSERT ON entry_revisions REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION arbiter_fulltext_added('past_text');
CREATE TRIGGER entry_revisions_fulltext_deleted AFTER DELETE ON entry_revisions FOR EACH ROW
    EXECUTE FUNCTION arbiter_fulltext_changed('past_text');

CREATE TRIGGER facts_fulltext_active AFTER UPDATE OF status ON facts FOR EACH ROW
    WHEN (new.status = 'active' AND old.status <> 'active')
    EXECUTE FUNCTION arbiter_fulltext_changed('fact_text');
