"""Questions as an agent asks its memory: `--phrasing third-person`, `keywords`.

A benchmark question is written by the user to the assistant ("What did I
buy?", "What did you recommend?"). An agent calling `recall` speaks about
both: "What did the user buy?", "What did the assistant recommend?". The
rewrite is mechanical (pronouns and the verb forms that agree with them), so
it changes who is named and nothing else; a retrieval signal that only
reads "I" and "you" loses its cue, as it would with a real agent.

An agent told to send key words sends the question's content words only
(`keywords`: recall's own stopwords out, so "I", "how many" and the "the"
of "the user" go); phrasings compose with "+" ("third-person+keywords").
"""

from __future__ import annotations

import re

from arbiter.recall.query import STOPWORDS

USER, ASSISTANT = "the user", "the assistant"

# Contractions and subject-verb pairs first, so "I am" becomes "the user is"
# rather than "the user am". Matching is case-insensitive; the replacement
# keeps a capital at the start of the question.
_AUX = r"(did|does|will|would|can|could|should|might|must|shall|may)"
_PAIRS: list[tuple[str, str]] = [
    (r"\bdo I\b", f"does {USER}"),
    (r"\bdo you\b", f"does {ASSISTANT}"),
    (rf"\b{_AUX} I\b", rf"\1 {USER}"),
    (rf"\b{_AUX} you\b", rf"\1 {ASSISTANT}"),
    (r"\bI'm\b", f"{USER} is"),
    (r"\bI've\b", f"{USER} has"),
    (r"\bI'd\b", f"{USER} would"),
    (r"\bI'll\b", f"{USER} will"),
    (r"\bI am\b", f"{USER} is"),
    (r"\bI have\b", f"{USER} has"),
    (r"\bI was\b", f"{USER} was"),
    (r"\bam I\b", f"is {USER}"),
    (r"\bhave I\b", f"has {USER}"),
    (r"\bwas I\b", f"was {USER}"),
    (r"\byou're\b", f"{ASSISTANT} is"),
    (r"\byou've\b", f"{ASSISTANT} has"),
    (r"\byou'd\b", f"{ASSISTANT} would"),
    (r"\byou'll\b", f"{ASSISTANT} will"),
    (r"\byou are\b", f"{ASSISTANT} is"),
    (r"\byou have\b", f"{ASSISTANT} has"),
    (r"\byou were\b", f"{ASSISTANT} was"),
    (r"\bare you\b", f"is {ASSISTANT}"),
    (r"\bhave you\b", f"has {ASSISTANT}"),
    (r"\bwere you\b", f"was {ASSISTANT}"),
    (r"\bwe\b", f"{USER} and {ASSISTANT}"),
    (r"\bmyself\b", USER),
    (r"\bmine\b", f"{USER}'s"),
    (r"\bmy\b", f"{USER}'s"),
    (r"\bme\b", USER),
    (r"\bI\b", USER),
    (r"\bour\b", f"{USER}'s"),
    (r"\bus\b", f"{USER} and {ASSISTANT}"),
    (r"\byourself\b", ASSISTANT),
    (r"\byours\b", f"{ASSISTANT}'s"),
    (r"\byour\b", f"{ASSISTANT}'s"),
    (r"\byou\b", ASSISTANT),
]
# "I" is matched case-sensitively (the pronoun is always capital); the rest not.
_RULES = [(re.compile(p, 0 if "I\\b" in p or "I'" in p else re.IGNORECASE), r) for p, r in _PAIRS]
_SENTENCE = re.compile(r"(^|[.?!]\s+)(the |does )")
PHRASINGS = ("as-written", "third-person", "keywords")
_WORD = re.compile(r"[\w']+")


def third_person(question: str) -> str:
    """`question` with the asker as "the user" and the one asked as "the assistant"."""
    out = question
    for pattern, replacement in _RULES:
        out = pattern.sub(replacement, out)
    # A sentence that opened with "I" or "Do you" opens with "the user" now.
    return _SENTENCE.sub(lambda m: m[1] + m[2].capitalize(), out)


def keywords(question: str) -> str:
    """`question`'s content words, in order: what an agent sends when told to send key words."""
    return " ".join(w for w in _WORD.findall(question) if w.lower() not in STOPWORDS)


def phrase(question: str, phrasing: str) -> str:
    """The question as the phrasing (or "+"-joined phrasings, applied in order) asks it."""
    for name in phrasing.split("+"):
        if name == "third-person":
            question = third_person(question)
        elif name == "keywords":
            question = keywords(question)
        elif name != "as-written":
            raise ValueError(f"unknown phrasing {name!r}; choose from {', '.join(PHRASINGS)}")
    return question
