"""The calendar days, months and years a query names ("on October 13, 2023", "in June", "in 2022").

A question that names a time asks about what was said or true then, and
every entry carries that time on its valid axis: recall favours the entries
valid_from places inside a span the query names (score.dated), and the
entries whose own relative words ("two weeks ago", "last Friday") place an
event inside one, counted back from when they were said (`referenced`). A
question's own relative words are not read: measured, they cost more than
they gave (docs/retrieval.md).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

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

_EPOCH = date(1970, 1, 1)
_DAY_US = 86_400_000_000


def _day(us: int) -> date:
    """The UTC calendar day holding the instant `us` (µs since the epoch).

    In integers: `us / 1e6` as a float rounds the last microsecond of 9999 up into a year 10000 that `date`
    cannot hold, and `as_of` may be that instant.
    """
    return _EPOCH + timedelta(days=us // _DAY_US)


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
        t = _day(us)
        return (
            (self.year is None or t.year == self.year)
            and (self.month is None or t.month == self.month)
            and (self.day is None or t.day == self.day)
        )

    def meets(self, days: Days) -> bool:
        """Whether some day of `days` falls inside the span."""
        first, last = days.first, days.last
        for year in range(first.year, last.year + 1) if self.year is None else (self.year,):
            if self.month is None:
                lo, hi = date(year, 1, 1), date(year, 12, 31)
            elif self.day is None:
                lo = date(year, self.month, 1)
                hi = lo.replace(day=calendar.monthrange(year, self.month)[1])
            elif _valid(year, self.month, self.day):
                lo = hi = date(year, self.month, self.day)
            else:
                continue
            if lo <= last and first <= hi:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Days:
    """A run of calendar days, `first` to `last` inclusive: where relative words ("last week") place an event."""

    first: date
    last: date


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


# The days a text places an event on, relative to when it was said:
# "yesterday", "last Friday", "last week", "two months ago". People report
# what happened after it happened, in words relative to their own now; a
# question that names the day ("on 1 May") asks about the event, not about
# the day it was told. Loose on purpose ("last week" is the fortnight
# before, "two weeks ago" give or take a third of a week): a day range only
# has to meet the question's span. "next week" is a plan, not a told event.
_NUMBER = {"a": 1, "an": 1, "one": 1, "two": 2, "couple": 2, "three": 3, "few": 3, "four": 4, "five": 5,
           "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\b(?:(?P<yesterday>yesterday|last night)"
    r"|(?:last|past|on) (?P<weekday>" + "|".join(_WEEKDAYS) + r")"
    r"|last (?P<unit>week|weekend|month|year)"
    r"|(?<![\d,.])(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|(?:a )?couple(?: of)?|(?:a )?few)"
    r" (?P<units>day|week|weekend|month|year)s? ago)\b"
)


def _may_tell(lowered: str) -> bool:
    """False when `_RELATIVE` cannot match: every match holds "yesterday", "last ", " ago" or a weekday.

    Substring tests cost a microsecond a text; the pattern, tried at every
    word boundary, costs about a hundred on a 1 KB turn, and a question
    naming a date reads fifty candidates. 7% of the dev sets' turns pass.
    """
    return "yesterday" in lowered or "last " in lowered or " ago" in lowered or any(d in lowered for d in _WEEKDAYS)


def _month_before(d: date) -> Days:
    """The calendar month before the one holding `d`."""
    last = d.replace(day=1) - timedelta(days=1)
    return Days(last.replace(day=1), last)


def referenced(text: str, said: int) -> list[Days]:
    """The day ranges `text`, said at `said` (µs since the epoch, UTC), places events on by words relative to then."""
    lowered = text.lower()
    if not _may_tell(lowered):
        return []
    today = _day(said)
    out = []
    for m in _RELATIVE.finditer(lowered):
        try:
            out.append(_told(m, today))
        except (ValueError, OverflowError):
            continue  # "4500 years ago" places nothing on the calendar
    return out


def _told(m: re.Match, today: date) -> Days:
    """The days one `_RELATIVE` match places an event on, said on `today`."""
    if m["yesterday"]:
        day = today - timedelta(days=1)
        return Days(day, day)
    if m["weekday"]:
        day = today - timedelta(days=(today.weekday() - _WEEKDAYS.index(m["weekday"])) % 7 or 7)
        return Days(day, day)
    if m["unit"]:  # "last week": the calendar unit before this one (a week: the fortnight before, either reading)
        if m["unit"] in ("week", "weekend"):
            return Days(today - timedelta(days=14), today - timedelta(days=1))
        if m["unit"] == "month":
            return _month_before(today)
        return Days(date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))
    unit = m["units"]  # "two weeks ago": that far back, give or take a third of the unit
    n = int(m["n"]) if m["n"].isdigit() else max(_NUMBER.get(w, 0) for w in m["n"].split())
    if unit == "year":
        return Days(date(today.year - n, 1, 1), min(date(today.year - n, 12, 31), today))
    days, slack = {"day": (1, 1), "week": (7, 3), "weekend": (7, 3), "month": (30, 10)}[unit]
    centre = today - timedelta(days=days * n)
    return Days(centre - timedelta(days=slack), min(centre + timedelta(days=slack), today))
