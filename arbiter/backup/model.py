"""Wire types of the backup verbs."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from arbiter.model import Params

#: Pages (4 KiB) copied per step: ~10 ms of work, so a write queues behind the
#: backup for no longer than that (bench/backup.py).
STEP_PAGES = 256


class BackupCreateParams(Params):
    """Where the daemon writes the copy (an absolute path to a file that does not exist yet), and its step size."""

    path: str
    pages_per_step: Annotated[int, Meta(ge=1, le=65536)] = STEP_PAGES


class BackupCreated(Struct, kw_only=True):
    """A finished backup: its file, size, its steps, and the longest a step held the writer (what a write could wait)."""

    path: str
    bytes: int
    pages: int
    steps: int
    seconds: float
    longest_step_ms: float


class BackupCheck(Struct, kw_only=True):
    """`backup verify`: ok, or the problems found; what the file holds."""

    path: str
    ok: bool
    problems: list[str] = []
    schema_version: int = 0
    tenants: int = 0
    entries: int = 0
    relations: int = 0
