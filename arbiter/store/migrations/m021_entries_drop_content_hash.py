"""m021_entries_drop_content_hash: drops `entries.content_hash` (computed when read; 0.06x of the text,
docs/benchmarks.md "Size").

An entry's `content_hash` is computed when read (store/entries.py), not stored: it is only ever shown, never
searched, and sha256 of a typical entry costs ~1 us while the column was 33 bytes a row, 0.06x of the text
(docs/benchmarks.md, "Size"). Duplicates have their own fingerprints (entry_sketches). An existing file's
pages shrink in place; the file itself only after a VACUUM.
"""

SQL = """
        ALTER TABLE entries DROP COLUMN content_hash;
        """
