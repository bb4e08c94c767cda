"""A PostgreSQL connection that speaks the part of apsw's interface Arbiter uses.

Arbiter's modules write their SQL once, in the subset both engines run
(`?` placeholders, `ON CONFLICT`, `RETURNING`, row values, CTEs), and call
`conn.execute(sql, params)` / `with conn:` whichever engine holds the
store. This class is the one place that differs: it turns `?` into
psycopg's `%s`, runs `with conn:` as a transaction (a savepoint when
nested, as apsw does), and keeps the last statement's row count for
`changes()`. What cannot be said in the common subset lives beside its
SQLite form, chosen by `conn.engine` (never by sniffing the SQL).
"""

from __future__ import annotations

import contextlib
import functools
import re
import select
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.types.numeric import Int8Dumper

ENGINE = "postgresql"

# A string literal, a quoted identifier, a comment, or a placeholder (`?`, `?N`, `:name`) or `%`:
# only the last two kinds are rewritten.
_TOKENS = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|(\?)(\d*)|(?<!:):([A-Za-z_]\w*)|(%)""", re.S
)


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> tuple[str, bool]:
    """`sql` in psycopg's placeholders, and whether they are named (`?N` and `:name` become `%(N)s`, `%(name)s`).

    `?` outside literals becomes `%s`, and each `%` is doubled (psycopg's escape).
    """
    named = False

    def one(m: re.Match) -> str:
        nonlocal named
        if m.group(1):
            if m.group(2):
                named = True
                return f"%({m.group(2)})s"
            return "%s"
        if m.group(3):
            named = True
            return f"%({m.group(3)})s"
        if m.group(4):
            return "%%"
        return m.group(0).replace("%", "%%")

    return _TOKENS.sub(one, sql), named


# An INSERT of one row of plain placeholders into named columns (no DO UPDATE): what `executemany` sends as one
# statement of a column array each, whatever the number of rows.
_ONE_ROW = re.compile(
    r"INSERT\s+INTO\s+(\w+)\s*\(([\w\s,]+)\)\s*VALUES\s*\(([?,\s]*)\)((?:(?!DO\s+UPDATE)[^;?])*)\Z", re.S | re.I
)
#: Column types PostgreSQL stores as floating point: a column of them may be given ints too (a weight of 1).
_FLOATS = frozenset({"double precision", "real"})


class Cursor:
    """The rows of one statement: iterate, or fetchone/fetchall, as with apsw."""

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor):
        self._cur = cur

    def __iter__(self) -> Iterator[tuple]:
        if self._cur.description is None:
            return iter(())
        return iter(self._cur)

    def fetchone(self) -> tuple | None:
        return self._cur.fetchone() if self._cur.description is not None else None

    def fetchall(self) -> list[tuple]:
        return self._cur.fetchall() if self._cur.description is not None else []

    @property
    def description(self):
        return self._cur.description


class Connection:
    """One PostgreSQL session, used by one thread at a time (as an apsw connection is)."""

    engine = ENGINE
    #: Called with every statement as sent (psycopg's placeholders), when set: what tests/unit/test_pg_tenancy.py
    #: reads to check that each statement stays within one tenant, and a way to see what a verb sends.
    trace: Callable[[str], None] | None = None

    def __init__(self, pg: psycopg.Connection, *, dsn: str):
        self._pg = pg
        # Every Python int goes as bigint (psycopg picks the smallest type by value): Arbiter's ids and
        # instants are 64-bit, and a `?` typed smallint breaks a recursive query whose other arm is bigint.
        pg.adapters.register_dumper(int, Int8Dumper)
        self.dsn = dsn
        self._depth = 0
        self._changes = 0
        self._dirty = False  # a statement of this transaction may have written
        self._read_only = False  # this transaction said it is READ ONLY
        self._begin = "BEGIN"  # what the next outermost `with conn:` sends (`snapshot` sets it for one transaction)
        #: Scope id -> tenant id, as this session has read them (a scope never changes tenant): store/pg/indexing.py.
        self.scope_tenants: dict[int, int] = {}
        self._types: dict[str, dict[str, str]] = {}  # `_column_types`
        #: The tenant whose full-text queue `settle` takes first, with the tenants the queue's triggers noted: the one
        #: the writer said it writes for (`engine.writing_for`), else the one it settled last (store/pg/indexing.py).
        self.settled_tenant: int | None = None
        #: Run in the outermost transaction just before its COMMIT (a failure rolls it back): how the writer
        #: indexes the full text its transaction queued (store/pg/indexing.py), whoever wrote.
        self.before_commit: list[Callable[[Connection], object]] = []
        #: Citus spreads this database over nodes (store/pg/citus.py): the few writes Citus cannot send to one node
        #: as they are written take another form (`engine.writes_in_with`), and statistics are the shards'
        #: (db.py `refresh_statistics`).
        self.citus = False

    # -- statements ---------------------------------------------------------------------------------------
    def _writing(self, sql: str) -> bool:
        """Note a statement that may write rows (anything but a SELECT, SET, RESET, SHOW or ANALYZE); True if it must
        run in a transaction of its own so that `before_commit` sees what it queued (a write outside `with conn:`
        would commit at once)."""
        # SET (a read's `SET TRANSACTION ... READ ONLY`), SHOW and ANALYZE write no row a trigger could queue: a
        # statement marked dirty paid `before_commit`'s round trip to find an empty queue.
        first = sql.lstrip()[:7].split(None, 1)[0].upper()
        if first in ("SELECT", "SET", "RESET", "SHOW", "ANALYZE"):
            # A transaction declared READ ONLY writes nothing, whatever it sends (a read opening with WITH): its
            # COMMIT has nothing to settle, and settle's DELETE would be refused in it.
            if first == "SET" and self._depth and "READ ONLY" in sql.upper():
                self._read_only = True
            return False
        if self._read_only:
            return False
        self._dirty = True
        return self._depth == 0 and bool(self.before_commit)

    def execute(self, sql: str, params: Sequence[Any] | dict | None = None) -> Cursor:
        if self._writing(sql):
            with self:
                return self.execute(sql, params)
        cur = self._pg.cursor()
        if params is None or (not params and not isinstance(params, dict)):
            # No parameters: several statements may be sent at once (DDL scripts), and `%` is literal.
            if self.trace:
                self.trace(sql)
            cur.execute(sql)
        else:
            query, named = translate(sql)
            if self.trace:
                self.trace(query)
            if named and not isinstance(params, dict):
                params = {str(i): value for i, value in enumerate(params, start=1)}
            cur.execute(query, params)
        self._changes = max(cur.rowcount, 0)
        return Cursor(cur)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        if self._writing(sql):
            with self:
                return self.executemany(sql, seq)
        rows = list(seq)
        if not rows:  # nothing to send (an entry that names no entity): not even psycopg's setup
            self._changes = 0
            return
        insert = _ONE_ROW.match(sql)
        if insert is not None and insert[3].count("?") == len(names := [n.strip() for n in insert[2].split(",")]):
            # A plain INSERT's rows go as one statement of a column array each (an entry's band keys, an idle
            # step's edges, a batch of recalls' access log): psycopg's executemany pipeline is a statement a row,
            # each parsed, executed and answered, and a statement of a placeholder per value is converted anew
            # each time past psycopg's 50 parameters. Not with DO UPDATE, which one statement may not apply twice
            # to a row, as successive ones may.
            if any(len(row) != len(names) for row in rows):
                raise psycopg.ProgrammingError(f"{len(names)} columns, but a row of another length: {sql}")
            types = self._column_types(insert[1])
            columns = []
            for name, column in zip(names, zip(*rows)):
                kind = types[name.lower()]
                if kind in _FLOATS:  # psycopg refuses a list mixing ints and floats
                    column = [float(x) if type(x) is int else x for x in column]
                columns.append(list(column))
            arrays = ", ".join(f"CAST(? AS {types[n.lower()]}[])" for n in names)
            self.execute(f"INSERT INTO {insert[1]}({insert[2]}) SELECT * FROM unnest({arrays}){insert[4]}", columns)
            return
        with self._pg.cursor() as cur:
            query, named = translate(sql)
            if self.trace:
                self.trace(query)
            if named:
                rows = [r if isinstance(r, dict) else {str(i): x for i, x in enumerate(r, start=1)} for r in rows]
            cur.executemany(query, rows)
            self._changes = max(cur.rowcount, 0)

    def _column_types(self, table: str) -> dict[str, str]:
        """A table's column name -> type as SQL writes it (`bigint`, `double precision`), read once a session."""
        if (types := self._types.get(table)) is None:
            types = self._types[table] = dict(self.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = CAST(? AS regclass) AND attnum > 0 AND NOT attisdropped", (table,)))
        return types

    def last_insert_rowid(self) -> int:
        """The id the session's last INSERT took from a table's identity sequence."""
        return self._pg.execute("SELECT lastval()").fetchone()[0]

    def changes(self) -> int:
        """Rows the last statement wrote."""
        return self._changes

    # -- transactions -------------------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def snapshot(self) -> "Connection":
        """`with conn.snapshot():` a read, one REPEATABLE READ snapshot, READ ONLY: begun in one round trip, where
        `BEGIN` and then `SET TRANSACTION` took two of a recall's ten or so."""
        if self._depth:
            raise RuntimeError("a snapshot is a transaction of its own, not a savepoint")
        self._begin = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        return self

    def __enter__(self) -> "Connection":
        if self._depth == 0:
            begin, self._begin = self._begin, "BEGIN"
            self._pg.execute(begin)
            self._read_only = begin != "BEGIN"
        else:
            self._pg.execute(f"SAVEPOINT s{self._depth}")
        self._depth += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._depth == 1 and exc_type is None and self._dirty:
            try:
                for hook in self.before_commit:  # still inside the transaction: what they write commits with it
                    hook(self)
            except BaseException:
                self._depth, self._dirty, self._read_only = 0, False, False
                with contextlib.suppress(psycopg.Error):
                    self._pg.execute("ROLLBACK")
                raise
        self._depth -= 1
        try:
            if self._depth == 0:
                self._dirty = self._read_only = False
                self._pg.execute("COMMIT" if exc_type is None else "ROLLBACK")
            elif exc_type is None:
                self._pg.execute(f"RELEASE SAVEPOINT s{self._depth}")
            else:
                self._pg.execute(f"ROLLBACK TO SAVEPOINT s{self._depth}")
                self._pg.execute(f"RELEASE SAVEPOINT s{self._depth}")
        except psycopg.Error:
            if exc_type is None:
                raise
        return False

    def alive(self) -> bool:
        """Whether the session is still there, as far as can be told without a round trip to the server.

        A server that shut down or restarted told an idle session so (a FATAL
        notice, then end of file) and nobody read it yet: this reads it now, so
        a daemon replaces the connection before a request fails on it.
        """
        if self._pg.closed:
            return False
        if self._depth:
            return True
        pgconn = self._pg.pgconn
        try:
            # A message, then end of file: the second read finds the end (and raises), as the first may not.
            for _ in range(3):
                readable, _, _ = select.select([pgconn.socket], [], [], 0)
                if not readable:
                    break
                pgconn.consume_input()
        except (OSError, ValueError, psycopg.OperationalError):
            return False
        return pgconn.status == psycopg.pq.ConnStatus.OK

    def close(self) -> None:
        self._pg.close()

    @property
    def closed(self) -> bool:
        return self._pg.closed

    @property
    def filename(self) -> str:
        """What names the store in caches keyed by database (apsw's attribute of the same name)."""
        return self.dsn


def lost(exc: BaseException) -> bool:
    """Whether `exc` says the session is gone (the server restarted, shut down, or cannot be reached)."""
    return isinstance(exc, psycopg.OperationalError) and (
        exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P")))


def conflicted(exc: BaseException) -> bool:
    """Whether `exc` is a serialization failure or a deadlock: the transaction was rolled back, and running it
    again may well succeed."""
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("40")  # transaction_rollback
