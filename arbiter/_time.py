"""Instants: integer microseconds since the Unix epoch, UTC, everywhere inside.

The wire takes RFC 3339 strings or epoch seconds (int or float) and returns
RFC 3339 with microseconds, so a value read back can be sent back unchanged.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from arbiter.errors import InvalidParams

US = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_us() -> int:
    """The current instant in microseconds."""
    return time.time_ns() // 1000


def parse_time(value: int | float | str, *, path: str = "time") -> int:
    """RFC 3339 text or epoch seconds -> microseconds; InvalidParams names `path` otherwise."""
    if isinstance(value, bool):
        raise InvalidParams(f"{path}: expected RFC 3339 text or epoch seconds", path=path)
    if isinstance(value, (int, float)):
        if value != value or abs(value) > 253402300799:  # NaN or past year 9999
            raise InvalidParams(f"{path}: epoch seconds out of range", path=path)
        return round(value * US) if isinstance(value, float) else value * US
    text = value.strip()
    try:
        return parse_time(float(text) if "." in text else int(text), path=path)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidParams(
            f"{path}: {value!r} is neither RFC 3339 (2026-11-20T10:00:00Z) nor epoch seconds", path=path
        ) from None
    if dt.tzinfo is None:
        raise InvalidParams(f"{path}: {value!r} has no UTC offset (add Z or +HH:MM)", path=path)
    delta = dt - _EPOCH
    return (delta.days * 86400 + delta.seconds) * US + delta.microseconds


def format_time(us: int | None) -> str | None:
    """Microseconds -> RFC 3339 UTC text with microseconds (None stays None)."""
    if us is None:
        return None
    seconds, micros = divmod(us, US)
    dt = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{micros:06d}Z"
