"""The SQLite store: one connection factory, migrations, and each table's SQL."""

from arbiter.store.db import MIGRATIONS, connect, migrate, open_database, schema_version

__all__ = ["MIGRATIONS", "connect", "migrate", "open_database", "schema_version"]
