"""Reaching the daemon from `arbiter mcp`: start one if none answers, revive it if it dies."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

from arbiter import paths
from arbiter._lock import lock_owner
from arbiter.client import Client
from arbiter.errors import Unavailable

START_TIMEOUT_S = 20.0
T = TypeVar("T")

def _reads(verb_name: str) -> bool:
    """Whether the verb `verb_name` only reads (`Verb.writes` says). A read cut off by a dying daemon is retried
    once on the revived one; anything else (a write, a name that is no verb) may or may not have committed, so
    it is reported, never retried blindly.
    """
    from arbiter.verbs import VERBS  # only once the daemon died: the table is not loaded on the way to a call

    verb = VERBS.get(verb_name)
    return verb is not None and not verb.writes


def say(message: str) -> None:
    """One line on stderr (stdout belongs to the MCP client)."""
    print(f"arbiter mcp: {message}", file=sys.stderr, flush=True)


def _answers(socket_path: Path) -> bool:
    try:
        with Client(socket_path, None, timeout=2) as c:
            c.ping()
        return True
    except Unavailable:
        return False


def _serve_command(home: Path, socket_path: Path) -> list[str]:
    # A frozen build is the `arbiter` executable itself; otherwise run this
    # interpreter on the package.
    base = [sys.executable] if getattr(sys, "frozen", False) else [sys.executable, "-m", "arbiter"]
    return [*base, "--home", str(home), "--socket", str(socket_path), "serve"]


def _serving(socket_path: Path) -> bool:
    """A daemon holds `socket_path`, answering or not (it refuses connections past its limit)."""
    return lock_owner(paths.lock_path(socket_path)) is not None


def ensure_daemon(home: Path, socket_path: Path, *, timeout: float = START_TIMEOUT_S) -> int | None:
    """Start a detached daemon unless one serves `socket_path`; its pid, or None if one was running."""
    if _answers(socket_path) or _serving(socket_path):
        return None
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = home / "daemon.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            _serve_command(home, socket_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives this server and its client's process group
        )
    say(f"no daemon answered on {socket_path}; started one (pid {proc.pid}, log {log_path})")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _answers(socket_path):
            return proc.pid
        # Another server may have won a race to start it: then ours exits, and theirs answers.
        if proc.poll() is not None and not _answers(socket_path):
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise Unavailable(f"the daemon exited with status {proc.returncode}: {' / '.join(tail)}")
        time.sleep(0.05)
    raise Unavailable(f"the daemon did not answer on {socket_path} within {timeout:.0f}s (log: {log_path})")


class Reviving(Client):
    """The one Client every tool call of `arbiter mcp` shares (a lock makes it safe across threads).

    If the daemon has gone away, `revive` starts a new one (saying so on
    stderr); a request whose verb only reads (`Verb.writes`) is then sent
    again, once; a write's caller is told it may or may not have been
    saved. A daemon that still holds its socket is up, only refusing (too
    many connections): a write gets its refusal, and nothing starts.
    """

    def __init__(self, socket_path: Path, token: str | None, *, revive: Callable[[], object] | None = None, **kw):
        super().__init__(socket_path, token, **kw)
        self.revive = revive
        self._lock = threading.RLock()
        self._depth = 0  # connecting sends a `ping` of its own: only the request a tool sent is revived and retried

    def call(self, method: str, params=None, result_type: type[T] = dict) -> T:
        with self._lock:
            self._depth += 1
            try:
                return super().call(method, params, result_type)
            except Unavailable:
                if self._depth > 1 or self.revive is None:
                    raise
                self.close()
                read = _reads(method)
                if self.revive() is None and not read:
                    raise  # the daemon is up (it refused us: too many connections); nothing was restarted
                if not read:
                    raise Unavailable(
                        "the daemon stopped during this call and was restarted; the write may or may "
                        "not have been saved: check with `get` or `recall` before retrying"
                    ) from None
                return super().call(method, params, result_type)
            finally:
                self._depth -= 1
