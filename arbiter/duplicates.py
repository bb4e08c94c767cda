"""Duplicates on `remember`: identical entries are not written twice; near-identical content is pointed out.

Each entry gets a few integer keys in `entry_sketches`:

- its *fingerprint*: a hash of its content case-folded with whitespace
  collapsed, written by the store with the entry (arbiter/derive.py), in the
  write's transaction, whoever writes. `remember` of an entry whose content
  an active entry of the same type and title (up to case and whitespace)
  already has writes nothing and answers `duplicate_of` (unless
  `allow_duplicate`); a batch skips it. The same text under another title is
  another entry (a team's "Rota" and one's own "Deploy plan" may say the same
  words), reported as `similar`.
- its *word key*: a hash of its words alone, in order, so texts that differ
  only by punctuation or case ("Target: Friday" and "Target: Friday.") find
  each other as `similar` even when too short for bands.
- up to four *band* keys, MinHash locality-sensitive hashing over the
  content's word bigrams (one-permutation MinHash, 16 buckets as 4 bands of
  4): two texts share a band with probability 1 - (1 - J⁴)⁴ for bigram
  Jaccard J: 0.88 at J = 0.8, 0.67 at 0.7, 3·10⁻⁵ at 0.05 (two unrelated
  texts).
  Candidates sharing a band are checked by their exact Jaccard; those at or
  above `SIMILAR` come back as `similar`, so the agent can link or supersede.

At most six index rows an entry instead of a text search per `remember`:
the lookup is six B-tree probes whatever the tenant's size.

Word and band keys are the `sketch` deriver's (arbiter/derive.py): a single write
derives them at once, a batch or an import leaves them to the idle writer,
seconds after it answers. Until then `similar` compares a text with those
entries directly, the newest `PENDING_COMPARED` of them; past that,
`remember`'s `note` says how many it has not compared yet.
"""

from __future__ import annotations

import hashlib
import re
import zlib

import apsw

from arbiter.store import engine
from arbiter.model import RememberParams
from arbiter.store.users import Viewer

#: Word-set Jaccard at or above which an entry is `similar` (bench/duplicates.py measures it).
SIMILAR = 0.7
_BANDS, _ROWS = 4, 4
_EMPTY = 1 << 32  # a bucket no word fell into
_BUCKET_MASK = _BANDS * _ROWS - 1  # 16 buckets: the hash's low 4 bits
_WORD = re.compile(r"\w+")
_FINGERPRINT_TAG = 1 << 62  # fingerprints, word keys and band keys never collide
_WORD_KEY_TAG = 1 << 61
_VERIFY = 20  # candidates (most bands shared first) checked by their exact Jaccard
#: Entries of a bulk write not yet indexed that `remember` compares directly, newest first (bench.pending_duplicates).
PENDING_COMPARED = 50


def words(text: str) -> frozenset[str]:
    """The content's word bigrams ("deploy friday"), case-folded: what near-duplicates share and others rarely do.

    Single words would not do: any two English texts share their common
    words, so MinHash over word sets makes most entries candidates of each other.
    """
    tokens = _WORD.findall(text.casefold())
    if len(tokens) < 2:
        return frozenset(tokens)
    return frozenset(f"{a} {b}" for a, b in zip(tokens, tokens[1:]))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def folded(text: str) -> str:
    """Case-folded, whitespace collapsed: what two texts are compared as."""
    return " ".join(text.casefold().split())


def fingerprint(content: str) -> int:
    """The content, case-folded and whitespace-collapsed, hashed to a 62-bit key tagged as a fingerprint.

    What the store writes with a new entry, and the update and delete triggers swap (`register`).
    """
    digest = hashlib.blake2b(folded(content).encode("utf-8", "surrogatepass"), digest_size=8)
    return (int.from_bytes(digest.digest(), "big") >> 2) | _FINGERPRINT_TAG


def word_key(content: str) -> int:
    """The content's words (case-folded, punctuation dropped), in order, hashed to a key tagged as a word key."""
    digest = hashlib.blake2b(" ".join(_WORD.findall(content.casefold())).encode("utf-8", "surrogatepass"),
                             digest_size=8, person=b"words")
    return (int.from_bytes(digest.digest(), "big") >> 3) | _WORD_KEY_TAG


def bands(shingles: frozenset[str]) -> list[int]:
    """The MinHash band keys of a set of word bigrams (bands with an empty bucket are left out).

    One-permutation MinHash: each bigram is hashed once, its hash picks one
    of 16 buckets and each bucket keeps its minimum, so the cost is one pass
    (k separate hash functions cost k passes: 2 ms an entry in Python). A
    short text leaves buckets empty; a band holding one would match every
    other short text, so it is dropped.
    """
    mins = [_EMPTY] * (_BANDS * _ROWS)
    for w in shingles:
        h = zlib.crc32(w.encode("utf-8", "surrogatepass"))
        b = h & _BUCKET_MASK
        if h < mins[b]:
            mins[b] = h
    out = []
    for band in range(_BANDS):
        chunk = mins[band * _ROWS:(band + 1) * _ROWS]
        if _EMPTY in chunk:
            continue
        digest = hashlib.blake2b(repr(chunk).encode(), digest_size=4, person=b"band%d" % band).digest()
        out.append(int.from_bytes(digest, "big") | (band << 32))
    return out


def _sketch(content: str, mine: frozenset[str]) -> list[int]:
    """The keys the `sketch` deriver writes: the word key and the bands."""
    return [word_key(content), *bands(mine)]


def _keys_json(content: str) -> str:
    """Every key of an entry, as a JSON array: what the update and delete triggers remove."""
    return "[" + ",".join(map(str, [fingerprint(content), *_sketch(content, words(content))])) + "]"


def register(conn: apsw.Connection) -> None:
    """The SQL functions the entries triggers call (m027): every connection that may write an entry needs them."""
    conn.create_scalar_function("arbiter_fingerprint", fingerprint, 1, deterministic=True)
    conn.create_scalar_function("arbiter_sketch_keys", _keys_json, 1, deterministic=True)


def _insert(conn: apsw.Connection, tenant_id: int, rows: list[tuple[int, int]]) -> None:
    """Write a tenant's (key, entry id) rows: an idle step's in one statement on PostgreSQL (a statement an entry
    was most of the `sketch` deriver's time there)."""
    conn.executemany("INSERT INTO entry_sketches(tenant_id, key, entry_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                     [(tenant_id, k, e) for k, e in rows])


def add(conn: apsw.Connection, tenant_id: int, entry_id: int, content: str) -> None:
    """Index an entry's word and band keys, and on PostgreSQL its fingerprint."""
    add_many(conn, tenant_id, [(entry_id, content)])


def add_many(conn: apsw.Connection, tenant_id: int, entries: list[tuple[int, str]]) -> None:
    """`add` for several (entry id, content) of one tenant.

    SQLite's trigger swaps the fingerprint when the text changes (it calls `fingerprint`); PostgreSQL's cannot
    call Python, so it drops every key of the entry and this puts the fingerprint back with the rest (a new
    entry's the store wrote already: the insert is a no-op).
    """
    pg = engine.is_postgresql(conn)
    _insert(conn, tenant_id, [(k, entry_id) for entry_id, content in entries
                              for k in ([fingerprint(content)] if pg else []) + _sketch(content, words(content))])


def always_written(p: RememberParams) -> bool:
    """Whether `p` is written even if it repeats an entry: it allows duplicates, or it retires something (a write
    that supersedes is never a no-op)."""
    return p.allow_duplicate or bool(p.supersedes_ids)


def identical(conn: apsw.Connection, v: Viewer, items: list[tuple[int, str, str] | None]) -> list[int | None]:
    """The duplicate rule, for one entry or a batch: per item (its content's `fingerprint`, type, title), the id
    of the oldest active entry `v` sees of that type whose title and content are these up to case and
    whitespace, else -1 - i if it repeats an earlier item i, else None. An item None is always written (None).
    """
    found: dict[tuple[int, str, str], int] = {}
    keys = [item[0] for item in items if item is not None]
    for start in range(0, len(keys), 500):
        chunk = sorted(set(keys[start:start + 500]))
        for key, eid, etype, title in conn.execute(
            "SELECT s.key, s.entry_id, e.type, e.title FROM entry_sketches s "
            "JOIN entries e ON e.tenant_id = s.tenant_id AND e.id = s.entry_id "
            f"WHERE s.tenant_id = ? AND s.key IN ({','.join('?' * len(chunk))}) AND e.valid_to IS NULL "
            f"AND {v.sees()} ORDER BY s.entry_id DESC",
            (v.tenant_id, *chunk),
        ):
            found[key, etype, folded(title)] = eid  # oldest last: it stays
    out: list[int | None] = []
    for i, item in enumerate(items):
        if item is None:
            out.append(None)
            continue
        k = (item[0], item[1], folded(item[2]))
        out.append(found.get(k))
        found.setdefault(k, -1 - i)
    return out


def duplicate_of(conn: apsw.Connection, v: Viewer, type: str, title: str, content: str) -> int | None:
    """`identical` for one entry: the oldest active entry `v` sees of `type` with this title and content."""
    return identical(conn, v, [(fingerprint(content), type, title)])[0]


# CROSS JOIN: the queue drives (newest first); else SQLite's planner scans every entry of the tenant by its
# time index and sorts them. The join's condition is in WHERE, as PostgreSQL (which plans it by its statistics)
# takes no ON after a CROSS JOIN.
def _unindexed_sql(conn: apsw.Connection, v: Viewer) -> str:
    return (f"FROM derive_queue q CROSS JOIN entries e WHERE e.id = q.entry_id "
            f"AND q.deriver = 'sketch' AND q.tenant_id = {int(v.tenant_id)} AND e.valid_to IS NULL AND {v.sees()}")


def unindexed(conn: apsw.Connection, v: Viewer, limit: int = PENDING_COMPARED) -> list[tuple[int, str, str]]:
    """(id, type, content) of the newest active entries `v` sees whose band keys wait for the idle writer."""
    return conn.execute(
        f"SELECT e.id, e.type, e.content {_unindexed_sql(conn, v)} ORDER BY q.entry_id DESC LIMIT ?", (limit,)
    ).fetchall()


def not_compared(conn: apsw.Connection, v: Viewer) -> int:
    """How many of the entries `unindexed` stands for it left out (past `PENDING_COMPARED`).

    Counted over the same rows as `unindexed`: another user's private bulk write must not show in the count.
    """
    waiting = conn.execute(f"SELECT count(*) FROM (SELECT 1 {_unindexed_sql(conn, v)}) q").fetchone()[0]
    return max(0, waiting - PENDING_COMPARED)


def similar(conn: apsw.Connection, v: Viewer, content: str, *, exclude: int | None = None,
            threshold: float = SIMILAR, limit: int = 5, pending: list[tuple[int, str, str]] | None = None) -> list[int]:
    """Active entries `v` sees whose word bigrams are at least `threshold` Jaccard-similar to `content`, most similar first."""
    mine = words(content)
    # The fingerprint and word key too: text too short for bands, identical or but for punctuation.
    return _similar(conn, v, mine, [fingerprint(content), *_sketch(content, mine)], exclude, threshold, limit, pending)


def add_new(conn: apsw.Connection, v: Viewer, entry_id: int, content: str, *,
            pending: list[tuple[int, str, str]] | None = None) -> list[int]:
    """Index a new entry's word and band keys and return what `similar` finds for `v` (what `remember` does),
    hashing its text once. The fingerprint (the trigger's) finds identical text under another title too.
    """
    mine = words(content)
    own = _sketch(content, mine)
    found = _similar(conn, v, mine, [fingerprint(content), *own], entry_id, SIMILAR, 5, pending)
    _insert(conn, v.tenant_id, [(k, entry_id) for k in own])
    return found


def _similar(conn: apsw.Connection, v: Viewer, mine: frozenset[str], band_keys: list[int],
             exclude: int | None, threshold: float, limit: int,
             pending: list[tuple[int, str, str]] | None) -> list[int]:
    # The entries compared are chosen among those `v` sees: another user's near-copies would otherwise take
    # the `_VERIFY` places, and the caller's own similar entry go unreported.
    seen = "" if v.solo or v.everyone else f"AND EXISTS (SELECT 1 FROM entries e WHERE e.id = entry_id AND {v.sees()}) "
    rows = conn.execute(
        f"SELECT e.id, e.content FROM (SELECT entry_id, count(*) AS n FROM entry_sketches "
        f"WHERE tenant_id = ? AND key IN ({','.join('?' * len(band_keys))}) {seen}GROUP BY entry_id "
        f"ORDER BY n DESC LIMIT {_VERIFY}) s JOIN entries e ON e.id = s.entry_id WHERE e.valid_to IS NULL "
        f"AND {v.sees()}",
        (v.tenant_id, *band_keys),
    ).fetchall()
    pending = unindexed(conn, v) if pending is None else pending
    rows += [(eid, text) for eid, _, text in pending]  # and a bulk write's, not indexed yet
    scored = {(jaccard(mine, words(text)), eid) for eid, text in rows if eid != exclude}
    return [eid for score, eid in sorted(scored, key=lambda s: (-s[0], -s[1])) if score >= threshold][:limit]
