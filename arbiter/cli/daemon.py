"""`arbiter serve` and `arbiter mcp`: the processes, not the client commands."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import click

from arbiter import paths
from arbiter._lock import lock_owner
from arbiter.cli._common import (
    DatabasePath, GivenPath, Settings, _name, handle_errors, main,
)
from arbiter.errors import InvalidParams, Unavailable


@main.command()
@click.option("--home", type=GivenPath(path_type=Path, file_okay=False),
              help="Data folder (overrides the global option).")
@click.option("--socket", type=GivenPath(path_type=Path), help="Socket path (overrides the global option).")
@click.option("--db", type=DatabasePath(path_type=Path), envvar="ARBITER_DB", metavar="FILE|URL",
              help="Database file, or a PostgreSQL URL postgresql://... (env ARBITER_DB; default HOME/arbiter.db).")
@click.option("--synchronous", type=click.Choice(["FULL", "NORMAL"]), default="FULL", show_default=True,
              envvar="ARBITER_SYNCHRONOUS",
              help="FULL: acknowledged writes survive power loss. NORMAL: faster commits; the last "
                   "transactions before an OS crash or power cut may roll back (never corrupt). SQLite's: on "
                   "PostgreSQL the server's synchronous_commit decides.")
@click.option("--max-frame", type=click.IntRange(1024), default=4 * 1024 * 1024, show_default=True,
              help="Largest request line in bytes.")
@click.option("--max-connections", type=click.IntRange(1), default=256, show_default=True,
              help="Connections served at once (also kept under the fd limit); at the limit the one idle longest "
                   "is closed to let a new one in, and only if all are busy is the new one told so and closed.")
@click.option("--max-buffered", type=click.IntRange(1024), default=16 * 1024 * 1024, show_default=True,
              help="Bytes of unfinished requests held across all connections; a frame past it is refused.")
@click.option("--idle-timeout", type=click.FloatRange(0.1), default=600.0, show_default=True,
              help="Seconds after which a connection with nothing in flight and nothing sent is closed.")
@click.option("--line-timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
              help="Seconds a connection may take to finish a request line it has begun before it is closed.")
@click.option("--fast-model", default="claude-haiku-4-5", show_default=True, envvar="ARBITER_FAST_MODEL",
              help="LLM for expand, rerank, auto-tag, extract-entities and topic names (needs ANTHROPIC_API_KEY).")
@click.option("--strong-model", default="claude-sonnet-4-6", show_default=True, envvar="ARBITER_STRONG_MODEL",
              help="LLM for rerank_fine, auto-supersede, auto-link and fact extract.")
@click.option("--maintenance-interval", type=click.FloatRange(min=1), default=3600, show_default=True,
              envvar="ARBITER_MAINTENANCE_INTERVAL",
              help="Seconds between maintenance runs (salience, retiring, entity clusters, WAL), each at a quiet spell.")
@click.option("--min-salience", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              envvar="ARBITER_MIN_SALIENCE",
              help="Maintenance retires (never deletes) non-permanent entries below this salience; 0 retires none.")
@click.option("--access-retention-days", type=click.FloatRange(min=0), default=30, show_default=True,
              envvar="ARBITER_ACCESS_RETENTION_DAYS", help="Days the access log keeps its rows (counts are kept).")
@click.pass_obj
@handle_errors
def serve(settings: Settings, home, socket, db, synchronous, max_frame, max_connections, max_buffered, idle_timeout,
          line_timeout,
          fast_model, strong_model, maintenance_interval, min_salience, access_retention_days):
    """Run the daemon in the foreground until SIGTERM or Ctrl-C.

    A first start creates the database, a `default` tenant (token in
    HOME/tenants/default.token) and an admin token (HOME/admin.token); a
    token file already there is kept, and the new database takes its token.

    With --db postgresql://..., the store is that PostgreSQL database, and
    several daemons (each with its own home and socket) may serve it at once.

    \b
    Examples:
      arbiter --home ~/scratch-memory serve
      arbiter serve --db postgresql://arbiter@db.example/memory
    """
    from arbiter import server

    home = home or settings.home
    socket = socket or (settings.socket if settings.socket != paths.socket_path(settings.home) else None)
    _fits_a_socket(socket or paths.socket_path(home), given=socket is not None)
    from arbiter.verb import Services

    services = Services(access_retention_days=access_retention_days)
    if key := os.environ.get("ANTHROPIC_API_KEY"):
        from arbiter.advisor import Advisor  # cheap: the anthropic SDK itself loads on first use

        services.advisor = Advisor(
            api_key=key, base_url=os.environ.get("ANTHROPIC_BASE_URL"), fast_model=fast_model,
            strong_model=strong_model,
        )
    server.run(
        home=home,
        db_path=db or paths.db_path(home),
        socket_path=socket or paths.socket_path(home),
        synchronous=synchronous,
        max_frame=max_frame,
        max_connections=max_connections,
        max_buffered=max_buffered,
        idle_timeout=idle_timeout,
        line_timeout=line_timeout,
        services=services,
        maintenance_interval_s=maintenance_interval,
        min_salience=min_salience,
    )


#: The longest path a unix socket takes, in bytes: sun_path less its closing NUL (108 on Linux, 104 elsewhere).
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103


def _fits_a_socket(path: Path, *, given: bool) -> None:
    """Refuse a socket path the kernel would refuse, before the daemon creates anything under its home."""
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_MAX:
        hint = "give a shorter --socket" if given else "give a shorter one with --socket (e.g. --socket /tmp/arbiter.sock)"
        raise InvalidParams(f"the socket path {path} is {size} bytes, over the {SOCKET_PATH_MAX} a unix socket takes: "
                            f"{hint}", path="socket")


def _loopback(ctx, param, value):
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    host = host.strip("[]")
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise click.BadParameter(f"{host!r} is not a loopback address: serve on 127.0.0.1 (or ::1)")
    return host, int(port)


@main.command()
@click.option("--home", type=GivenPath(path_type=Path, file_okay=False),
              help="Data folder (overrides the global option).")
@click.option("--timeout", type=click.FloatRange(0), default=30, show_default=True,
              help="Seconds to wait for the daemon to finish its requests and exit.")
@click.pass_obj
@handle_errors
def stop(settings: Settings, home, timeout):
    """Stop the daemon serving this home's socket; return once it has let go of the database.

    Sends SIGTERM to the pid in SOCKET.lock: the daemon finishes and answers
    the requests it has started (one it has not started is not run), closes
    the database and removes its socket. Run it after an
    upgrade, since a running daemon keeps running the old code.

    \b
    Example:
      arbiter stop && arbiter serve
    """
    home = home or settings.home
    socket = settings.socket if settings.socket != paths.socket_path(settings.home) else paths.socket_path(home)
    lock = paths.lock_path(socket)
    owner = lock_owner(lock)
    if owner is None:
        click.echo(f"no arbiter daemon on {socket}")
        return
    pid = owner.split()[0] if owner.split() else ""
    if not pid.isdigit():
        raise Unavailable(f"the daemon on {socket} is older than `arbiter stop` (no pid in {lock}): "
                          "stop it with the tool that started it, or kill its process")
    os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while lock_owner(lock) is not None:
        if time.monotonic() > deadline:
            raise Unavailable(f"the daemon (pid {pid}) on {socket} did not exit within {timeout:g}s")
        time.sleep(0.02)
    click.echo(f"stopped the arbiter daemon (pid {pid}) on {socket}")


@main.command()
@click.option("--home", type=GivenPath(path_type=Path, file_okay=False),
              help="Data folder (overrides the global option).")
@click.option("--tenant", callback=_name, help="Tenant (overrides the global --tenant / ARBITER_TENANT).")
@click.option("--conversation", type=click.IntRange(1), envvar="ARBITER_CONVERSATION",
              help="Resume this conversation (env ARBITER_CONVERSATION); default: the first write starts one.")
@click.option("--http", "http", metavar="HOST:PORT", callback=_loopback,
              help="Serve streamable HTTP on this loopback address instead of stdio (bearer token required).")
@click.option("--user", callback=_name, help="Act as this user of the tenant (overrides the global --user / ARBITER_USER).")
@click.option("--token-file", type=GivenPath(path_type=Path, dir_okay=False),
              help="Act as whoever this token file's token names (instead of --tenant/--user).")
@click.option("--tools", metavar="all|default|NAME,...", envvar="ARBITER_MCP_TOOLS",
              help="Tools to offer: the default surface (14 tools), all (every fine-grained tool), or these names.")
@click.pass_obj
@handle_errors
def mcp(settings: Settings, home, tenant, conversation, http, user, token_file, tools):
    """Serve MCP on stdin/stdout for an agent (Claude Desktop, Claude Code, any MCP client).

    Starts the daemon (detached) if none answers on the socket, then hands
    the client this tenant's briefing as its instructions. With --http, serves
    MCP's streamable HTTP transport at http://HOST:PORT/mcp instead; every
    request must carry `Authorization: Bearer TOKEN` (the token is printed
    once, when created, and kept in HOME/mcp-http.token, mode 0600).

    \b
    Example MCP client config:
      {"mcpServers": {"arbiter": {"command": "arbiter", "args": ["mcp"]}}}
    As one user of a team (each teammate's agent runs its own):
      {"mcpServers": {"arbiter": {"command": "arbiter", "args": ["mcp", "--user", "bob"]}}}
    Example over HTTP:
      arbiter mcp --http 127.0.0.1:8765
    Every fine-grained tool instead of the 14 that reach them:
      arbiter mcp --tools all
    """
    from arbiter import mcp as mcp_package  # the MCP layer loads only on this path

    home = home or settings.home
    socket = settings.socket if settings.socket != paths.socket_path(settings.home) else paths.socket_path(home)
    tenant = tenant or settings.tenant
    token_file = token_file or paths.user_token_path(home, tenant, user or settings.user)
    mcp_package.run(home=home, socket_path=socket, tenant=tenant, token_file=token_file,
                    conversation_id=conversation, http=http, tools=tools)
