"""Instants: integer microseconds since the Unix epoch, UTC, everywhere inside.

The wire takes RFC 3339 strings or epoch seconds (int or float) and returns
RFC 3339 with microseconds, so a value read back can be sent back unchanged.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from arbiter.errors import InvalidParams

US = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: The instants RFC 3339 can write: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z.
MIN_US = -62135596800 * US
MAX_US = 253402300800 * US - 1


def now_us() -> int:
    """The current instant in microseconds."""
    return time.time_ns() // 1000


def parse_time(value: int | float | str, *, path: str = "time") -> int:
    """RFC 3339 text or epoch seconds -> microseconds; InvalidParams names `path` otherwise."""
    if isinstance(value, bool):
        raise InvalidParams.at(path, "expected RFC 3339 text or epoch seconds")
    if isinstance(value, str):
        us = _parse_text(value, path)
    elif value != value:  # NaN
        us = None
    elif isinstance(value, float):
        us = round(value * US) if abs(value) < 1e12 else None
    else:
        us = value * US
    if us is None or not MIN_US <= us <= MAX_US:
        raise InvalidParams.at(path, f"{value!r} is outside years 0001-9999")
    return us


def valid_from(value: int | float | str | None, *, now: int, path: str, what: str, plan: str) -> int:
    """When a written entry or fact starts to hold: `now` if not given, else `value`, never after `now`.

    A future start would make default reads (what is not retired) and
    `as_of=now` reads disagree, and a supersession would close the older
    window in the future. `what` is what is written, `plan` how to record a plan for later instead.
    """
    if value is None:
        return now
    us = parse_time(value, path=path)
    if us > now:
        raise InvalidParams.at(
            path, f"{format_time(us)} is in the future: {what} records what holds from a past or present instant "
                  f"({plan})",
        )
    return us


def _parse_text(value: str, path: str) -> int | None:
    text = value.strip()
    # A date ("2026-11-20...") has "-" at 4 and 7, which no number has (its only "-" are a leading sign and
    # one after "e"): such text skips the two failed number parses (an import parses hundreds of thousands).
    dated = len(text) >= 10 and text[4] == "-" and text[7] == "-"
    for number in () if dated else (int, float):  # epoch seconds sent as text ("1795168800", "1.5e9")
        try:
            return parse_time(number(text), path=path)
        except ValueError:
            pass
    try:
        # RFC 3339 allows lower-case "t" and "z".
        dt = datetime.fromisoformat(text.upper())
    except ValueError:
        raise InvalidParams.at(path, f"{value!r} is neither RFC 3339 (2026-11-20T10:00:00Z) nor epoch seconds") \
            from None
    if dt.tzinfo is None:
        raise InvalidParams.at(path, f"{value!r} has no UTC offset (add Z or +HH:MM)")
    delta = dt - _EPOCH
    return (delta.days * 86400 + delta.seconds) * US + delta.microseconds


def format_time(us: int | None) -> str | None:
    """Microseconds -> RFC 3339 UTC text with microseconds (None stays None)."""
    if us is None:
        return None
    seconds, micros = divmod(us, US)
    dt = _EPOCH + timedelta(seconds=seconds)
    # Not strftime("%Y"): glibc does not zero-pad years before 1000.
    return f"{dt.year:04d}-{dt:%m-%dT%H:%M:%S}.{micros:06d}Z"
