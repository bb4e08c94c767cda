"""Fixtures the integration modules share."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests import corpus
from tests.conftest import DaemonProcess


@pytest.fixture(scope="module")
def memory():
    """A daemon holding the fixture corpus (module-scoped: built once per module), and the built corpus."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    d = DaemonProcess(home).start()
    with d.client() as c:
        built = corpus.build(c)
    yield d, built
    d.stop()
    shutil.rmtree(home, ignore_errors=True)
