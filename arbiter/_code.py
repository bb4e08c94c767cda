"""Which code this process runs: the version and a fingerprint of the package's sources.

`pip install -e .` (or a `git pull`) over a running daemon changes the code on
disk while the daemon keeps running the old one, under the same version
string. The client compares both with the daemon's `ping` answer and asks for
a restart instead of failing later on a verb the old code lacks.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from arbiter import __version__

_PACKAGE = Path(__file__).resolve().parent
#: Written by build.spec into the frozen executable, which carries no sources to hash.
FROZEN_FILE = "_fingerprint.txt"


@functools.cache
def fingerprint() -> str:
    """16 hex digits of sha256 over the package's .py files (path and bytes), or the frozen build's."""
    frozen = _PACKAGE / FROZEN_FILE
    if frozen.exists():
        return frozen.read_text().strip()
    return source_fingerprint(_PACKAGE)


def source_fingerprint(package: Path) -> str:
    """The fingerprint of the sources under `package` (also what build.spec bakes in)."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def describe(version: str, code: str) -> str:
    return f"{version} ({code or 'no fingerprint'})"


def current() -> tuple[str, str]:
    return __version__, fingerprint()
