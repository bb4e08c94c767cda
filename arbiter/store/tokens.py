"""The tokenizer every full-text index is written with, and a SQLite connection to lend it.

FTS5's `porter unicode61 remove_diacritics 2` cuts the text on both engines: SQLite's indexes use it
inside FTS5, PostgreSQL's (store/pg/fulltext.py) take their stems from it through apsw, and recall cuts a
query with it, so a query's stems are its index's whichever engine holds the store.
"""

from __future__ import annotations

import threading

import apsw

from arbiter.store import engine

#: Name and arguments, as FTS5's `tokenize=` option takes them.
TOKENIZER = ("porter", ("unicode61", "remove_diacritics", "2"))

_memory = threading.local()


def tokenizing(conn: object = None) -> apsw.Connection:
    """A SQLite connection that lends FTS5's tokenizers: the store's own, or (on PostgreSQL, or with no store)
    a private in-memory one per thread."""
    if conn is not None and not engine.is_postgresql(conn):
        return conn
    if getattr(_memory, "conn", None) is None:
        _memory.conn = apsw.Connection(":memory:")
    return _memory.conn
