"""The daemon's one way to write to its log: never the same complaint more than a few times a second.

A fault that repeats per request (a full disk, no file descriptors left) must
not turn into a log of millions of identical tracebacks. Lines are grouped by
a key (by default the message itself); each key may speak `burst` times per
`window` seconds, and the first line it writes after a quiet spell says how
many were held back.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable


class RateLimitedLog:
    """`log(message, key=...)`: at most `burst` lines per key per `window` seconds; the rest are counted."""

    def __init__(
        self,
        write: Callable[[str], None] | None = None,
        *,
        burst: int = 3,
        window: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.burst = burst
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()  # worker threads log too
        self._keys: dict[str, list] = {}  # key -> [window start, lines in it, held back since last line]

    def __call__(self, message: str, *, key: str | None = None) -> None:
        key = key or message
        now = self._clock()
        with self._lock:
            state = self._keys.get(key)
            if state is None or now - state[0] >= self.window:
                held = state[2] if state else 0
                state = self._keys[key] = [now, 0, held]
                if len(self._keys) > 1000:  # keys are few; never let a stream of distinct ones grow it
                    self._keys = {key: state}
            if state[1] >= self.burst:
                state[2] += 1
                return
            state[1] += 1
            held, state[2] = state[2], 0
        if held:
            message += f"\n  ({held} more like this were not logged)"
        self._write(message)
