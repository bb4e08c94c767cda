"""Fixtures the integration modules share."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from arbiter.client import Client
from tests import corpus
from tests.conftest import DaemonProcess, engine_daemon


@pytest.fixture(scope="module")
def memory(request):
    """A daemon holding the fixture corpus (module-scoped: built once per module), and the built corpus; on
    PostgreSQL for a test that parametrizes it indirectly with "postgresql" (`engine_daemon`)."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    with engine_daemon(request, home) as d:
        with d.client() as c:
            built = corpus.build(c)
        yield d, built
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def people():
    """A daemon whose tenant's first user (`default`) added alice, bob and carol; alice's team `core` has bob.

    Yields (daemon, {user: token}); `tests.conftest.as_user` opens a client as one of them.
    """
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    tokens = {}
    with d.client() as owner:
        for name in ("alice", "bob", "carol"):
            tokens[name] = owner.user_add(name).token
    with Client(d.socket, tokens["alice"]) as alice:
        alice.team_add("core")
        alice.team_join("core", "bob")
    yield d, tokens
    d.stop()
    shutil.rmtree(home, ignore_errors=True)
