"""Query expansion from a lexical hierarchy: a category word also searches its members.

A question names a category ("How many siblings do I have?", "What
activities...", "recommend a show") where the statement that answers it
names a member ("my sister", "we went hiking", "a stand-up special"). A
lexicon maps a word's lemma to its near members and synonyms (WordNet's
hyponyms); each becomes a soft OR term of the query, its idf scaled down, so
an entry holding the question's own words still outranks one holding only a
member.

Measured on the three development sets and not kept (docs/retrieval.md,
"Query expansion from WordNet"): no lexicon ships and `Tuning.expand` is 0.
`bench/wordnet.py` builds one from the WordNet database for `bench.devsets`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from arbiter.recall.query import Term, Tokenize

#: WordNet's detachment rules for nouns (morphy(7WN)): an inflected form -> candidate lemmas.
_SUFFIXES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
             ("ies", "y"), ("s", ""))


@dataclass(frozen=True)
class Lexicon:
    """lemma -> related words, nearest first, each with its distance (0: a synonym, 1: a member, ...).

    Keyed by lemma, not by the index's stem: porter merges words a lexicon
    keeps apart ("activities" and "activation" share `activ`).
    """

    related: Mapping[str, Sequence[tuple[str, int]]]

    def lookup(self, word: str) -> Sequence[tuple[str, int]]:
        """`word`'s related words: the word itself as a lemma, else the first lemma morphy's rules find."""
        if word in self.related:
            return self.related[word]
        for suffix, ending in _SUFFIXES:
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                found = self.related.get(word[: -len(suffix)] + ending)
                if found is not None:
                    return found
        return ()


def names(text: str) -> frozenset[str]:
    """Words written capitalized other than first in a sentence: names, which a lexicon reads as common nouns
    ("John" -> "toilet")."""
    return frozenset(m.group(1).lower() for m in _NAME.finditer(text))


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w']*)")


_WH = frozenset("what which how number".split())
_QUANTIFIER = frozenset("many much".split())
_FILLER = frozenset("kind kinds type types sort sorts total number of is are was were the a an some any".split())


def asked(tokens: Sequence[tuple[str, str]], stopwords: frozenset[str]) -> frozenset[str]:
    """The words a question asks for: the content words right after "what", "which", "how many", "number of"
    ("What activities...", "Which outdoor spot...", "the total number of siblings"), past "kind of", "the"...
    """
    words = [s for s, _ in tokens]
    out: set[str] = set()
    for i, w in enumerate(words):
        if w not in _WH:
            continue
        j = i + 1
        if w == "how":
            if j >= len(words) or words[j] not in _QUANTIFIER:
                continue
            j += 1
        while j < len(words) and words[j] in _FILLER:
            j += 1
        while j < len(words) and words[j] not in stopwords:
            out.add(words[j])
            j += 1
    return frozenset(out)


def expand(
    terms: Sequence[Term], lexicon: Lexicon, tokenize: Tokenize, *, weight: float, decay: float = 1.0,
    skip: frozenset[str] = frozenset(), only: frozenset[str] | None = None,
) -> list[Term]:
    """The expansion terms for `terms`: each related word of each plain word term, once, not a query stem.

    A term's weight is `weight x decay^(distance - 1)` (synonyms count as distance 1).
    Words in `skip` (names) are not expanded.
    """
    have = {t.stem for t in terms}
    out: dict[str, Term] = {}
    for t in terms:
        if t.phrase or t.prefix or t.number or t.text in skip or (only is not None and t.text not in only):
            continue
        for word, distance in lexicon.lookup(t.text):
            tokens = tokenize(word)
            if len(tokens) != 1:
                continue
            surface, stem = tokens[0]
            if stem in have or stem in out:
                continue
            out[stem] = Term(surface, stem, weight=weight * decay ** max(distance - 1, 0), source=t.text)
    return list(out.values())


def select(
    extra: Sequence[Term], df: Mapping[str, int], n: int, *, max_share: float, cap: int, per_word: int,
    floor: int = 0,
) -> list[Term]:
    """The expansion terms worth searching: present in the index, not common, at most `per_word` a query word.

    A word no entry holds costs an FTS5 branch and matches nothing; a word in
    more than `max_share` of the documents (and more than `floor`) is a
    common word whose match says little, and would flood the pass.
    """
    kept: list[Term] = []
    per: dict[str | None, int] = {}
    for t in extra:
        d = df.get(t.stem, 0)
        if not d or (d > max_share * n and d > floor) or per.get(t.source, 0) >= per_word:
            continue
        per[t.source] = per.get(t.source, 0) + 1
        kept.append(t)
        if len(kept) >= cap:
            break
    return kept
