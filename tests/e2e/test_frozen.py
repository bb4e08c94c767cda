"""The single-file executable, end to end, with the frozen binary only.

Uses `$ARBITER_BINARY` when set; otherwise this tree's build (tests/e2e/build.py: into build/e2e/, reused while
the sources are unchanged, started in the background as soon as the suite has collected its tests).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import apsw
import psycopg
import pytest

from arbiter.store import text
from tests.conftest import isolated_env
from tests.e2e import build as e2e_build

@pytest.fixture(scope="session")
def frozen() -> Path:
    if env := os.environ.get("ARBITER_BINARY"):
        return Path(env)
    return e2e_build.build()


def _ping(sock_path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect(str(sock_path))
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            return b'"result"' in s.recv(4096)
    except OSError:
        return False


def _wait(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


class Cli:
    def __init__(self, argv0: list[str], home: Path):
        self.argv0 = argv0
        self.env = isolated_env(home)

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
        run = subprocess.run([*self.argv0, *args], env=self.env, capture_output=True, text=True, timeout=60)
        if ok:
            assert run.returncode == 0, run.stderr
        return run

    def json(self, *args: str):
        return json.loads(self(*args, "--json").stdout)


@contextlib.contextmanager
def _serving(frozen: Path, home: Path, *args: str):
    """`serve` by the executable (with `args`) until the block ends: (its Cli, its process)."""
    cli = Cli([str(frozen)], home)
    proc = subprocess.Popen([str(frozen), "serve", *args], env=cli.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        _wait(lambda: _ping(home / "arbiter.sock") or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read().decode()
        yield cli, proc
    finally:
        if proc.poll() is None:
            # SIGTERM, not SIGKILL: the one-file executable is a bootloader whose
            # child is the daemon; it forwards SIGTERM, while a SIGKILL would
            # orphan the child.
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stderr.close()


@pytest.fixture
def served(frozen, home):
    with _serving(frozen, home) as both:
        yield both


def test_frozen_binary_serves_and_answers_every_core_command(served, home):
    cli, proc = served
    first = cli.json("remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday",
                     "--tag", "release")
    second = cli.json("remember", "--type", "project", "--title", "Ship v1 slips",
                      "--content", "Target: Monday, the release moved")
    assert {"id", "type", "title", "valid_from", "valid_to"} <= first.keys()
    link = cli.json("link", str(second["id"]), "supersedes", str(first["id"]))
    assert (link["source_id"], link["relation"], link["target_id"]) == (second["id"], "supersedes", first["id"])
    hits = cli.json("recall", "release target")["hits"]
    assert [h["id"] for h in hits] == [second["id"]]
    assert cli.json("forget", str(second["id"])) == {"id": second["id"], "forgotten": True}
    gone = cli("get", str(second["id"]), ok=False)
    assert gone.returncode == 1 and gone.stderr.startswith("arbiter: error:") and "Traceback" not in gone.stderr
    then = cli.json("get", str(second["id"]), "--as-of", second["valid_from"])
    assert (then["id"], then["title"]) == (second["id"], "Ship v1 slips") and then["valid_to"] is not None
    status = cli.json("status")
    assert (status["entries_active"], status["entries_retired"], status["relations"]) == (0, 2, 1)

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert not (home / "arbiter.sock").exists()
    conn = apsw.Connection(str(home / "arbiter.db"))
    text.register(conn)  # the check computes the generated `content` column (store/text.py)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_frozen_binary_serves_a_new_postgresql_database(frozen, home, pg_databases):
    """The one file carries the PostgreSQL engine whole: its driver and its schema steps, which a new database
    is given at the first start."""
    url = pg_databases.create(empty=True)
    try:
        with _serving(frozen, home, "--db", url) as (cli, proc):
            made = cli.json("remember", "--type", "project", "--title", "Frozen on PostgreSQL",
                            "--content", "The executable serves a shared database")
            assert [h["id"] for h in cli.json("recall", "shared database")["hits"]] == [made["id"]]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT id, title FROM entries").fetchall() == [(made["id"], "Frozen on PostgreSQL")]
    finally:
        pg_databases.drop(url)


def test_frozen_binary_behaves_like_python_m_arbiter(served, home):
    frozen_cli, _ = served
    python_cli = Cli([sys.executable, "-m", "arbiter"], home)
    entry = frozen_cli.json("remember", "--type", "user", "--title", "Tabs", "--content", "Prefers tabs")
    cases = [
        ("get", str(entry["id"]), "--json"),
        ("list", "--json"),
        ("get", "999999"),
        ("link", str(entry["id"]), "supersedes", str(entry["id"])),
        ("remember", "--type", "nonsense", "--title", "x", "--content", "y"),
        ("--version",),
    ]
    for args in cases:
        a, b = frozen_cli(*args, ok=False), python_cli(*args, ok=False)
        if args[0] == "get" and a.returncode == 0:  # salience counts the read between the two, and time
            a.stdout, b.stdout = (json.dumps({**json.loads(x.stdout), "salience": None}) for x in (a, b))
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout), args
        assert a.stderr.replace(str(frozen_cli.argv0[0]), "arbiter") == b.stderr, args


def test_frozen_mcp_server_answers_a_real_mcp_client(served, home, tmp_path):
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    cli, _ = served
    cli("remember", "--type", "reference", "--title", "Staging host", "--content", "staging runs on box-7")
    params = StdioServerParameters(command=cli.argv0[0], args=["mcp"], env=cli.env)

    async def session_run():
        with open(tmp_path / "mcp.stderr", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    tools = await session.list_tools()
                    found = await session.call_tool("recall", {"query": "staging host"})
                    return init.instructions, {t.name for t in tools.tools}, found

    instructions, tools, found = anyio.run(session_run)
    assert "Staging host" in instructions
    assert {"remember", "recall", "explore"} <= tools
    assert not found.is_error
    assert "Staging host" in "".join(block.text for block in found.content if block.type == "text")


def test_frozen_binary_serves_the_web_view_with_its_assets(served, home):
    """`arbiter ui` from the one file: the page, the vendored graph library and the API, behind the token."""
    import urllib.error
    import urllib.request

    cli, _ = served
    cli("remember", "--type", "project", "--title", "Ship v1", "--content", "Target: Friday", "--tag", "release")
    ui = subprocess.Popen([*cli.argv0, "ui", "--port", "0"], env=cli.env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        line = ui.stdout.readline()
        assert line.startswith("arbiter ui: http://127.0.0.1:"), line + ui.stderr.read()
        url = line.split()[2]
        with urllib.request.urlopen(url) as r:
            assert b"force-graph.min.js" in r.read()
        with urllib.request.urlopen(url + "static/force-graph.min.js") as r:
            assert r.read().startswith(b"// Version")
        with urllib.request.urlopen(url + "api/graph") as r:
            assert [n["title"] for n in json.load(r)["nodes"]] == ["Ship v1"]
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.rsplit("/", 2)[0] + "/static/app.js")
    finally:
        ui.terminate()
        ui.wait(15)
        ui.stdout.close()
        ui.stderr.close()


def test_frozen_daemon_reaches_the_llm_over_the_libraries_it_unpacks_on_first_use(frozen, home, fake_messages):
    """OpenSSL, jiter and pydantic-core are unpacked when the anthropic SDK first loads, not at start
    (packaging/rthook_lazy_binaries.py): the SDK must find them then."""
    fake_messages.set_script(['{"tags": ["release", "friday"]}'])
    cli = Cli([str(frozen)], home)
    cli.env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL=fake_messages.base_url)
    proc = subprocess.Popen([str(frozen), "serve"], env=cli.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(lambda: _ping(home / "arbiter.sock"))
        e = cli.json("remember", "--type", "project", "--title", "Ship", "--content", "Ship on Friday", "--auto-tag")
        assert e["tags"] == ["release", "friday"] and len(fake_messages.requests) == 1
    finally:
        proc.terminate()
        proc.wait(15)
        proc.stderr.close()
