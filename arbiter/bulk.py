"""Bulk loading: JSON Lines of `remember` fields, sent as `remember_many` batches.

Each batch is one transaction in the daemon: acknowledged whole or not at
all. A bad line stops the load after the lines before it are written, and
the error says which `--skip` resumes after fixing it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import msgspec

from arbiter.client import Client
from arbiter.errors import ArbiterError, InvalidParams
from arbiter.model import REMEMBER_ONLY, RememberParams
from arbiter.validation import describe

#: Entries per `remember_many` (the daemon allows 10,000).
DEFAULT_BATCH = 1000
#: Encoded bytes per `remember_many`: under the daemon's default 4 MiB frame.
MAX_BATCH_BYTES = 3 * 1024 * 1024

_decoder = msgspec.json.Decoder(RememberParams)


class LoadSummary(msgspec.Struct, kw_only=True):
    """What a load did: lines read (skipped ones included), entries written (and lines that repeat an entry
    already there, not written again), the new entries' ids, speed."""

    lines: int
    skipped: int
    written: int
    duplicates: int = 0
    first_id: int | None
    last_id: int | None
    seconds: float
    entries_per_s: float


class LoadStopped(InvalidParams):
    """A load stopped at a bad line, or the daemon refused a batch; `lines_written` says how far it got."""

    def __init__(self, message: str, *, path: str | None = None, lines_written: int):
        super().__init__(message, path=path)
        self.lines_written = lines_written


def _parse(line: bytes) -> RememberParams:
    try:
        p = _decoder.decode(line)
    except msgspec.ValidationError as e:
        message, path = describe(e, RememberParams)
        raise ValueError(f"{path}: {message}" if path else message) from None
    except msgspec.DecodeError as e:
        raise ValueError(f"not JSON: {e}") from None
    # Checked here as remember_many would, so the error names the line and says to fix it (the daemon's
    # refusal of a batch names neither, and loading the file again would meet it again).
    if refused := [flag for flag in REMEMBER_ONLY if getattr(p, flag)]:
        them = "it" if len(refused) == 1 else "them"
        raise ValueError(f"{', '.join(refused)}: `remember` only (one entry at a time); "
                         f"leave {them} out of a bulk load")
    if p.new_conversation is not None:
        raise ValueError("new_conversation: not in a bulk load (a line names its conversation with conversation_id)")
    return p


def _resume(acked: int, *, fix: bool = False) -> str:
    """What is written and how to go on, for a load stopped after `acked` lines."""
    then = "fix it and " if fix else ""
    if acked == 0:
        return f"nothing is written: {then}load the file again"
    return f"lines 1-{acked} are written, {then}resume with --skip {acked}"


def load(
    client: Client,
    lines: Iterable[bytes],
    *,
    skip: int = 0,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] = lambda n: None,
) -> LoadSummary:
    """Write each non-blank line after the first `skip` as an entry; raise `LoadStopped` at a bad line.

    Lines count from 1. Before raising, every good line before the bad one is
    written, so `skip` = the error's `lines_written` resumes exactly after
    fixing it. Nothing after the last acknowledged batch is assumed written.
    """
    started = time.perf_counter()
    batch: list[bytes] = []
    size = 0
    number = acked = skipped = written = duplicates = 0
    first_id = last_id = None

    def flush(through: int) -> None:
        """Send the batch, which holds the lines after `acked` up to `through`."""
        nonlocal batch, size, acked, written, duplicates, first_id, last_id
        if batch:
            try:
                got = client.call("remember_many", msgspec.Raw(b'{"entries":[' + b",".join(batch) + b"]}"), dict)
            except ArbiterError as e:
                raise LoadStopped(
                    f"the batch of lines {acked + 1}-{through} was refused: {e.message}; {_resume(acked)}",
                    path=e.path, lines_written=acked,
                ) from None
            again = set(got.get("duplicates", ()))
            ids = [entry_id for i, entry_id in enumerate(got["ids"]) if i not in again]
            if ids:
                first_id = first_id or ids[0]
                last_id = ids[-1]
            written += len(ids)
            duplicates += len(again)
            progress(len(got["ids"]))
        acked = through
        batch, size = [], 0

    for number, line in enumerate(lines, start=1):
        if number <= skip:
            skipped += 1
            acked = number
            continue
        if not line.strip():
            continue
        try:
            _parse(line)
        except ValueError as e:
            flush(number - 1)
            raise LoadStopped(
                f"line {number}: {e}; {_resume(acked, fix=True)}",
                path=f"line {number}", lines_written=acked,
            ) from None
        encoded = line.strip()
        if batch and (len(batch) >= batch_size or size + len(encoded) > MAX_BATCH_BYTES):
            flush(number - 1)
        batch.append(encoded)
        size += len(encoded) + 1
    flush(number)
    seconds = time.perf_counter() - started
    return LoadSummary(
        lines=number, skipped=skipped, written=written, duplicates=duplicates, first_id=first_id, last_id=last_id,
        seconds=round(seconds, 3), entries_per_s=round(written / seconds, 1) if seconds > 0 else 0.0,
    )
