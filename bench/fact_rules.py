"""A rule-based fact extractor for the benchmark only: what people say about themselves, as triples.

The product's extractor is the LLM advisor (`arbiter fact extract`), which
needs the Anthropic API; this one lets `bench.facts_recall` measure facts in
recall without it. It is a floor, not an estimate of the advisor: a fixed
list of first- and third-person statement shapes ("I work at X", "my dog's
name is X", "Emma moved to Y", "I have 3 bikes", "my favorite X is Y"), each
with the reason it states a lasting fact. The patterns were written from the
kinds of statements people make about themselves, never from the
development sets' questions or answers; what they miss (anything said in
other words, facts implied rather than stated, the assistant's words) an
LLM would often get.

`extract(text, speaker)` returns `Triple`s; the first person is the speaker
("user" for LongMemEval's user turns, the speaker's name in LoCoMo), "my
sister" is `<speaker>'s sister`, and a capitalised name before the verb is
that person. Assistant turns state nothing about the user's world and yield
nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Speakers whose first person is not a person in the user's world.
NOT_A_PERSON = frozenset({"assistant", "system"})

#: People and animals someone calls "my ...": a statement about them is a fact about that relation.
RELATIONS = (
    "best friend|friend|sister|brother|mom|mother|dad|father|parents|wife|husband|partner|spouse|fiancée|fiancee|"
    "fiancé|fiance|boyfriend|girlfriend|son|daughter|kids|children|boss|manager|cousin|aunt|uncle|grandma|"
    "grandmother|grandpa|grandfather|niece|nephew|roommate|neighbor|neighbour|coworker|colleague|"
    "dog|cat|puppy|kitten|pet|bird|parrot|rabbit|bunny|hamster|horse|fish"
)
#: Capitalised words that open sentences but name no one.
NOT_NAMES = frozenset("""
I We You He She They It This That These Those There Here What When Where Why How Who Which Yes No Yeah Thanks
Thank Also So But And Or Then Well Oh Hi Hey Wow Great Sure Okay Ok Just Now Today Yesterday Tomorrow Recently
Actually Honestly Anyway Finally Lately Maybe Perhaps Sometimes Since After Before Because If As Our Your My His
Her Their Its Everyone Someone Nobody Everybody Mine Let Please Good Nice Awesome Cool Hello Dear Sorry
""".split())

_PERSON = (
    r"(?:(?P<me>\b(?:[Ii]|[Ww]e)\b)|\b[Mm]y (?P<rel>" + RELATIONS + r")\b|(?P<name>\b[A-Z][a-z]+\b))"
)
_MY = r"\b[Mm]y"
#: Where an object ends: punctuation, or a word that starts another clause or an adjunct.
_END = (
    r"(?=\s+(?:and|but|because|since|so|which|who|whom|that|where|when|while|with|as|for|from|now|right now|"
    r"these days|at the moment|anymore|too|though|although|if|until|after|before|to|in|on|at|last|next|this|every|"
    r"about|by|or|than|is|was|are|were|i|I|yesterday|today|tonight|tomorrow|recently|ago|earlier|lately|soon)\b|\s*[.,;:!?()\[\]\"]|\s*$)"
)
_OBJ = r"(?P<o>[^.,;:!?()\[\]\"\n]{2,60}?)" + _END
_NUM = (
    r"(?P<n>\d{1,4}|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
#: Adverbs between a subject and its verb ("I am currently living in"): dropped before matching.
_ADVERBS = re.compile(r"\b(?:currently|now|still|just|recently|finally|also|actually|really|already|"
                      r"officially|absolutely|definitely|mostly|usually)\s+(?=[a-z])")


@dataclass(frozen=True)
class Pattern:
    """One statement shape: the predicate it states, why that is a lasting fact, how sure a match is."""

    predicate: str
    regex: re.Pattern[str]
    reason: str
    confidence: float = 0.8
    #: One object at a time per subject (a predicate the bench declares functional unless it is built in).
    functional: bool = False
    #: The object must begin with a capital (a proper name: a place, a language).
    proper: bool = False


def _p(predicate: str, regex: str, reason: str, **kw) -> Pattern:
    return Pattern(predicate, re.compile(regex), reason, **kw)


PATTERNS: tuple[Pattern, ...] = (
    _p("works_at", _PERSON + r" (?:works?|am working|is working|are working|started working|"
       r"got a (?:new )?job|started a (?:new )?job|took a (?:new )?job|have a (?:new )?job)"
       r"(?: as (?:a|an) [a-z ]+?)? (?:at|for|with) " + _OBJ,
       "where someone works now (not 'worked': the past says nothing about now)", functional=True),
    _p("has_job_title", _PERSON + r" (?:works?|am working|is working) as (?:a|an) " + _OBJ,
       "what someone does for a living", functional=True),
    _p("has_job_title", _MY + r" (?:job title|job|position|role) is (?:now )?(?:a |an )?" + _OBJ,
       "a job stated as such", functional=True),
    _p("lives_in", _PERSON + r" (?:live|lives|am living|is living|are living|"
       r"moved|have moved|has moved|relocated|have relocated) (?:in|to|back to) " + _OBJ,
       "where someone lives; a move is the new place", functional=True, proper=True),
    _p("born_in", _PERSON + r" (?:was|were) born (?:and raised )?in " + _OBJ,
       "a birthplace (or year) never changes", proper=True),
    _p("has_name", r"\b[Mm]y (?P<rel>" + RELATIONS + r")(?:'s name| is named| is called) (?:is )?" + _OBJ,
       "a relation's or pet's name", functional=True, proper=True),
    _p("has_name", r"\b(?:[Ii] have|[Ii] have got|[Ii] got|[Ii] adopted|[Ww]e have|[Ww]e got|[Ww]e adopted) "
       r"(?:a|an|another) (?:[a-z]+ ){0,2}?(?P<rel>[a-z]+) (?:named|called) " + _OBJ,
       "a pet, relation or thing introduced by name ('a golden retriever named Biscuit')", functional=True,
       proper=True),
    _p("has_name", r"\b[Mm]y (?P<rel>" + RELATIONS + r"),? (?P<o>[A-Z][a-z]+)\b(?! [A-Z])",
       "'my sister Emma': the relation's name", functional=True, confidence=0.7),
    _p("has_name", r"\b[Mm]y name is " + _OBJ, "someone's own name", functional=True, proper=True),
    _p("has_pet", r"\b(?:[Ii] have|[Ii] have got|[Ii] adopted|[Ii] just adopted|[Ii] got|[Ww]e have|[Ww]e adopted|"
       r"[Ww]e got) (?:a|an|another) (?:new )?(?:[a-z]+ )?(?P<o>dog|cat|puppy|kitten|parrot|bird|rabbit|bunny|"
       r"hamster|horse|fish|turtle|snake|lizard|guinea pig)\b",
       "a pet someone has"),
    _p("has_age", _PERSON + r" (?:am|is|are) (?P<o>\d{1,3}) years? old\b", "someone's age", functional=True),
    _p("has_age", _PERSON + r" (?:just )?turned (?P<o>\d{1,3})\b(?! ?(?:%|percent|minutes|hours|days|dollars))",
       "an age reached", functional=True),
    _p("count", _PERSON + r" (?:have|has|own|owns|have got|now have|currently have) "
       + _NUM + r" (?P<o>(?:[a-z]+ ){0,2}?[a-z]+s)\b",
       "how many of something someone has: the number changes, so one count at a time", functional=True),
    _p("favorite", _MY + r" (?:new |current |all-time |absolute )?(?:favou?rite) (?P<topic>[a-z]+(?: [a-z]+)?) "
       r"(?:is|are|has become|is now|has always been|would be|would have to be) " + _OBJ,
       "a favourite: one at a time, and it changes", functional=True),
    _p("prefers", _PERSON + r" (?:prefer|prefers|would prefer|would rather have) " + _OBJ,
       "a stated preference", confidence=0.7),
    _p("enjoys", _PERSON + r" (?:love|loves|enjoy|enjoys|like|likes|adore|adores|am into|"
       r"am passionate about|am obsessed with) "
       r"(?!to |that |this |it\b|the idea|how |what |your |you\b|when |having |being |getting )" + _OBJ,
       "what someone enjoys (multi-valued)", confidence=0.6),
    _p("enjoys", _PERSON + r" (?:am|is|are) (?:a )?(?:big |huge |great |longtime )?fans? of " + _OBJ,
       "being a fan of something", confidence=0.7),
    _p("dislikes", _PERSON + r" (?:hate|hates|dislike|dislikes|can't stand|don't like|doesn't like|do not like) "
       r"(?!to |that |this |it\b|how |what |when |when )" + _OBJ, "what someone dislikes", confidence=0.6),
    _p("plays", _PERSON + r" (?:play|plays|am playing|have been playing|"
       r"started playing) (?:the )?" + _OBJ, "an instrument or sport someone plays", confidence=0.7),
    _p("is_learning", _PERSON + r" (?:am|is|are|have been|started) (?:learning|taking "
       r"(?:a |an )?(?:class|classes|course|lessons) (?:in|on)) (?:how to |to )?" + _OBJ,
       "a skill someone is learning", confidence=0.7),
    _p("studies", _PERSON + r" (?:am|is|are) (?:studying|majoring in|doing a degree in|"
       r"doing a masters in|doing a phd in|pursuing a degree in) " + _OBJ, "a subject someone studies",
       functional=True),
    _p("studies", _MY + r" major is " + _OBJ, "a major", functional=True),
    _p("studied_at", _PERSON + r" (?:graduated from|studied at|am studying at|go to school at|"
       r"attend|attended|am attending) " + _OBJ, "a school someone went to", proper=True),
    _p("speaks", _PERSON + r" (?:speak|speaks) (?:fluent )?" + _OBJ, "a language someone speaks",
       proper=True),
    _p("allergic_to", _PERSON + r" (?:am|is|are) (?:severely |very |mildly )?allergic to " + _OBJ,
       "an allergy"),
    _p("married_to", _PERSON + r" (?:am|is|are|got|just got) (?:married|engaged) to " + _OBJ,
       "a spouse or fiancé", functional=True, proper=True),
    _p("owns", _PERSON + r" (?:bought|purchased|got myself|treated myself to|invested in|ordered|"
       r"upgraded to|own|owns) (?:a|an|my|some|the|two|three|new|a new|myself a) (?:new )?" + _OBJ,
       "something someone bought or owns", confidence=0.6),
    _p("drives", _PERSON + r" (?:drive|drives|am driving) (?:a|an) " + _OBJ,
       "the car someone drives", functional=True, confidence=0.7),
    _p("visited", _PERSON + r" (?:visited|went to|traveled to|travelled to|flew to|spent (?:a|two|"
       r"three|\d+) (?:days?|weeks?|months?) in|got back from|came back from|returned from) " + _OBJ,
       "a place someone went (a proper name: not 'the store')", proper=True, confidence=0.7),
    _p("uses", _PERSON + r" (?:use|uses|am using|switched to|have been using) "
       + _OBJ, "a tool, app or product someone uses", confidence=0.6),
    _p("is_reading", _PERSON + r" (?:am|is) (?:reading|re-reading|rereading) " + _OBJ,
       "a book someone is reading", confidence=0.7),
    _p("has_read", _PERSON + r" (?:finished reading|finished|read) (?:the book |the novel )?"
       r"(?P<o>(?:\"|')?[A-Z][^.,;:!?()\[\]\n]{1,58}?)" + _END, "a book someone read", confidence=0.6),
    _p("has_watched", _PERSON + r" (?:watched|saw|am watching|binge-watched|binged) "
       r"(?:the (?:movie|film|show|series|documentary) )?(?P<o>(?:\"|')?[A-Z][^.,;:!?()\[\]\n]{1,58}?)" + _END,
       "a film or show someone watched", confidence=0.6),
    _p("plans_to", _PERSON + r" (?:am|is|are) (?:planning|hoping|aiming|saving up) (?:to |on |for )?" + _OBJ,
       "a plan or goal someone has ('trying to', 'thinking about' frame a request, not a plan)", confidence=0.6),
    _p("is_a", _PERSON + r" (?:am|is) (?:a|an) (?!bit|little|lot|big|huge|great|fan|few|couple|good|bad)"
       r"(?P<o>[a-z]+(?: [a-z]+)?)(?=[.,;:!?]|\s+(?:and|but|who|so|at|for|in|with|now|myself)\b|$)",
       "what someone is (a vegetarian, a teacher, a runner)", confidence=0.6),
)

_ARTICLE = re.compile(r"^(?:a|an|the|some)\s+", re.I)
#: Objects that name nothing: a light verb cut off by the next clause ("planning to go to..."), a pronoun.
_EMPTY = frozenset("""
a an the some it this that them these those something anything everything one around out up go do get make use
build start try find take have be see come keep put give work play
""".split())
_QUOTES = "\"'“”‘’"
_MAX_WORDS = 8


@dataclass(frozen=True)
class Triple:
    """One fact a statement makes: subject, predicate, object, how sure, and which pattern said so."""

    subject: str
    predicate: str
    object: str
    confidence: float
    functional: bool
    pattern: int


_CONTRACTIONS = ((re.compile(r"\b([Ii])'m\b"), r"\1 am"), (re.compile(r"(\w)'ve\b"), r"\1 have"),
                 (re.compile(r"(\w)'re\b"), r"\1 are"), (re.compile(r"(\w)'d\b"), r"\1 would"),
                 (re.compile(r"(\w)'ll\b"), r"\1 will"))


def sentences(text: str) -> list[str]:
    """Sentences of a turn, contractions written out ("I'm" -> "I am"): split on end punctuation and line breaks."""
    text = text.replace("’", "'").replace("‘", "'")
    for pattern, full in _CONTRACTIONS:
        text = pattern.sub(full, text)
    text = _ADVERBS.sub("", text)
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def extract(text: str, speaker: str) -> list[Triple]:
    """The triples `speaker`'s `text` states, in order, without repeats; [] for an assistant's turn."""
    who = speaker.strip()
    if not who or who.casefold() in NOT_A_PERSON:
        return []
    if text.startswith(who + ":"):  # LoCoMo writes "Speaker: text"
        text = text[len(who) + 1:]
    text = re.sub(r"\[photo:[^\]]*\]", " ", text)
    out: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for sentence in sentences(text):
        for i, pat in enumerate(PATTERNS):
            for m in pat.regex.finditer(sentence):
                t = _triple(m, pat, i, who)
                if t is not None and (t.subject.casefold(), t.predicate, t.object.casefold()) not in seen:
                    seen.add((t.subject.casefold(), t.predicate, t.object.casefold()))
                    out.append(t)
    return out


def _triple(m: re.Match[str], pat: Pattern, index: int, speaker: str) -> Triple | None:
    groups = m.groupdict()
    if groups.get("name"):
        if groups["name"] in NOT_NAMES:
            return None
        subject = groups["name"]
    elif groups.get("rel"):
        subject = f"{speaker}'s {groups['rel']}"
    else:
        subject = speaker
    obj = _ARTICLE.sub("", groups["o"].strip().strip(_QUOTES).strip())
    if not obj or obj.casefold() in _EMPTY or len(obj.split()) > _MAX_WORDS or (pat.proper and not obj[0].isupper() and not obj[0].isdigit()):
        return None
    predicate = pat.predicate
    if predicate == "count":
        subject, obj = f"{subject}'s {obj}", _number(groups["n"])
    elif predicate == "favorite":
        predicate = "favorite_" + groups["topic"].replace(" ", "_")
    elif predicate == "born_in" and obj.isdigit():
        predicate = "born_year"
    if subject.casefold() == obj.casefold():
        return None
    return Triple(subject, predicate, obj, pat.confidence, pat.functional, index)


_WORDS = {"two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
          "ten": "10", "eleven": "11", "twelve": "12"}


def _number(n: str) -> str:
    return _WORDS.get(n.lower(), n.lower())
