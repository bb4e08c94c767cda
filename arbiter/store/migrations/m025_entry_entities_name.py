"""m025_entry_entities_name: `entry_entities.name_id`: which of the entity's names a link came through (null for
earlier links), so an alias shows only to who sees an entry that used it (see Entities: Visibility).

Which of the entity's names an entry's link came through (arbiter/entities/visibility.py, names_sql): in a
tenant of several users an alias shows only to who sees an entry that named the entity so. Links made before
it carry none, so their aliases show only to a whole-tenant viewer until named again.
"""

SQL = """
        ALTER TABLE entry_entities ADD COLUMN name_id INTEGER;
        """
