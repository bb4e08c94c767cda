"""`arbiter/mcp/_daemon.py` and the tools over a real daemon, in process: which calls are retried after the daemon
is revived (a verb's `writes` decides), and which verbs the tools reach."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from arbiter.client import Client
from arbiter.errors import Unavailable
from arbiter.mcp import WITHOUT_TOOL, load_tools
from arbiter.mcp._daemon import Reviving
from arbiter.mcp.tool import TOOLS, Session, call_tool
from arbiter.mcp.watch import Watch
from arbiter.verbs import VERBS
from tests import corpus
from tests.conftest import DaemonProcess


class Recording(Client):
    """A real client that notes the verb of every request it sends."""

    sent: set[str]

    def call(self, method, params=None, result_type=dict):
        self.sent.add(method)
        return super().call(method, params, result_type)


@pytest.fixture(scope="module")
def served():
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    with d.client() as c:
        built = corpus.build(c)
        c.team_add("mcp-tools")
        c.remember(type="reference", title="Dashboards", content="Logs are read in Kibana.", entities=["Kibana UI"])
    yield d, built
    d.stop()
    shutil.rmtree(home, ignore_errors=True)


def test_after_a_revival_a_read_verb_is_retried_and_a_write_verb_is_reported(served, tmp_path):
    daemon, built = served
    revived: list[DaemonProcess] = []

    def revive():
        revived.append(DaemonProcess(daemon.home).start())
        return revived[-1].proc.pid

    with Reviving(daemon.socket, daemon.token, revive=revive) as client:
        assert client.get(built["deadlock"]).id == built["deadlock"]
        daemon.stop()
        try:
            assert client.get(built["deadlock"]).id == built["deadlock"]  # `get` reads: retried on the new daemon
            revived.pop().stop()
            with pytest.raises(Unavailable, match="may or may not"):  # `reinforce` writes: reported, not retried
                client.reinforce(built["deadlock"])
            assert VERBS["get"].writes is False and VERBS["reinforce"].writes is True
        finally:
            for d in revived:
                d.stop()
            daemon.start()


def test_every_verb_is_reached_by_a_tool_or_left_out_for_a_stated_reason(served):
    # A verb added without a tool fails here until it gets one or a reason in WITHOUT_TOOL (and architecture.md).
    from tests.integration.test_mcp_tools import CASES, LAST, ORDER

    daemon, built = served
    load_tools()
    client = Recording(daemon.socket, daemon.token)
    client.sent = set()
    with client:
        client.connect()
        client.sent.clear()  # connecting checks the daemon's version: no tool's doing
        session = Session(client)
        mine = call_tool(session, TOOLS, "remember", CASES["remember"](built.ids, 0))["structuredContent"].entry.id
        for name in [n for n in TOOLS if n not in ORDER + LAST] + ORDER + LAST:
            result = call_tool(session, TOOLS, name, CASES[name](built.ids, mine))
            assert not result["isError"], (name, result["content"][0]["text"])
        assert not call_tool(session, TOOLS, "conversation", {"title": "Another"})["isError"]
        Watch(session.daemon).poll({"arbiter://briefing"})  # what a subscribed server polls
        reached = client.sent
    assert not reached & set(WITHOUT_TOOL), sorted(reached & set(WITHOUT_TOOL))
    assert set(VERBS) - reached == set(WITHOUT_TOOL), (sorted(set(VERBS) - reached - set(WITHOUT_TOOL)),
                                                       sorted(set(WITHOUT_TOOL) - set(VERBS)))
