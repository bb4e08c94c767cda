"""`arbiter export` and `arbiter import`: a tenant's memory out to JSON Lines and back in."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from arbiter import paths
from arbiter.cli._common import GivenPath, Settings, _emit, command, counted, main
from arbiter.errors import InvalidParams


#: The words `backup create` uses for the same refusal, and the way out.
_EXISTS = "{} already exists; choose a new file name (or --force to replace it)"


def _exists(file: Path) -> bool:
    return file.exists() or file.is_symlink()


def _private(path: Path):
    """`path` open to write and read back, 0600 (`paths.private_fd`): an export holds the memory, as a backup does."""
    return os.fdopen(paths.private_fd(path, os.O_RDWR), "w+b")


@command(main, "export")
@click.argument("file", default="-", type=GivenPath(path_type=Path, dir_okay=False, allow_dash=True))
@click.option("--all", "everything", is_flag=True, help="Every tenant (needs the admin token).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress on stderr.")
@click.option("--force", is_flag=True, help="Replace FILE if it exists (by default an existing file is refused).")
def export_cmd(settings: Settings, as_json, file, everything, progress, force):
    """Write this tenant's memory to FILE (default `-`, stdout) as JSON Lines.

    Line 1 is a header (format version, Arbiter version, time); then every
    conversation, entry (its current state with both time axes, its author
    and team), earlier recorded state of an entry, relation, entity and fact
    (with every state it was recorded in), with this database's ids; the
    last line counts the lines between the header and it, so a copy cut
    short will not import. A user's export holds what that user sees;
    `--all` holds every tenant whole, with its users, teams and memberships
    (never tokens). Derived
    data (the search index, tag graph, topic names) is rebuilt on import,
    not exported. FILE is written for its owner alone (0600), and an
    existing FILE is refused unless --force, as `backup create` does.

    An export taken while agents write is checked as import would check it,
    and made again if it names records it lacks. To stdout (`-`), it is
    made whole in a temporary file first (in $TMPDIR, as large as the
    export), so nothing is written to stdout until it is checked.

    \b
    Examples:
      arbiter export memory.jsonl
      arbiter export - | gzip > memory.jsonl.gz
      arbiter export --all everything.jsonl     # every tenant, admin token
    """
    from arbiter.cli._progress import Progress
    from arbiter.transfer import files

    to_stdout = str(file) == "-"
    if to_stdout and as_json:
        raise click.UsageError("--json prints a summary on stdout: give a FILE to export to")
    if not to_stdout:
        paths.need_folder(file.parent, path="file")
    if not to_stdout and not force and _exists(file):
        raise InvalidParams(_EXISTS.format(file), path="file")
    partial = file.with_name(file.name + ".partial")
    bar = Progress(None, "export", unit="records", file=sys.stderr) if progress else None
    try:
        with settings.client(admin=everything) as c:
            tenants = [t.name for t in c.tenant_list().tenants] if everything else None
            tick = bar.update if bar else (lambda n: None)
            # Checked, and made again, if writes during the export left it naming what it lacks. Stdout cannot
            # be read back, so its export is made in an unnamed temporary file, then copied: on disk, not in
            # memory, as a 250K-entry tenant's export is ~230 MB.
            with tempfile.TemporaryFile() if to_stdout else _private(partial) as out:
                summary = files.export_whole(c, out, tenants=tenants, progress=tick)
                if to_stdout:
                    out.seek(0)
                    shutil.copyfileobj(out, sys.stdout.buffer)
                else:
                    out.flush()
                    os.fsync(out.fileno())  # whole on disk before its name says it is
    except BaseException:
        if not to_stdout:
            partial.unlink(missing_ok=True)
        raise
    finally:
        if bar:
            bar.finish()
    if not to_stdout:
        if not force and _exists(file):  # made while the export ran: kept, and the export beside it
            raise InvalidParams(_EXISTS.format(file) + f"; the export is in {partial}", path="file")
        paths.replace(partial, file)
    if not to_stdout or as_json:
        _emit(summary, as_json, lambda s: click.echo(
            f"exported {counted(s.entries, 'entry', 'entries')} ({counted(s.revisions, 'earlier state')}), "
            f"{counted(s.relations, 'relation')}, {counted(s.conversations, 'conversation')}"
            + (f", {counted(s.facts, 'fact')}" if s.facts else "")
            + (f" of {counted(s.tenants, 'tenant')}" if everything else "") + f" to {file}"
        ))


@command(main, "import")
@click.argument("file", type=GivenPath(path_type=Path, exists=True, allow_dash=True))
@click.option("--from", "source", type=click.Choice(["arbiter", "mcp-memory", "markdown"]), default="arbiter",
              show_default=True,
              help="What FILE is: an Arbiter export, the MCP memory server's memory.jsonl, or a folder of "
                   "Markdown notes (Obsidian, basic-memory).")
@click.option("--all", "everything", is_flag=True,
              help="FILE is an `export --all`: each tenant's part goes to the tenant of that name (created if "
                   "missing, unless its token file is already there; needs the admin token).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress on stderr.")
def import_cmd(settings: Settings, as_json, file, source, everything, progress):
    """Add the memory in FILE (`-` for stdin) to this tenant, with new ids and every reference kept.

    You are the author of what you import; an entry shared with a team stays
    shared if that team exists here and you are in it, else it is yours
    alone. With --all, each tenant's users, teams and memberships are
    created where missing and every entry keeps its author and team; a new
    user's token is written under HOME/tenants/TENANT/ (a file already
    there is kept: it may be another database's only copy). A tenant this
    database lacks whose token file is already there stops the import
    before anything is written: move the file aside first.

    The whole file is checked first: a malformed line is named and nothing
    is written, and so is a file cut short (one with no end line, or whose
    end line counts other lines than it holds). Then it goes in batches of
    2000 lines, each all or nothing; if an import is interrupted, running it again goes on after the last
    written batch. Importing the same file again is a no-op that says so.

    \b
    Examples:
      arbiter import memory.jsonl
      arbiter --tenant work export | arbiter --tenant home import -
      arbiter import --from mcp-memory ~/.mcp/memory.jsonl
      arbiter import --from markdown ~/notes/vault
    """
    if everything:
        settings.as_administrator()  # it writes every tenant's part, whoever would otherwise be asked
    if str(file) == "-":
        if source == "markdown":
            raise click.UsageError("--from markdown reads a folder of notes, not standard input")
        # Read twice (checked whole, then written) and known again by its bytes: kept while it goes in, in a
        # temporary file for its owner alone (mkstemp's 0600), as `export -` keeps its copy.
        with tempfile.NamedTemporaryFile(prefix="arbiter-import-", suffix=".jsonl") as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.flush()
            return _import(settings, as_json, Path(spool.name), source, everything, progress, shown="-")
    return _import(settings, as_json, file, source, everything, progress, shown=str(file))


def _import(settings: Settings, as_json, file: Path, source, everything, progress, *, shown: str):
    from arbiter.cli._progress import Progress
    from arbiter.client import Client
    from arbiter.transfer import files, sources

    lines = None
    if source != "arbiter":
        converted = sources.lines(source, file)
        lines = lambda: iter(converted)  # noqa: E731
    elif file.is_dir():
        raise click.UsageError(f"{file} is a folder: use --from markdown for a folder of notes")
    checked = files.check(file, lines=lines() if lines else None,
                          where=(lambda n: sources.origin(source, converted[n - 1], n)) if lines else None)
    if checked.header.tenant is None and not everything:
        raise InvalidParams("this is an `export --all` file (every tenant): import it with --all", path="file")
    if everything and checked.header.tenant is not None:
        raise InvalidParams("--all needs an `export --all` file; this one holds one tenant", path="file")

    def tenant_exists(tenant: str) -> bool:
        with settings.client(admin=True) as admin:
            return tenant in {t.name for t in admin.tenant_list().tenants}

    # Every tenant's file before any section is written: a refusal halfway would leave the sections before it
    # written (and their new users without tokens).
    for tenant in [s.tenant for s in checked.sections if s.tenant is not None]:
        paths.require_unheld(paths.token_path(settings.home, tenant), f"a tenant named {tenant!r}",
                             exists=functools.partial(tenant_exists, tenant))

    def clients(tenant: str | None) -> Client:
        if tenant is None:
            return settings.client()
        token = paths.token_path(settings.home, tenant)
        if paths.held_secret(token) is None:
            with settings.client(admin=True) as admin:
                created = admin.tenant_create(tenant)
            paths.write_secret(token, created.token)
            click.echo(f"arbiter: created tenant {tenant!r} (token in {token})", err=True)
        return Client(settings.socket, paths.read_secret(token, f"tenant {tenant!r}"), start_with=settings.serve)

    def issue_tokens(done) -> None:
        """Imported users have no token anyone holds: give each one, as `arbiter user add` would."""
        for tenant, s in done.items():
            if not s.new_users:
                continue
            with clients(tenant) as c:
                for name in s.new_users:
                    path = paths.user_token_path(settings.home, tenant, name)
                    if paths.held_secret(path) is not None:  # maybe the only copy of another database's token
                        click.echo(f"arbiter: user {name!r} of tenant {tenant!r}: {path} already holds a token and "
                                   f"is kept; `arbiter --tenant {tenant} user rotate {name}` gives them one "
                                   "(after moving that file aside)", err=True)
                        continue
                    paths.write_secret(path, c.user_rotate(name).token)
                    click.echo(f"arbiter: user {name!r} of tenant {tenant!r}: token in {path}", err=True)

    total = sum(s.records for s in checked.sections)
    bar = Progress(total, "import", unit="records", file=sys.stderr) if progress else None
    try:
        done = files.run_import(clients, file, checked=checked, source=source, lines=lines,
                                progress=bar.update if bar else (lambda n: None))
    finally:
        if bar:
            bar.finish()
    issue_tokens(done)
    if not done:  # a header and nothing after it: say so, rather than print nothing
        _emit({} if everything else {settings.tenant: files.ImportSummary()}, as_json,
              lambda _: click.echo(f"nothing to import: {shown} holds no records"))
        return

    def human(done):
        for tenant, s in done.items():
            who = f"tenant {tenant!r}: " if everything else ""
            if s.already:
                click.echo(f"{who}already imported ({s.finished_at}): nothing changed")
            else:
                resumed = f" (went on from line {s.resumed_at})" if s.resumed_at else ""
                people = f", {counted(len(s.new_users), 'user')}, {counted(s.teams, 'team')}" if everything else ""
                click.echo(f"{who}imported {counted(s.entries, 'entry', 'entries')} "
                           f"({counted(s.revisions, 'earlier state')}), {counted(s.relations, 'relation')}, "
                           f"{counted(s.conversations, 'conversation')}"
                           + (f", {counted(s.facts, 'fact')}" if s.facts else "") + f"{people}{resumed}")
                if s.private:
                    click.echo(f"{who}{counted(s.private, 'entry', 'entries')} shared with a team you are not in here: "
                               "they are yours alone (share their threads with `arbiter share`)")

    _emit({tenant or settings.tenant: s for tenant, s in done.items()}, as_json, lambda _: human(done))
