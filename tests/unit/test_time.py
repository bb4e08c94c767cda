"""arbiter._time: the wire's RFC 3339 / epoch-seconds instants and their microsecond form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from arbiter._time import MAX_US, MIN_US, US, format_time, parse_time
from arbiter.errors import InvalidParams

T0 = 1795168800 * US  # 2026-11-20T10:00:00Z


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-20T10:00:00Z", T0),
        ("2026-11-20t10:00:00z", T0),  # RFC 3339 allows lower case
        ("2026-11-20 10:00:00Z", T0),  # ... and a space for the T
        ("2026-11-20T10:00:00+00:00", T0),
        ("2026-11-20T11:30:00+01:30", T0),
        ("2026-11-20T04:00:00-06:00", T0),
        ("2026-11-20T10:00:00.5Z", T0 + 500_000),
        ("2026-11-20T10:00:00.000001Z", T0 + 1),
        ("2026-11-20T10:00:00.123456Z", T0 + 123_456),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999Z", -1),
        ("  2026-11-20T10:00:00Z  ", T0),
    ],
)
def test_rfc3339(text, expected):
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (1795168800, T0),
        (1795168800.25, T0 + 250_000),
        (0, 0),
        (-1, -US),
        (-0.5, -500_000),
        ("1795168800", T0),
        ("1795168800.25", T0 + 250_000),
        ("1.7951688e9", T0),
        (" 42 ", 42 * US),
    ],
)
def test_epoch_seconds(value, expected):
    assert parse_time(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "2026-11-20T10:00:00",  # no offset: ambiguous, refused
        "2026-11-20",
        "2026-13-01T00:00:00Z",
        "2026-11-20T25:00:00Z",
        "nan",
        "inf",
        float("nan"),
        float("inf"),
        -float("inf"),
        True,
        253402300800,  # 10000-01-01
        -62135596801,  # before 0001-01-01
        10**30,
        "9" * 5000,  # past int()'s digit limit: still a clean error
    ],
)
def test_bad_time_names_the_path(value):
    with pytest.raises(InvalidParams) as info:
        parse_time(value, path="entries[3].valid_from")
    assert info.value.path == "entries[3].valid_from"
    assert "\n" not in info.value.message


def test_format_is_rfc3339_utc_with_microseconds():
    assert format_time(T0) == "2026-11-20T10:00:00.000000Z"
    assert format_time(T0 + 7) == "2026-11-20T10:00:00.000007Z"
    assert format_time(-1) == "1969-12-31T23:59:59.999999Z"
    assert format_time(None) is None


def test_format_pads_early_years():
    assert format_time(MIN_US) == "0001-01-01T00:00:00.000000Z"
    assert format_time(MAX_US) == "9999-12-31T23:59:59.999999Z"
    assert format_time(-59011459200 * US) == "0100-01-01T00:00:00.000000Z"


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=MIN_US, max_value=MAX_US))
def test_round_trip_is_exact(us):
    assert parse_time(format_time(us)) == us


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-62135596800, max_value=253402300799))
def test_integer_seconds_are_exact(seconds):
    assert parse_time(seconds) == seconds * US
    assert parse_time(str(seconds)) == seconds * US
