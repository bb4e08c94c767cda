"""The association graph: edges Arbiter derives from entries, never asserted, never retiring anything.

Four kinds, after Mnemon, with lexical signals where Mnemon uses vectors:

- temporal: backbone (an entry and the one before and after it in its
  conversation) and proximity (entries whose `valid_from` lies within 24 hours,
  weight 1 / (1 + hours apart), at most 10);
- entity: entries that mention the same entity (at most 5 per entity), weight 1.0;
- similarity: entries whose stemmed word sets overlap (Jaccard) at or above
  `AUTO` (at most 3, stored); between `CANDIDATE` and `AUTO` they are only
  candidates handed back by `remember`;
- causal: only ever a candidate (`remember` hands it back; `link` confirms).

Temporal and entity edges are functions of indexed columns (`conversation_id`,
`valid_from`, the entity links), so they are computed when read: storing them
would take ~15 rows an entry, about doubling the database, to save a few index
seeks. Similarity edges cost a search and a comparison to find, so they are
stored in `associations` — at once by a `remember` that asks for link
candidates (finding them derives the edges on the way), otherwise by
the idle writer moments later (the `associations` deriver, arbiter/derive.py) — and `rebuild` derives them
again from the entries alone. Derivation for entry N only ever looks at entries with a lower
id, so rebuilding gives exactly the edges incremental derivation gave.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import apsw

from arbiter.model import Association, LinkCandidate
from arbiter.recall.query import STOPWORDS, TOKENIZER, quote, tokenizer
from arbiter.store import fts, users
from arbiter.store.tokens import tokenizing
from arbiter.store.users import Viewer

HOUR_US = 3_600_000_000
PROXIMITY_HOURS = 24
PROXIMITY_MAX = 10
ENTITY_MAX = 5
#: Similarity thresholds on the Jaccard overlap of stemmed word sets, chosen by
#: measurement (bench/associations.py, docs/architecture.md): at AUTO and above
#: most pairs are the same topic; from CANDIDATE they are worth a model's look.
AUTO = 0.6
CANDIDATE = 0.35
#: Short texts ("Thanks, see you!") overlap by chance: similarity needs this many distinct words on both sides.
MIN_WORDS = 6
AUTO_MAX = 3
CANDIDATES_MAX = 5
#: Causal candidates: Mnemon's rule, token overlap of at least 15%.
CAUSAL_OVERLAP = 0.15
#: The most distinctive words of an entry searched for its similar entries.
_PROBE_WORDS = 5
_PROBE_DEPTH = 30

CAUSAL_MARKERS = re.compile(
    r"\b(because|therefore|thus|hence|due to|caused by|as a result|so that|led to|leads to|resulted in|"
    r"results in|owing to|consequently|since then|which is why|that's why|in order to)\b",
    re.IGNORECASE,
)


# Plain substrings of the markers: `in` on the case-folded text rules most texts out in a few
# microseconds, where the case-insensitive alternation costs ~30 µs a text (and `remember`
# checks up to ~40 texts for causal candidates).
_MARKER_WORDS = tuple(CAUSAL_MARKERS.pattern[len(r"\b("):-len(r")\b")].split("|"))


def has_causal_marker(text: str) -> bool:
    folded = text.casefold()
    return any(w in folded for w in _MARKER_WORDS) and CAUSAL_MARKERS.search(text) is not None


@dataclass(frozen=True, slots=True)
class Row:
    id: int
    conversation_id: int | None
    valid_from: int
    text: str


def _row(conn: apsw.Connection, tenant_id: int, entry_id: int) -> Row | None:
    r = conn.execute(
        "SELECT id, conversation_id, valid_from, title || '\n' || content FROM entries WHERE id = ? AND tenant_id = ?",
        (entry_id, tenant_id),
    ).fetchone()
    return Row(*r) if r else None


def _rows(conn: apsw.Connection, tenant_id: int, ids: list[int]) -> dict[int, Row]:
    """Rows by id, in one statement."""
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT id, conversation_id, valid_from, title || '\n' || content FROM entries "
        f"WHERE id IN ({','.join('?' * len(ids))}) AND tenant_id = ?",
        (*ids, tenant_id),
    )
    return {r[0]: Row(*r) for r in rows}


class Words:
    """Stemmed, stopword-free word sets of texts, through the index's own tokenizer.

    The stems and the lower-cased surfaces (which decide what is a stopword)
    come from two calls that return bare token lists: the index's tokenizer,
    and its inner tokenizer keeping diacritics (the surface as written). One
    token at a time with offsets cost ~40 µs a text, this ~20 µs; `remember`
    compares ~8 texts. Where the two lists do not pair up, the offsets path
    answers.
    """

    def __init__(self, conn: apsw.Connection):
        conn = tokenizing(conn)  # SQLite's FTS5 tokenizers on either engine: the same word sets, the same edges
        self._tokenize = tokenizer(conn)
        porter, (inner, *inner_args) = TOKENIZER
        self._stems = conn.fts5_tokenizer(porter, [inner, *inner_args])
        keep = [a for pair in zip(inner_args[::2], inner_args[1::2]) for a in pair if pair[0] != "remove_diacritics"]
        self._surfaces = conn.fts5_tokenizer(inner, [*keep, "remove_diacritics", "0"])

    def __call__(self, text: str) -> frozenset[str]:
        data = text.encode("utf-8", "surrogatepass")
        stems = self._stems(data, apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False)
        surfaces = self._surfaces(data, apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False,
                                  include_colocated=False)
        pairs = zip(surfaces, stems) if len(surfaces) == len(stems) else self._tokenize(text)
        return frozenset(stem for surface, stem in pairs if surface not in STOPWORDS and not stem.isdigit())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared words over the smaller set: a short entry fully restated in a long one overlaps 1.0."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


# ---- derived on read: temporal and entity ----------------------------------------------


def _whole(v: Viewer) -> bool:
    return v.solo or v.everyone


def temporal(conn: apsw.Connection, v: Viewer, row: Row) -> list[Association]:
    """Backbone (previous and next entry in the conversation) and proximity (within 24 h) neighbours, among the
    entries `v` sees (the entry before one in a conversation is the one before it that `v` sees)."""
    tenant_id = v.tenant_id
    sees = v.sees("entries")
    out: list[Association] = []
    if row.conversation_id is not None:
        for sql in (
            f"SELECT max(id) FROM entries WHERE conversation_id = ? AND id < ? AND tenant_id = ? AND {sees}",
            f"SELECT min(id) FROM entries WHERE conversation_id = ? AND id > ? AND tenant_id = ? AND {sees}",
        ):
            (other,) = conn.execute(sql, (row.conversation_id, row.id, tenant_id)).fetchone()
            if other is not None:
                out.append(Association(other_id=other, kind="temporal", sub_type="backbone", weight=1.0,
                                       evidence="next to it in the conversation"))
    window = PROXIMITY_HOURS * HOUR_US
    # The nearest on each side by two index seeks, not a scan of the window:
    # a bulk load puts thousands of entries at one instant.
    near = conn.execute(
        "SELECT * FROM (SELECT id, ?1 - valid_from FROM entries WHERE tenant_id = ?2 AND valid_from BETWEEN ?1 - ?3 AND ?1 "
        f"AND id != ?4 AND {sees} ORDER BY valid_from DESC, id DESC LIMIT ?5) b UNION ALL "
        "SELECT * FROM (SELECT id, valid_from - ?1 FROM entries WHERE tenant_id = ?2 AND valid_from > ?1 "
        f"AND valid_from <= ?1 + ?3 AND {sees} ORDER BY valid_from, id LIMIT ?5) a",
        (row.valid_from, tenant_id, window, row.id, PROXIMITY_MAX),
    ).fetchall()
    for other, gap in sorted(near, key=lambda r: (r[1], r[0]))[:PROXIMITY_MAX]:
        hours = gap / HOUR_US
        out.append(Association(other_id=other, kind="temporal", sub_type="proximity", weight=round(1 / (1 + hours), 4),
                               evidence=f"{hours:.2f} hours apart"))
    return out


def entity(conn: apsw.Connection, v: Viewer, entry_id: int) -> list[Association]:
    """Entries `v` sees mentioning an entity this one mentions: the nearest `ENTITY_MAX` per entity."""
    out: list[Association] = []
    seen = {entry_id}
    names = conn.execute(
        "SELECT l.entity_id, x.name FROM entry_entities l JOIN entities x ON x.tenant_id = l.tenant_id "
        "AND x.id = l.entity_id "
        "WHERE l.entry_id = ? AND l.tenant_id = ?",
        (entry_id, v.tenant_id),
    ).fetchall()
    sql = (
        "SELECT entry_id FROM entry_entities WHERE tenant_id = ?4 AND entity_id = ?1 AND entry_id != ?2 "
        "ORDER BY abs(entry_id - ?2), entry_id LIMIT ?3"
        if _whole(v) else
        "SELECT l.entry_id FROM entry_entities l JOIN entries e ON e.tenant_id = l.tenant_id AND e.id = l.entry_id "
        "WHERE l.entity_id = ?1 "
        f"AND l.entry_id != ?2 AND {v.sees('e')} ORDER BY abs(l.entry_id - ?2), l.entry_id LIMIT ?3"
    )
    for entity_id, name in names:
        others = conn.execute(sql, (entity_id, entry_id, ENTITY_MAX) + ((v.tenant_id,) if _whole(v) else ()))
        for (other,) in others:
            if other not in seen:
                seen.add(other)
                out.append(Association(other_id=other, kind="entity", sub_type=name, weight=1.0,
                                       evidence=f"both mention {name}"))
    return out


def similarity(conn: apsw.Connection, v: Viewer, entry_id: int) -> list[Association]:
    """Stored similarity edges of an entry to entries `v` sees, both directions."""
    rows = conn.execute(
        "SELECT o.other, o.weight FROM (SELECT CASE WHEN a = ?1 THEN b ELSE a END AS other, weight FROM associations "
        f"WHERE tenant_id = ?2 AND (a = ?1 OR b = ?1)) o JOIN entries e ON e.id = o.other WHERE {v.sees('e')} "
        "ORDER BY o.weight DESC",
        (entry_id, v.tenant_id),
    )
    return [
        Association(other_id=o, kind="similarity", sub_type="auto", weight=w, evidence=f"{w:.0%} of their words shared")
        for o, w in rows
    ]


def of(conn: apsw.Connection, v: Viewer, entry_id: int, kind: str | None = None) -> list[Association]:
    """Every association of an entry (or those of one kind) whose other end `v` sees, strongest first within a kind.

    The edges are derived over the whole tenant; each kind is read among the
    entries `v` sees, so another user's entry neither shows nor takes a place
    (the 10 nearest in time are the 10 nearest `v` sees), except among the
    stored similarity edges, chosen over the whole tenant at write time
    (docs/architecture.md, Associations: Visibility).
    """
    row = _row(conn, v.tenant_id, entry_id)
    if row is None:
        return []
    out: list[Association] = []
    if kind in (None, "temporal"):
        out += temporal(conn, v, row)
    if kind in (None, "entity"):
        out += entity(conn, v, entry_id)
    if kind in (None, "similarity"):
        out += similarity(conn, v, entry_id)
    return out


# ---- derived on write: similarity edges and link candidates ---------------------------


def _probe(conn: apsw.Connection, tenant_id: int, row: Row, words: frozenset[str]) -> list[tuple[int, str]]:
    """Earlier entries sharing at least two of this one's most distinctive words: (id, text)."""
    ids = _probe_ids(conn, users.tenant_scopes(conn, tenant_id), row, words)
    if not ids:
        return []
    return conn.execute(
        f"SELECT id, title || '\n' || content FROM entries WHERE id IN ({','.join('?' * len(ids))}) "
        "AND tenant_id = ? ORDER BY id DESC",
        (*ids, tenant_id),
    ).fetchall()


def _probe_ids(conn: apsw.Connection, scopes: list[int], row: Row, words: frozenset[str]) -> list[int]:
    """The ids of `_probe`'s entries, newest first, searched in the tenant's `scopes`.

    The words are the longest ones (long words are the rare ones, Zipf), so no
    statistic of the index (nor of another tenant) decides what is compared;
    the most recent matches are taken, and no score orders them.
    """
    probe = sorted(words, key=lambda w: (-len(w), w))[:_PROBE_WORDS]
    if len(probe) < 2 or len(words) < MIN_WORDS:
        return []
    # "At least two of the words" as (a AND (b OR c ...)) OR (b AND (c OR ...)) ...: the same matches as
    # the OR of all ten pairs, with each word's postings walked fewer times (0.34 vs 0.54 ms at 20K entries).
    quoted = [quote(w) for w in probe]
    pairs = " OR ".join(f"({a} AND ({' OR '.join(quoted[i + 1:])}))" for i, a in enumerate(quoted[:-1]))
    ids: list[int] = []
    # The tenant's own scope indexes: another tenant's entries are in none of
    # them. Edges may join two users' entries; reads show one only to whoever
    # sees both ends, and candidates go to the writer only if they see them.
    for scope in scopes:
        ids += fts.newest_matches(conn, scope, f"{{title content}} : ({pairs})", _PROBE_DEPTH, below=row.id)
    return sorted(ids, reverse=True)[:_PROBE_DEPTH]


def _auto(mine: frozenset[str], theirs: list[tuple[int, frozenset[str]]]) -> list[tuple[float, int]]:
    """The stored edges' (similarity, other id) among the probed entries' (id, words): the `AUTO_MAX` most similar
    at or above `AUTO` (ties: the newest)."""
    scored = sorted(((jaccard(mine, w) if len(w) >= MIN_WORDS else 0.0, other) for other, w in theirs),
                    key=lambda s: (-s[0], -s[1]))
    return [(j, other) for j, other in scored if j >= AUTO][:AUTO_MAX]


def _store(conn: apsw.Connection, tenant_id: int, edges: list[tuple[int, int, float]], now: int) -> None:
    """Write similarity edges (a, b, weight) of a tenant: an idle step's in one statement on PostgreSQL."""
    conn.executemany(
        "INSERT INTO associations(tenant_id, a, b, weight, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(tenant_id, a, b, round(w, 4), now) for a, b, w in edges],
    )


def derive_stored(conn: apsw.Connection, tenant_id: int, entry_ids: list[int], *, now: int,
                  words: Words | None = None) -> None:
    """`derive(..., candidates=False)` of several entries of a tenant: the stored edges only (the idle writer's).

    The entries, the tenant's scopes and every text their probes find are read
    once for all, each text is tokenized once, and the edges go in one
    statement: entry by entry, that was five statements and thirty texts
    tokenized an entry. The same edges: an entry's probe sees only entries
    before it and never reads an edge.
    """
    words = words or Words(conn)
    rows = _read(conn, tenant_id, entry_ids)
    scopes = users.tenant_scopes(conn, tenant_id)
    known: dict[int, frozenset[str]] = {}

    def of(entry_id: int, text: str) -> frozenset[str]:
        if entry_id not in known:
            known[entry_id] = words(text)
        return known[entry_id]

    probed = {i: _probe_ids(conn, scopes, rows[i], of(i, rows[i].text)) for i in entry_ids if i in rows}
    texts = _read(conn, tenant_id, sorted({o for ids in probed.values() for o in ids} - rows.keys()))
    texts.update(rows)
    edges = [(other, entry_id, j) for entry_id, ids in probed.items()
             for j, other in _auto(known[entry_id], [(o, of(o, texts[o].text)) for o in ids if o in texts])]
    _store(conn, tenant_id, edges, now)


def _read(conn: apsw.Connection, tenant_id: int, ids: list[int]) -> dict[int, Row]:
    """`_rows` of any number of ids."""
    out: dict[int, Row] = {}
    for start in range(0, len(ids), 500):
        out.update(_rows(conn, tenant_id, ids[start:start + 500]))
    return out


def derive(conn: apsw.Connection, tenant_id: int, entry_id: int, *, words: Words | None = None,
           now: int, candidates: bool = True, v: Viewer | None = None) -> list[LinkCandidate]:
    """Store entry `entry_id`'s similarity edges and return its link candidates (causal, similar).

    Idempotent: deriving an entry twice stores the same edges once. With
    `candidates=False` (catching up on bulk writes, where no caller waits for
    them) only the stored edges are derived. The stored edges are the whole
    tenant's (reads filter them); candidates are found among the entries the
    writer `v` sees (default: the whole tenant), hops included.
    """
    v = v or users.whole_tenant(tenant_id)
    row = _row(conn, tenant_id, entry_id)
    if row is None:
        return []
    words = words or Words(conn)
    mine = words(row.text)
    scored = sorted(
        ((jaccard(mine, w) if len(w) >= MIN_WORDS else 0.0, overlap(mine, w), other, text, w)
         for other, text in _probe(conn, tenant_id, row, mine) for w in (words(text),)),
        key=lambda s: (-s[0], -s[2]),
    )
    _store(conn, tenant_id, [(other, entry_id, j) for j, other in _auto(mine, [(s[2], s[4]) for s in scored])], now)
    if not candidates:
        return []
    # Candidates are what the writer could link: entries they see that stand (a forgotten one is still indexed).
    live = _live(conn, v, [s[2] for s in scored])
    scored = [s for s in scored if s[2] in live]
    found: list[LinkCandidate] = []
    for j, _, other, _, _ in scored:
        if CANDIDATE <= j < AUTO and len(found) < CANDIDATES_MAX:
            found.append(LinkCandidate(
                id=other, kind="similar", source_id=entry_id, target_id=other, relation="relates_to",
                score=round(j, 4), reason=f"shares {j:.0%} of its words with #{other}",
            ))
    return found + _causal(conn, v, row, mine, scored, words)


def _live(conn: apsw.Connection, v: Viewer, ids: list[int]) -> set[int]:
    """Those of `ids` that `v` sees and that are not retired."""
    if not ids:
        return set()
    return {r[0] for r in conn.execute(
        f"SELECT e.id FROM entries e WHERE e.id IN ({','.join('?' * len(ids))}) AND e.valid_to IS NULL "
        f"AND {v.sees('e')}", ids
    )}


def _causal(conn, v: Viewer, row: Row, mine: frozenset[str], scored, words: Words) -> list[LinkCandidate]:
    """Mnemon's causal candidates: a causal marker on either side and ≥ 15% shared words.

    Looked for among the lexical matches and the entries two hops away over
    temporal and entity associations. The side that carries the marker is the
    effect ("we chose SQLite because the team lacks Redis experience"): the
    other side is suggested as its cause.
    """
    tenant_id = v.tenant_id
    # (text, its words if the lexical step already has them): texts are tokenized once.
    pool: dict[int, tuple[str, frozenset[str] | None]] = {other: (text, w) for _, _, other, text, w in scored}
    hop1 = [a.other_id for a in temporal(conn, v, row) + entity(conn, v, row.id) if a.other_id < row.id]
    near = _rows(conn, tenant_id, hop1[:5])
    hop2: list[int] = []
    for other in hop1[:5]:
        if other in near:
            hop2 += [a.other_id for a in temporal(conn, v, near[other])[:3] if a.other_id < row.id]
    rest = [o for o in dict.fromkeys(hop1 + hop2) if o not in pool and o != row.id]
    live = _live(conn, v, rest)
    rest = [o for o in rest if o in live]
    far = _rows(conn, tenant_id, [o for o in rest if o not in near])
    for other in rest:
        r = near.get(other) or far.get(other)
        if r is not None:
            pool[other] = (r.text, None)
    marked_new = has_causal_marker(row.text)
    out: list[LinkCandidate] = []
    for other, (text, theirs) in pool.items():
        # Both tests must pass: the cheaper one first (a set overlap where the words are known).
        if theirs is not None and overlap(mine, theirs) < CAUSAL_OVERLAP:
            continue
        if not marked_new and not has_causal_marker(text):
            continue
        share = overlap(mine, theirs if theirs is not None else words(text))
        if share < CAUSAL_OVERLAP:
            continue
        cause, effect = (other, row.id) if marked_new else (row.id, other)
        out.append(LinkCandidate(
            id=other, kind="causal", source_id=cause, target_id=effect, relation="causes", score=round(share, 4),
            reason=f"#{effect} gives a reason ({'this entry' if effect == row.id else f'#{other}'} has a causal word) "
                   f"and shares {share:.0%} of its words with #{cause}",
        ))
    out.sort(key=lambda c: (-c.score, c.id))
    return out[:CANDIDATES_MAX]


# ---- rebuilding the stored edges -------------------------------------------------------


def rebuild(conn: apsw.Connection, tenant_id: int, *, now: int, v: Viewer | None = None) -> int:
    """Drop a tenant's stored edges and derive them again from its entries, oldest first.

    Returns the edge count: of the edges whose both ends `v` sees (default: all of the tenant's).
    """
    conn.execute("DELETE FROM associations WHERE tenant_id = ?", (tenant_id,))
    ids = [r[0] for r in conn.execute("SELECT id FROM entries WHERE tenant_id = ? ORDER BY id", (tenant_id,))]
    words = Words(conn)
    for start in range(0, len(ids), 200):  # a batch's texts tokenized once, the memory they take bounded
        derive_stored(conn, tenant_id, ids[start:start + 200], now=now, words=words)
    v = v or users.whole_tenant(tenant_id)
    return conn.execute(
        "SELECT count(*) FROM associations s JOIN entries ea ON ea.tenant_id = s.tenant_id AND ea.id = s.a "
        "JOIN entries eb ON eb.tenant_id = s.tenant_id AND eb.id = s.b "
        f"WHERE s.tenant_id = ? AND {v.sees('ea')} AND {v.sees('eb')}",
        (tenant_id,),
    ).fetchone()[0]
