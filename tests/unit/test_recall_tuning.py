"""Rankings the measured tuning decides: each fails if its number drifts to the value it was measured against."""

from __future__ import annotations

from tests.unit.test_recall import DAY, T0, US, ask, conversation, ids, remember

_TALK = "the team met on tuesday to talk about the plan for next quarter and the budget and hiring"


def test_a_short_entry_naming_a_word_once_outranks_a_long_one_naming_it_twice(db, tenant):
    # Full length normalisation (BM25 b = 1): a long entry mentions many words without being about them.
    # At FTS5's 0.75 the long entry's second mention wins (each side by about 5%).
    short = remember(db, tenant, "note", "we moved the queue to kafka last week")
    long = remember(db, tenant, "note", f"kafka {_TALK} kafka")
    remember(db, tenant, "note", "lunch is soup and bread on fridays")
    assert ids(ask(db, tenant, "kafka")) == [short, long]


def test_a_lone_turn_that_matches_much_better_keeps_its_place_above_a_weak_turn_of_an_exchange(db, tenant):
    # The episode signal nudges, it does not overrule: at weight 0.2 a lone turn matching the query 1.7 times
    # better than a weak turn of an exchange about it stays above; at 0.3 or more it falls below (at BM25 b 1
    # or 0.75: the two turns are about as long).
    # (test_recall's lone mention, a closer match, is the other side: there the exchange wins.)
    chat = conversation(db, tenant)
    said = remember(db, tenant, "t", "My sourdough starter bubbled overnight, the sourdough smells great",
                    conversation_id=chat, now=T0, speaker="Ann")
    after = remember(db, tenant, "t", "Keep the starter warm and it rises again", conversation_id=chat,
                     now=T0 + 60 * US, speaker="Bo")
    lone = remember(db, tenant, "t", "Starter: the starter rises, starter done", conversation_id=chat,
                    now=T0 + DAY, speaker="Ann")
    res = ask(db, tenant, "How is the sourdough starter?", conversation_id=chat, explain=True, now=T0 + 2 * DAY)
    assert ids(res) == [said, lone, after]
    assert res.hits[1].parts["episode"] < 1.0  # the episode signal was at work, and still lost
