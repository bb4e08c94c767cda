"""`arbiter/mcp/_daemon.py` on its own: which calls are retried after the daemon is revived; and which verbs the
MCP tools reach."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import arbiter.mcp
from arbiter.client import Client
from arbiter.mcp import WITHOUT_TOOL
from arbiter.mcp._daemon import READS
from arbiter.verbs import VERBS


def test_the_retried_calls_are_exactly_the_read_verbs_a_client_method_reaches():
    # A read missing here answers "the write may or may not have been saved" after a revival, and is not retried;
    # a name here that is no read verb (a write, a verb renamed or gone) would be retried blindly, or never match.
    reads = {name for name, verb in VERBS.items() if not verb.writes and hasattr(Client, name)}
    assert READS == reads, (sorted(reads - READS), sorted(READS - reads))


def test_every_verb_is_reached_by_a_tool_or_left_out_for_a_stated_reason():
    # A verb added without a tool fails here until it gets one or a reason in WITHOUT_TOOL (and architecture.md).
    # Tools reach the daemon as `s.call("client_method", ...)`; each Client method sends one verb.
    package = Path(arbiter.mcp.__file__).parent
    methods = {m for f in package.glob("*.py") for m in re.findall(r'call\("([a-z_]+)"', f.read_text())}
    client_source = Path(inspect.getsourcefile(Client)).read_text()
    sends = dict(re.findall(r'def ([a-z_]+)\(self.*?self\.call\("([a-z_]+)"', client_source, re.S))
    reached = {sends[m] for m in methods}
    assert not reached & set(WITHOUT_TOOL), sorted(reached & set(WITHOUT_TOOL))
    assert set(VERBS) - reached == set(WITHOUT_TOOL), (sorted(set(VERBS) - reached - set(WITHOUT_TOOL)),
                                                       sorted(set(WITHOUT_TOOL) - set(VERBS)))
