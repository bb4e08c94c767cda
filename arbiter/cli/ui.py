"""`arbiter ui`: the web view on 127.0.0.1."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from arbiter import paths
from arbiter.cli._common import Settings, handle_errors, main
from arbiter.errors import Unavailable


@main.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port on 127.0.0.1 (default: any free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@click.pass_obj
@handle_errors
def ui(settings: Settings, port, open_browser):
    """Serve the web view of this tenant's memory until Ctrl-C.

    The graph of entries and relations coloured by topic, a time slider for
    as-of, recall search, and each entry's history and backlinks; a list
    view on small screens. Only on 127.0.0.1, and only with the random token
    in the printed URL. The daemon must be running. It reads as the user
    you run it as (`--user`) and shows only what that user sees.

    \b
    Example:
      arbiter ui --open
      arbiter --user bob ui       # the memory as bob sees it
    """
    from arbiter.ui.server import UIServer

    with settings.client() as c:  # fail now, not in the browser, if there is no daemon or token
        me = c.whoami()
    try:
        server = UIServer(settings.client, port=port)
    except OSError as e:
        raise Unavailable(f"cannot serve the web view on 127.0.0.1:{port}: {e.strerror or e}") from None
    click.echo(f"arbiter ui: {server.url}  (as {me.user}: it shows what they see; Ctrl-C to stop)")
    opener = None
    # `kill` stops it as Ctrl-C does: the page that holds the token goes with the server.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if open_browser:
            import webbrowser

            # Never the URL itself on the browser's command line: every local user can read it (ps,
            # /proc/PID/cmdline), and the token is all that guards the page. A 0600 page that redirects to it.
            opener = _redirect_page(settings.home, server.url)
            webbrowser.open(opener.as_uri())
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if opener is not None:
            opener.unlink(missing_ok=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _redirect_page(home: Path, url: str) -> Path:
    """A page only this user can read that sends the browser on to `url`."""
    path = home / f"ui-open-{os.getpid()}.html"
    paths.write_secret(path, f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={url}">'
                             f'<title>Arbiter</title><a href="{url}">Open Arbiter</a>\n')
    return path
