"""Where Arbiter keeps its files. One function owns the data folder."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path

from arbiter.errors import Conflict, InvalidParams, Unauthorized

DEFAULT_TENANT = "default"


def default_home() -> Path:
    """`$ARBITER_HOME`, else `~/.local/share/arbiter` (XDG_DATA_HOME respected)."""
    if env := os.environ.get("ARBITER_HOME"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "arbiter"


def db_path(home: Path) -> Path:
    return home / "arbiter.db"


def is_database_url(text: str) -> bool:
    """Whether `text` is a URL naming a database server (`postgresql://...`) rather than a file path."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.replace("+", "").isalnum() and scheme[:1].isalpha()


def socket_path(home: Path) -> Path:
    return home / "arbiter.sock"


def lock_path(path: Path) -> Path:
    """The file a serving daemon holds an exclusive flock on, beside its socket and its database."""
    return path.with_name(path.name + ".lock")


def token_path(home: Path, tenant: str) -> Path:
    return home / "tenants" / f"{tenant}.token"


def user_token_path(home: Path, tenant: str, user: str | None) -> Path:
    """A user's token file; the tenant's first user (named as the tenant) holds the tenant token."""
    if user is None or user == tenant:
        return token_path(home, tenant)
    return home / "tenants" / tenant / f"{user}.token"


def admin_token_path(home: Path) -> Path:
    return home / "admin.token"


def need_folder(folder: Path, *, path: str) -> None:
    """Refuse to write into `folder` unless it is one, saying which is wrong: it is missing (and how to make it),
    or it is something else. `path` names the parameter, as on every InvalidParams."""
    if not folder.exists():
        raise InvalidParams(f"{folder} does not exist: make it first (mkdir -p {shlex.quote(str(folder))})", path=path)
    if not folder.is_dir():
        raise InvalidParams(f"{folder} is not a folder", path=path)


def private_fd(path: Path, flags: int = os.O_WRONLY) -> int:
    """`path` opened with `flags`, created or emptied, 0600 whatever the umask or the mode of a file already there,
    before a byte is written: for what holds the memory (backups, exports)."""
    # O_NOFOLLOW: a symlink planted where a backup or an export goes must not redirect (and chmod) its target.
    fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    # O_CREAT's mode is for a new file: one already there (a `.partial` an interrupted export left) keeps its own.
    os.fchmod(fd, 0o600)
    return fd


def replace(src: Path | str, dest: Path | str) -> None:
    """Rename `src` over `dest` (in the same folder) and sync the folder.

    A rename changes the folder, not the file: the file's own fsync does not
    cover it, and after a power cut the folder could still name the old file
    (or none). Callers sync the file first.
    """
    os.replace(src, dest)
    fd = os.open(Path(dest).parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_secret(path: Path, text: str) -> None:
    """Write a 0600 file in a 0700 folder, never readable by others even briefly.

    Written whole beside `path`, then renamed over it: whatever was at `path` is replaced, a symlink too, never
    written through, and a write that fails leaves it as it was.
    """
    # The daemon has often changed the token already (a rotation, a restore): refusing a link at `path`, or
    # failing after emptying it, would lose the only copy of the new one.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, new = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600, O_EXCL: a fresh file
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        replace(new, path)
    except BaseException:
        Path(new).unlink(missing_ok=True)
        raise


def held_secret(path: Path) -> str | None:
    """The token in the file at `path`, or None if there is none (no file, an empty one, not text)."""
    try:
        return path.read_text().strip() or None
    except (FileNotFoundError, ValueError):
        return None


def require_unheld(path: Path, what: str, *, exists: Callable[[], bool]) -> None:
    """Conflict if `path` already holds a token and `what` does not `exists` here: a command about to make
    `what` must not write over it.

    Tokens are stored hashed, so a token file can be the only copy of a token another database of this home
    gave out (`serve --db scratch.db` makes a tenant or user of the same name), or of an earlier one. A name
    this database has is the daemon's to refuse ("already exists"), and its file is that name's own; `exists`
    (a daemon call) is asked only when the file holds a token.
    """
    if held_secret(path) is not None and not exists():
        raise Conflict(f"{path} already holds a token, perhaps the only copy of one that another database of this "
                       f"home gave {what}: it is kept and nothing was created; move the file aside and run this "
                       "again", path="name")


def read_secret(path: Path, what: str) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise Unauthorized(f"no token for {what}: {path} does not exist") from None
