"""`arbiter migrate`: move a home's database between engines (a SQLite file, a PostgreSQL database)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from arbiter import paths
from arbiter.cli._common import Settings, _emit, command, counted, main


class Store(click.ParamType):
    """A SQLite file (a path) or a PostgreSQL database (a `postgresql://` URL)."""

    name = "FILE|URL"

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            return value
        if not value:
            self.fail("must not be empty: name a database file or a postgresql:// URL", param, ctx)
        if paths.is_database_url(value):
            if not value.startswith(("postgresql://", "postgres://")):
                self.fail(f"{value.split('://', 1)[0]}:// is not an engine Arbiter stores in: give a SQLite file "
                          "path or a postgresql:// URL", param, ctx)
            return value
        return Path(value).expanduser()


@command(main, "migrate")
@click.option("--to", "target", type=Store(), required=True,
              help="Where the home goes: a new SQLite file, or an empty PostgreSQL database (postgresql://...).")
@click.option("--from", "source", type=Store(), envvar="ARBITER_DB",
              help="The database to move: a SQLite file or a postgresql:// URL (env ARBITER_DB; default "
                   "HOME/arbiter.db, the one `arbiter serve` opens).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress on stderr.")
def migrate_cmd(settings: Settings, as_json, target, source, progress):
    """Copy a home's whole database into another engine: SQLite to PostgreSQL, or back.

    Everything is copied with its ids: tenants, users, teams and memberships,
    tokens' hashes (the token files under HOME keep working), conversations,
    entries with their earlier states (`--known-at` reads the same),
    relations, salience, entities, facts with every state they were
    recorded in (each passes the target's gate as it passed the source's),
    and what the derivers still owe. The search index and the tag graph are
    rebuilt by the target as the entries go in. The source is read in one
    snapshot (an older file is upgraded first, as `arbiter serve` would). A
    table with rows that the move does not know, or that the target's
    engine cannot hold yet, is named, and nothing is written.

    The target must be a new file or an empty database (`createdb` makes
    one). Stop the daemons serving either end first (`arbiter stop`): a
    running one is refused, so nothing written meanwhile is left behind.
    The copy is one transaction (SQLite: written beside as FILE.partial and
    renamed when whole), so if it fails or is interrupted the target is as
    it was: run it again. Then serve the copy with `arbiter serve --db`.

    \b
    Examples:
      createdb arbiter && arbiter migrate --to postgresql://localhost/arbiter
      arbiter migrate --from postgresql://db.internal/arbiter --to ~/arbiter-copy.db
    """
    from arbiter.cli._progress import Progress
    from arbiter.transfer import migrate

    settings.as_administrator()  # every tenant and user moves: "as bob" would mean nothing
    source = source if source is not None else paths.db_path(settings.home)
    bar = Progress(None, "migrate", unit="rows", file=sys.stderr) if progress else None
    try:
        moved = migrate.migrate(source, target, progress=bar.update if bar else (lambda n: None),
                                total=(lambda n: setattr(bar, "total", n)) if bar else (lambda n: None))
    finally:
        if bar:
            bar.finish()

    def human(m: migrate.Moved) -> None:
        r = m.rows
        click.echo(f"moved {counted(r.get('entries', 0), 'entry', 'entries')} "
                   f"({counted(r.get('entry_revisions', 0), 'earlier state')}), "
                   f"{counted(r.get('relations', 0), 'relation')}, {counted(r.get('users', 0), 'user')}, "
                   f"{counted(r.get('teams', 0), 'team')} of {counted(r.get('tenants', 0), 'tenant')} "
                   f"from {m.source} to {m.target} in {m.seconds:.1f}s")
        click.echo(f"serve it with: arbiter serve --db {shlex.quote(m.target)}", err=True)

    _emit(moved, as_json, human)
