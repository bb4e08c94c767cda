"""PostgreSQL's schema steps: literal SQL files `pNNN_name.sql`, applied in name order, frozen once shipped.

A PostgreSQL store starts at today's schema (the SQLite file's history
before it, m001-m027, has no counterpart here); a later change to the
schema is a new file, on both engines.
"""

from __future__ import annotations

from importlib import resources

NAMES = ["p001_core", "p002_fulltext", "p003_features", "p004_fulltext_upkeep", "p005_tenant_keys", "p006_write_speed",
         "p007_settle_by_tenant", "p008_bulk_write", "p009_replies_orphaned"]


def steps() -> list[tuple[str, str]]:
    """(name, SQL) of every step, in order."""
    here = resources.files(__name__)
    return [(name, (here / f"{name}.sql").read_text(encoding="utf-8")) for name in NAMES]
