"""`python -m arbiter ...` for tests, without paying for a fresh interpreter and its imports every time.

The suite starts a few hundred daemons and CLI commands. Each used to spend most of its CPU starting Python
and importing the same modules (the anthropic SDK alone is two seconds of it), on two cores. A zygote is one
process per test worker and per kind of command that has imported what that command imports, then forks a
child for each start. The child is a real process, as `python -m arbiter` makes one: its own pid, stdio,
environment, signals and exit status; it runs the command line's own entry point. Only a command's imports
happened earlier, in its parent.

Three kinds, so that each child holds only what its real counterpart would have loaded:
- `serve`: the daemon, with OpenSSL left out first as `arbiter serve` does (arbiter/_openssl.py);
- `llm`: a daemon given an API key, which imports the anthropic SDK on its first model call;
- `cli`: every other command (the client side).

A start that needs its own interpreter (another working directory, which `python -m` puts first on
`sys.path`; another PYTHONPATH) is exec'd as before.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------- the test side


class Forked:
    """The part of `subprocess.Popen` the tests use, for a child of a zygote (not of this process: its exit
    status comes from the zygote, which reaps it)."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, stdout, stderr):
        self.args = args
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = None
        self.returncode: int | None = None
        self._conn = conn
        self._pending = b""

    def _read_status(self) -> None:
        while b"\n" not in self._pending:
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError(f"the zygote that forked pid {self.pid} went away")
            self._pending += chunk
        word, code = self._pending.split(b"\n", 1)[0].split()
        assert word == b"exit", word
        self.returncode = int(code)  # negative: the signal that ended it, as Popen says
        self._conn.close()

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)


class _Zygote:
    def __init__(self, kind: str):
        self.folder = tempfile.mkdtemp(prefix="arb-z")  # short: a unix socket path holds 108 bytes
        self.path = os.path.join(self.folder, "z.sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARBITER_", "ANTHROPIC_"))}
        # Its stdin is a pipe this process holds: when the test worker ends, however it ends, the zygote reads
        # end-of-file and exits.
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zygote", kind, self.path], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        if self.proc.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the {kind} zygote did not start")

    def fork(self, args: list[str], env: dict[str, str], stdio: list[int]) -> tuple[socket.socket, int]:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        body = json.dumps({"args": args, "env": env}).encode()
        socket.send_fds(conn, [struct.pack("!I", len(body))], stdio)
        conn.sendall(body)
        line = b""
        while not line.endswith(b"\n"):
            chunk = conn.recv(1)
            if not chunk:
                raise RuntimeError("the zygote closed the connection before forking")
            line += chunk
        return conn, int(line.split()[1])


_zygotes: dict[str, _Zygote] = {}
_lock = threading.Lock()


def _kind(args: list[str], env: dict[str, str]) -> str:
    if "serve" in args:
        return "llm" if env.get("ANTHROPIC_API_KEY") else "serve"
    return "cli"


def _forkable(env: dict[str, str], cwd) -> bool:
    """The zygote runs in the project folder with this process's PYTHONPATH: so must the command."""
    here = Path.cwd().resolve()
    return (here == ROOT and (cwd is None or Path(cwd).resolve() == ROOT)
            and env.get("PYTHONPATH") == os.environ.get("PYTHONPATH"))


def spawn(args: list[str], *, env: dict[str, str], cwd=None, stdin=subprocess.DEVNULL,
          stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """`subprocess.Popen([sys.executable, "-m", "arbiter", *args], ...)`, forked from a zygote where it can be.

    stdin, stdout and stderr: `subprocess.PIPE` (out and err only), `subprocess.DEVNULL`, or a file
    descriptor / file object."""
    if not _forkable(env, cwd):
        return subprocess.Popen([sys.executable, "-m", "arbiter", *args], env=env, cwd=cwd, stdin=stdin,
                                stdout=stdout, stderr=stderr)
    kind = _kind(args, env)
    with _lock:
        zygote = _zygotes.get(kind) or _zygotes.setdefault(kind, _Zygote(kind))
    mine: list[int] = []  # our ends and the child's, closed here once it has them
    fds, ours = [], []
    for stream, target in ((0, stdin), (1, stdout), (2, stderr)):
        if target == subprocess.PIPE:
            read, write = os.pipe()
            fds.append(write)
            mine.append(write)
            ours.append(os.fdopen(read, "rb"))
        elif target == subprocess.DEVNULL or target is None:
            fd = os.open(os.devnull, os.O_RDWR)
            fds.append(fd)
            mine.append(fd)
            ours.append(None)
        else:
            fds.append(target if isinstance(target, int) else target.fileno())
            ours.append(None)
    try:
        conn, pid = zygote.fork(args, env, fds)
    finally:
        for fd in mine:
            os.close(fd)
    return Forked([sys.executable, "-m", "arbiter", *args], conn, pid, ours[1], ours[2])


def run(args: list[str], *, env: dict[str, str], cwd=None, input: str | None = None,
        timeout: float | None = 60) -> subprocess.CompletedProcess:
    """`subprocess.run([sys.executable, "-m", "arbiter", *args], capture_output=True, text=True, ...)`."""
    with tempfile.TemporaryFile() as inp, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input is not None:
            inp.write(input.encode())
            inp.seek(0)
        proc = spawn(args, env=env, cwd=cwd, stdin=inp if input is not None else subprocess.DEVNULL,
                     stdout=out, stderr=err)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))


# -------------------------------------------------------------------------------------------- the zygote side


def _preload(kind: str) -> None:
    if kind in ("serve", "llm"):
        from arbiter import _openssl

        if not _openssl.leave_out():
            raise RuntimeError("OpenSSL was loaded before the daemon's imports: the zygote must import less")
        import arbiter.cli.daemon  # noqa: F401
        import arbiter.server  # noqa: F401
        import arbiter.verbs  # noqa: F401
        if kind == "llm":
            import anthropic  # noqa: F401

            import arbiter.advisor  # noqa: F401
    else:
        import arbiter.cli  # noqa: F401
        import arbiter.client  # noqa: F401
        for module in set(arbiter.cli.main.modules.values()):
            __import__(f"arbiter.cli.{module}")


def _child(args: list[str], env: dict[str, str], stdio: list[int]) -> None:
    """In the forked child: become `python -m arbiter *args`; never returns."""
    code = 1
    try:
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        if env.get("TEST_TENANCY_REPORT") and _on_postgresql(args, env):
            from tests.tenancy import traced_to

            traced_to(env["TEST_TENANCY_REPORT"])
        import runpy

        sys.argv = ["arbiter", *args]
        runpy.run_module("arbiter", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        import atexit

        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _on_postgresql(args: list[str], env: dict[str, str]) -> bool:
    from arbiter.store import engine

    return any(engine.is_url(a) for a in args) or engine.is_url(env.get("ARBITER_DB"))


def _recv_request(conn: socket.socket) -> tuple[list[str], dict[str, str], list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    while len(head) < 4:
        head += conn.recv(4 - len(head))
    size = struct.unpack("!I", head)[0]
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    request = json.loads(body)
    return request["args"], request["env"], fds


def _serve(kind: str, path: str) -> None:
    _preload(kind)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the connection that asked for it)
    sys.stdout.buffer.write(b"ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in sel.select():
            if key.data == "parent":
                if not os.read(key.fd, 4096):
                    return  # the test worker is gone; its children are not ours to stop
            elif key.data == "accept":
                conn, _ = listener.accept()
                args, env, stdio = _recv_request(conn)
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    listener.close()
                    for pidfd, (_pid, other) in children.items():
                        os.close(pidfd)
                        other.close()
                    conn.close()
                    _child(args, env, stdio)
                for fd in stdio:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                sel.register(pidfd, selectors.EVENT_READ, "child")
                try:
                    conn.sendall(f"pid {pid}\n".encode())
                except OSError:
                    pass
            else:
                pid, conn = children.pop(key.fd)
                sel.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass  # the test let go of it
                conn.close()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
