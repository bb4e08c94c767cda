"""README.md's examples, run in order in a fresh home as a person would paste them.

Each indented block is run line by line in one shell (so `T=$(date ...)` carries to the lines after it), with
the `arbiter` command of this tree on PATH and a real daemon. A line fails the test by a non-zero exit, by a
traceback, or by output that contradicts what the README says beside it (`EXPECT`, and the ids it names as
`#N`). The blocks not run are named in `NOT_RUN` with why; a block named there that the README no longer has,
or an expectation no line meets, fails the test too, so the list cannot drift from the file.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import DaemonProcess, isolated_env

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

#: Blocks not run, by their first line's start, and why.
NOT_RUN = {
    "pip install . && arbiter serve": "installing is the test set-up; the test starts `arbiter serve` itself",
    "pip install -e '.[test]'": "the whole suite, of which this test is part",
    '{"mcpServers"': "a client's config file, not a command",
    "arbiter ui --open": "opens a browser; the web view has its own tests (tests/integration/test_ui.py)",
    "SELECT id, CAST(": "SQL for a sqlite3 shell, not a command",
    "arbiter stop      # nothing may write while a home moves": "needs a PostgreSQL server; "
    "tests/integration/test_migrate.py moves a home there and back, and serves it",
    "pyinstaller build.spec": "minutes of build; tests/e2e/test_frozen.py builds and runs the executable",
    "arbiter serve --db postgresql://": "needs a PostgreSQL server; tests/integration/test_pg_daemon.py serves one",
}

#: What the README says a line prints: a command's start, then text its output must hold and text it must not.
EXPECT = {
    'arbiter recall "when do we ship"': (["#2  [project]  Ship v1 slips"], ["#1  ["]),
    "arbiter get 1 --as-of": (["Target: Friday"], []),
    "arbiter get 2 --known-at $T": (["Target: Monday"], ["10:00"]),
    'arbiter recall "monday" --known-at $T': (["#2  ["], []),
    'arbiter recall "ship*"': (["#2  ["], []),
    "arbiter entity show PostgreSQL": (["#3  ["], []),
    "arbiter link 4 causes 5": (["4 causes 5"], []),
    "arbiter facts user": (["Acme Corp"], []),
    "arbiter --user bob reply 8": (["Re: Deploy plan"], []),
    "arbiter backup verify": (["ok"], []),
}

#: Files a person brings, named by the README ("your file"), put in the working folder before the blocks run.
def _their_files(work: Path, person: Path) -> None:
    (work / "notes.jsonl").write_text(
        '{"type": "project", "title": "Standup", "content": "The standup moves to 9:30 from Monday"}\n'
        '{"type": "learning", "title": "Flaky test", "content": "test_sync fails when the clock jumps"}\n')
    shutil.copy(DATA / "mcp-memory.jsonl", work / "mcp-memory.jsonl")
    shutil.copytree(DATA / "notes", person / "notes" / "vault")


def blocks(readme: str) -> list[list[str]]:
    """The README's indented code blocks, each as its lines (indent removed, continuation lines kept)."""
    out, current, prev_blank = [], None, True
    for line in readme.splitlines():
        if line.startswith("    ") and (current is not None or prev_blank):
            if current is None:
                current = []
                out.append(current)
            current.append(line[4:])
        elif line.strip():
            current = None
        prev_blank = not line.strip()
    return out


def _script(lines: list[str]) -> str:
    steps = []
    for i, line in enumerate(lines):
        steps.append(f"{line}\nprintf '\\n@@{i}:%s\\n' $?\nprintf '\\n@@{i}\\n' >&2\n")
    return "".join(steps)


def _split(text: str, marker: str) -> list[str]:
    return [part.strip("\n") for part in re.split(marker, text)[::2]]


def test_readme_examples_run_as_written(tmp_path_factory):
    readme = (ROOT / "README.md").read_text()
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"arb-readme-{os.getpid()}"  # a socket path fits in 108 bytes
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    work = tmp_path_factory.mktemp("work")
    person = work / "person"  # their $HOME: ~/backups goes here
    person.mkdir()
    bin_dir = work / "bin"
    bin_dir.mkdir()
    command = bin_dir / "arbiter"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m arbiter "$@"\n')
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    _their_files(work, person)
    env = isolated_env(home, PATH=f"{bin_dir}:{os.environ['PATH']}", HOME=str(person),
                       PYTHONPATH=str(ROOT))
    daemon = DaemonProcess(home).start()
    skipped, expected = set(), dict(EXPECT)
    try:
        for block in blocks(readme):
            reason = next((key for key in NOT_RUN if block[0].startswith(key)), None)
            if reason is not None:
                skipped.add(reason)
                continue
            proc = subprocess.run(["bash", "-c", _script(block)], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=300)
            codes = re.findall(r"\n@@(\d+):(\d+)\n", "\n" + proc.stdout)
            outs, errs = _split("\n" + proc.stdout, r"\n@@\d+:(\d+)\n"), _split("\n" + proc.stderr, r"\n@@(\d+)\n")
            assert len(codes) == len(block), (block, proc.stdout, proc.stderr)
            for i, line in enumerate(block):
                out, err = outs[i], errs[i]
                said = f"README line: {line}\nstdout: {out}\nstderr: {err}"
                assert codes[i][1] == "0", said
                assert "Traceback" not in err, said
                _check(line, out, said, expected)
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    assert skipped == set(NOT_RUN), f"blocks NOT_RUN names that README.md no longer has: {set(NOT_RUN) - skipped}"
    assert not expected, f"EXPECT names lines README.md no longer has: {list(expected)}"


def _check(line: str, out: str, said: str, expected: dict) -> None:
    command = line.split("  #")[0]
    if re.search(r"\bremember\b", command) and command.startswith("arbiter"):
        assert "already remembered" not in out, said
        printed = re.match(r"#(\d+)  \[", out)
        assert printed, said
        if named := re.search(r"#\s*#(\d+) after", line):  # "# #6 after the entries above"
            assert printed[1] == named[1], said
    for start in list(expected):
        if command.startswith(start):
            holds, lacks = expected.pop(start)
            for text in holds:
                assert text in out, f"expected {text!r}\n{said}"
            for text in lacks:
                assert text not in out, f"did not expect {text!r}\n{said}"
