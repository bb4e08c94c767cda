"""`arbiter backup create|verify|restore`: a safe copy of the database, its checks, and putting one back."""

from __future__ import annotations

from pathlib import Path

import click

from arbiter import paths
from arbiter.cli._common import (
    DatabasePath, GivenPath, Settings, _emit, command, counted, handle_errors, json_option, main,
)


@main.group()
def backup():
    """Back up the database while the daemon serves, check a backup, restore one.

    \b
    Examples:
      arbiter backup create ~/arbiter-2026-11-23.db
      arbiter backup verify ~/arbiter-2026-11-23.db
      arbiter backup restore ~/arbiter-2026-11-23.db
    """


@command(backup, "create")
@click.argument("file", type=GivenPath(path_type=Path, dir_okay=False))
def backup_create(settings: Settings, as_json, file):
    """Copy the whole database (every tenant) to FILE through the running daemon.

    Uses SQLite's online backup API a few pages at a time, so writers keep
    going; FILE is one self-contained database (no -wal beside it). Needs
    the admin token (HOME/admin.token).

    \b
    Example:
      arbiter backup create ~/backups/arbiter-$(date +%F).db
    """
    with settings.client(admin=True) as c:
        done = c.backup_create(file.expanduser().absolute())
    _emit(done, as_json, lambda d: click.echo(
        f"backed up {d.bytes / 1e6:.1f} MB to {d.path} in {d.seconds:.2f}s ({d.steps} steps)"
    ))


@backup.command("verify")
@click.argument("file", type=DatabasePath(path_type=Path, dir_okay=False))
@json_option
@handle_errors
def backup_verify(as_json, file):
    """Check a backup: SQLite's integrity and foreign-key checks and the full-text index. Exit 1 on a problem.

    \b
    Example:
      arbiter backup verify ~/backups/arbiter-2026-11-23.db
    """
    from arbiter.backup import core as backup_mod

    check = backup_mod.verify(file.expanduser() if isinstance(file, Path) else file)

    def human(c):
        if c.ok:
            click.echo(f"ok: schema {c.schema_version}, {counted(c.tenants, 'tenant')}, "
                       f"{counted(c.entries, 'entry', 'entries')}, {counted(c.relations, 'relation')}")
        else:
            for p in c.problems:
                click.echo(f"problem: {p}")

    _emit(check, as_json, human)
    if not check.ok:
        raise SystemExit(1)


@backup.command("restore")
@click.argument("file", type=GivenPath(path_type=Path, dir_okay=False, exists=True))
@click.option("--db", type=DatabasePath(path_type=Path), envvar="ARBITER_DB",
              help="Database file to replace (env ARBITER_DB; default HOME/arbiter.db).")
@click.pass_obj
@handle_errors
def backup_restore(settings: Settings, file, db):
    """Replace the home's database with FILE. The daemon must be stopped (refused otherwise).

    FILE is verified first. The current database is renamed aside
    (arbiter.db.before-restore-TIMESTAMP), not deleted. Tenants, users and
    the admin whose token files in this home do not match the backup get new
    tokens.

    \b
    Example:
      arbiter backup restore ~/backups/arbiter-2026-11-23.db && arbiter serve
    """
    from arbiter.backup import core as backup_mod

    settings.as_administrator()  # it replaces every tenant's data
    db = db or paths.db_path(settings.home)
    aside = backup_mod.restore(
        file.expanduser(), home=settings.home, db_path=db, socket_path=settings.socket,
        log=lambda m: click.echo(m, err=True),
    )
    click.echo(f"restored {file} into {db}" + (f" (the previous database is now {aside.name})" if aside else ""))
