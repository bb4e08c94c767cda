"""Recall stages 3-7 as pure functions: boosts, intent, decay, voice, episodes, term selection, fusion."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import given, strategies as st

from arbiter.recall import Candidate, DEFAULT, Tuning, _settled, fuse, score, select_terms
from arbiter.recall._rank import idf
from arbiter.recall.query import Term

US = 1_000_000
DAY = 86_400 * US
NOW = 1_800_000_000 * US


# ---- stage 4: boosts ------------------------------------------------------------


def test_boosts_multiply_for_the_callers_type_and_tag():
    neutral = score.boost("project", ["a"], types=[], tag=None)
    typed = score.boost("project", ["a"], types=["project"], tag=None)
    tagged = score.boost("project", ["a"], types=["user"], tag="a")
    assert neutral == 1.0 == score.boost("project", ["b"], types=["user"], tag="a")
    assert typed > 1.0 and tagged > 1.0
    assert score.boost("project", ["a"], types=["project"], tag="a") == pytest.approx(typed * tagged)
    # A caller's own type outweighs what intent merely guesses from the question's wording.
    assert typed > score.intent("project", frozenset({"project"})) > 1.0


# ---- stage 5: intent --------------------------------------------------------------


def test_intent_routes_cues_to_types():
    assert score.intent_types({"preference"}, []) == {"user", "feedback"}
    assert score.intent_types({"fact", "time"}, []) == {"reference", "project"}
    assert score.intent_types({"howto"}, []) == {"learning"}
    assert score.intent_types(set(), []) == set()


def test_caller_types_win_over_intent():
    assert score.intent_types({"preference", "time"}, ["reference"]) == frozenset()


# ---- stage 6: decay -----------------------------------------------------------------


half_lives = st.floats(min_value=1, max_value=1000, allow_nan=False)
floors = st.floats(min_value=0, max_value=0.6, allow_nan=False)


def decay_at(age: int, **kw) -> float:
    return score.decay(NOW - age, NOW, **kw)


@pytest.mark.parametrize("half_life", [1, 10, 45, 90, 365.25])
@pytest.mark.parametrize("floor", [0.0, 0.3, 0.6])
def test_an_older_entry_never_weighs_more_and_never_below_the_floor(half_life, floor):
    # Every hour from a day in the future to five half-lives (or a year) back: a grid, so no step is missed.
    hours = range(-24, round(max(5 * half_life, 365) * 24))
    weights = [decay_at(h * 3600 * US, half_life_days=half_life, floor=floor) for h in hours]
    assert weights == sorted(weights, reverse=True)
    assert weights[0] == 1.0 and weights[-1] == floor


@given(st.integers(-1000 * DAY, 30 * DAY), half_lives, floors)
def test_the_first_month_and_the_future_count_as_new(age, half_life, floor):
    assert decay_at(age, half_life_days=half_life, floor=floor) == 1.0


@given(st.integers(31 * DAY, 5000 * DAY), half_lives, half_lives)
def test_a_longer_half_life_decays_less_and_stretches_the_curve(age, h1, h2):
    shorter, longer = sorted((h1, h2))
    assert decay_at(age, half_life_days=longer) >= decay_at(age, half_life_days=shorter)
    # The same share of a half-life weighs the same: the curve's shape is the half-life's, not the calendar's.
    assert decay_at(2 * age, half_life_days=2 * shorter) == decay_at(age, half_life_days=shorter)


@given(st.floats(min_value=40, max_value=1000), st.floats(min_value=0, max_value=0.6, exclude_max=True))
def test_each_half_life_passed_weighs_less_down_to_the_floor(half_life, floor):
    kw = {"half_life_days": half_life, "floor": floor}
    days_old = (30, 0.99 * half_life, 1.01 * half_life, 2.01 * half_life, 4.01 * half_life, 100 * half_life)
    steps = [decay_at(round(days * DAY), **kw) for days in days_old]
    assert steps[0] == 1.0 and steps[-2] == steps[-1] == floor
    assert all(a > b for a, b in pairwise(steps[:-1]))


# ---- voice ------------------------------------------------------------------------------


def test_voice_is_neutral_without_a_perspective():
    assert score.voice(10, 0, None) == 1.0
    assert score.voice(0, 0, "self") == 1.0


def test_voice_favours_the_asker_s_own_words():
    first, second = score.voice(8, 0, "self"), score.voice(0, 8, "self")
    assert first > 1.0 > second
    assert score.voice(0, 8, "other") == pytest.approx(first)  # flipped
    assert score.voice(8, 0, "self", strength=0.0) == 1.0


# ---- episodes -------------------------------------------------------------------------------


@dataclass
class Placed:
    conversation_id: int | None
    valid_from: int
    score: float


def test_quantity_favours_entries_holding_a_numeral():
    none, digit, word = (score.quantity(n) for n in (0, score.DIGIT, score.NUMBER_WORD))
    assert none == 1.0 < digit == word  # a figure in digits or in words counts the same
    assert score.quantity(score.NUMBER_WORD, words=False) == 1.0 < score.quantity(score.DIGIT, words=False)
    assert score.quantity(score.DIGIT, strength=0.0) == 1.0  # strength 0 switches it off
    # Soft: a figure never outweighs a much better text match (a factor well under 2).
    assert digit < 1.5


def test_episodes_share_one_factor_and_keep_the_order_inside():
    minute = 60 * 1_000_000
    items = [
        Placed(1, 0, 10.0),
        Placed(1, minute, 6.0),  # same episode as the first: mass 16
        Placed(1, DAY, 8.0),  # same conversation, a day later: an episode of its own
        Placed(None, minute, 4.0),  # outside any conversation: a whole of its own, left alone
    ]
    f = score.episodes(items, weight=1.0, gap_us=10 * minute, members=3)
    assert f == pytest.approx([1.0, 1.0, 0.5, 1.0])
    assert f[0] * items[0].score > f[1] * items[1].score
    assert score.episodes(items, weight=0.0) == [1.0] * 4
    assert score.episodes(items, weight=1.0, gap_us=10 * minute, members=1)[:3] == pytest.approx([1.0, 1.0, 0.8])
    # Notes' stream: those in no conversation are one stream of their own, the note a minute in is with none.
    notes = [Placed(None, 0, 10.0), Placed(None, minute, 6.0), Placed(None, DAY, 8.0), Placed(2, minute, 4.0)]
    f = score.episodes(notes, weight=1.0, gap_us=10 * minute, members=3, stream=score.by_writing)
    assert f == pytest.approx([1.0, 1.0, 0.5, 0.25])


# ---- tenant pass term selection -----------------------------------------------------------


def term(text: str, phrase: bool = False) -> Term:
    return Term(text, text, phrase=phrase)


def test_term_selection_keeps_the_rarest_within_budget():
    terms = (term("common"), term("rare"), term("mid"), term("absent"), term("exact words", phrase=True))
    df = {"common": 900, "rare": 3, "mid": 40, "absent": 0}
    assert [t.text for t in select_terms(terms, df, 1000, 0.5, 100)] == ["rare", "mid", "absent", "exact words"]
    everything = ["common", "rare", "mid", "absent", "exact words"]
    assert [t.text for t in select_terms(terms, df, 1000, 1.0, 10_000)] == everything
    # The rarest word stays even when it alone is over the caps.
    assert [t.text for t in select_terms((term("common"),), df, 1000, 0.01, 1)] == ["common"]
    # Below the floor no word counts as common: a small tenant keeps its words.
    kept = select_terms(terms, df, 1000, 0.01, 10_000, floor=1000)
    assert [t.text for t in kept] == everything


def test_idf_is_never_negative():
    assert idf(0, 100) > idf(50, 100) > idf(100, 100) >= 0


# ---- stage 7: fusion ------------------------------------------------------------------------


def cands(*ids: int) -> list[Candidate]:
    return [Candidate(i, "project", None, 0, 1.0) for i in ids]


def test_rrf_contribution():
    assert score.rrf(1, 1.5) == pytest.approx(1.5 / 61)
    assert score.rrf(10, 1.0, k=10) == pytest.approx(1 / 20)


def test_fusion_sums_weighted_reciprocal_ranks():
    fused = fuse([("conversation", 1.5, cands(1, 2)), ("tenant", 1.0, cands(3, 1))])
    by_id = {c.id: c for c in fused}
    assert by_id[1].score == pytest.approx(1.5 / 61 + 1 / 62)
    assert by_id[2].score == pytest.approx(1.5 / 62)
    assert by_id[3].score == pytest.approx(1 / 61)
    assert [c.id for c in fused] == [1, 2, 3]
    assert by_id[1].parts == {"conversation_rank": 1.0, "tenant_rank": 2.0, "rrf": by_id[1].score}


def test_a_tenant_hit_at_the_top_outranks_local_hits_past_rank_31():
    local = cands(*range(100, 140))
    fused = fuse([("conversation", 1.5, local), ("tenant", 1.0, cands(7))])
    position = [c.id for c in fused].index(7)
    assert position == 31  # 1/61 beats 1.5/(60+32): it lands after 31 local hits, ahead of the rest


def test_the_tenant_pass_is_skipped_only_when_it_cannot_matter():
    assert _settled(10, 10, DEFAULT)  # 1.5/70 > 1/61
    assert not _settled(9, 10, DEFAULT)  # too few local hits: the tenant fills
    assert not _settled(40, 40, DEFAULT)  # 1.5/100 < 1/61: a tenant hit could enter the top 40
    assert not _settled(10, 10, Tuning(conversation_weight=1.0, tenant_weight=1.5))
