"""Stages 1, 2 and the query's cues: what a recall query says, as FTS5 terms.

User text reaches FTS5 only through `quote`: every term is one double-quoted
FTS5 string (a prefix term, `depl*`, that string followed by FTS5's `*`), so
no input can produce FTS5 syntax. Terms are cut with the
index's own tokenizer (apsw exposes it), so the analyser and the index agree
on what a token is and which surface forms share a stem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Literal

import apsw

from arbiter.recall.dates import Span, spans
from arbiter.store.tokens import TOKENIZER, tokenizing

#: Longer queries keep their first terms: past this, more OR branches cost
#: time and add almost nothing to BM25.
MAX_TERMS = 32
#: NEAR window (tokens) and the term counts for which the phrase and NEAR
#: branches are built (issue 3, stage 2).
NEAR_WINDOW = 8
NEAR_MIN, NEAR_MAX = 2, 6

Tokenize = Callable[[str], list[tuple[str, str]]]
Voice = Literal["self", "other"] | None

# A general English list (function words, auxiliaries, contraction pieces the
# tokenizer splits off) plus the words that frame a question to a memory
# rather than name its subject ("remind me what you mentioned about...").
ENGLISH = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m o re ve y don doesn didn isn aren wasn weren hasn haven hadn won wouldn shouldn couldn
    ain mightn mustn needn shan
    """.split()
)
#: Words that frame a question to a memory rather than name its subject
#: (`disable=["framing"]` keeps them as terms).
FRAMING = frozenset(
    """
    many much ago currently previous previously conversation remind mentioned mention told tell say said
    recall remember wondering wonder know
    """.split()
)
STOPWORDS = ENGLISH | FRAMING

# Stage 5 cue words -> the entry types they suggest (issue 3's routing table).
INTENT_CUES: dict[str, tuple[str, ...]] = {
    "preference": ("user", "feedback"),
    "fact": ("reference",),
    "howto": ("learning",),
    "time": ("project",),
}
_PREFERENCE = frozenset(
    "prefer prefers preferred preference favorite favourite favorites like likes love loves hate hates dislike "
    "dislikes enjoy enjoys rather want wants wish style".split()
)
_FACT = frozenset("what where who whom which".split())
_HOWTO = frozenset("why explain explains explained".split())
_TIME = frozenset("when before after first recent recently ago latest last earlier since until".split())

_QUANTITY_PAIRS = frozenset(
    ("how", w) for w in "many much long old often far big tall large fast heavy".split()
) | {("number", "of")}
#: Besides "when": the wordings that ask for a time ("what year", "how long ago").
_WHEN_PAIRS = frozenset(("what", w) for w in "year month day date time week".split()) | {("long", "ago")}
_QUANTITY = frozenset("percentage percent total average amount count".split())
_FIRST_PERSON = frozenset("i me my mine myself".split())
_SECOND_PERSON = frozenset("you your yours yourself".split())
# "you said", "did you recommend": the question asks what the other party
# said, so the answer is in the other party's words, not the asker's. A
# request ("can you recommend") is not a report and does not count.
_REPORTED = frozenset(
    "said told mentioned recommended suggested gave provided listed shared explained wrote described called "
    "named noted advised".split()
)
_REPORTING = frozenset(
    "say tell mention recommend suggest give provide list share explain write describe call name note advise".split()
)
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|(?<!\w)\'([^\']+)\'(?!\w)')
#: A capitalised word: a name, where it is not a stopword ("What", "I").
_NAME = re.compile(r"(?<![\w'’])[A-Z][\w]*")
# `depl*`: a word with a trailing star searches every word it begins.
_PREFIX = re.compile(r"(\w+)\*(?![\w*])")


def quote(text: str, *, prefix: bool = False) -> str:
    """The only way user text reaches FTS5: one double-quoted string, inner quotes doubled.

    NUL ends a C string inside SQLite's parser, so it becomes a space.
    `prefix` appends FTS5's prefix operator: `"depl"*` matches deploy, deployment...
    """
    return '"' + text.replace("\x00", " ").replace('"', '""') + '"' + ("*" if prefix else "")


@dataclass(frozen=True, slots=True)
class Term:
    """One query term: `text` goes to FTS5 (quoted), `stem` is its index form.

    A prefix term's stem ends in `*` (`depl*`): it stands for every indexed
    stem that begins so.
    """

    text: str
    stem: str
    phrase: bool = False
    number: bool = False
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Query:
    """An analysed query: its terms (stopwords out, one per stem) and its cues."""

    text: str
    terms: tuple[Term, ...]
    voice: Voice = None
    cues: frozenset[str] = field(default_factory=frozenset)
    #: Every word of the query, lowercased, stopwords too (speaker names are matched against them).
    words: frozenset[str] = field(default_factory=frozenset)
    #: The calendar days, months and years the query names (`dates.spans`).
    when: tuple[Span, ...] = ()
    #: Stems of the names the query holds (capitalised words that are not stopwords): whom it is about.
    names: frozenset[str] = field(default_factory=frozenset)

    @property
    def empty(self) -> bool:
        return not self.terms


def tokenizer(conn: apsw.Connection) -> Tokenize:
    """The index's tokenizer as `text -> [(surface lowercased, stem)]`."""
    name, args = TOKENIZER
    fts5 = tokenizing(conn).fts5_tokenizer(name, list(args))

    def tokenize(text: str) -> list[tuple[str, str]]:
        data = text.encode("utf-8", "surrogatepass")
        out = []
        for start, end, *stems in fts5(data, apsw.FTS5_TOKENIZE_QUERY, None):
            surface = data[start:end].decode("utf-8", "replace").lower()
            out.append((surface, stems[0]))
        return out

    return tokenize


def analyze(text: str, tokenize: Tokenize, *, stopwords: frozenset[str] = STOPWORDS, parties: bool = True) -> Query:
    """Stage 1: tokens, stopwords out, numbers and quoted phrases kept, cues noted.

    A query made only of stopwords keeps them: "who am I" still searches.
    With `parties`, "the user" and "the assistant" that name a party are
    not terms (`_named_parties`).
    """
    text = text.replace("\x00", " ")
    tokens = tokenize(text)
    terms: list[Term] = []
    seen: set[str] = set()

    def add(term: Term) -> None:
        if term.stem not in seen and len(terms) < MAX_TERMS:
            seen.add(term.stem)
            terms.append(term)

    for m in _QUOTED.finditer(text):
        inner = tokenize(next(g for g in m.groups() if g is not None))
        if len(inner) > 1:
            add(Term(" ".join(s for s, _ in inner), " ".join(st for _, st in inner), phrase=True))
        elif inner:
            add(_term(*inner[0]))
    prefixes = {s for m in _PREFIX.finditer(text) for s, _ in tokenize(m.group(1))[-1:]}
    kept = [(i, s, st) for i, (s, st) in enumerate(tokens) if s not in stopwords or s in prefixes]
    named = _named_parties([s for s, _ in tokens]) if parties else set()
    # A query that is only a party ("the user") searches for it.
    content = [(s, st) for i, s, st in kept if i not in named or s in prefixes] or [(s, st) for _, s, st in kept] or tokens
    for surface, stem in content:
        if surface in prefixes:
            add(Term(surface, stem + "*", prefix=True))
        else:
            add(_term(surface, stem))
    words = frozenset(s for s, _ in tokens)
    names = frozenset(st for m in _NAME.finditer(text) for s, st in tokenize(m.group()) if s not in stopwords
                      and s not in PARTIES)
    return Query(
        text=text, terms=tuple(terms), voice=_voice(tokens), cues=_cues(tokens), words=words, when=spans(text),
        names=names,
    )


def first_name(text: str, tokenize: Tokenize, *, stopwords: frozenset[str] = STOPWORDS) -> str | None:
    """The stem of the first name `text` holds (a capitalised word that is not a stopword, as `analyze` reads a
    query's names), or None: whom a note names first is whom it is about ("Melanie finds LGBTQ events like the
    conference Caroline attended..." is about Melanie)."""
    for m in _NAME.finditer(text):
        for surface, stem in tokenize(m.group())[:1]:
            if surface not in stopwords and surface not in PARTIES:
                return stem
    return None


def _term(surface: str, stem: str) -> Term:
    return Term(surface, stem, number=surface.isdigit())


def _voice(tokens: list[tuple[str, str]]) -> Voice:
    """Whose words hold the answer: the asker's own ("self") or the other party's ("other").

    An agent asks about "the user" and "the assistant" where the user asks
    about "I" and "you": the two phrasings name the same parties.
    """
    surfaces = _parties([s for s, _ in tokens])
    for i, s in enumerate(surfaces):
        if s not in _SECOND_PERSON:
            continue
        after = surfaces[i + 1 : i + 3]
        asked = i > 0 and surfaces[i - 1] == "did"
        if any(w in _REPORTED for w in after) or (asked and any(w in _REPORTING for w in after)):
            return "other"
    if any(s in _FIRST_PERSON for s in surfaces):
        return "self"
    return None


def _parties(surfaces: list[str]) -> list[str]:
    """ "the user" as "i" and "the assistant" as "you", so both phrasings give the same cue."""
    out: list[str] = []
    for s in surfaces:
        if out and out[-1] == "the" and s in PARTIES:
            out[-1] = PARTIES[s]
        else:
            out.append(s)
    return out


#: The conversation's parties as an agent names them, and the pronoun the asker would use: voice reads them, they
#: are not search terms where they name a person, and they are roles rather than a speaker's name.
PARTIES = {"user": "i", "assistant": "you"}
_AUXILIARIES = frozenset("did does do has have had is was are were can could would will should".split())


def _named_parties(surfaces: list[str]) -> set[int]:
    """The positions of "user" and "assistant" where "the user" / "the assistant" names a party of the conversation.

    An agent asks "What did the user buy for the user's sister?" where the
    user asks "What did I buy for my sister?": the words name who, which
    voice reads, not what; as terms they match "user_id" in a pasted query
    and "As an AI assistant". A party is a person: possessed ("the user's"),
    asked about ("did the user meet"), or followed by a function word ("the
    user has", "for the user to"). "the user table" is a subject and stays,
    unless an auxiliary comes before it: "is the user table indexed?" reads
    as a party asked about (the cost docs/retrieval.md names). A starred
    word ("the user* table") is always a term: its asker chose it.
    """
    out = set()
    for i in range(1, len(surfaces)):
        if surfaces[i] not in PARTIES or surfaces[i - 1] != "the":
            continue
        after = surfaces[i + 1] if i + 1 < len(surfaces) else None
        if after is None or after in ENGLISH or (i >= 2 and surfaces[i - 2] in _AUXILIARIES):
            out.add(i)
    return out


def _cues(tokens: list[tuple[str, str]]) -> frozenset[str]:
    """Stage 5 cues: which intents the question's wording suggests."""
    surfaces = [s for s, _ in tokens]
    words = set(surfaces)
    cues = set()
    if words & _PREFERENCE:
        cues.add("preference")
    pairs = set(zip(surfaces, surfaces[1:]))
    if words & _FACT or ("how", "many") in pairs or ("how", "much") in pairs:
        cues.add("fact")
    if words & _HOWTO or ("how", "to") in pairs or ("how", "do") in pairs or ("how", "can") in pairs:
        cues.add("howto")
    if any(p in pairs for p in _QUANTITY_PAIRS) or words & _QUANTITY:
        cues.add("quantity")
    if words & _TIME:
        cues.add("time")
    # "When did ...?" asks for a time; "what happens when the deploy fails" does not: only a leading "when".
    if surfaces[:1] == ["when"] or any(p in pairs for p in _WHEN_PAIRS):
        cues.add("when")
    return frozenset(cues)


@dataclass(frozen=True, slots=True)
class Expression:
    """An FTS5 expression and, per FTS5 phrase in it (in order), its branch and the stems it covers.

    Branches: "phrase" (the words in order), "near" (one word inside the
    NEAR group), "bag" (one term on its own). The ranking gives each phrase
    the idf of its stems.
    """

    text: str
    slots: tuple[tuple[str, tuple[str, ...]], ...]


def expression(terms: tuple[Term, ...] | list[Term], *, phrase: bool = True, near: bool = True) -> Expression:
    """Stage 2: the FTS5 expression for `terms` (callers check there is at least one).

    For 2-6 single-word terms: `"t1 t2 ..." OR NEAR("t1" "t2" ..., 8) OR ("t1" OR "t2" ...)`,
    so an entry holding the words together scores them again; a bag of words
    otherwise. Quoted phrases join the bag as phrases.
    """
    words = [t for t in terms if not t.phrase and not t.prefix]
    parts: list[str] = []
    slots: list[tuple[str, tuple[str, ...]]] = []
    if NEAR_MIN <= len(words) <= NEAR_MAX:
        if phrase:
            parts.append(quote(" ".join(t.text for t in words)))
            slots.append(("phrase", tuple(t.stem for t in words)))
        if near:
            parts.append(f"NEAR({' '.join(quote(t.text) for t in words)}, {NEAR_WINDOW})")
            slots.extend(("near", (t.stem,)) for t in words)
    bag = " OR ".join(quote(t.text, prefix=t.prefix) for t in terms)
    slots.extend(("bag", tuple(t.stem.split(" "))) for t in terms)
    text = " OR ".join([*parts, f"({bag})"]) if parts else bag
    return Expression(text, tuple(slots))
