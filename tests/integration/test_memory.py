"""What a briefing leaves behind in the daemon: nothing resident (every MCP connect runs one)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from tests.conftest import wait_for


def rss_kb(pid: int) -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())[1])


def test_a_briefing_with_topic_clusters_leaves_the_daemon_no_larger(daemon, client):
    rng = random.Random(7)
    themes = [[f"t{t}-{w}" for w in ("deploy", "queue", "cache", "index", "login", "invoice")] for t in range(6)]
    client.remember_many([{"type": "project", "title": f"note {i}", "content": f"about theme {i % 6}",
                           "tags": rng.sample(themes[i % 6], 3)} for i in range(600)])
    for query in ("theme", "note about", "deploy"):  # the reader's connection and caches, paid once
        client.recall(query)
    before = rss_kb(daemon.proc.pid)
    briefing = client.briefing()
    assert "t0-deploy" in briefing.text  # the clusters were computed and shown
    # Idle work trims the heap; whatever the clustering imported would stay (networkx: 10+ MB).
    wait_for(lambda: rss_kb(daemon.proc.pid) - before < 3 * 1024, timeout=10,
             what="the daemon's RSS to come back within 3 MB of where it was")


def test_the_daemon_maps_no_openssl(daemon, client):
    # libcrypto alone is ~3.5 MB resident; the daemon hashes (tokens, content_hash, duplicate
    # fingerprints) with Python's builtin digests instead (arbiter/_openssl.py).
    first = client.remember(type="project", title="Deploy runbook", content="deploy on friday", tags=["ops"])
    client.remember_many([{"type": "project", "title": f"note {i}", "content": f"deploy step {i}"} for i in range(50)])
    assert client.get(first.id).content == "deploy on friday"
    assert client.recall("deploy").hits
    client.briefing()
    maps = Path(f"/proc/{daemon.proc.pid}/maps").read_text()
    assert "libcrypto" not in maps and "libssl" not in maps
