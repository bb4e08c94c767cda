"""Backups: a consistent copy of the live database, its checks, and putting one back.

`create` runs inside the daemon on the writer connection, a step of
`STEP_PAGES` pages at a time (SQLite's online backup API). Between steps the
writer thread is free, so a write queued behind the backup waits for one step
at most; and since those writes go through the same connection as the backup,
SQLite copies the pages they change into the backup as it goes instead of
restarting it (a backup from another connection restarts on every write).

`verify` and `restore` work on files, with no daemon: `restore` refuses while
one serves the home.

A PostgreSQL store is backed up by its operator, not by Arbiter: each of
these refuses one (`ON_POSTGRESQL`) before it writes anything.
"""

from __future__ import annotations

import errno
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import apsw

from arbiter import paths
from arbiter._lock import lock_owner, take_lock
from arbiter.errors import Conflict, InvalidParams, StorageFull, Unavailable
from arbiter.backup.model import STEP_PAGES, BackupCheck, BackupCreated, BackupCreateParams
from arbiter.store import engine, text
from arbiter.store.db import MIGRATIONS
from arbiter.store.users import hash_token
from arbiter.verb import Context, Verb

ON_POSTGRESQL = (
    "backups of a PostgreSQL store are the operator's, not Arbiter's: use pg_dump (or pg_basebackup with WAL "
    "archiving for point-in-time recovery) and restore with pg_restore; `arbiter backup` copies SQLite files only"
)


def _refuse_postgresql(target, *, path: str) -> None:
    """Refuse a PostgreSQL store (a URL, or a connection to one) with `ON_POSTGRESQL`."""
    if engine.is_url(target) or engine.is_postgresql(target):
        raise InvalidParams(ON_POSTGRESQL, path=path)


#: The targets of the backups being made in this process. The daemon runs every step on its writer thread,
#: one at a time, so a set needs no lock.
_UNDER_WAY: set[Path] = set()


def create(source: apsw.Connection, dest: Path, *, step_pages: int = STEP_PAGES) -> Iterator[None]:
    """Copy `source`'s main database to `dest`, yielding between steps; returns a `BackupCreated`.

    The copy is written beside `dest` and renamed into place once whole, so
    `dest` is never a half-written file. It is left in rollback-journal mode:
    one self-contained file, nothing to copy alongside it.
    """
    dest = Path(dest)
    if not dest.is_absolute():
        raise InvalidParams(f"{dest} is not an absolute path", path="path")
    if dest.exists():
        raise InvalidParams(f"{dest} already exists; choose a new file name", path="path")
    paths.need_folder(dest.parent, path="path")
    # By the folder's real path: "/a/../a/b.db" or a link to /a names the same .partial as "/a/b.db".
    target = dest.parent.resolve() / dest.name
    if target in _UNDER_WAY:  # its start would delete the other's .partial under it, and both would fail
        raise Conflict(f"a backup to {dest} is already being made: wait for it, or choose another file name",
                       path="path")
    _UNDER_WAY.add(target)
    partial = dest.with_name(dest.name + ".partial")
    try:
        partial.unlink(missing_ok=True)
        return (yield from _copy_to(source, dest, partial, step_pages))
    except (apsw.FullError, OSError) as e:
        if not _full(e):
            raise
        # The backup's disk, not the database's: the daemon's own "disk full" would send the user to the wrong disk.
        raise StorageFull(f"no space left for the backup in {dest.parent}: nothing was written there, "
                          "and the database is unchanged", path="path") from None
    finally:
        _UNDER_WAY.discard(target)


def _copy_to(source: apsw.Connection, dest: Path, partial: Path, step_pages: int) -> Iterator[None]:
    """`create`'s copy into `partial`, renamed to `dest` once whole and synced."""
    started = time.perf_counter()
    steps = 0
    longest = 0.0
    target = apsw.Connection(str(partial))
    # The copy needs no durability until it is whole (one fsync, then the
    # rename): without a journal and syncs, a step is a memcpy of pages, not
    # a journal write and two fsyncs on every step.
    target.pragma("journal_mode", "off")
    target.pragma("synchronous", "off")
    try:
        with target.backup("main", source, "main") as b:
            while not b.done:
                t = time.perf_counter()
                b.step(step_pages)
                longest = max(longest, time.perf_counter() - t)
                steps += 1
                if not b.done:
                    yield
            pages = b.page_count
        target.pragma("journal_mode", "delete")
    except BaseException:
        target.close()
        partial.unlink(missing_ok=True)
        raise
    target.close()
    try:
        with open(partial, "rb+") as f:
            os.fsync(f.fileno())
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    paths.replace(partial, dest)
    return BackupCreated(
        path=str(dest), bytes=dest.stat().st_size, pages=pages, steps=steps,
        seconds=round(time.perf_counter() - started, 3), longest_step_ms=round(longest * 1000, 1),
    )


def _open_readonly(path: Path) -> apsw.Connection:
    if not path.exists():
        raise InvalidParams(f"no such file: {path}", path="path")
    if not path.is_file():
        raise InvalidParams(f"{path} is not a file", path="path")
    # A plain name, not a "file:" URI: in a URI "#" and "?" end the name, so "b.db#2" would open "b.db".
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    text.register(conn)  # the stored text is read through arbiter_text (store/text.py), checks included
    return conn


def verify(path: Path) -> BackupCheck:
    """Run SQLite's integrity and foreign-key checks and FTS5's index check on a backup file."""
    _refuse_postgresql(path, path="path")
    path = Path(path)
    _not_served(path)
    conn = _open_readonly(path)
    try:
        return _checks(conn, path)
    except apsw.NotADBError:
        return BackupCheck(path=str(path), ok=False, problems=["not an SQLite database"])
    except apsw.CorruptError as e:
        return BackupCheck(path=str(path), ok=False, problems=[f"corrupt: {e}"])
    finally:
        conn.close()


def _not_served(path: Path) -> None:
    """Refuse a database a daemon serves: FTS5's check is spelled as an INSERT, so it takes the write lock,
    and the daemon's writes would wait on it (then fail) for as long as the check runs."""
    for lock in dict.fromkeys((paths.lock_path(path), paths.lock_path(path.resolve()))):
        owner = lock_owner(lock)
        if owner is not None:
            raise Unavailable(
                f"a daemon (pid {owner.partition(chr(10))[0] or '?'}) is serving {path}: check a copy of it "
                "(`arbiter backup create FILE`, then `arbiter backup verify FILE`), or stop the daemon first",
                path="path")


def _checks(conn: apsw.Connection, path: Path) -> BackupCheck:
    problems = [r[0] for r in conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone():
        return BackupCheck(path=str(path), ok=False, problems=problems + ["not an Arbiter database"])
    schema = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
    if schema > len(MIGRATIONS):
        problems.append(f"schema version {schema} is newer than this Arbiter knows ({len(MIGRATIONS)})")
    for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
        problems.append(f"{table} row {rowid} refers to a missing {parent} row")
    if not _fts_matches(path):
        problems.append("the full-text index does not match the entries")
    counts = dict(conn.execute(
        "SELECT 'tenants', count(*) FROM tenants UNION ALL SELECT 'entries', count(*) FROM entries "
        "UNION ALL SELECT 'relations', count(*) FROM relations"
    ).fetchall())
    return BackupCheck(
        path=str(path), ok=not problems, problems=problems, schema_version=schema,
        tenants=counts["tenants"], entries=counts["entries"], relations=counts["relations"],
    )


def _fts_matches(path: Path) -> bool:
    """FTS5's own check that the index matches the rows it was built from (rank 1: against the rows too).

    It is spelled as an INSERT, which a read-only connection refuses, so it
    runs on a read-write one inside a transaction that is rolled back: the
    file is not changed.
    """
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    text.register(conn)  # the index is checked against the text, which arbiter_text reads
    try:
        conn.execute("BEGIN")
        try:
            # One index per tenant since m010 (store/fts.py); one in all before.
            indexes = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE % fts5(%'"
            )]
            for t in indexes:
                conn.execute(f'INSERT INTO "{t}"("{t}", rank) VALUES (\'integrity-check\', 1)')
            return True
        except apsw.CorruptError:
            return False
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def restore(backup: Path, *, home: Path, db_path: Path, socket_path: Path, log=print) -> Path | None:
    """Put `backup` in place of `db_path`; refuse while a daemon serves that file (on any socket) or `socket_path`.

    The current database (with its -wal and -shm) is renamed aside, never
    deleted; its new name is returned (None if there was none). Tokens: a
    tenant or user whose token file in `home` still matches keeps it; any
    other tenant and user, and the admin, get a fresh token written to `home` (a backup
    restored into a new home would otherwise lock everyone out).
    """
    _refuse_postgresql(db_path, path="db")
    backup = Path(backup)
    check = verify(backup)
    if not check.ok:
        raise InvalidParams(f"{backup} failed its checks: {'; '.join(check.problems[:3])}", path="path")
    socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    held: list[int] = []
    try:
        # Both of a daemon's locks (server._claim): the database's is what a daemon serving this file on
        # another socket holds, the socket's what one serving another file here holds; none may start meanwhile.
        for lock in (db_path, socket_path):
            owner = take_lock(paths.lock_path(lock), f"{os.getpid()}\n", held)
            if owner is not None:
                pid, _, where = owner.partition("\n")
                serving = f"{db_path}" + (f" on {where.strip()}" if where.strip() else "") if lock == db_path \
                    else f"on {socket_path}"
                raise Unavailable(
                    f"a daemon (pid {pid or '?'}) is serving {serving}; stop it before restoring "
                    "(`arbiter stop`; `arbiter backup restore` never replaces a database in use)"
                )
        staged = db_path.with_name(db_path.name + ".restoring")
        _remove_database(staged)
        try:
            _copy(backup, staged)
            tokens = _keep_tokens(staged, home)
        except BaseException as e:
            _remove_database(staged)
            if _full(e):
                raise StorageFull(f"no space left in {db_path.parent} for the restored database: nothing was "
                                  "changed; free some space and restore again", path="path") from None
            raise
        aside = None
        if db_path.exists():
            _fold_wal(db_path)
            aside = _free_name(db_path.with_name(f"{db_path.name}.before-restore-{time.strftime('%Y%m%dT%H%M%S')}"))
            for suffix in ("-wal", "-shm"):  # what _fold_wal could not fold: a WAL must never meet another database
                if Path(f"{db_path}{suffix}").exists():
                    os.replace(f"{db_path}{suffix}", f"{aside}{suffix}")
            os.replace(db_path, aside)
        paths.replace(staged, db_path)  # syncs the folder: the renames aside above with it
        # Only now: written before the swap, a failure would have left the old database behind tokens it lacks.
        for path, token, message in tokens:
            paths.write_secret(path, token)
            log(message)
        return aside
    finally:
        for fd in held:
            os.close(fd)


def _fold_wal(db: Path) -> None:
    """Checkpoint `db`'s -wal into it; closing the last connection then removes the -wal and -shm.

    So the copy a restore keeps aside is one file, whole, as a backup is (a daemon killed, or a reader left
    open, leaves them). A database SQLite cannot open this way keeps them, and they move aside with it.
    """
    if not any(os.path.lexists(f"{db}{suffix}") for suffix in ("-wal", "-shm")):
        return
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
    except apsw.Error:
        return  # not folded: the caller moves the -wal and -shm aside with the database, nothing is lost


def _free_name(path: Path) -> Path:
    """`path`, or `path-2`, `path-3`...: the first with no file, nor a -wal or -shm, by that name.

    Named by the second, a second restore within it would replace the database the first one moved aside.
    """
    n, free = 1, path
    while any(os.path.lexists(f"{free}{suffix}") for suffix in ("", "-wal", "-shm")):
        n += 1
        free = path.with_name(f"{path.name}-{n}")
    return free


def _full(e: BaseException) -> bool:
    """Whether `e` says a disk is full (SQLite's or the OS's words for it)."""
    return isinstance(e, apsw.FullError) or isinstance(e, OSError) and e.errno == errno.ENOSPC


def _remove_database(path: Path) -> None:
    """Remove a database file and whatever journal SQLite left beside it."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _copy(src: Path, dest: Path) -> None:
    """Copy through SQLite, so what lands is a whole database whatever the source's journal state."""
    source = _open_readonly(src)
    # Born 0600 whatever the caller's umask, as the daemon makes its own (SQLite gives its journal the same mode).
    os.close(paths.private_fd(dest))
    target = apsw.Connection(str(dest))
    try:
        with target.backup("main", source, "main") as b:
            b.step()
        target.pragma("journal_mode", "delete")
    finally:
        target.close()
        source.close()
    with open(dest, "rb+") as f:
        os.fsync(f.fileno())


def _keep_tokens(db: Path, home: Path) -> list[tuple[Path, str, str]]:
    """Give `db` a new token for each tenant, user and the admin whose token file in `home` does not match it.

    Returns the (file, token, message) to write once `db` is in place.
    """
    conn = apsw.Connection(str(db))
    tokens = []
    try:
        with conn:
            has_users = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'users'").fetchone()
            people = conn.execute(
                # Every user, each tenant's first user (who holds the tenant token) first.
                "SELECT t.id, t.name, u.id, u.name, u.token_hash, u.id = (SELECT min(id) FROM users WHERE tenant_id = t.id) "
                "FROM users u JOIN tenants t ON t.id = u.tenant_id ORDER BY u.id"
                if has_users else "SELECT id, name, NULL, name, token_hash, 1 FROM tenants"
            ).fetchall()
            for tenant_id, name, user_id, user, token_hash, first in people:
                path = paths.user_token_path(home, name, None if first else user)
                if _matches(path, token_hash):
                    continue
                token = "arb_" + secrets.token_urlsafe(32)
                if first:
                    conn.execute("UPDATE tenants SET token_hash = ? WHERE id = ?", (hash_token(token), tenant_id))
                if user_id is not None:
                    conn.execute("UPDATE users SET token_hash = ? WHERE id = ?", (hash_token(token), user_id))
                tokens.append((path, token,
                               f"arbiter: new token for {'tenant' if first else 'user'} {name if first else user!r} in {path}"))
            row = conn.execute("SELECT value FROM settings WHERE key = 'admin_token_hash'").fetchone()
            path = paths.admin_token_path(home)
            if row is not None and not _matches(path, row[0]):
                token = "arbadm_" + secrets.token_urlsafe(32)
                conn.execute("UPDATE settings SET value = ? WHERE key = 'admin_token_hash'", (hash_token(token),))
                tokens.append((path, token, f"arbiter: new admin token in {path}"))
    finally:
        conn.close()
    return tokens


def _matches(path: Path, token_hash: bytes) -> bool:
    try:
        return hash_token(path.read_text().strip()) == token_hash
    except FileNotFoundError:
        return False


def backup_create(ctx: Context, p: BackupCreateParams):
    """Copy the whole database (every tenant) to `path` while serving; writes wait one step at most."""
    _refuse_postgresql(ctx.conn, path="path")
    return (yield from create(ctx.conn, Path(p.path), step_pages=p.pages_per_step))


VERBS = {
    "backup_create": Verb(BackupCreateParams, backup_create, writes=True, admin=True, stepped=True),
}
