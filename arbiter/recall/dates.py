"""The calendar days, months and years a query names ("on October 13, 2023", "in June", "in 2022").

A question that names a time asks about what was said or true then, and
every entry carries that time on its valid axis: recall favours the entries
valid_from places inside a span the query names (score.dated). Only
explicit calendar words count; relative ones ("last week") need a
reference the question does not give.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

MONTHS = {
    name: i + 1
    for i, name in enumerate(
        "january february march april may june july august september october november december".split()
    )
}
_MONTH = "(?P<month>" + "|".join(MONTHS) + ")"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first; a match's text is blanked before the next pattern runs.
_PATTERNS = [
    re.compile(rf"\b{_YEAR}-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+{_YEAR}\b)?", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\b", re.IGNORECASE),
    re.compile(rf"\b(?:in|during|of|since|until|before|after|by)\s+{_YEAR}\b", re.IGNORECASE),
]
# "may" and "march" are verbs too: alone (no day or year beside them) they
# count only after a word that introduces a time.
_AMBIGUOUS = frozenset({"may", "march"})
_INTRODUCES = re.compile(r"\b(?:in|during|of|since|until|before|after|by|early|late|mid|this|last|next)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Span:
    """A day (all three set), a month (no day), a month of any year (month only) or a year (year only)."""

    year: int | None
    month: int | None
    day: int | None

    def holds(self, us: int) -> bool:
        """Whether the instant `us` (µs since the epoch, UTC) falls inside the span."""
        t = datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)
        return (
            (self.year is None or t.year == self.year)
            and (self.month is None or t.month == self.month)
            and (self.day is None or t.day == self.day)
        )


def spans(text: str) -> tuple[Span, ...]:
    """Every calendar span `text` names, most specific reading of each phrase; impossible dates are skipped."""
    out: list[Span] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            found = m.groupdict()
            month = int(found["mnum"]) if found.get("mnum") else MONTHS.get((found.get("month") or "").lower())
            year = int(found["year"]) if found.get("year") else None
            day = int(found["day"]) if found.get("day") else None
            if found.get("month") and found["month"].lower() in _AMBIGUOUS and day is None and year is None:
                if not _INTRODUCES.search(text[: m.start()]):
                    continue
            if not _valid(year, month, day):
                continue
            out.append(Span(year, month, day))
            text = text[: m.start()] + " " * (m.end() - m.start()) + text[m.end() :]
    return tuple(dict.fromkeys(out))


def _valid(year: int | None, month: int | None, day: int | None) -> bool:
    if month is not None and not 1 <= month <= 12:
        return False
    if day is None:
        return True
    try:
        datetime(year or 2000, month or 1, day)  # 2000 is a leap year: February 29 stays possible
    except ValueError:
        return False
    return True


# A statement of when: a day relative to the speaker's now, a weekday, a
# month, a year. Bare "week"/"month"/"year" are left out: they measure a
# span ("for three years") as often as they place an event.
_SAYS_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago"
    r"|(?:last|next|this) (?:week|weekend|month|year|night|morning|summer|winter|spring|fall|autumn"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|january|february|april|june|july|august|september|october|november|december"
    r"|(?:in|since|of|by|until|before|after|during|from|back in) (?:19|20)\d\d)\b",
    re.IGNORECASE,
)
#: The same pattern for lowercased ASCII text: Python's case-insensitive matching tries
#: every case of every letter at every position, three times the cost of lower() first.
_SAYS_WHEN_LOWER = re.compile(_SAYS_WHEN.pattern)


def says_when(text: str) -> bool:
    """True if `text` places something in time ("yesterday", "last weekend", "on Friday", "in June", "in 2022").

    "May" and "March" are left out alone (as verbs they are far more common),
    and so are a bare year ("2048 MB") and plural weekdays ("on Mondays": a habit).
    """
    if text.isascii():  # ASCII letters fold only among themselves: the same answer, at a third of the cost
        return _SAYS_WHEN_LOWER.search(text.lower()) is not None
    return _SAYS_WHEN.search(text) is not None
