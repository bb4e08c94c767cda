"""The FTS5 query subset Arbiter writes, parsed, and matched against one document as FTS5 matches it.

recall builds MATCH strings in FTS5 syntax (recall/query.py `expression`,
recall/_sql.py scope filters, facts/recall.py, associations/core.py): double-
quoted phrases (a prefix phrase ends in `*`), `NEAR(p1 p2 ..., N)`, AND, OR,
NOT, parentheses and column filters `{col col} : ...`. `parse` turns one into
a tree whose phrases are numbered as FTS5 numbers them (left to right), each
with the columns it may match (filters nest by intersection, as in FTS5).
Anything else (a bare word, `^`, `-{col}`, `+`) is refused: no caller writes
it, so it would be a bug, not a user's query.

`instances` is the reference semantics the SQL in fulltext.py must agree with:
for one document (its terms' positions), the positions of each phrase that
FTS5's auxiliary API (`phrase_locations`) reports, that is:

- a phrase's instances are where its tokens stand in order, in its columns;
- a NEAR group keeps only the instances that take part in a match of the
  group (`fts5ExprNearIsMatch`, ported below step by step);
- a phrase reports instances only where every node above it matches the
  document: an OR's branch that misses, an AND that fails, the right side of
  NOT and a NEAR group that is not near report none.

Positions are (column << 24) | offset, as the postings store them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import apsw

from arbiter.store.tokens import TOKENIZER, tokenizing

#: Bits of a position that hold the token's offset in its column.
SHIFT = 24

_local = threading.local()


def _fts5():
    fts5 = getattr(_local, "fts5", None)
    if fts5 is None:
        name, args = TOKENIZER
        fts5 = _local.fts5 = tokenizing().fts5_tokenizer(name, list(args))
    return fts5


def tokenize(text: str, *, query: bool = False, prefix: bool = False) -> list[tuple[int, int, str]]:
    """(start byte, end byte, stem) of each token of `text`, from SQLite's own FTS5 tokenizer (via apsw)."""
    fts5 = _fts5()
    flags = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
    if prefix:
        flags |= apsw.FTS5_TOKENIZE_PREFIX
    return [(start, end, stems[0]) for start, end, *stems in fts5(text.encode("utf-8", "surrogatepass"), flags, None)]


def stems(text: str) -> list[str]:
    """The stems of a document's `text`, in order (`tokenize` without the offsets: what indexing needs)."""
    # The stems alone, as apsw hands them without offsets: no tuple a token for the caller to take apart.
    return _fts5()(text.encode("utf-8", "surrogatepass"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False,
                   include_colocated=False)


@dataclass(frozen=True, slots=True)
class Phrase:
    """FTS5 phrase number `index`: its stems in order, the last one a prefix if `prefix`; `cols` it may match."""

    index: int
    stems: tuple[str, ...]
    prefix: bool
    cols: frozenset[int]


@dataclass(frozen=True, slots=True)
class Near:
    """`NEAR(p1 p2 ..., distance)`: every phrase, within `distance` tokens of the others."""

    phrases: tuple[Phrase, ...]
    distance: int


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    left: Node
    right: Node


Node = Phrase | Near | And | Or | Not

_LEX = re.compile(r'\s*(?:(?P<q>"(?:[^"]|"")*")|(?P<star>\*)|(?P<cols>\{[^}]*\})|(?P<p>[():,])|(?P<w>[^\s"():,*{}]+))')


def parse(match: str, columns: Sequence[str]) -> Node:
    """The tree of an FTS5 MATCH string over `columns` (the index's column names, in order)."""
    tokens: list[tuple[str, str]] = []
    at = 0
    text = match.rstrip()
    while at < len(text):
        m = _LEX.match(text, at)
        if not m or m.end() == at:
            raise ValueError(f"unsupported FTS5 syntax at {at}: {match!r}")
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
        at = m.end()
    parser = _Parser(tokens, columns)
    node = parser.expr(0)
    if parser.at != len(tokens):
        raise ValueError(f"unsupported FTS5 syntax: {match!r}")
    return node


_BINARY = {"OR": 1, "AND": 2, "NOT": 3}  # FTS5's grammar: NOT binds tightest, then AND, then OR


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], columns: Sequence[str]) -> None:
        self.tokens, self.at, self.columns = tokens, 0, list(columns)
        self.everywhere = frozenset(range(len(columns)))
        self.phrases = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind or (value is not None and tok[1] != value):
            raise ValueError(f"unsupported FTS5 syntax: expected {value or kind} at token {self.at}")
        self.at += 1
        return tok[1]

    def expr(self, floor: int) -> Node:
        left = self.implicit_and()
        while (tok := self.peek()) and tok[0] == "w" and _BINARY.get(tok[1], 0) > floor:
            op = tok[1]
            self.at += 1
            right = self.expr(_BINARY[op])
            left = Not(left, right) if op == "NOT" else _join(And if op == "AND" else Or, left, right)
        return left

    def implicit_and(self) -> Node:
        """Adjacent operands with no operator between are ANDed, tighter than any operator (FTS5's exprlist)."""
        nodes = [self.operand(self.everywhere)]
        while (tok := self.peek()) and (tok[0] in ("q", "cols") or tok == ("p", "(") or tok == ("w", "NEAR")):
            nodes.append(self.operand(self.everywhere))
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes))

    def operand(self, cols: frozenset[int]) -> Node:
        tok = self.peek()
        if tok is None:
            raise ValueError("unsupported FTS5 syntax: an expression ends early")
        if tok[0] == "cols":
            self.at += 1
            self.take("p", ":")
            return self.operand(cols & self.colset(tok[1]))
        if tok == ("p", "("):
            self.at += 1
            # A filter outside the parentheses applies to every phrase inside.
            saved, self.everywhere = self.everywhere, cols
            node = self.expr(0)
            self.everywhere = saved
            self.take("p", ")")
            return node
        if tok == ("w", "NEAR"):
            self.at += 1
            self.take("p", "(")
            phrases = [self.phrase(cols)]
            while (t := self.peek()) and t[0] == "q":
                phrases.append(self.phrase(cols))
            distance = 10  # FTS5's default
            if self.peek() == ("p", ","):
                self.at += 1
                distance = int(self.take("w"))
            self.take("p", ")")
            return Near(tuple(phrases), distance)
        if tok[0] == "q":
            return self.phrase(cols)
        raise ValueError(f"unsupported FTS5 syntax: {tok[1]!r}")

    def phrase(self, cols: frozenset[int]) -> Phrase:
        quoted = self.take("q")
        prefix = self.peek() == ("star", "*")
        if prefix:
            self.at += 1
        text = quoted[1:-1].replace('""', '"')
        phrase = Phrase(self.phrases, tuple(s for _, _, s in tokenize(text, query=True, prefix=prefix)), prefix, cols)
        self.phrases += 1
        return phrase

    def colset(self, braces: str) -> frozenset[int]:
        names = braces[1:-1].split()
        try:
            return frozenset(self.columns.index(n) for n in names)
        except ValueError:
            raise ValueError(f"no such column in {braces!r}; the index has {self.columns}") from None


def _join(kind: type[And | Or], left: Node, right: Node) -> Node:
    """`kind` of the two, flattened: (a OR b) OR c is one OR of three."""
    parts: list[Node] = []
    for side in (left, right):
        parts.extend(side.children if isinstance(side, kind) else (side,))
    return kind(tuple(parts))


def phrases(node: Node) -> list[Phrase]:
    """Every phrase of a tree, in FTS5's numbering."""
    if isinstance(node, Phrase):
        return [node]
    if isinstance(node, Near):
        return list(node.phrases)
    if isinstance(node, Not):
        return phrases(node.left) + phrases(node.right)
    return [p for child in node.children for p in phrases(child)]


# -- one document ------------------------------------------------------------------------------------------

Positions = Mapping[str, Sequence[int]]
Expand = Callable[[str], Sequence[str]]


def _phrase_positions(p: Phrase, doc: Positions, expand: Expand) -> list[int]:
    """Where phrase `p` starts in the document, in its columns (empty if it is not there)."""
    if not p.stems:
        return []

    def at(i: int) -> set[int] | Sequence[int]:
        stem = p.stems[i]
        if p.prefix and i == len(p.stems) - 1:
            out: set[int] = set()
            for term in expand(stem):
                out.update(doc.get(term, ()))
            return out
        return doc.get(stem, ())

    first = sorted(at(0))
    rest = [set(at(i)) for i in range(1, len(p.stems))]
    return [x for x in first if (x >> SHIFT) in p.cols and all(x + i + 1 in r for i, r in enumerate(rest))]


def _near(lists: list[list[int]], sizes: list[int], distance: int) -> list[list[int]]:
    """The instances of each phrase of a NEAR group that take part in a match: fts5ExprNearIsMatch, step by step."""
    eof = 1 << 62
    readers = [[lst, 0, 0, 0] for lst in lists]  # list, next index, iPos, iLookahead

    def advance(r: list) -> bool:
        r[2] = r[3]
        if r[1] < len(r[0]):
            r[3] = r[0][r[1]]
            r[1] += 1
        else:
            r[3] = eof
        return r[2] == eof

    for r in readers:
        advance(r)
        advance(r)
    out: list[list[int]] = [[] for _ in lists]
    while True:
        top = readers[0][2]
        while True:
            matched = True
            for i, r in enumerate(readers):
                low = top - sizes[i] - distance
                if r[2] < low or r[2] > top:
                    matched = False
                    while r[2] < low:
                        if advance(r):
                            return out if out[0] else [[] for _ in lists]
                    top = max(top, r[2])
            if matched:
                break
        for i, r in enumerate(readers):
            if not out[i] or r[2] != out[i][-1]:
                out[i].append(r[2])
        step = min(range(len(readers)), key=lambda i: readers[i][3])
        if advance(readers[step]):
            return out if out[0] else [[] for _ in lists]


def instances(node: Node, doc: Positions, expand: Expand) -> tuple[bool, dict[int, list[int]]]:
    """(does the document match, {phrase number: the instances FTS5 reports for it}).

    `doc` maps a stem to its sorted positions in the document; `expand(prefix)`
    lists the document's stems that begin with `prefix`.
    """
    def evaluate(n: Node) -> tuple[bool, dict[int, list[int]]]:
        if isinstance(n, Phrase):
            got = _phrase_positions(n, doc, expand)
            return bool(got), {n.index: got} if got else {}
        if isinstance(n, Near):
            lists = [_phrase_positions(p, doc, expand) for p in n.phrases]
            if not all(lists):
                return False, {}
            if len(lists) > 1:
                lists = _near(lists, [len(p.stems) for p in n.phrases], n.distance)
                if not lists[0]:
                    return False, {}
            return True, {p.index: got for p, got in zip(n.phrases, lists)}
        if isinstance(n, Not):
            ok, inst = evaluate(n.left)
            if not ok or evaluate(n.right)[0]:
                return False, {}
            return True, inst
        results = [evaluate(c) for c in n.children]
        if isinstance(n, And):
            if not all(ok for ok, _ in results):
                return False, {}
            merged: dict[int, list[int]] = {}
            for _, inst in results:
                merged.update(inst)
            return True, merged
        merged = {}
        for ok, inst in results:
            if ok:
                merged.update(inst)
        return any(ok for ok, _ in results), merged

    return evaluate(node)
