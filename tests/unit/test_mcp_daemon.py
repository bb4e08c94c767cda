"""`arbiter/mcp/_daemon.py` on its own: which calls are retried after the daemon is revived."""

from __future__ import annotations

from arbiter.client import Client
from arbiter.mcp._daemon import READS
from arbiter.verbs import VERBS


def test_the_retried_calls_are_exactly_the_read_verbs_a_client_method_reaches():
    # A read missing here answers "the write may or may not have been saved" after a revival, and is not retried;
    # a name here that is no read verb (a write, a verb renamed or gone) would be retried blindly, or never match.
    reads = {name for name, verb in VERBS.items() if not verb.writes and hasattr(Client, name)}
    assert READS == reads, (sorted(reads - READS), sorted(READS - reads))
