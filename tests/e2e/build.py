"""The single-file executable the e2e tests run, built from this tree once and reused while its sources are the same.

A build takes about a minute of one core. The suite starts it in the background as soon as the tests are
collected (`python -m tests.e2e.build`, from tests/conftest.py) and runs the e2e tests after the integration
tests, so the build overlaps them; whoever comes second waits on the lock and reuses what the first built.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "e2e"
BINARY = OUT / "dist" / "arbiter"


def _source_stamp() -> str:
    digest = hashlib.sha256()
    sources = [ROOT / "build.spec", ROOT / "pyproject.toml", *(ROOT / "packaging").glob("*.py"),
               *(ROOT / "arbiter").rglob("*.py"), *(ROOT / "arbiter").rglob("*.sql"),
               *(ROOT / "arbiter" / "ui" / "static").iterdir()]
    for path in sorted(sources):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def current(stamp: str | None = None) -> bool:
    """Whether the executable built last is this tree's (`stamp`: its sources' stamp, if already read)."""
    stamp_file = OUT / "stamp"
    return BINARY.exists() and stamp_file.exists() and stamp_file.read_text() == (stamp or _source_stamp())


def build() -> Path:
    """This tree's executable: the one built already, or built now (waiting for a build under way)."""
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT.parent / "e2e.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = _source_stamp()
        if current(stamp):
            return BINARY
        shutil.rmtree(OUT, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, "-m", "PyInstaller", "-y", "--log-level", "ERROR", "--distpath", str(OUT / "dist"),
             "--workpath", str(OUT / "work"), "build.spec"],
            cwd=ROOT, capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"PyInstaller failed:\n{done.stderr[-3000:]}")
        (OUT / "stamp").write_text(stamp)
        return BINARY


if __name__ == "__main__":
    build()
