"""m026_entry_entities_name_backfill: gives a link made before m025 the alias its entry's title or content writes
(ASCII case folded), so upgraded shared tenants show their aliases to whoever sees an entry that uses them.

A link made before m025 records no name, so in a shared tenant its alias showed to nobody but a whole-tenant
viewer, the user who wrote it included. Give it the alias its entry's text writes: whoever sees that entry
reads the spelling in it anyway, so this shows an alias to no one who could not read it. (ASCII case folding
only: a spelling it misses stays hidden, never shown to the wrong user.)
"""

SQL = """
        UPDATE entry_entities SET name_id = (
            SELECT n.id FROM entity_names n, entries e
            WHERE n.entity_id = entry_entities.entity_id AND n.is_alias = 1 AND e.id = entry_entities.entry_id
              AND instr(lower(e.title || char(10) || e.content), lower(n.name)) > 0
            ORDER BY n.id LIMIT 1)
        WHERE name_id IS NULL
          AND entity_id IN (SELECT entity_id FROM entity_names WHERE is_alias = 1);
        """
