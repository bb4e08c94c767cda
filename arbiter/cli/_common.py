"""What every `arbiter` command shares: the root group, settings, output and error handling.

Config is read here and only here (flags, then ARBITER_* env vars). Errors
become one line on stderr and exit 1; usage errors exit 2; ARBITER_DEBUG=1
keeps tracebacks.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from pathlib import Path

import click
import msgspec
from click.core import ParameterSource

from arbiter import __version__, paths
from arbiter.errors import ArbiterError, InvalidParams, Unauthorized, Unavailable

EXAMPLES = """
\b
Examples:
  arbiter serve &
  arbiter remember --type project --title "Ship v1" --content "Target: Friday" --valid-from 2026-11-01T09:00:00Z
  arbiter remember --type project --title "Ship v1 slips" --content "Target: Monday" --tag release
  arbiter link 2 supersedes 1
  arbiter recall "when do we ship"
  arbiter get 1 --as-of 2026-11-20T10:00:00Z
"""

class GivenPath(click.Path):
    """A click.Path that refuses '' (which pathlib reads as '.', the working folder).

    Else `--home ""` makes the working folder the home, and `backup verify ""` fails inside with a traceback.
    """

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            self.fail("must not be empty: name a file or folder", param, ctx)
        return super().convert(value, param, ctx)


class DatabasePath(GivenPath):
    """A SQLite database file, or a PostgreSQL URL (`postgresql://` or `postgres://`), kept as the string it is.

    Any other URL is refused: taken for a relative path, it would make a folder named `mysql:` where it ran.
    """

    def convert(self, value, param, ctx):
        if isinstance(value, str) and paths.is_database_url(value):
            from arbiter.store import engine  # only now: the store's modules load apsw, which --help need not

            if engine.is_url(value):
                return value
            self.fail(f"{value.split('://', 1)[0]}:// is a database URL Arbiter cannot use: give a SQLite file "
                      "path or a postgresql:// URL", param, ctx)
        return super().convert(value, param, ctx)


class Settings:
    """Where the CLI finds the daemon and its token."""

    def __init__(self, home: Path, socket: Path | None, tenant: str, user: str | None = None, *,
                 serve: str = "arbiter serve"):
        self.home = home
        self.socket = socket or paths.socket_path(home)
        self.tenant = tenant
        self.user = user
        #: The command line that starts a daemon on this home and socket: the hint when none answers.
        self.serve = serve

    def token_path(self) -> Path:
        return paths.user_token_path(self.home, self.tenant, self.user)

    def as_administrator(self) -> None:
        """Refuse `--user` (or ARBITER_USER) on a command that runs as the administrator.

        Such a command (export --all, tenant add, backup create, ...) uses the admin token, which sees every
        tenant and user: run "as bob", it would silently do what bob may not.
        """
        if self.user is not None:
            raise InvalidParams(f"--user {self.user}: this command runs as the administrator (the admin token, "
                                "every tenant and user), not as a user: leave out --user (and ARBITER_USER)")

    def client(self, *, admin: bool = False):
        from arbiter.client import Client, no_daemon

        try:
            if admin:
                self.as_administrator()
                token = paths.read_secret(paths.admin_token_path(self.home), "the admin")
            else:
                who = f"user {self.user!r} of tenant {self.tenant!r}" if self.user else f"tenant {self.tenant!r}"
                token = paths.read_secret(self.token_path(), who)
        except Unauthorized:
            # A fresh home has no token until a daemon first starts on it: say what to do about that.
            if not self._daemon_answers():
                raise no_daemon(self.socket, self.serve) from None
            raise
        return Client(self.socket, token, start_with=self.serve)

    def _daemon_answers(self) -> bool:
        from arbiter.client import Client

        try:
            with Client(self.socket, None, timeout=5) as c:
                c.ping()
        except Unavailable:
            return False
        return True


def _emit(obj, as_json: bool, human) -> None:
    """Print `obj` as JSON (structs and lists of them) or through `human`."""
    if as_json:
        click.echo(msgspec.json.encode(obj).decode())
    else:
        human(obj)


def counted(n: int, one: str, many: str | None = None) -> str:
    """`1 entry`, `3 entries`: a count with its noun in the right number."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _date(text: str | None) -> str:
    return (text or "")[:10]


def entry_line(e) -> str:
    """`#42  [project]  Title  (2026-11-20 · superseded)`."""
    marks = [_date(e.valid_from)]
    if getattr(e, "superseded", None) or getattr(e, "superseded_by", None):
        marks.append("superseded")
    elif e.valid_to:
        marks.append("retired")
    line = f"#{e.id}  [{e.type}]  {e.title}  ({' · '.join(marks)})"
    if getattr(e, "scope", None) == "conversation":
        line += "  [conversation]"
    return line


def _show_entry(e) -> None:
    click.echo(entry_line(e))
    if e.tags:
        click.echo("tags: " + ", ".join(e.tags))
    extras = [
        f"{k}: {v}"
        for k, v in (
            ("source", e.source),
            ("speaker", e.speaker),
            ("conversation", e.conversation_id),
            ("parent", e.parent_id),
            ("valid_to", e.valid_to),
            ("superseded by", ", ".join(map(str, e.superseded_by)) or None),
        )
        if v
    ]
    for x in extras:
        click.echo(x)
    if s := getattr(e, "salience", None):
        click.echo("salience: " + salience_words(s))
    click.echo()
    click.echo(e.content)


def salience_words(s) -> str:
    """`0.612 (initial 0.5 · read 3 times, last 2026-11-23: +0.100 · +0.012 recency and age)`: every term of the
    sum (arbiter/salience.py), so none of the value is unexplained.

    Recency adds up to 0.1 on the day of the last write or read, less each day after; age takes a little each day.
    """
    import math

    from arbiter.salience import PERMANENT_FLOOR

    reads = 0.05 * math.log2(1 + s.access_count)
    boost = min(0.15 * s.reinforcements, 0.6)
    parts = [f"initial {s.initial:g}", "never read" if not s.access_count else
             f"read {counted(s.access_count, 'time')}, last {_date(s.last_access)}"
             + ("" if s.permanent else f": +{reads:.3f}")]
    if s.reinforcements:
        parts.append(f"reinforced {counted(s.reinforcements, 'time')}" + ("" if s.permanent else f": +{boost:.2f}"))
    if s.permanent:
        parts.append(f"permanent: the initial value, at least {PERMANENT_FLOOR:g}")
    elif 0 < s.salience < 1:  # else clamped, and the terms add up to more than the value shows
        parts.append(f"{s.salience - s.initial - reads - boost:+.3f} recency and age")
    return f"{s.salience:.3f} ({' · '.join(parts)})"


def _show_list(items) -> None:
    for e in items:
        click.echo(entry_line(e))
    if not items:
        click.echo("(no entries)", err=True)


def _name(ctx, param, value: str | None) -> str | None:
    """A tenant or user name as the daemon takes one: checked before it becomes part of a token file's path."""
    if value is None:
        return None
    try:
        return new_name(value)
    except InvalidParams as e:
        raise click.BadParameter(e.reason) from None


def new_name(name: str) -> str:
    """A tenant or user name, checked as the daemon would check it, before it names a token file ("../admin"
    would name the admin token's); the error is one line naming NAME, as the daemon's."""
    from arbiter.model import Name  # here: `arbiter --version` and `--help` need none of the model
    from arbiter.validation import describe

    try:
        return msgspec.convert(name, Name)
    except msgspec.ValidationError as e:
        raise InvalidParams.at("name", describe(e)[0]) from None


def read_content(content: str | None) -> str | None:
    """`--content`'s text (stdin for `-`), checked as the daemon checks it before it is sent.

    Text past the daemon's frame limit (4 MiB) would otherwise get a frame error instead of the content limit.
    """
    from arbiter.model import check_content

    if content == "-":
        content = sys.stdin.read()
    if content is not None:
        check_content(content)
    return content


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def _fail(line: str, error: ArbiterError | None = None, *, as_json: bool = False):
    """One line on stderr and exit 1; with --json, the JSON-RPC error object the socket and MCP answer with.

    The same `code` and `data.name` (`invalid_params`, `not_found`...) whoever asks; `message` is the line
    a person reads. An error of the user's own machine (a file missing, a port in use) is `invalid_params`.
    """
    if as_json:
        error = error or InvalidParams(line)
        click.echo(msgspec.json.encode({"error": {"code": error.code, "message": line, "data": error.data()}}),
                   err=True)
    else:
        click.echo(f"arbiter: error: {line}", err=True)
    sys.exit(1)


_PLACE = re.compile(r"(\w+)(?:\[(\d+)\])?")
_LAST = re.compile(r"\.(\w+)(?:\[(\d+)\])?$")


def _as_typed(path: str) -> str | None:
    """How the user typed the wire field `path` names: `--conversation`, `--tag 'two words'`, `ENTRY_ID`.

    A command's parameter is named for the wire field it fills (`--conversation`
    is `conversation_id`), so click knows both spellings. A field inside the
    request's objects is a parameter's too when the user gave it (`fact propose
    --subject ''` fills `facts[0].subject`). A field no parameter fills (None)
    keeps its wire name.
    """
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    params = {p.name: p for p in ctx.command.params}
    place = _PLACE.match(path)
    if place is None or place[1] not in params:
        place = _LAST.search(path)
        given = place is not None and place[1] in params and ctx.get_parameter_source(place[1]) not in (
            None, ParameterSource.DEFAULT)
        if not given:
            return None
    param = params[place[1]]
    typed = param.human_readable_name if isinstance(param, click.Argument) else max(param.opts, key=len)
    value = ctx.params.get(param.name)
    if place[2] is not None and isinstance(value, (list, tuple)) and int(place[2]) < len(value):
        value = str(value[int(place[2])])  # which of the repeated values, still on one line
        typed += " " + (shlex.quote(value) if value.isprintable() else repr(value))
    return typed + path[place.end():]


def _in_flags(e: ArbiterError) -> str:
    """The error's one line, naming the flag or argument the user typed where the daemon named a wire field."""
    if e.path is None:
        return e.message
    typed = _as_typed(e.path)
    if e.reason is not None:  # "conversation_id: must be at least 1", said of the flag
        return f"{typed or e.path}: {e.reason}"
    # A place inside a list or object (supersedes_ids[0], facts[2].object) says which one; a top-level
    # field's value is already in the message ("entry 999 not found", not "... (at id)").
    nested = "[" in e.path or "." in e.path
    return e.message + (f" (at {typed or e.path})" if nested else "")


def handle_errors(f):
    """Turn ArbiterError into one stderr line (with --json, a JSON error object) and exit 1 (tracebacks with
    ARBITER_DEBUG=1).

    So do the errors of the user's own machine, which are theirs to fix: a
    file or folder missing or of the wrong kind, a port in use (OSError), an
    argument or input that is not UTF-8 (Python keeps such bytes as
    surrogates, which no request can carry).
    """

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        fail = functools.partial(_fail, as_json=bool(kwargs.get("as_json")))
        try:
            return f(*args, **kwargs)
        except ArbiterError as e:
            if os.environ.get("ARBITER_DEBUG"):
                raise
            fail(_in_flags(e), e)
        except BrokenPipeError:
            raise  # `arbiter list | head`: click ends quietly
        except OSError as e:
            if os.environ.get("ARBITER_DEBUG"):
                raise
            fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e.strerror or e))
        except UnicodeEncodeError as e:
            bad = e.object[e.start:e.end]
            if os.environ.get("ARBITER_DEBUG") or not all("\ud800" <= c <= "\udfff" for c in bad):
                raise
            bad = bad.encode("utf-8", "surrogateescape")
            fail(f"{e.object[max(0, e.start - 20):e.end + 20]!r} is not UTF-8 text (byte {bad.hex(' ')}): "
                 "arguments and input must be UTF-8")

    return wrapper


def command(group, name=None, **kw):
    """A client command: JSON flag, error handling and the Settings object."""

    def deco(f):
        return group.command(name, **kw)(json_option(click.pass_obj(handle_errors(f))))

    return deco


class LazyGroup(click.Group):
    """The root group: a command's module is imported when the command is asked for, not at every start.

    Every command paid for importing all of them (and what they import) before it ran; the frozen executable
    most of all (bench/startup.py). `modules` maps each command name to the module that registers it.
    """

    modules: dict[str, str] = {}

    def list_commands(self, ctx):
        return sorted(self.commands.keys() | self.modules.keys())

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in self.modules:
            import importlib

            importlib.import_module(f"arbiter.cli.{self.modules[cmd_name]}")
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="arbiter")
@click.option("--home", type=GivenPath(path_type=Path, file_okay=False), envvar="ARBITER_HOME",
              help="Data folder (env ARBITER_HOME; default $XDG_DATA_HOME/arbiter, else ~/.local/share/arbiter).")
@click.option("--socket", type=GivenPath(path_type=Path), envvar="ARBITER_SOCKET",
              help="Daemon socket (env ARBITER_SOCKET; default HOME/arbiter.sock).")
@click.option("--tenant", default=paths.DEFAULT_TENANT, envvar="ARBITER_TENANT", show_default=True, callback=_name,
              help="Tenant whose token to use (env ARBITER_TENANT).")
@click.option("--user", envvar="ARBITER_USER", callback=_name,
              help="Act as this user of the tenant, with the token `arbiter user add` saved "
                   "(env ARBITER_USER; default the tenant's first user, who holds the tenant token).")
@click.pass_context
def main(ctx, home, socket, tenant, user):
    """Arbiter: a local memory daemon for AI agents.

    Start the daemon with `arbiter serve`; every other command talks to it.
    """
    # The flags given on the command line, repeated in the hint to start a daemon: one started without them
    # would serve the default home. Those from the environment are still there when the user runs the hint.
    given = [f"--{name} {shlex.quote(str(value))}" for name, value in (("home", home), ("socket", socket))
             if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE]
    ctx.obj = Settings(home or paths.default_home(), socket, tenant, user, serve=" ".join(["arbiter serve", *given]))

