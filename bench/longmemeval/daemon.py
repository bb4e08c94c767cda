"""Reach a daemon: start one on a home of our own, or connect to one already running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arbiter.client import Client

SOCKET_NAME = "arbiter.sock"
TOKEN_FILE = Path("tenants") / "default.token"
LOG_NAME = "bench-daemon.log"


def isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a bench daemon on `home`: none of the shell's ARBITER_* settings.

    ARBITER_DB or ARBITER_SOCKET would otherwise send the bench's writes to
    the user's real memory. ANTHROPIC_* stays: the LLM variants need the key.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARBITER_")}
    return {**env, "ARBITER_HOME": str(home), **extra}


class DaemonError(RuntimeError):
    """The daemon could not be started, reached or stopped."""


def connect(socket_path: Path, token_file: Path) -> Client:
    """A Client for the daemon on `socket_path`, authenticated with the token in `token_file`."""
    # Imported here so that `--help`, dataset checks and the unit tests work
    # without loading the client stack.
    from arbiter.client import Client

    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as e:
        raise DaemonError(f"{token_file}: cannot read the tenant token: {e.strerror}") from None
    return Client(socket_path=str(socket_path), token=token)


def _listening(path: Path) -> bool:
    # A bare connect tells "not listening yet" (an OSError) apart from a real
    # protocol error, which the Client's ping would raise as something else.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


class Daemon:
    """`python -m arbiter --home HOME serve` for the length of a `with` block.

    Ready once its socket accepts and answers ping, within `timeout` seconds;
    SIGTERM on exit. Its output goes to HOME/bench-daemon.log, whose tail is
    quoted if it dies.
    """

    def __init__(self, home: Path, *, timeout: float = 30.0):
        self.home = home.absolute()  # the socket path must not depend on the daemon's working folder
        self.timeout = timeout
        self.socket_path = self.home / SOCKET_NAME
        self.token_file = self.home / TOKEN_FILE
        self.log_path = self.home / LOG_NAME
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Daemon:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "arbiter", "--home", str(self.home), "serve"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=isolated_env(self.home),
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self.stop()
        except DaemonError as e:
            if exc is None:
                raise
            exc.add_note(str(e))  # keep the error that ended the block in front

    @property
    def pid(self) -> int | None:
        """The daemon's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    def client(self) -> Client:
        """A Client for this daemon's default tenant."""
        return connect(self.socket_path, self.token_file)

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.timeout
        while not (self.token_file.exists() and self.socket_path.exists() and _listening(self.socket_path)):
            if self._proc.poll() is not None:
                raise DaemonError(f"the daemon exited with code {self._proc.returncode}: {self._log_tail()}")
            if time.monotonic() > deadline:
                raise DaemonError(f"the daemon did not listen on {self.socket_path} within {self.timeout:.0f} s")
            time.sleep(0.02)
        with self.client() as c:
            c.ping()

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            return f"(no log: {e.strerror})"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"

    def stop(self, *, timeout: float = 15.0) -> None:
        """SIGTERM, wait up to `timeout` seconds, then SIGKILL and say so."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise DaemonError(f"the daemon ignored SIGTERM for {timeout:.0f} s and was killed") from None
