"""WordNet 3.0's noun hierarchy, read from its database files, as query expansions.

    python -m bench.wordnet siblings gardening movie      # what a word expands to

A question naming a category is answered by a statement naming a member of
it ("How many siblings do I have?" / "my sister"): each query word's nearest
hyponyms (and the other words of its synsets) can join the query as soft
terms. This module reads the WordNet database as Debian's `wordnet-base`
package installs it (`/usr/share/wordnet`: `index.noun`, `data.noun`,
`cntlist.rev`; WordNet 3.0 licence, redistributable with its notice) and
builds the expansion table under given choices, for `bench.devsets` to
measure.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")

#: Pointer symbols (wndb(5WN)): hyponym, instance hyponym, member meronym, part meronym.
HYPONYM, INSTANCE, MEMBER, PART = "~", "~i", "%m", "%p"

#: Lexicographer files (lexnames(5WN)) of the nouns that name kinds of things people
#: talk about having or doing: acts, animals, artifacts, foods, groups, people, plants...
CONCRETE = frozenset(
    ["act", "animal", "artifact", "body", "communication", "event", "food", "group", "location", "object", "person", "plant", "substance"]
)
LEXFILES = {
    3: "Tops", 4: "act", 5: "animal", 6: "artifact", 7: "attribute", 8: "body", 9: "cognition",
    10: "communication", 11: "event", 12: "feeling", 13: "food", 14: "group", 15: "location", 16: "motive",
    17: "object", 18: "person", 19: "phenomenon", 20: "plant", 21: "possession", 22: "process",
    23: "quantity", 24: "relation", 25: "shape", 26: "state", 27: "substance", 28: "time",
}


#: Definition words that name no member: the genus words every definition uses.
_GLOSS_STOP = frozenset(["a", "an", "the", "of", "or", "and", "in", "to", "for", "by", "with", "as", "that", "which", "who", "from", "on", "at", "is", "are", "its", "their", "someone", "something", "person", "people", "thing", "things", "one", "kind", "sort", "type", "form", "part", "act", "activity", "group"])


@dataclasses.dataclass(frozen=True)
class Choices:
    """Which relations, how deep, how many senses of each word, which kinds of noun."""

    #: Relations followed from a sense (pointer symbols).
    relations: tuple[str, ...] = (HYPONYM,)
    depth: int = 1
    #: Only the word's most frequent senses (WordNet orders them by tagged frequency).
    senses: int = 1
    #: The synset's other words.
    synonyms: bool = True
    #: The nouns of the sense's definition ("sibling: a person's brother or sister"), at distance 1.
    gloss: bool = False
    #: Only senses in these lexicographer files (None: all).
    lexfiles: frozenset[str] | None = CONCRETE
    #: Only members tagged at least this often in SemCor (cntlist.rev); 0: any.
    min_count: int = 0
    #: Only words SemCor tags as a noun at least as often as as a verb or adjective
    #: ("help", "getting", "performing" are mostly verbs: their noun senses mislead).
    mostly_nouns: bool = True


@dataclasses.dataclass
class Synset:
    lexfile: str
    words: list[tuple[str, int]]  # (lemma, SemCor count of this sense)
    pointers: list[tuple[str, str]]  # (symbol, offset) to other nouns
    definition: str = ""


class WordNet:
    """WordNet's nouns: senses per lemma (most frequent first), synsets by offset, sense counts."""

    def __init__(self, root: Path = WORDNET) -> None:
        if not (root / "index.noun").exists():
            raise SystemExit(f"no WordNet database in {root}: apt-get install wordnet-base")
        counts: dict[str, int] = {}
        #: lemma -> SemCor tags as a noun, as anything else
        self.usage: dict[str, list[int]] = {}
        for line in (root / "cntlist.rev").open(encoding="utf-8"):
            key, _, count = line.split()
            counts[key] = int(count)
            lemma, rest = key.split("%", 1)
            self.usage.setdefault(lemma, [0, 0])[0 if rest[0] == "1" else 1] += int(count)
        self.senses: dict[str, list[str]] = {}
        for line in (root / "index.noun").open(encoding="utf-8"):
            if line.startswith(" "):
                continue  # the licence header
            f = line.split()
            lemma, n_synsets, n_ptrs = f[0], int(f[2]), int(f[3])
            self.senses[lemma] = f[6 + n_ptrs : 6 + n_ptrs + n_synsets]
        self.synsets: dict[str, Synset] = {}
        for line in (root / "data.noun").open(encoding="utf-8"):
            if line.startswith(" "):
                continue
            head, _, gloss = line.partition(" | ")
            f = head.split()
            offset, lexfile, n_words = f[0], int(f[1]), int(f[3], 16)
            words = []
            for i in range(n_words):
                lemma, lex_id = f[4 + 2 * i].lower(), int(f[5 + 2 * i], 16)
                lemma = lemma.split("(")[0]  # adjective markers, "(a)"
                words.append((lemma, counts.get(f"{lemma}%1:{lexfile:02d}:{lex_id:02d}::", 0)))
            i = 4 + 2 * n_words
            pointers = []
            for j in range(int(f[i])):
                symbol, target, target_pos = f[i + 1 + 4 * j : i + 4 + 4 * j]
                if target_pos == "n":
                    pointers.append((symbol, target))
            definition = gloss.split(";")[0].split('"')[0]
            self.synsets[offset] = Synset(LEXFILES[lexfile], words, pointers, definition)
        self.exceptions: dict[str, str] = {}
        for line in (root / "noun.exc").open(encoding="utf-8"):
            inflected, base = line.split()[:2]
            self.exceptions[inflected] = base

    def mostly_noun(self, word: str) -> bool:
        """SemCor tags `word` as a noun at least as often as it tags it, or the verb it inflects, as anything else."""
        noun, other = self.usage.get(word, (0, 0))
        for suffix, ending in (("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""), ("s", "")):
            if word.endswith(suffix) and len(word) > len(suffix) + 2:
                other = max(other, self.usage.get(word[: -len(suffix)] + ending, (0, 0))[1])
        if word.endswith("ing") and len(word) > 5 and word[-4] == word[-5]:  # "getting" -> "get"
            other = max(other, self.usage.get(word[:-4], (0, 0))[1])
        return noun >= other

    def related(self, lemma: str, choices: Choices) -> list[tuple[str, int]]:
        """(word, distance) for `lemma`'s synonyms (0) and relations up to `choices.depth`, nearest first,
        then the more often tagged first."""
        out: dict[str, tuple[int, int]] = {}
        if choices.mostly_nouns and not self.mostly_noun(lemma):
            return []

        def add(word: str, distance: int, count: int) -> None:
            if "_" in word or "-" in word or word == lemma or count < choices.min_count:
                return
            d, c = out.get(word, (99, 0))
            if distance < d or (distance == d and count > c):
                out[word] = (distance, count)

        for offset in self.senses.get(lemma, [])[: choices.senses]:
            synset = self.synsets[offset]
            if choices.lexfiles is not None and synset.lexfile not in choices.lexfiles:
                continue
            if choices.synonyms:
                for w, c in synset.words:
                    add(w, 0, c)
            if choices.gloss:
                for w in re.findall(r"[a-z]+", synset.definition.lower()):
                    if len(w) > 2 and w in self.senses and w not in _GLOSS_STOP and self.mostly_noun(w):
                        add(w, 1, self.usage.get(w, (0, 0))[0])
            frontier, seen = [offset], {offset}
            for d in range(1, choices.depth + 1):
                nxt = []
                for o in frontier:
                    for symbol, target in self.synsets[o].pointers:
                        if symbol in choices.relations and target not in seen:
                            seen.add(target)
                            nxt.append(target)
                            for w, c in self.synsets[target].words:
                                add(w, d, c)
                frontier = nxt
        return [(w, d) for w, (d, c) in sorted(out.items(), key=lambda x: (x[1][0], -x[1][1], x[0]))]


def table(choices: Choices, wn: WordNet | None = None) -> dict[str, list[tuple[str, int]]]:
    """lemma -> [(related word, distance)] for every single-word noun lemma with any, and its irregular plurals."""
    wn = wn or WordNet()
    out = {}
    for lemma in wn.senses:
        if "_" in lemma or "-" in lemma:
            continue
        related = wn.related(lemma, choices)
        if related:
            out[lemma] = related
    for inflected, base in wn.exceptions.items():
        if base in out and inflected not in out:
            out[inflected] = out[base]
    return out


_WN: WordNet | None = None


def lexicon(choices: Choices):
    """The table as a `recall.lexicon.Lexicon` (a query word is looked up by its lemma)."""
    global _WN
    from arbiter.recall.lexicon import Lexicon

    _WN = _WN or WordNet()
    return Lexicon(table(choices, _WN))


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("words", nargs="+")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--senses", type=int, default=1)
    ap.add_argument("--all-kinds", action="store_true", help="every lexicographer file, not only concrete nouns")
    args = ap.parse_args(list(argv) if argv is not None else None)
    choices = Choices(depth=args.depth, senses=args.senses, lexfiles=None if args.all_kinds else CONCRETE)
    lex = lexicon(choices)
    for w in args.words:
        print(w, lex.lookup(w))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
