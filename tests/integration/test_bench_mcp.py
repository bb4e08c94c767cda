"""`python -m bench.mcp --node` runs: the TypeScript SDK client drives `arbiter mcp` beside the Python one.

Nothing is timed here: a tiny run only shows the bench and its Node script
still work end to end (the figures live in docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def bench(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    # A short temporary folder: the daemon's socket path must fit AF_UNIX's 108 bytes (xdist's are long).
    short = tempfile.mkdtemp(prefix="arb-")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ARBITER_", "ANTHROPIC_"))}
    try:
        return subprocess.run([sys.executable, "-m", "bench.mcp", *args], cwd=REPO, capture_output=True, text=True,
                              env={**base, "TMPDIR": short, **env}, timeout=120)
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (.ci/run installs nodejs, npm and the SDK)")
def test_the_typescript_client_times_recall_on_the_same_daemon(tmp_path):
    out = bench(tmp_path, "--entries", "40", "--singles", "10", "--queries", "3", "--node", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout)
    assert res["entries"] == 40 and res["queries"] == 3
    assert res["node_tools"] > 0  # it listed the tools, so it compiled their output schemas
    for way in ("node", "node_unchecked", "same"):
        assert res[f"recall_{way}_p50_ms"] > 0
    assert {"recall_node_adds_p50_ms", "recall_node_validation_p50_ms", "recall_node_validate_p50_ms"} <= set(res)
    assert list(tmp_path.iterdir()) == []  # its home is gone


def test_without_node_it_says_so_before_writing_anything(tmp_path):
    out = bench(tmp_path, "--node", PATH=str(tmp_path))  # python is run by its full path; nothing else is found
    assert out.returncode == 1
    assert "--node needs Node.js" in out.stderr
    assert list(tmp_path.iterdir()) == []
