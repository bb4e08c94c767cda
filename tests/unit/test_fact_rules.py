"""The benchmark's rule fact extractor (bench/fact_rules.py): a few real sentences per statement shape."""

from __future__ import annotations

import pytest

from bench import fact_rules
from bench.fact_rules import extract
from bench.facts_recall import _fuse


def triples(text: str, speaker: str = "user") -> list[tuple[str, str, str]]:
    return [(t.subject, t.predicate, t.object) for t in extract(text, speaker)]


@pytest.mark.parametrize("text, expected", [
    ("I work at Google as an engineer.", [("user", "works_at", "Google")]),
    ("I just got a new job at Stripe!", [("user", "works_at", "Stripe")]),
    ("I'm working at Acme now", [("user", "works_at", "Acme")]),
    ("I work as a nurse.", [("user", "has_job_title", "nurse")]),
    ("I just moved to Denver last month!", [("user", "lives_in", "Denver")]),
    ("I am currently living in San Francisco", [("user", "lives_in", "San Francisco")]),
    ("We've moved to Austin.", [("user", "lives_in", "Austin")]),
    ("My sister lives in Boston with her husband.", [("user's sister", "lives_in", "Boston")]),
    ("Emma moved to Seattle.", [("Emma", "lives_in", "Seattle")]),
    ("My dog's name is Max.", [("user's dog", "has_name", "Max")]),
    ("I have a golden retriever named Biscuit.", [("user's retriever", "has_name", "Biscuit")]),
    ("My husband is called Tom.", [("user's husband", "has_name", "Tom")]),
    ("I have 3 bikes.", [("user's bikes", "count", "3")]),
    ("I have two cats and 3 bikes.", [("user's cats", "count", "2")]),  # a clause without its subject is missed
    ("I now have 4 bikes.", [("user's bikes", "count", "4")]),
    ("My favorite band is Radiohead.", [("user", "favorite_band", "Radiohead")]),
    ("I prefer tea over coffee.", [("user", "prefers", "tea over coffee")]),
    ("I'm 32 years old", [("user", "has_age", "32")]),
    ("I really love jazz.", [("user", "enjoys", "jazz")]),
    ("I'm allergic to peanuts.", [("user", "allergic_to", "peanuts")]),
    ("I've been learning Spanish for two months.", [("user", "is_learning", "Spanish")]),
    ("I drive a Honda Civic.", [("user", "drives", "Honda Civic")]),
    ("I recently visited Japan with my family.", [("user", "visited", "Japan")]),
    ("I'm currently reading Dune by Frank Herbert.", [("user", "is_reading", "Dune")]),
    ("I bought a new laptop yesterday.", [("user", "owns", "laptop")]),
    ("I'm a vegetarian.", [("user", "is_a", "vegetarian")]),
])
def test_first_and_third_person_statements(text, expected):
    assert triples(text) == expected


@pytest.mark.parametrize("text", [
    "I worked at IBM for years.",  # the past says nothing about now
    "I'm a bit tired today.",
    "I moved to a new apartment.",  # lives_in wants a place's name
    "I'm planning to go to Paris.",  # the object would be the light verb "go"
    "I have a few questions.",  # not a count
    "Can you recommend a good book?",
])
def test_statements_that_are_not_facts(text):
    assert triples(text) == []


def test_the_speaker_is_the_first_person_and_assistants_state_nothing():
    assert triples("Caroline: I went to Sweden last summer [photo: a lake]", "Caroline") == [
        ("Caroline", "visited", "Sweden")
    ]
    assert triples("I live in Paris and work at a bakery.", "assistant") == []
    assert triples("This weekend I live in Paris.", "user") == [("user", "lives_in", "Paris")]


def test_every_pattern_says_why_and_proposes_a_valid_triple():
    for p in fact_rules.PATTERNS:
        assert p.reason and 0.5 <= p.confidence <= 1.0
    t = extract("My favourite hobby is rock climbing.", "user")[0]
    assert (t.predicate, t.functional) == ("favorite_hobby", True)


def test_fusion_lifts_entry_hits_that_are_fact_sources():
    # Entry hits 10, 11, 12; the one fact's sources are 12 (a hit) and 99 (not a hit).
    assert _fuse([10, 11, 12], [[12, 99]], 1.0) == [12, 10, 11, 99]
    # On an equal footing the fact's sources tie the first hit and come after it.
    assert _fuse([10, 11], [[99]], 1.5) == [10, 99, 11]
