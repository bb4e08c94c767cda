"""Changes made anywhere (the CLI, a teammate, another `arbiter mcp`), found for this server's subscribers.

The daemon answers `changes` (arbiter/changes/) with a version of each
watched entry the caller sees and one of their whole memory. `Watch` keeps
the last answer; each poll compares the next one with it: an entry whose
version moved or vanished is a `resources/updated` for `arbiter://entry/ID`,
a memory version that moved is `resources/list_changed` and (if watched) an
update of the briefing. The daemon computes versions through the caller's
Viewer, so an entry the caller cannot see never moves anything here.

A server polls only while it has subscriptions (`POLL_S` apart), and polls
once more right after each of its own writes, so what its own tool call
changed is told at once and not again a second later.
"""

from __future__ import annotations

import re
import threading
from arbiter.changes.model import MAX_IDS
from arbiter.client import Client

BRIEFING_URI = "arbiter://briefing"
_ENTRY = re.compile(r"arbiter://entry/([1-9][0-9]{0,17})")

#: Seconds between polls while something is subscribed.
POLL_S = 1.0


def entry_uri(entry_id: int) -> str:
    return f"arbiter://entry/{entry_id}"


def entry_id(uri: str) -> int | None:
    """The entry id an `arbiter://entry/ID` URI names, else None."""
    m = _ENTRY.fullmatch(uri)
    return int(m[1]) if m else None


class Watch:
    """What the subscribed resources looked like at the last poll, and what moved since."""

    def __init__(self, daemon: Client):
        self.daemon = daemon
        self._lock = threading.Lock()
        self._entries: dict[int, int | None] = {}  # watched id -> version at the last poll (None: not seen)
        self._memory: int | None = None
        self._briefing = False  # the briefing was watched at the last poll

    def poll(self, uris: set[str]) -> tuple[list[str], bool]:
        """(URIs among `uris` that changed since the last poll, whether the resource list did).

        A URI the last poll did not watch is taken as it stands now (it
        becomes the baseline), not reported: subscribe, then poll at once.
        """
        ids = sorted({i for uri in uris if (i := entry_id(uri)) is not None})
        with self._lock:
            now, memory = {}, None
            for start in range(0, max(len(ids), 1), MAX_IDS):  # the verb takes MAX_IDS ids a call
                got = self.daemon.changes(ids[start:start + MAX_IDS])
                now.update((e.id, e.version) for e in got.entries)
                memory = got.memory if memory is None else memory
            changed = [entry_uri(i) for i in ids if i in self._entries and self._entries[i] != now.get(i)]
            listed = self._memory is not None and memory != self._memory
            if listed and self._briefing and BRIEFING_URI in uris:
                changed.insert(0, BRIEFING_URI)
            self._entries = {i: now.get(i) for i in ids}
            self._memory = memory
            self._briefing = BRIEFING_URI in uris
        return changed, listed

    def reset(self) -> None:
        """Nothing is watched any more: the next poll starts from a new baseline."""
        with self._lock:
            self._entries, self._memory, self._briefing = {}, None, False
