"""Idle upkeep (merging the index, draining the entity backlog) yields to traffic, not only to a request in flight."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

from arbiter.server import Daemon


def _daemon(tmp_path, steps: list[int], *, requests_during_step: int) -> Daemon:
    d = Daemon(home=tmp_path, db_path=tmp_path / "arbiter.db", socket_path=tmp_path / "arbiter.sock")
    d._writer_pool = ThreadPoolExecutor(1)

    def step() -> bool:
        steps.append(1)
        # Requests that arrived and were answered while the step ran: none is in flight when it ends.
        d._requests += requests_during_step
        return len(steps) < 5  # more upkeep remains after each of the first four steps

    d._compact_step = step
    d._checkpoint = lambda: True
    return d


def test_a_request_during_a_step_ends_the_quiet_spell(tmp_path):
    steps: list[int] = []
    d = _daemon(tmp_path, steps, requests_during_step=1)
    d._wrote.clear()
    asyncio.run(d._merge_and_checkpoint())
    assert len(steps) == 1  # back-to-back requests leave nothing in flight between them, and still stop it
    assert d._wrote.is_set() and d._active.is_set()  # the rest waits for the next quiet spell


def test_a_quiet_spell_runs_the_upkeep_to_its_end(tmp_path):
    steps: list[int] = []
    d = _daemon(tmp_path, steps, requests_during_step=0)
    d._wrote.clear()
    asyncio.run(d._merge_and_checkpoint())
    assert len(steps) == 5 and not d._wrote.is_set()
