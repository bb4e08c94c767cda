"""Change notifications for changes made anywhere: the CLI, a teammate, the socket; never another user's private ones."""

from __future__ import annotations

import threading

import anyio
import pytest
from mcp import types

from arbiter import paths
from arbiter.changes.model import MAX_IDS
from arbiter.client import Client
from arbiter.mcp import load_tools
from arbiter.mcp.server import McpServer
from arbiter.mcp.tool import Session
from arbiter.mcp.watch import Watch
from tests.conftest import arbiter_cli, as_user, wait_for
from tests.integration.test_mcp_tools import run_session

UPDATED, LISTED = "notifications/resources/updated", "notifications/resources/list_changed"
BRIEFING = "arbiter://briefing"


def uri(entry_id: int) -> str:
    return f"arbiter://entry/{entry_id}"


class Heard:
    """Notifications as they arrive (an updated one as its URI), and a way to wait for the next."""

    def __init__(self):
        self.seen: list[str] = []
        self._new = anyio.Event()

    async def on_message(self, message) -> None:
        if isinstance(message, types.ServerNotification):
            self.seen.append(str(message.params.uri) if message.method == UPDATED else message.method)
            self._new.set()
            self._new = anyio.Event()

    async def next_poll(self) -> list[str]:
        """What the next poll that finds something tells (it ends with list_changed: every change moves the list)."""
        start = len(self.seen)
        with anyio.fail_after(10):
            while LISTED not in self.seen[start:]:
                await self._new.wait()
        return self.seen[start:]


def cli(home, *args: str) -> None:
    done = arbiter_cli(home, *args)
    assert done.returncode == 0, done.stderr


# resources/subscribe is the handshake protocol's way (2025-11-25, which `arbiter mcp` speaks); the SDK
# warns that the 2026-07-28 protocol replaces it.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_a_subscriber_hears_of_changes_made_anywhere_it_can_see(people):
    daemon, tokens = people
    home = daemon.home
    paths.write_secret(paths.user_token_path(home, "default", "alice"), tokens["alice"])  # `--user alice`
    with as_user(people, "alice") as alice, as_user(people, "bob") as bob:
        own = alice.remember(type="project", title="Watched by alice", content="v1").id
        bobs = bob.remember(type="project", title="Bob's draft", content="draft v1").id  # private to bob
    heard = Heard()

    async def body(session):
        for watched in (uri(own), uri(bobs), BRIEFING):
            await session.subscribe_resource(watched)
        polls = {}
        with as_user(people, "bob") as bob, as_user(people, "alice") as alice:
            # Bob's private change first, then alice's at the CLI: a poll that finds hers has his too.
            bob.update(bobs, content="draft v2")
            await anyio.to_thread.run_sync(cli, home, "--user", "alice", "update", str(own), "--content", "v2")
            polls["cli"] = await heard.next_poll()
            bob.share(bobs, "core")  # a teammate: bob's entry now exists for alice
            polls["shared"] = await heard.next_poll()
            bob.remember(type="project", title="Bob's team note", content="for the team", team="core")
            polls["new"] = await heard.next_poll()
            alice.purge(own)  # through the socket
            polls["purged"] = await heard.next_poll()
        return polls

    polls = run_session(home, body, "--user", "alice", message_handler=heard.on_message)
    assert polls == {
        "cli": [BRIEFING, uri(own), LISTED],  # nothing for bob's private change
        "shared": [BRIEFING, uri(bobs), LISTED],
        "new": [BRIEFING, LISTED],
        "purged": [BRIEFING, uri(own), LISTED],
    }
    assert uri(bobs) not in heard.seen[:heard.seen.index(uri(own))]


def test_only_a_subscription_starts_polling(daemon):
    load_tools()
    calls: list[str] = []
    sent: list[dict] = []
    class Recording(Client):
        def call(self, method, params=None, result_type=dict):
            calls.append(method)
            return super().call(method, params, result_type)

    with Recording(daemon.socket, daemon.token) as c:
        entry = c.remember(type="project", title="Polled", content="v1").id
        server = McpServer(Session(c), "")
        server.poll_s = 0.05
        server.emit = sent.extend

        def request(method: str, **params) -> dict:
            response, after = server.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            sent.extend(after)
            return response

        def watching() -> bool:
            return any(t.name == "arbiter-mcp-watch" for t in threading.enumerate())

        request("tools/call", name="update", arguments={"id": entry, "content": "v2"})
        assert "changes" not in calls and not watching()  # a write with nothing subscribed asks nothing more
        request("resources/subscribe", uri=uri(entry))
        wait_for(lambda: calls.count("changes") >= 3, what="polls while subscribed")
        with daemon.client() as elsewhere:  # its own connection: `c` is the watch thread's, outside the server's lock
            elsewhere.update(entry, content="v3")
        wait_for(lambda: {"jsonrpc": "2.0", "method": UPDATED, "params": {"uri": uri(entry)}} in sent,
                 what="the change made elsewhere")
        request("resources/unsubscribe", uri=uri(entry))
        wait_for(lambda: not watching(), what="the watch thread to end")


def test_a_watch_over_more_ids_than_one_call_takes(daemon):
    with daemon.client() as c:
        ids = c.remember_many([{"type": "context", "title": f"Watched {n}", "content": f"note {n}"}
                               for n in range(MAX_IDS + 1)])
        watch = Watch(c)
        uris = {uri(i) for i in ids}
        assert watch.poll(uris) == ([], False)  # the baseline
        for changed in (ids[0], ids[-1]):  # asked for in the first call, and in the second
            c.update(changed, content="changed")
            assert watch.poll(uris) == ([uri(changed)], True)
