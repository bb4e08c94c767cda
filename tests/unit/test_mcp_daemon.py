"""`arbiter/mcp/_daemon.py` on its own: which calls are retried after the daemon is revived."""

from __future__ import annotations

from arbiter.client import Client
from arbiter.mcp._daemon import READS
from arbiter.verbs import VERBS


def test_every_read_verb_a_client_method_reaches_is_retried_and_no_write_is():
    # A read missing here answers "the write may or may not have been saved" after a revival, and is not retried.
    reads = {name for name, verb in VERBS.items() if not verb.writes and hasattr(Client, name)}
    writes = {name for name, verb in VERBS.items() if verb.writes}
    assert reads <= READS, sorted(reads - READS)
    assert not READS & writes
