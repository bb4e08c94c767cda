"""FTS5's snippet() in Python, for PostgreSQL's full text (fulltext.py): the same excerpt, byte for byte.

A port of fts5_aux.c's fts5SnippetFunction over the instances
fulltext_query.py finds: each instance of a column tries a window of
`tokens` tokens centred on the instances it holds, and the sentence before
it (a token after whitespace after '.' or ':'); a window scores 1000 for
each phrase's first instance in it and 1 for each repeat, a sentence start
+100 (+120 at the column's start); the best window wins, earlier columns on
ties. Overlapping instances are marked as one run (fts5CInstIter).
tests/unit/test_pg_fulltext.py compares it with SQLite's on every hit of its
cases.
"""

from __future__ import annotations

from collections.abc import Sequence

from arbiter.store.pg import fulltext_query as q


def snippet(names: Sequence[str], match: str, columns: Sequence[str | None], *, tokens: int = 24,
            start: str = "**", end: str = "**", ellipsis: str = "…") -> str | None:
    """FTS5's `snippet(t, -1, start, end, ellipsis, tokens)` of one document, in Python; None if nothing matches.

    `names` are the index's column names, `columns` the document's texts as indexed. The window is chosen as
    fts5_aux.c's fts5SnippetFunction chooses it (1000 for each phrase's first
    instance in it, 1 for each repeat, +120/+100 for starting a sentence,
    centred on its instances), and overlapping instances are marked as one.
    """
    tree = q.parse(match, names)
    size = {p.index: len(p.stems) for p in q.phrases(tree)}
    cut = [q.tokenize(text) if text else [] for text in columns]
    doc: dict[str, list[int]] = {}
    for col, toks in enumerate(cut):
        for offset, (_, _, stem) in enumerate(toks):
            doc.setdefault(stem, []).append((col << q.SHIFT) | offset)
    ok, found = q.instances(tree, doc, lambda prefix: [t for t in doc if t.startswith(prefix)])
    if not ok:
        return None
    mask = (1 << q.SHIFT) - 1
    # xInst's order: by column, offset, then phrase.
    inst = sorted((x >> q.SHIFT, x & mask, ip) for ip, where in found.items() for x in where)

    def score(col: int, first: int, size_of_col: int) -> tuple[int, int]:
        seen: set[int] = set()
        total, low, last = 0, -1, 0
        for ic, off, ip in inst:
            if ic == col and first <= off < first + tokens:
                total += 1 if ip in seen else 1000
                seen.add(ip)
                if low < 0:
                    low = off
                last = off + size[ip]
        spare = tokens - (last - low)
        adjust = low - (abs(spare) // 2 if spare >= 0 else -(abs(spare) // 2))  # C's division
        if adjust + tokens > size_of_col:
            adjust = size_of_col - tokens
        return total, max(adjust, 0)

    best, best_col, best_start = 0, 0, 0
    for col, toks in enumerate(cut):
        text = (columns[col] or "").encode("utf-8", "surrogatepass")
        firsts = [i for i, (s, _, _) in enumerate(toks) if i == 0 or _sentence_starts(text, s)]
        for ic, off, _ in inst:
            if ic != col:
                continue
            got, adjust = score(col, off, len(toks))
            if got > best:
                best, best_col, best_start = got, col, adjust
            if firsts and len(toks) > tokens:
                jj = 0
                while jj < len(firsts) - 1 and firsts[jj + 1] <= off:
                    jj += 1
                if firsts[jj] < off:
                    got = score(col, firsts[jj], len(toks))[0] + (120 if firsts[jj] == 0 else 100)
                    if got > best:
                        best, best_col, best_start = got, col, firsts[jj]
    toks = cut[best_col]
    text = (columns[best_col] or "").encode("utf-8", "surrogatepass")
    if not toks:
        return None
    # Instances of the column as token ranges, overlapping ones joined (fts5CInstIter).
    runs: list[list[int]] = []
    for ic, off, ip in inst:
        if ic != best_col:
            continue
        last = off + max(size[ip], 1) - 1
        if runs and off <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], last)
        else:
            runs.append([off, last])
    stop = best_start + tokens - 1
    out = [ellipsis.encode()] if best_start > 0 else []
    cursor = toks[best_start][0] if best_start > 0 else 0
    run = 0
    opened = False
    for i in range(best_start, min(stop, len(toks) - 1) + 1):
        s, e, _ = toks[i]
        while run < len(runs) and runs[run][1] < i:
            run += 1
        inside = run < len(runs) and runs[run][0] <= i <= runs[run][1]
        if inside and not opened:
            out += [text[cursor:s], start.encode()]
            cursor, opened = s, True
        if opened and (not inside or i == runs[run][1] or i == stop):
            out += [text[cursor:e], end.encode()]
            cursor, opened = e, False
    out.append(text[cursor:] if stop >= len(toks) - 1 else text[cursor:toks[stop][1]] + ellipsis.encode())
    return b"".join(out).decode("utf-8", "replace")


def _sentence_starts(text: bytes, at: int) -> bool:
    """FTS5's sentence test: whitespace before the token, and a '.' or ':' before that."""
    i = at - 1
    while i >= 0 and text[i : i + 1] in (b" ", b"\t", b"\n", b"\r"):
        i -= 1
    return i != at - 1 and i >= 0 and text[i : i + 1] in (b".", b":")
