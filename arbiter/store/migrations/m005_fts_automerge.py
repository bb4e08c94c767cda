"""m005_fts_automerge: FTS5 `automerge=16`.

FTS5 merges a level's segments once it holds `automerge` of them (default 4). At 16, bulk ingest merges far
less while writing: +20% entries/s at 60K entries (bench/load.py). The daemon's idle compaction
(recall.maintain.compact) merges what is left once writes pause.
"""

SQL = """
        INSERT INTO entries_fts(entries_fts, rank) VALUES ('automerge', 16);
        """
