"""m013_entries_speaker: `entries.speaker`: who said an entry (never indexed as text).

Who said an entry, as a field rather than a guess from its pronouns: a name ("Caroline") or a role ("user",
"assistant"). Recall matches names in a query to it; it is never searched as text. It is not revised (no verb
changes it), so past states read the current one.
"""

SQL = """
        ALTER TABLE entries ADD COLUMN speaker TEXT;
        """
