"""Name forms for lexical resolution: the case-folded key, the normalised form and its trigrams.

`key` is what "the same name, ignoring case" means; `norm` also drops
diacritics, punctuation (but not the `+`/`#` of C++ and C#), plural endings
and company suffixes, so "Acme, Inc." and "acme" meet; `trigrams` are
pg_trgm's padded character trigrams of `norm`, whose Jaccard similarity
catches typos and near-spellings ("Postgress", "Kubernets").
"""

from __future__ import annotations

import re
import unicodedata

#: Trailing words dropped by `norm`: legal forms, so "Acme Ltd" is "Acme".
COMPANY_SUFFIXES = frozenset(
    "inc incorporated ltd limited llc llp plc corp corporation co company gmbh ag sa sas bv nv oy ab pty srl spa".split()
)
_PUNCT = re.compile(r"[^\w\s+#]+")
_SPACE = re.compile(r"\s+")
_ACRONYM_PLURAL = re.compile(r"\b([A-Z]{2,})s\b")


def key(name: str) -> str:
    """The case-insensitive form: case-folded, inner whitespace collapsed."""
    return _SPACE.sub(" ", name.strip()).casefold()


def _singular(word: str) -> str:
    # English plural endings only, and only on words long enough to carry one:
    # "APIs" -> "api", "libraries" -> "library", but "AWS", "class" and "bus" stay.
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def norm(name: str) -> str:
    """The normalised form: case-fold, strip diacritics, punctuation, plurals and company suffixes."""
    # An acronym's plural ("APIs", "URLs") is seen before case-folding hides it.
    name = _ACRONYM_PLURAL.sub(r"\1", name)
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    words = _PUNCT.sub(" ", text).replace("_", " ").split()
    while len(words) > 1 and words[-1] in COMPANY_SUFFIXES:
        words.pop()
    if words and words[0] == "the" and len(words) > 1:
        words.pop(0)
    return " ".join(_singular(w) for w in words) or key(name)


def trigrams(form: str) -> frozenset[str]:
    """pg_trgm's trigrams: each word padded with two spaces before and one after."""
    grams: set[str] = set()
    for word in form.split():
        padded = f"  {word} "
        grams.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return frozenset(grams)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two trigram sets (pg_trgm's `similarity`)."""
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def similarity_to(grams: frozenset[str], form: str, count: int) -> float:
    """`similarity(grams, trigrams(form))` when `form` has `count` trigrams, without building that set.

    Every trigram of a padded word is a substring of the padded words laid end
    to end, and the only other substrings there end in two spaces, which no
    trigram does: so `g in padded` is `g in trigrams(form)`. Resolution scores
    20 candidate names a new name; building their sets was most of its time.
    """
    if not grams or not count:
        return 0.0
    padded = "".join(f"  {word} " for word in form.split())
    shared = sum(g in padded for g in grams)
    return shared / (len(grams) + count - shared)
