"""`arbiter mcp` driven by the MCP Inspector CLI: a client nobody here wrote.

`.ci/run` installs the pinned inspector into .ci/node; without that install
the test fetches the same version with `npx` (slower, needs the npm
registry). Without Node at all it fails, saying what to install: it never
skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import isolated_env

REPO = Path(__file__).resolve().parents[2]
INSPECTOR_VERSION = "2.12.0"  # keep in step with .ci/run


def inspector() -> list[str]:
    local = REPO / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
    if local.exists():
        return [str(local)]
    npx = shutil.which("npx")
    if npx is None:
        pytest.fail("the MCP Inspector needs Node and npm: run .ci/run, or install nodejs and npm")
    return [npx, "--yes", f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"]


def run_inspector(home: Path, *method: str, warnings: list | None = None) -> dict:
    """The Inspector CLI's answer; its stderr lines go to `warnings` when given (its schema checks print there)."""
    server = [sys.executable, "-m", "arbiter", "--home", str(home), "mcp"]
    # The inspector starts the server with a minimal environment; pass on where our code is.
    env_args = ["-e", f"PYTHONPATH={os.environ.get('PYTHONPATH') or REPO}"]
    out = subprocess.run([*inspector(), "--cli", *env_args, *server, *method], cwd=REPO, env=isolated_env(home),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    if warnings is not None:
        warnings += out.stderr.splitlines()
    return json.loads(out.stdout)


def test_the_inspector_lists_tools_and_calls_one(home, daemon):
    with daemon.client() as c:
        c.remember(type="reference", title="Staging host", content="staging runs on box-7")
    said: list[str] = []
    listed = run_inspector(home, "--method", "tools/list", warnings=said)
    assert not [line for line in said if "Schema portability" in line], said  # its check of every tool's schemas
    tools = {t["name"]: t for t in listed["tools"]}
    assert {"remember", "recall", "get", "update", "explore", "facts", "entities"} <= set(tools) and len(tools) <= 14
    # A tool standing for several answers with theirs: it declares no output schema of its own.
    assert all(t.get("outputSchema", {"type": "object"})["type"] == "object" for t in tools.values())
    called = run_inspector(home, "--method", "tools/call", "--tool-name", "recall", "--tool-arg", "query=staging host")
    assert called["isError"] is False
    assert called["structuredContent"]["hits"][0]["title"] == "Staging host"
    assert "Staging host" in called["content"][0]["text"]
