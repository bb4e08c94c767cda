"""Stages 3-7 as pure functions: each returns one factor or term of a hit's score.

A candidate's score in one pass is

    bm25 x boost x intent x decay x voice x quantity x date x when x speaker x episode

(a length prior exists for measurement, off), and passes are fused by weighted reciprocal rank. Each factor is its own entry
in `Hit.parts` under `explain=true`, so a ranking can be read, not guessed.
The constants are the chosen values; docs/retrieval.md has the measurements
behind them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import functools
import re

from arbiter.recall.dates import Days, Span
from arbiter.recall.query import INTENT_CUES, PARTIES, Voice

_WORD = re.compile(r"\w+")

#: Stage 3: BM25 column weights (title, content, tags, source, scope): the
#: issue's 10/4/8/2 ratios scaled so content is 1. Weights multiply term
#: frequency inside BM25's saturation, so their scale acts as 1/k1: at
#: 10/4/8/2 one occurrence already saturates (measured -5 points R@1).
#: `scope` holds the tenant/conversation tokens and never scores.
BM25_WEIGHTS = (2.5, 1.0, 2.0, 0.5, 0.0)
#: Stage 4: soft boosts in search mode (browse mode filters instead).
TYPE_BOOST = 1.3
TAG_BOOST = 1.2
#: Stage 5: the soft boost intent routing gives the types a cue suggests.
INTENT_BOOST = 1.1
#: Stage 7: reciprocal-rank fusion constant and pass weights.
RRF_K = 60
CONVERSATION_WEIGHT = 1.5
TENANT_WEIGHT = 1.0
#: Voice: how far the perspective match moves a score (0 = off, 1 = x0.5..x1.5).
VOICE_STRENGTH = 1.0
#: Quantity: a question asking for an amount multiplies entries holding a
#: numeral by 1 + QUANTITY_BOOST (measured +3 points R@1 on dev, both halves).
QUANTITY_BOOST = 0.2
#: Speaker: an entry said by someone the query names ("What did Caroline research?").
SPEAKER_BOOST = 0.5
#: Names: a note (an entry with no speaker) that names first whom the query names ("What did Caroline research?"):
#: who a note is about is whom it names first, as a turn's is its speaker. Named anywhere, x1.5 was the best of
#: 0.25 / 0.5 / 1; named first, the signal is sharper and x2 the best of 0.25 / 0.5 / 1 / 2 (docs/retrieval.md).
NAMES_BOOST = 1.0
#: Dates: an entry valid from inside a day, month or year the query names, or telling of an event inside it in
#: words relative to when it was said (measured with those 0.25 / 0.5 / 1 / 1.5 / 2 / 3: a plateau from 1 to 3).
DATE_BOOST = 1.0
#: When: a question asking when favours entries that say when (measured 0.25 / 0.5 / 1 / 2: 0.5 best).
WHEN_BOOST = 0.5
#: Replies: the turn after a matching question gets this share of its score.
REPLY_SHARE = 1.0
#: Follow-ups: the answer to a short question asked right after a matching turn gets this share of its score.
FOLLOWUP_SHARE = 0.7
#: Antecedents: the turn before a matching turn, said by the other party, gets this share of its match
#: (under 1: the turn that matched the query's words stays above a predecessor with the same factors).
ANTECEDENT_SHARE = 0.7
#: Episodes: a pass's candidates of one conversation valid at most
#: EPISODE_GAP_US apart form an episode; each is multiplied by (episode mass /
#: best episode mass) ** EPISODE_WEIGHT, the mass being its best
#: EPISODE_MEMBERS scores. Measured on the three sets: weights 0.1-0.3, gaps
#: 10 min-2 h and 3-5 members all give the same mean (docs/retrieval.md).
EPISODE_GAP_US = 10 * 60 * 1_000_000
EPISODE_WEIGHT = 0.2
EPISODE_MEMBERS = 3
#: Size: score x (SIZE_PIVOT / bytes) ** SIZE_EXPONENT, capped to [SIZE_MIN, SIZE_MAX]
#: (measured: a length prior on top of BM25's own costs R@1, so off).
SIZE_PIVOT = 1000
SIZE_EXPONENT = 0.0
SIZE_MIN, SIZE_MAX = 0.5, 1.5

#: Entities: x(1 + ENTITY_BOOST) for a candidate mentioning an entity the
#: query names, x(1 + CLUSTER_BOOST) for one mentioning an entity of the same
#: cluster; salience: x(1 + SALIENCE_WEIGHT x (2 x salience - 1)). Measured on
#: the dev sets (docs/retrieval.md); 0 is off.
ENTITY_BOOST = 0.0
CLUSTER_BOOST = 0.0
SALIENCE_WEIGHT = 0.0

_DAY_US = 86_400 * 1_000_000


def entity(linked: bool, boost: float) -> float:
    """The entity (or cluster) factor: 1 + boost for a candidate linked to what the query names."""
    return 1.0 + boost if linked else 1.0


def salience(value: float, weight: float) -> float:
    """The salience factor: 1 at the default salience 0.5, 1 ± weight at 1 and 0."""
    return 1.0 + weight * (2.0 * value - 1.0)


def boost(entry_type: str, tags: Iterable[str], *, types: Sequence[str], tag: str | None) -> float:
    """Stage 4: x1.3 for a caller's type, x1.2 for the caller's tag; soft, never a filter."""
    factor = 1.0
    if types and entry_type in types:
        factor *= TYPE_BOOST
    if tag is not None and tag in tags:
        factor *= TAG_BOOST
    return factor


def intent_types(cues: Iterable[str], caller_types: Sequence[str]) -> frozenset[str]:
    """Stage 5: the types the question's cues suggest; caller-supplied types win (then none)."""
    if caller_types:
        return frozenset()
    return frozenset(t for cue in cues for t in INTENT_CUES.get(cue, ()))


def intent(entry_type: str, suggested: frozenset[str]) -> float:
    """Stage 5: a soft boost for an entry of a suggested type."""
    return INTENT_BOOST if entry_type in suggested else 1.0


def decay(valid_from: int, reference: int, *, half_life_days: float = 90.0, floor: float = 0.5) -> float:
    """Stage 6, piecewise by age at `reference`: <=30 d 1.0, <=half-life 0.9, <=2x 0.75, <=4x 0.6, older `floor`.

    Entries from after the reference (clock skew, future-dated facts) count as new.
    """
    age_days = (reference - valid_from) / _DAY_US
    if age_days <= 30:
        return 1.0
    if age_days <= half_life_days:
        return 0.9
    if age_days <= 2 * half_life_days:
        return 0.75
    if age_days <= 4 * half_life_days:
        return 0.6
    return floor


def voice(self_refs: int, other_refs: int, asked: Voice, *, strength: float = VOICE_STRENGTH) -> float:
    """Perspective: a question about the asker ("what did I buy") favours text in the first person.

    `self_refs`/`other_refs` count first-person ("I", "my") and second-person
    ("you") words in the entry. A question about what the other party said
    ("what did you recommend") flips the preference; a question in neither
    person, or an entry in neither, is neutral.
    """
    if asked is None:
        return 1.0
    share = (self_refs + 1) / (self_refs + other_refs + 2)
    if asked == "other":
        share = 1.0 - share
    return 1.0 + strength * (share - 0.5)


#: `recall_entries.numerals`: the content holds a digit / no digit but a number word ("two", "five").
DIGIT, NUMBER_WORD = 1, 2


def quantity(numerals: int, *, strength: float = QUANTITY_BOOST, words: bool = True) -> float:
    """A question asking for an amount ("how many", "how long", "total") favours text holding a numeral.

    `numerals` is DIGIT when the entry's content holds a digit, NUMBER_WORD
    when it holds no digit but a cardinal word ("two weeks"), else 0;
    `words=False` counts digits only. Restatements of a fact often name it without its
    figure ("the necklace my grandma gave me" vs "on my 18th birthday"); the
    one with the figure answers, and people write small counts in words.
    """
    held = numerals == DIGIT or (words and numerals == NUMBER_WORD)
    return 1.0 + strength if held else 1.0


def speaker(name: str | None, words: frozenset[str], *, strength: float = SPEAKER_BOOST) -> float:
    """x(1 + strength) for an entry whose speaker the query names, by any word of the name.

    "When did Caroline go to the support group?" favours Caroline's own turns
    over Melanie's turns that mention her. The roles "user" and "assistant"
    are left to voice.
    """
    if not name or not words:
        return 1.0
    return 1.0 + strength if _name_words(name) & words else 1.0


def dated(valid_from: int, when: Sequence[Span], *, strength: float = DATE_BOOST, told: Sequence[Days] = ()) -> float:
    """x(1 + strength) for an entry whose valid time starts inside a span the query names, or whose words place
    an event inside one (`told`: day ranges from dates.referenced), else 1."""
    hit = any(span.holds(valid_from) or any(span.meets(days) for days in told) for span in when)
    return 1.0 + strength if hit else 1.0


def when(says: bool, *, strength: float = WHEN_BOOST) -> float:
    """x(1 + strength) for an entry that says when something happened, asked by a "when" question; else 1.

    "When did Caroline go to the support group?" is answered by "I went to a
    support group yesterday", not by the turns that only talk about the group.
    """
    return 1.0 + strength if says else 1.0


@functools.lru_cache(maxsize=4096)
def _name_words(name: str) -> frozenset[str]:
    """The words of a speaker's name that can name them in a query (a tenant has few speakers)."""
    # Roles, not names: voice reads them, and on LongMemEval dev a role match on top of voice cost 5 points R@1.
    return frozenset(w for w in _WORD.findall(name.lower()) if w not in PARTIES)


def size(nbytes: int, *, exponent: float = SIZE_EXPONENT) -> float:
    """A length prior on top of BM25's own: shorter texts that match are denser matches."""
    if not exponent or nbytes <= 0:
        return 1.0
    return min(SIZE_MAX, max(SIZE_MIN, (SIZE_PIVOT / nbytes) ** exponent))


class _Placed(Protocol):
    conversation_id: int | None
    valid_from: int
    score: float


P = TypeVar("P", bound=_Placed)


def by_conversation(c: _Placed) -> int | None:
    """A turn's stream is its conversation (a turn in none is a whole of its own)."""
    return c.conversation_id


def by_writing(c: _Placed) -> int:
    """A note's stream: notes written together, in their conversation or in none (-1)."""
    return -1 if c.conversation_id is None else c.conversation_id


def episodes(
    candidates: Sequence[P], *, weight: float = EPISODE_WEIGHT, gap_us: int = EPISODE_GAP_US, members: int = EPISODE_MEMBERS,
    stream: Callable[[P], int | None] = by_conversation,
) -> list[float]:
    """Episode evidence: a factor per candidate, shared by every candidate of one episode.

    An episode is a run of a pass's candidates of one conversation whose
    valid times are at most `gap_us` apart (a turn is valid from when it was
    said, unless the writer says otherwise). Its mass is the sum of its best
    `members` scores; each member is multiplied by
    `(mass / best mass) ** weight`. A turn's own words are thin evidence:
    an exchange that keeps returning to the query's words is more likely the
    one asked about than a turn that mentions them in passing, so the weaker
    turns of that exchange rise over lone mentions elsewhere. Every member
    gets the same factor, so the order inside an episode is left alone (a
    share of the best neighbour's score added to each turn lifted the
    neighbours of the best turn past it). Episodes run within one `stream`
    (`by_conversation`: an entry outside any conversation is a whole of its
    own, factor 1; `by_writing` for notes: a conversation's, or those in none).
    """
    out = [1.0] * len(candidates)
    if not weight or not candidates:
        return out
    keys = [stream(c) for c in candidates]
    order = sorted((i for i, k in enumerate(keys) if k is not None), key=lambda i: (keys[i], candidates[i].valid_from))
    groups: list[list[int]] = []
    for i in order:
        if groups:
            last, me = groups[-1][-1], candidates[i]
            if keys[last] == keys[i] and me.valid_from - candidates[last].valid_from <= gap_us:
                groups[-1].append(i)
                continue
        groups.append([i])
    mass = [sum(sorted((max(candidates[i].score, 0.0) for i in g), reverse=True)[:members]) for g in groups]
    best = max(mass, default=0.0)
    if best <= 0:
        return out
    for g, m in zip(groups, mass):
        f = (m / best) ** weight
        for i in g:
            out[i] = f
    return out


def rrf(rank: int, weight: float, *, k: int = RRF_K) -> float:
    """Stage 7: one ranked list's weighted reciprocal-rank contribution (rank counts from 1)."""
    return weight / (k + rank)
