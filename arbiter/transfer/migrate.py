"""Moving a home between engines: a SQLite file into an empty PostgreSQL database, and back.

Every table the store keeps is copied row for row, ids and all, in
dependency order (`TABLES`), so tokens' hashes, users, teams, history and
every reference read the same in the copy; then the target's id sequences
are set where the source's stood, so a purged id is not handed out again.
What the target's own triggers derive from the entries as they go in
(`recall_entries`, the tag graph; on SQLite each scope's full-text index,
made with `fts.create` and filled set-based by `deferred`) is rebuilt rather
than copied: on PostgreSQL those tables also carry `tenant_id`, and a trigger
computes them the same way whichever writer wrote the entry. What a target's
triggers let in only by one path (a fact passes the evaluation gate) goes in
by that path (`Table.later`), and what they write on the way (a fact's
recorded states) gives way to the source's rows (`Table.refilled`).

*Why tables and not an export:* an export is what one viewer sees, with new
ids on import and no tokens; a move must keep everything a user's tools hold
(ids in notes, tokens in files) working against the new store.

*All or nothing:* the source is read in one snapshot and the target written
in one transaction (PostgreSQL: its schema step too, under the advisory lock a
starting daemon takes; SQLite: a new `FILE.partial`, renamed into place once
whole), so a failure or an interrupt leaves the target as it was. A table the
move does not know, or one the target lacks, holding rows in the source,
stops it before anything is written: nothing is silently left behind.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

import apsw
import msgspec

from arbiter import paths
from arbiter._lock import take_lock
from arbiter.errors import Conflict, InvalidParams, StorageFull, Unavailable
from arbiter.store import engine, text

#: Rows read a page at a time (keyset by primary key: bounded memory on either engine, no server-side cursor).
PAGE = 1000
#: Bind parameters in one INSERT: under SQLite's 32766 and PostgreSQL's 65535.
_MAX_PARAMS = 30000
#: `application_name` of the move's sessions: a daemon's are `arbiter...`, and the move looks for those.
APPLICATION = "arbiter migrate"


class Table(NamedTuple):
    """A table the move copies: its name, and its primary key (the order rows are read and written in)."""

    name: str
    key: tuple[str, ...]
    #: The target's triggers write rows here while the tables before it go in (the entries' derive queue, a fact's
    #: revisions, the aspects' counts): once everything else is in, they give way to the source's rows.
    refilled: bool = False
    #: (column, stand-in): written as the stand-in, then set to the source's value once every table is in, the
    #: last table first. For a row naming a later row of its own table (an entity merged into a newer one: neither
    #: engine defers these foreign keys), and for what the target's triggers let in only by the gate's own path:
    #: a fact goes in a candidate in a batch under evaluation, then becomes what it was, then the batch.
    later: tuple[tuple[str, object], ...] = ()
    #: (column, SQL over the source row): a column one engine keeps and the other derives (PostgreSQL gives a
    #: fact's revisions and sources their fact's tenant_id), computed from the source when it lacks it.
    fill: tuple[tuple[str, str], ...] = ()


def _fact_tenant(table: str) -> tuple[tuple[str, str], ...]:
    return (("tenant_id", f"(SELECT f.tenant_id FROM facts f WHERE f.id = {table}.fact_id)"),)


#: Every table a move copies, each after those it refers to. A table one of the two engines lacks is passed
#: over when the source holds no row of it (PostgreSQL's entities, facts and associations tables arrive with
#: p003_features.sql; each is one line here).
TABLES: tuple[Table, ...] = (
    Table("settings", ("key",)),
    Table("tenants", ("id",)),
    Table("users", ("id",)),
    Table("teams", ("id",)),
    Table("team_members", ("user_id", "team_id")),
    Table("scopes", ("id",)),
    Table("conversations", ("id",)),
    Table("entries", ("id",)),
    Table("entry_revisions", ("id",)),
    Table("relations", ("id",)),
    Table("entry_retirements", ("id",)),
    Table("entry_salience", ("entry_id",)),
    Table("entry_sketches", ("tenant_id", "key", "entry_id")),
    Table("access_log", ("id",)),
    Table("maintenance_runs", ("id",)),
    Table("imports", ("id",)),
    Table("import_ids", ("import_id", "kind", "old_id"),
          fill=(("tenant_id", "(SELECT i.tenant_id FROM imports i WHERE i.id = import_ids.import_id)"),)),
    Table("entities", ("id",), later=(("merged_into", None),)),
    Table("entity_names", ("id",)),
    Table("entity_trigrams", ("tenant_id", "gram", "name_id")),
    Table("entry_entities", ("entry_id", "entity_id")),
    Table("entity_relations", ("id",)),
    Table("entity_events", ("id",)),
    Table("entity_clusters", ("entity_id",)),
    Table("cluster_names", ("tenant_id", "tags_sha256", "scopes")),
    Table("associations", ("a", "b")),
    Table("predicates", ("tenant_id", "name")),
    Table("patch_batches", ("id",), later=(("status", "evaluated"),)),
    Table("facts", ("id",), later=(("status", "candidate"), ("valid_to", None))),
    Table("fact_sources", ("fact_id", "entry_id"), fill=_fact_tenant("fact_sources")),
    Table("fact_aspects", ("fact_id", "aspect")),
    Table("fact_revisions", ("id",), refilled=True, fill=_fact_tenant("fact_revisions")),
    Table("aspect_scores", ("tenant_id", "aspect"), refilled=True),
    Table("aspect_members", ("tenant_id", "aspect", "kind", "value"), refilled=True),
    Table("derive_queue", ("deriver", "entry_id"), refilled=True),
)

#: Derived from the entries on the target as they go in (`_indexing`): by its triggers, and the full text (SQLite's
#: FTS5 tables by `fts`; PostgreSQL's postings, store/pg/fulltext.py, named here so that a PostgreSQL source's
#: are not taken for rows the move would leave behind).
REBUILT = frozenset({"recall_entries", "entry_tags", "tag_counts", "tag_pairs", "tag_graph_version",
                     "fulltext_docs", "fulltext_postings", "fulltext_totals"})
#: Each store's own bookkeeping, never another's: its schema steps, SQLite's sequences and deferred-index marks.
OWN = frozenset({"schema_version", "sqlite_sequence", "deferred_scopes"})
#: Settings that describe one file rather than the memory (a compaction the SQLite file still owes itself).
_LOCAL_SETTINGS = ("vacuum_pending",)


class Moved(msgspec.Struct):
    """What a move copied: rows per table (those it copied, in order), and how long it took."""

    source: str
    target: str
    rows: dict[str, int]
    seconds: float


def migrate(source: str | Path, target: str | Path, *, progress: Callable[[int], None] = lambda n: None,
            total: Callable[[int], None] = lambda n: None) -> Moved:
    """Copy the store at `source` (a SQLite file or a `postgresql://` URL) into `target`, a new file or an
    empty PostgreSQL database; `total` hears the rows to copy once they are counted, `progress` each page."""
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            src = stack.enter_context(_source(source))
            dst, finish = stack.enter_context(_target(target))
            counts = _copy_all(src, dst, target, progress, total)
            finish()
    except (*_full_errors(), OSError) as e:  # anywhere: the lock, the schema, a row, the commit, the checkpoint
        if isinstance(e, OSError) and e.errno != errno.ENOSPC:
            raise
        raise StorageFull(f"no space left for the copy ({_words(e)}): nothing was moved; free some and run it again",
                          path="target") from None
    except _lost_errors() as e:  # the server went away (restarted, the session ended): its transaction with it
        raise Unavailable(f"lost PostgreSQL during the move ({_words(e)}): nothing was moved; run it again") from None
    return Moved(source=engine.shown(source), target=engine.shown(target), rows=counts,
                 seconds=round(time.monotonic() - started, 3))


def _copy_all(src, dst, target: str | Path, progress: Callable[[int], None],
              total: Callable[[int], None]) -> dict[str, int]:
    """Every table, read in one snapshot of `src` and written in one transaction on `dst`; rows per table."""
    with src:
        if engine.is_postgresql(src):
            src.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        with dst:
            if engine.is_postgresql(dst):
                from arbiter.store.pg import db as pg

                pg.migrate(dst)  # a savepoint here; its advisory lock makes a daemon starting now wait for us
            _refuse_unless_empty(dst, target)
            plan = _plan(src, dst)
            counts = {t.name: src.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0] for t, _ in plan}
            total(sum(counts.values()))
            copied = [(t, columns) for t, columns in plan if not t.refilled]
            links = [_guarded(t, _copy, src, dst, t, columns, progress) for t, columns in copied]
            for (table, _), settled in reversed(list(zip(copied, links))):
                _guarded(table, _settle, dst, table, settled)
            if engine.is_postgresql(dst):
                # Index the copy's full text now (store/pg/indexing.py), before the source's queue replaces the
                # one the target's triggers wrote, which holds what is to be indexed.
                from arbiter.store.pg import indexing

                indexing.settle(dst)
            for table, columns in plan:
                if table.refilled:
                    # What the target's triggers wrote meanwhile gives way to the source's: work the source still
                    # owed, a fact's recorded states, the aspects' counts as the source's history left them.
                    dst.execute(f"DELETE FROM {table.name}")
                    _guarded(table, _copy, src, dst, table, columns, progress)
            _set_sequences(src, dst, [t for t, _ in plan])
    if engine.is_postgresql(dst):
        # The planner's statistics for what was just written: until autovacuum comes round, recall is planned as
        # for empty tables, 4-5x slower on the development sets (docs/benchmarks.md, "Engine parity").
        dst.execute("ANALYZE")
    return counts


def _guarded(table: Table, step, *args):
    """`step(*args)`, a row the target refuses becoming one error that names the table (and nothing written)."""
    try:
        return step(*args)
    except (*_full_errors(), *_lost_errors()):
        raise
    except _engine_errors() as e:
        raise InvalidParams(f"the target refused a row of the source's {table.name} ({_words(e)}): nothing was "
                            "moved", path="source") from None


def _words(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _full_errors() -> tuple[type[BaseException], ...]:
    """What a store's driver raises when the target's disk is full: apsw's, and psycopg's once a URL loaded it."""
    psycopg = sys.modules.get("psycopg")
    return (apsw.FullError, psycopg.errors.DiskFull) if psycopg else (apsw.FullError,)


def _lost_errors() -> tuple[type[BaseException], ...]:
    """psycopg's errors for a session the server ended or cannot go on with (none without a URL)."""
    psycopg = sys.modules.get("psycopg")
    return (psycopg.OperationalError,) if psycopg else ()


def _engine_errors() -> tuple[type[BaseException], ...]:
    """The errors a store's driver raises for a row it refuses: apsw's, and psycopg's once a URL loaded it."""
    psycopg = sys.modules.get("psycopg")
    return (apsw.Error, psycopg.Error) if psycopg else (apsw.Error,)


# ---- opening both ends -------------------------------------------------------------------------------------

@contextmanager
def _source(source: str | Path) -> Iterator[object]:
    """The source store, opened (and upgraded, as a daemon starting on it would) with no daemon serving it."""
    if engine.is_url(source):
        from arbiter.store.pg import db as pg

        conn = pg.connect(str(source), application=APPLICATION)
        try:
            _refuse_served_pg(conn, source, "move it")
            if pg.schema_version(conn) == 0:
                raise InvalidParams(f"{engine.shown(source)} holds no Arbiter store: nothing to move", path="source")
            pg.migrate(conn)
            yield conn
        finally:
            conn.close()
        return
    from arbiter.store import db

    path = Path(source)
    if not path.is_file():
        raise InvalidParams(f"{path} does not exist: name the database file to move (the home's is "
                            "HOME/arbiter.db)", path="source")
    with ExitStack() as stack:
        _hold(stack, path, "move it")
        # Looked at read-only first: connecting to write turns on WAL, which another program's file must not get.
        try:
            probe = db.connect(path, readonly=True)
            try:
                version = db.schema_version(probe)
            finally:
                probe.close()
        except apsw.Error:  # not a database at all (NotADBError), or not one this process may open
            version = 0
        if version == 0:
            raise InvalidParams(f"{path} is not an Arbiter database: nothing to move", path="source")
        conn = db.connect(path)
        stack.callback(conn.close)
        db.migrate(conn)
        yield conn


@contextmanager
def _target(target: str | Path) -> Iterator[tuple[object, Callable[[], None]]]:
    """The target store and what makes it whole once its transaction has committed."""
    if engine.is_url(target):
        from arbiter.store.pg import db as pg

        conn = pg.connect(str(target), application=APPLICATION)
        try:
            _refuse_served_pg(conn, target, "move a home into it")
            _refuse_foreign_pg(conn, target)
            yield conn, lambda: None
        finally:
            conn.close()
        return
    from arbiter.store import db

    path = Path(target)
    paths.need_folder(path.parent, path="target")
    with ExitStack() as stack:
        _refuse_existing(path)  # before its lock, which the source's may be (a move onto itself)
        _hold(stack, path, "write it")
        _refuse_existing(path)
        # Ours while we hold the lock: one an interrupted move left is started again.
        partial = path.with_name(path.name + ".partial")
        _remove_database(partial)
        stack.callback(_remove_database, partial)  # gone once renamed; else what a failure leaves
        os.close(paths.private_fd(partial))  # the memory, for its owner alone (as backups and exports)
        conn = db.open_database(partial)
        stack.callback(conn.close)  # a second close is nothing to apsw

        def finish() -> None:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()  # the last connection: the WAL is folded in and removed, so the file alone is the store
            fd = os.open(partial, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            paths.replace(partial, path)

        yield conn, finish


def _refuse_existing(path: Path) -> None:
    if path.exists() or path.is_symlink():
        raise Conflict(f"{path} already exists: a home moves only into a new file (or an empty PostgreSQL "
                       "database); move it aside or name another", path="target")


def _hold(stack: ExitStack, path: Path, doing: str) -> None:
    """Take the lock a daemon serving `path` holds (server/claim.py) until the move ends, refusing a served file."""
    held: list[int] = []
    stack.callback(lambda: [os.close(fd) for fd in held])
    # The daemon locks the path it was given: a link's and its target's are two files. One file reached by two
    # spellings (relative, absolute) is locked once: a second flock on it would refuse this very process.
    spelled = (paths.lock_path(path), paths.lock_path(path.resolve()))
    for lock in {lock.parent.resolve() / lock.name: lock for lock in spelled}.values():
        if not lock.exists():  # made here, so removed after, while still held (a daemon starting later makes its own)
            stack.callback(lock.unlink, missing_ok=True)
        owner = take_lock(lock, f"{os.getpid()}\n", held)
        if owner is not None:
            raise Unavailable(f"a daemon (pid {owner.partition(chr(10))[0] or '?'}) is serving {path}: stop it "
                              f"(`arbiter stop`) to {doing}, so that nothing written meanwhile is left behind")


_CLOSING_S = 2.0


def _remove_database(path: Path) -> None:
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        name.unlink(missing_ok=True)


def _refuse_served_pg(conn, url: str | Path, doing: str) -> None:
    """Refuse a database Arbiter daemons are connected to: what they wrote during the move would be left behind.

    A session whose client just closed it (a daemon just stopped, a look at the database a moment before) stays
    listed until its server process has exited: it is given `_CLOSING_S` to go before it counts.
    """
    deadline = time.monotonic() + _CLOSING_S
    while True:
        n = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name LIKE 'arbiter%' AND application_name <> ?", (APPLICATION,),
        ).fetchone()[0]
        if not n or time.monotonic() > deadline:
            break
        time.sleep(0.05)
        conn.execute("SELECT pg_stat_clear_snapshot()")  # a transaction reads the sessions once, unless told
    if n:
        raise Unavailable(f"{n} Arbiter session{'s are' if n > 1 else ' is'} connected to {engine.shown(url)}: stop the "
                          f"daemons serving it to {doing}, so that nothing written meanwhile is left behind")


def _refuse_foreign_pg(conn, url: str | Path) -> None:
    tables = [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")]
    if tables and "schema_version" not in tables:
        raise InvalidParams(f"{engine.shown(url)} holds another program's tables ({', '.join(tables[:3])}"
                            f"{', ...' if len(tables) > 3 else ''}): give the move an empty database", path="target")


def _refuse_unless_empty(conn, target: str | Path) -> None:
    """Refuse a target that holds a memory already: a move never merges two."""
    have = table_names(conn)
    full = [t.name for t in TABLES if t.name in have and conn.execute(f"SELECT 1 FROM {t.name} LIMIT 1").fetchone()]
    if full:
        raise Conflict(f"{engine.shown(target)} already holds a memory (rows in {', '.join(full[:3])}"
                       f"{', ...' if len(full) > 3 else ''}): a home moves only into an empty database "
                       "(a daemon started on it once made its first tenant); create a new one", path="target")


# ---- what to copy --------------------------------------------------------------------------------------------

def table_names(conn) -> set[str]:
    """The store's plain tables (on SQLite not the full-text ones, virtual and their shadows, which it rebuilds)."""
    if engine.is_postgresql(conn):
        return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    return {r[1] for r in conn.execute("PRAGMA main.table_list")
            if r[0] == "main" and r[2] == "table" and not r[1].startswith("sqlite_")}


def table_columns(conn, table: str) -> tuple[list[str], list[str]]:
    """(every column a SELECT reads, the columns an INSERT sets) of `table`, in table order."""
    if engine.is_postgresql(conn):
        rows = conn.execute(
            "SELECT column_name, is_generated FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position", (table,)).fetchall()
        return [r[0] for r in rows], [r[0] for r in rows if r[1] == "NEVER"]
    rows = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
    return [r[1] for r in rows], [r[1] for r in rows if r[6] == 0]  # hidden 2, 3: generated


def _plan(src, dst) -> list[tuple[Table, list[tuple[str, str]]]]:
    """Each table to copy with its (source column or expression, target column) pairs; refuses what a move would
    leave behind."""
    have, can = table_names(src), table_names(dst)
    known = {t.name for t in TABLES} | REBUILT | OWN
    unknown = sorted(t for t in have - known if src.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone())
    if unknown:
        raise InvalidParams(f"the source holds rows in {', '.join(unknown)}, which this Arbiter's move does not "
                            "copy: nothing was moved", path="source")
    missing = sorted(t.name for t in TABLES if t.name in have and t.name not in can
                     and src.execute(f"SELECT 1 FROM {t.name} LIMIT 1").fetchone())
    if missing:
        raise InvalidParams(f"the target's engine has no {', '.join(missing)} table yet, and the source holds rows "
                            "in it: nothing was moved (this Arbiter cannot store them there)", path="target")
    plan = []
    for table in TABLES:
        if table.name not in have or table.name not in can:
            continue
        readable, stored = table_columns(src, table.name)
        _, settable = table_columns(dst, table.name)
        derived = dict(table.fill)
        pairs = []
        for column in settable:
            if column in readable:
                pairs.append((column, column))
            elif column == "content_z" and "content" in readable:  # into SQLite: the text, packed (store/text.py)
                pairs.append(("content", column))
            elif column in derived:
                pairs.append((derived[column], column))
        carried = {s for s, _ in pairs} | derived.keys()  # a derived column the target lacks, it derives itself
        left = [c for c in stored if c not in carried and not (c == "content_z" and "content" in carried)]
        if left:
            raise InvalidParams(f"the target's {table.name} has no column for the source's "
                                f"{', '.join(left)}: nothing was moved", path="target")
        plan.append((table, pairs))
    return plan


# ---- copying ---------------------------------------------------------------------------------------------------

def _pages(conn, table: Table, columns: list[str]) -> Iterator[list[tuple]]:
    """The table's rows in key order, a page at a time (keyset: each page seeks past the last key read)."""
    key = ", ".join(table.key)
    skip = " WHERE key NOT IN (" + ", ".join("?" * len(_LOCAL_SETTINGS)) + ")" if table.name == "settings" else ""
    select = f"SELECT {', '.join(columns)}, {key} FROM {table.name}"
    after: tuple | None = None
    while True:
        where = skip
        params: list = list(_LOCAL_SETTINGS) if skip else []
        if after is not None:
            where += (" AND " if where else " WHERE ") + f"({key}) > ({', '.join('?' * len(after))})"
            params += list(after)
        rows = conn.execute(f"{select}{where} ORDER BY {key} LIMIT {PAGE}", params).fetchall()
        if not rows:
            return
        width = len(columns)
        yield [tuple(r[:width]) for r in rows]
        if len(rows) < PAGE:
            return
        after = tuple(rows[-1][width:])


def _copy(src, dst, table: Table, pairs: list[tuple[str, str]], progress: Callable[[int], None]) -> list:
    """Copy one table's rows, its `later` columns as their stand-ins; returns what `_settle` sets them to."""
    source_columns = [s for s, _ in pairs]
    target_columns = [t for _, t in pairs]
    packed = [i for i, (s, t) in enumerate(pairs) if s == "content" and t == "content_z"]
    per = max(1, min(500, _MAX_PARAMS // len(pairs)))
    row_marks = "(" + ", ".join("?" * len(pairs)) + ")"
    insert = f"INSERT INTO {table.name}({', '.join(target_columns)}) VALUES "
    later = [(target_columns.index(c), c, stand_in) for c, stand_in in table.later if c in target_columns]
    keys = [target_columns.index(k) for k in table.key]
    links: list[tuple[str, list[tuple]]] = [(c, []) for _, c, _ in later]
    with _indexing(dst, table):
        for rows in _pages(src, table, source_columns):
            if packed:
                rows = [tuple(text.pack(v) if i in packed else v for i, v in enumerate(r)) for r in rows]
            for (i, _, stand_in), (_, values) in zip(later, links):
                values += [(r[i], *(r[k] for k in keys)) for r in rows if r[i] != stand_in]
                rows = [r[:i] + (stand_in,) + r[i + 1:] for r in rows]
            for start in range(0, len(rows), per):
                chunk = rows[start:start + per]
                dst.execute(insert + ", ".join([row_marks] * len(chunk)), [v for r in chunk for v in r])
            progress(len(rows))
    return links


def _settle(dst, table: Table, links: list[tuple[str, list[tuple]]]) -> None:
    """Set a table's `later` columns to the source's values, in the order `Table.later` gives them."""
    where = " AND ".join(f"{k} = ?" for k in table.key)
    for column, values in links:
        if values:
            dst.executemany(f"UPDATE {table.name} SET {column} = ? WHERE {where}", values)


@contextmanager
def _indexing(conn, table: Table) -> Iterator[None]:
    """Around the entries' copy into SQLite: every scope's full-text index made first, and it and the tag graph
    filled set-based after the rows (store/deferred.py), as an import fills them; elsewhere nothing.

    On PostgreSQL the triggers keep `recall_entries` and the tag graph and queue the full text, which the copy
    indexes before it replaces the queue with the source's (store/pg/indexing.py).
    """
    if table.name != "entries" or engine.is_postgresql(conn):
        yield
        return
    from arbiter.store import deferred, fts

    scopes = conn.execute("SELECT id, team_id FROM scopes ORDER BY id").fetchall()
    for scope_id, team_id in scopes:
        fts.create(conn, scope_id, shared=team_id is not None)
    with text.packing(), deferred.deferred(conn, {s for s, _ in scopes}):
        yield


def _set_sequences(src, dst, tables: list[Table]) -> None:
    """Set each copied table's id sequence on the target where the source's stood (a purged id is not reused)."""
    for table in tables:
        if table.key != ("id",):
            continue
        mark = max(_sequence(src, table.name), src.execute(f"SELECT coalesce(max(id), 0) FROM {table.name}")
                   .fetchone()[0])
        if engine.is_postgresql(dst):
            dst.execute("SELECT setval(pg_get_serial_sequence(?, 'id'), ?, ?)", (table.name, max(mark, 1), mark > 0))
        elif mark and dst.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ? "
                                  "AND sql LIKE '%AUTOINCREMENT%'", (table.name,)).fetchone():
            dst.execute("DELETE FROM sqlite_sequence WHERE name = ?", (table.name,))
            dst.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (table.name, mark))


def _sequence(conn, table: str) -> int:
    """The last id the table's sequence handed out (0 if none, or the table has none)."""
    if engine.is_postgresql(conn):
        row = conn.execute("SELECT pg_sequence_last_value(pg_get_serial_sequence(?, 'id')::regclass)",
                           (table,)).fetchone()
    else:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return (row[0] if row else None) or 0
