"""Lock files: one daemon per database and per socket, and the pid `arbiter stop` signals.

A lock is an exclusive `flock` on `NAME.lock` beside the database or socket,
held for the daemon's life; the kernel drops it when the process dies, however
it dies, so a lock file left on disk never blocks a new daemon.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def take_lock(path: Path, owner: str, held_fds: list[int]) -> str | None:
    """Take an exclusive flock on `path` and write `owner` in it (the fd joins `held_fds`).

    If another process holds it, return what that process wrote instead.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held = os.pread(fd, 4096, 0).decode(errors="replace")
        os.close(fd)
        return held
    os.ftruncate(fd, 0)
    os.pwrite(fd, owner.encode(), 0)
    held_fds.append(fd)
    return None


def lock_owner(path: Path) -> str | None:
    """What the process holding the lock file `path` wrote in it ("" if nothing), or None if none holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 4096, 0).decode(errors="replace")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
