"""The schema's history: one frozen step per file, applied in order by `arbiter.store.db.migrate`.

A step is a module `mNNN_what.py` holding `SQL` (literal SQL), or `apply(conn)` where the step depends on the
rows (m010, m015, m020 and m023 remake each tenant's or scope's full-text index). Its module name is what
`schema_version` records, so a step is never renamed, and once it has shipped it is never edited: it imports
nothing from Arbiter, so a file upgrades the same way whenever it is upgraded, whatever the live code has
become since. Live code that makes the same objects at run time (a new scope's index: store/fts.py) owns its
own copy of their SQL. tests/unit/test_store.py upgrades a file from every earlier step and compares its whole
schema with a new file's, which fails if a step or that copy drifts. The steps' SQL is byte for byte the text
the code that shipped them generated (what existing files hold in sqlite_master), hence its uneven indents.

To change the schema, add the next file (`m027_what.py`: a docstring saying what it adds and why, then `SQL`
or `apply`), append its name to `NAMES` below and its row to docs/architecture.md's migrations table, and run
tests/unit/test_store.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Callable

import apsw

Step = str | Callable[[apsw.Connection], None]


class _Steps(Sequence):
    """(name, step) in order; a step's module is imported only when it is read, so opening a current file (the
    daemon's start) loads none of them."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        name = self.names[i]
        module = importlib.import_module(f"{__name__}.{name}")
        return name, getattr(module, "apply", None) or module.SQL


#: Every step, in the order applied: the names `schema_version` records, so never renamed or reordered. Listed
#: rather than found, so that two branches which each add "the next" step conflict here when merged.
NAMES = (
    "m001_initial",
    "m002_fts_entries",
    "m003_tag_graph",
    "m004_recall_index",
    "m005_fts_automerge",
    "m006_entities",
    "m007_entry_revisions",
    "m008_imports",
    "m009_facts",
    "m010_tenant_fts",
    "m011_salience_maintenance",
    "m012_associations",
    "m013_entries_speaker",
    "m014_recall_replies_index",
    "m015_users_teams",
    "m016_tag_scopes",
    "m017_fact_scopes",
    "m018_import_fact_ids",
    "m019_relation_qualifier",
    "m020_deferred_index",
    "m021_entries_drop_content_hash",
    "m022_entry_tags_one_table",
    "m023_compressed_text",
    "m024_revision_speaker",
    "m025_entry_entities_name",
    "m026_entry_entities_name_backfill",
    "m027_derive_queue",
    "m028_fact_gate",
)

#: (name, step) in order: what `migrate` applies, and what `schema_version` counts.
MIGRATIONS: Sequence[tuple[str, Step]] = _Steps(NAMES)
