"""m024_revision_speaker: `entry_revisions.speaker`, filled from each revision's entry (a speaker could not
change before), and the revision triggers record it: `update` corrects a speaker, `known_at` reads the old
one.

`update` can correct who said an entry, so a past state needs its own speaker. Until now it could not
change, so every revision's speaker is its entry's. The revision triggers are m023's with `speaker` among the
recorded columns.
"""

SQL = """
        ALTER TABLE entry_revisions ADD COLUMN speaker TEXT;
        UPDATE entry_revisions SET speaker = (SELECT e.speaker FROM entries e WHERE e.id = entry_revisions.entry_id);
        DROP TRIGGER entries_revision_unstamped;
        DROP TRIGGER entries_revision;
        
    CREATE TRIGGER entries_revision_unstamped
    BEFORE UPDATE OF type, title, content_z, tags, source, speaker, valid_from, valid_to ON entries
    WHEN new.revised_at IS old.revised_at AND (new.type IS NOT old.type OR new.title IS NOT old.title OR new.content_z IS NOT old.content_z OR new.tags IS NOT old.tags OR new.source IS NOT old.source OR new.speaker IS NOT old.speaker OR new.valid_from IS NOT old.valid_from OR new.valid_to IS NOT old.valid_to) BEGIN
        SELECT RAISE(ABORT, 'a change to an entry must stamp revised_at (its record time)');
    END;
    CREATE TRIGGER entries_revision AFTER UPDATE OF revised_at ON entries
    WHEN new.revised_at IS NOT old.revised_at BEGIN
        INSERT INTO entry_revisions(entry_id, tenant_id, conversation_id, recorded_from, recorded_to,
                                    type, title, content_z, tags, source, speaker, valid_from, valid_to)
        VALUES (old.id, old.tenant_id, old.conversation_id, coalesce(old.revised_at, old.recorded_at),
                new.revised_at, old.type, old.title, old.content_z, old.tags, old.source, old.speaker, old.valid_from, old.valid_to);
    END;
"""
