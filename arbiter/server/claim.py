"""The daemon's claim on its database and socket: lock files, and the folders and files a refused start leaves not."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from arbiter import paths
from arbiter._lock import take_lock
from arbiter.errors import InvalidParams, Unavailable


class Claim:
    """One daemon per database file and one per socket, held by flocks until `release`.

    A PostgreSQL database (`db_path` None) is not claimed: several daemons serve one (the server takes turns
    on idle work with advisory locks, server/upkeep.py); each still claims its own socket.
    """

    def __init__(self, db_path: Path | None, socket_path: Path):
        self.db_path = db_path
        self.socket_path = socket_path
        self._fds: list[int] = []
        self._made: list[Path] = []  # folders and lock files this start created, deepest last (`undo`)

    def take(self) -> None:
        """Lock the database, then the socket.

        The database lock (SQLite's only) is what keeps two writers off one file (`serve
        --socket other.sock` on a served home is refused); the socket lock keeps
        a daemon of another database from replacing a live socket. Each lock file
        holds the owner's pid, for `arbiter stop` and for the refusal message.
        """
        for folder in (self.socket_path.parent, *([self.db_path.parent] if self.db_path else [])):
            missing = [d for d in (folder, *folder.parents) if not d.exists()]
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._made.extend(reversed(missing))
        if self.db_path is not None:
            db_lock = paths.lock_path(self.db_path)
            fresh = not db_lock.exists()
            held = take_lock(db_lock, f"{os.getpid()}\n{self.socket_path}\n", self._fds)
            if held is not None:
                self.undo()
                pid, _, where = held.partition("\n")
                raise Unavailable(f"another arbiter daemon (pid {pid or '?'}) is already serving {self.db_path}"
                                  + (f" on {where.strip()}" if where.strip() else ""))
            self._made += [db_lock] if fresh else []
        socket_lock = paths.lock_path(self.socket_path)
        fresh = not socket_lock.exists()
        if take_lock(socket_lock, f"{os.getpid()}\n", self._fds) is not None:
            self.undo()
            raise Unavailable(f"another arbiter daemon is already serving on {self.socket_path}")
        self._made += [socket_lock] if fresh else []
        # We hold the lock, so a socket left here belongs to a dead daemon. Anything else is not ours to
        # delete: `--socket` naming the user's file by mistake must not cost them the file.
        try:
            mode = self.socket_path.lstat().st_mode
        except FileNotFoundError:
            return
        if not (stat.S_ISSOCK(mode) or stat.S_ISLNK(mode)):
            self.undo()
            raise InvalidParams(f"{self.socket_path} is not a socket: serve on a path that is free or holds "
                                "a socket arbiter left", path="socket")
        self.socket_path.unlink()

    def undo(self) -> None:
        """A start refused before the database opened leaves nothing: the lock files and folders it made go.

        Only files it made, and only while it still holds their locks (a daemon
        that meanwhile opened one finds it locked and is refused as it would be).
        """
        for made in reversed(self._made):
            try:
                made.rmdir() if made.is_dir() else made.unlink()
            except OSError:  # a folder something else wrote into meanwhile stays
                pass
        self._made = []
        self.release()

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
