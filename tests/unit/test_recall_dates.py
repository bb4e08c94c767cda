"""Dates a query names: the spans read from its text, and the entries valid inside them favoured."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st

from arbiter._time import MAX_US, MIN_US, US, format_time
from arbiter.recall import dates
from arbiter.recall.dates import Days, Span, referenced, spans
from tests.unit.test_recall import ask, conversation, ids, remember

DAY_US = 86_400 * US


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("What did Melanie show Caroline on October 13, 2023?", [Span(2023, 10, 13)]),
        ("What did Gina find on 1 February, 2023?", [Span(2023, 2, 1)]),
        ("the 3rd of march", [Span(None, 3, 3)]),
        ("the March 15th issue", [Span(None, 3, 15)]),
        ("When did Melanie go camping in June?", [Span(None, 6, None)]),
        ("what changed in december 2025", [Span(2025, 12, None)]),
        ("deployed on 2026-11-20", [Span(2026, 11, 20)]),
        ("from 2024 and in 2022", [Span(2022, None, None)]),  # a bare number is a year only after a time word
        ("Who did Maria have dinner with on May 3, 2023?", [Span(2023, 5, 3)]),
        ("what did I do in May?", [Span(None, 5, None)]),
        ("May I ask what we may march on?", []),  # the verbs
        ("2023-13-01 and 2023-02-29", []),  # no such days
        ("February 30", [Span(None, 2, None)]),  # no such day: the month is still named
        ("February 29", [Span(None, 2, 29)]),  # a leap day is a day of some year
        ("the zeppelin", []),
    ],
)
def test_the_spans_a_query_names(text, want):
    assert list(spans(text)) == want


def at(*ymd) -> int:
    return int(datetime(*ymd, 12, tzinfo=timezone.utc).timestamp()) * US


def test_a_span_holds_the_instants_inside_it():
    assert Span(2023, 10, 13).holds(at(2023, 10, 13)) and not Span(2023, 10, 13).holds(at(2023, 10, 14))
    assert Span(None, 6, None).holds(at(2021, 6, 30)) and not Span(None, 6, None).holds(at(2021, 7, 1))
    assert Span(2022, None, None).holds(at(2022, 1, 1)) and not Span(2022, None, None).holds(at(2023, 1, 1))


def test_an_entry_valid_inside_a_named_date_is_favoured(db, tenant):
    chat = conversation(db, tenant)
    # Two sessions say the same words; the question names the older one's day (decay, asked for, favours the newer).
    older = remember(db, tenant, "t", "Melanie: I showed Caroline my new painting", conversation_id=chat,
                     valid_from=format_time(at(2023, 7, 3)))
    newer = remember(db, tenant, "t", "Melanie: I showed Caroline my new painting", conversation_id=chat,
                     valid_from=format_time(at(2023, 10, 13)))
    question = "What painting did Melanie show on July 3, 2023?"
    res = ask(db, tenant, question, conversation_id=chat, explain=True, decay=True, now=at(2023, 12, 1))
    by_id = {h.id: h for h in res.hits}
    assert ids(res) == [older, newer]
    assert by_id[older].parts["date"] > 1.0 == by_id[newer].parts["date"]
    assert ids(ask(db, tenant, question, conversation_id=chat, disable=["dates"], decay=True,
                   now=at(2023, 12, 1))) == [newer, older]
    # A month of any year counts too; a day the entries are not from moves nothing.
    for asked, first in (("in July", older), ("on July 4", newer)):
        res = ask(db, tenant, f"What painting did Melanie show {asked}?", conversation_id=chat, decay=True, now=at(2023, 12, 1))
        assert ids(res)[0] == first


def test_a_span_meets_the_day_ranges_that_reach_into_it():
    assert Span(2022, 5, 1).meets(Days(date(2022, 4, 25), date(2022, 5, 1)))
    assert not Span(2022, 5, 1).meets(Days(date(2022, 5, 2), date(2022, 5, 9)))
    assert Span(None, 12, None).meets(Days(date(2021, 12, 31), date(2022, 1, 2)))  # a month of any year, across new year
    assert not Span(None, 3, None).meets(Days(date(2022, 1, 1), date(2022, 2, 28)))
    assert Span(2021, None, None).meets(Days(date(2021, 12, 20), date(2022, 1, 3)))
    assert Span(None, 2, 29).meets(Days(date(2024, 2, 1), date(2024, 3, 1)))
    assert not Span(None, 2, 29).meets(Days(date(2023, 2, 1), date(2023, 3, 1)))  # no such day that year


# Said at noon on Monday, 2 May 2022.
@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("I watched it last night", [(date(2022, 5, 1), date(2022, 5, 1))]),
        ("Yesterday was long.", [(date(2022, 5, 1), date(2022, 5, 1))]),
        ("I finished it last Friday", [(date(2022, 4, 29), date(2022, 4, 29))]),
        ("We met on Monday", [(date(2022, 4, 25), date(2022, 4, 25))]),  # a weekday told is a past one
        ("last week was busy", [(date(2022, 4, 18), date(2022, 5, 1))]),  # either reading of "last week"
        ("last month", [(date(2022, 4, 1), date(2022, 4, 30))]),  # the calendar month before
        ("last year and yesterday", [(date(2021, 1, 1), date(2021, 12, 31)), (date(2022, 5, 1), date(2022, 5, 1))]),
        # "N units ago": that far back, give or take a third of the unit
        ("a couple of days ago", [(date(2022, 4, 29), date(2022, 5, 1))]),
        ("I dyed my hair two weeks ago", [(date(2022, 4, 15), date(2022, 4, 21))]),
        ("a month ago", [(date(2022, 3, 23), date(2022, 4, 12))]),
        ("3 years ago", [(date(2019, 1, 1), date(2019, 12, 31))]),
        ("0 years ago", [(date(2022, 1, 1), date(2022, 5, 2))]),  # this year, but not its days still to come
        ("built 4,500 years ago", []),  # not "500 years ago"
        ("How many weeks ago did I meet her?", []),  # asks for a span, names none
        ("I will go next week", []),  # plans are not told events
        ("the last weeks of the project", []),
    ],
)
def test_relative_words_place_an_event_before_it_was_told(text, want):
    assert referenced(text, at(2022, 5, 2)) == [Days(*days) for days in want]


def test_last_month_in_january_is_last_december():
    assert referenced("last month", at(2023, 1, 15)) == [Days(date(2022, 12, 1), date(2022, 12, 31))]


def ranked_by_date(db, tenant, question, now, *turns, **kw):
    """Turns (text, day) of one conversation, then `question` asked at `now`: their ids, the ranking, the ids
    the dates signal favoured, and the ranking with it off."""
    chat = conversation(db, tenant)
    made = [remember(db, tenant, "t", text, conversation_id=chat, valid_from=format_time(day)) for text, day in turns]
    res = ask(db, tenant, question, conversation_id=chat, explain=True, now=now, **kw)
    plain = ask(db, tenant, question, conversation_id=chat, disable=["dates"], now=now, **kw)
    return made, ids(res), {h.id for h in res.hits if h.parts.get("date", 1.0) > 1.0}, ids(plain)


def test_an_event_told_later_in_relative_words_counts_for_its_own_day(db, tenant):
    (told, other), ranked, favoured, plain = ranked_by_date(
        db, tenant, "What movie did Joanna watch on 1 May, 2022?", at(2022, 6, 1),
        ("Joanna: I watched The Lord of the Rings last night", at(2022, 5, 2)),
        ("Joanna: I watched The Lord of the Rings again", at(2022, 5, 20)),
    )
    assert (ranked, favoured, plain) == ([told, other], {told}, [other, told])


def test_a_question_s_own_relative_words_do_not_date_it(db, tenant):
    # Measured and not kept (docs/retrieval.md): "a month ago" in a question names no span; only what it says does.
    turns = (("I ran the charity 5K with my colleagues", at(2023, 3, 19)), ("I ran another charity 5K", at(2023, 4, 16)))
    _, ranked, favoured, plain = ranked_by_date(db, tenant, "Which charity 5K did I run a month ago?", at(2023, 4, 18),
                                                *turns)
    assert favoured == set() and ranked == plain
    assert len(ids(ask(db, tenant, "Which charity 5K did I run 4500 years ago?", now=at(2023, 6, 1)))) == 2


_PHRASES = ["yesterday", "last night", "last Friday", "on Sunday", "last week", "last weekend", "last month",
            "last year", "a day ago", "3 days ago", "0 years ago", "0 weeks ago", "a couple of weeks ago", "two months ago", "10 years ago",
            "a few days ago", "next week", "the last word", "ago", "4500 years ago", "99999999999 weeks ago",
            "1000000 days ago"]


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.one_of(st.sampled_from(_PHRASES), st.text(max_size=12)), max_size=6),
    # Every instant the wire takes, 0001 to the last microsecond of 9999, the two ends drawn often.
    said=st.one_of(st.sampled_from([MIN_US, MAX_US]), st.integers(MIN_US, MAX_US)),
)
def test_told_days_lie_before_the_telling_and_never_fail(words, said):
    text = " ".join(words)
    day = (datetime(1970, 1, 1) + timedelta(microseconds=said)).date()
    told = referenced(text, said)
    for days in told:
        # Told events happened: a run of days, in order, ending no later than the day it was said,
        # and no phrase places one more loosely than a calendar year.
        assert days.first <= days.last <= day
        assert (days.last - days.first).days <= 365
    # Said a day later, the same words place nothing earlier ("last Friday" on a Saturday is the day before).
    if said + DAY_US <= MAX_US:
        later = referenced(text, said + DAY_US)
        if len(later) == len(told):  # a count of years can fall off the calendar's start on one day and not the next
            for then, now in zip(told, later):
                assert then.first <= now.first and then.last <= now.last


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.one_of(st.sampled_from(_PHRASES + ["Monday", "past Tuesday", "on wednesday", "AGO"]),
                                st.text(max_size=12)), max_size=6),
       sep=st.sampled_from([" ", "\n", "\t", "  "]))
def test_the_cheap_test_before_the_pattern_never_loses_a_told_day(words, sep):
    # `referenced` skips the pattern when the text holds none of the words every match holds.
    text = sep.join(words).lower()
    if dates._RELATIVE.search(text):
        assert dates._may_tell(text), text


def test_the_calendar_edges_are_days_like_any_other(db, tenant):
    assert Span(9999, 12, 31).holds(MAX_US) and Span(1, 1, 1).holds(MIN_US)
    assert Span(None, 12, None).meets(Days(date(9999, 12, 30), date(9999, 12, 31)))
    assert referenced("yesterday", MAX_US) == [Days(date(9999, 12, 30), date(9999, 12, 30))]
    # A question asked at the last instant of the calendar is answered.
    told = remember(db, tenant, "t", "I ran a charity 5K yesterday")
    assert ids(ask(db, tenant, "Which 5K did I run yesterday?", as_of=format_time(MAX_US))) == [told]
