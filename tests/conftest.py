"""Shared fixtures: a real daemon process on a real socket, and a real store file."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arbiter import paths
from arbiter.client import Client
from arbiter.errors import Unavailable
from tests import pg, zygote
from tests.tenancy import Checker
from tests.fake_messages import fake_messages  # noqa: F401  (a fixture, shared by every test module)


@pytest.fixture(scope="session")
def pg_databases():
    """Throwaway PostgreSQL databases (tests/pg.py); a test that needs one says so by name, and is skipped, with
    the reason, only where no cluster is given (`.ci/run` always gives one)."""
    admin = pg.admin_url()
    if admin is None:
        pytest.skip(f"{pg.ENV} is not set: .ci/run starts a throwaway PostgreSQL cluster and sets it")
    databases = pg.Databases(admin)
    yield databases
    databases.close()


@pytest.fixture
def pg_url(pg_databases):
    """The URL of a fresh, migrated PostgreSQL database, dropped after the test."""
    url = pg_databases.create()
    yield url
    pg_databases.drop(url)


def pytest_collection_modifyitems(config, items):
    """The executable's tests after the integration tests, its build started now in the background
    (tests/e2e/build.py): a build is a minute of one core, which then overlaps the integration tests instead of
    holding a worker at the start, and the many small unit files after them even out the workers' ends. Every
    worker collects the same order; one starts the build, and the e2e tests wait on its lock."""
    e2e = [item for item in items if "/tests/e2e/" in str(item.path)]
    if not e2e:
        return
    rest = [item for item in items if item not in e2e]
    unit = next((i for i, item in enumerate(rest) if "/tests/unit/" in str(item.path)), len(rest))
    items[:] = rest[:unit] + e2e + rest[unit:]
    if (os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0" and not os.environ.get("ARBITER_BINARY")
            and not config.option.collectonly):
        from tests.e2e import build

        if not build.current():
            _builds.append(subprocess.Popen([sys.executable, "-m", "tests.e2e.build"], cwd=build.ROOT,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL))


_builds: list[subprocess.Popen] = []


def pytest_unconfigure(config):
    """Wait for the build this worker started: another worker's e2e tests may be waiting on it."""
    for proc in _builds:
        proc.wait()


@pytest.fixture(scope="session", autouse=True)
def daemons_statements():
    """Where the daemons this test process starts on PostgreSQL write what they send (`tests.tenancy.traced_to`,
    set up by tests/zygote.py); session-wide, so a module's daemon, started before any test's fixtures, has it."""
    if pg.admin_url() is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="arb-sql-"))
    report = folder / "statements.jsonl"
    report.touch()
    os.environ["TEST_TENANCY_REPORT"] = str(report)
    yield report
    del os.environ["TEST_TENANCY_REPORT"]
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def routed_to_one_tenant(monkeypatch, daemons_statements):
    """Every statement Arbiter sends to PostgreSQL in this test stays on one tenant's node under Citus (issue #31,
    "Scale out by tenant"): the test fails naming each that would fan out, where it was sent and why
    (tests/tenancy.py; its EVERY_TENANT lists the exceptions). This process's statements, and those its daemons
    wrote meanwhile (a daemon exec'd rather than forked is not heard)."""
    if pg.admin_url() is None:
        yield
        return
    from arbiter.store.pg.connection import Connection

    checker = Checker()
    monkeypatch.setattr(Connection, "trace", staticmethod(checker))
    start = daemons_statements.stat().st_size
    yield
    checker.read(daemons_statements, start)
    if checker.problems:
        pytest.fail(f"statements that would reach every tenant's node:\n{checker.report()}", pytrace=False)


def isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for an `arbiter` child process on `home`.

    Every ARBITER_* and ANTHROPIC_* variable of the developer's shell is
    dropped: ARBITER_DB or ARBITER_SOCKET would point a test at their real
    memory, and a real key must never reach a test daemon.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARBITER_", "ANTHROPIC_"))}
    return {**env, "ARBITER_HOME": str(home), **extra}


_sqlite_template: list[Path] = []


def new_sqlite(path: Path, **kw):
    """A new, migrated SQLite store at `path`: a copy of a file this test process migrated once.

    Migrating from nothing takes ~0.2 s and the unit tests open ~800 stores; the copy is the file
    `open_database` makes (tests of the upgrade path and of a first start build their own).
    """
    from arbiter.store import open_database

    if not _sqlite_template:
        folder = Path(tempfile.mkdtemp(prefix="arb-template-"))
        atexit.register(shutil.rmtree, folder, True)
        open_database(folder / "arbiter.db").close()
        _sqlite_template.append(folder / "arbiter.db")
    shutil.copyfile(_sqlite_template[0], path)
    return open_database(path, **kw)


def arbiter_cli(home: Path, *args: str, input: str | None = None, env: dict | None = None, cwd=None,
                timeout: float = 60) -> subprocess.CompletedProcess:
    """`arbiter *args` as a process of its own on `home` (isolated_env, with `env` added), its output as text."""
    return zygote.run(list(args), env=isolated_env(home, **(env or {})), cwd=cwd, input=input, timeout=timeout)


def wait_for(predicate, timeout: float = 10.0, what: str = "condition", interval: float = 0.01):
    """Poll `predicate` every `interval` s until it is truthy or `timeout` passes (then fail)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def as_user(people, name: str) -> Client:
    """A client of the `people` fixture's daemon as `name` (`default`: the tenant's first user)."""
    daemon, tokens = people
    return daemon.client() if name == "default" else Client(daemon.socket, tokens[name])


def tool_text(result) -> str:
    """The text blocks of an MCP tool result, joined."""
    return "\n".join(block.text for block in result.content if block.type == "text")


class DaemonProcess:
    """`arbiter serve` as a subprocess on a temporary home."""

    def __init__(self, home: Path, extra_env: dict | None = None, args: tuple = (), cwd: Path | None = None):
        self.home = home
        self.cwd = cwd  # `python -m` imports from the working directory first
        self.socket = paths.socket_path(home)
        self.db = paths.db_path(home)
        self.extra_env = extra_env or {}
        self.args = args
        self.proc: subprocess.Popen | zygote.Forked | None = None
        self.log = ""  # the daemon's stderr, once stopped

    def start(self) -> "DaemonProcess":
        self.proc = zygote.spawn(["serve", *self.args], env=isolated_env(self.home, **self.extra_env), cwd=self.cwd)
        wait_for(self._ready, what="the daemon to answer ping")
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited early: {self.proc.stderr.read().decode()}")
        try:
            with Client(self.socket, None, timeout=1, check_code=False) as c:  # liveness only
                c.ping()
            return True
        except Unavailable:
            return False

    @property
    def token(self) -> str:
        return paths.token_path(self.home, "default").read_text().strip()

    @property
    def admin_token(self) -> str:
        return paths.admin_token_path(self.home).read_text().strip()

    def client(self, token: str | None = None) -> Client:
        return Client(self.socket, token or self.token)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)
        code = self.proc.returncode if self.proc else 0
        if self.proc and not self.proc.stderr.closed:
            if self.proc.returncode is not None:
                self.log = self.proc.stderr.read().decode(errors="replace")
            self.proc.stdout.close()
            self.proc.stderr.close()
        return code


@contextlib.contextmanager
def engine_daemon(request, home: Path):
    """A daemon for `home` on its SQLite file, or, for a module fixture a test parametrizes indirectly with
    "postgresql", on a fresh PostgreSQL database (dropped after): one test of a module reruns on the second
    engine without the module's other tests."""
    url = None
    if getattr(request, "param", "sqlite") == "postgresql":
        databases = request.getfixturevalue("pg_databases")
        url = databases.create()
    d = DaemonProcess(home, args=("--db", url) if url else ()).start()
    try:
        yield d
    finally:
        d.stop()
        if url:
            databases.drop(url)


@pytest.fixture
def home():
    # Short paths: a unix socket path must fit in 108 bytes.
    path = Path(tempfile.mkdtemp(prefix="arb-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(home):
    d = DaemonProcess(home).start()
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    with daemon.client() as c:
        yield c


@pytest.fixture
def small_disk():
    """A 16 MiB tmpfs (root only): a disk that really fills up."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mount = Path(tempfile.mkdtemp(prefix="arb-disk-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(mount, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)
    shutil.rmtree(mount, ignore_errors=True)


def fill(path: Path) -> None:
    """Write zeros to `path` until its disk refuses more."""
    # Unbuffered: a buffered file's close flushes what the refused write left in its buffer, and raises again.
    with open(path, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * (1 << 16))
            f.flush()


@pytest.fixture
def syncs(monkeypatch) -> list[tuple[str, str]]:
    """What os.fsync and os.replace are asked to do, in order: ("file" | "folder", path) and ("rename", dest)."""
    done: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        done.append(("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dest):
        done.append(("rename", str(dest)))
        real_replace(src, dest)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return done

