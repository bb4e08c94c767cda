"""Arbiter's second engine: the same store on PostgreSQL (docs/architecture.md, "PostgreSQL").

`connection.py` speaks the apsw subset the code uses; `migrations/` holds
the schema; `db.py` opens, checks and migrates a database.
"""
