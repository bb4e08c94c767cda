"""How an entry's text is stored: a self-describing compressed blob (`content_z`).

`entries.content` and `entry_revisions.content` are VIRTUAL generated columns,
`arbiter_text(content_z)`, so every reader (SELECTs, views, the FTS5
external-content views, triggers) reads the text as before; only writers
store `pack(text)` in `content_z` (docs/architecture.md, "Stored text").

A blob is one codec byte, then the payload:

    0x00  the UTF-8 text as is (empty, tiny or incompressible texts)
    0x01  the UTF-8 text as a zlib stream (RFC 1950: deflate with a checksum)

Any other first byte is refused when read: a later codec (a trained
dictionary, say, naming its dictionary after the codec byte) gets a new
value and a migration, and rows written before it stay readable as they
are. Deflate at level 6 stores bench.load's text in 0.53 of its bytes
(docs/benchmarks.md, "Size"); zlib is in the standard library, so it adds no
dependency and nothing resident. The zlib stream's 6 bytes of header and
checksum (0.01x of the text) buy a check of every text read, and a way in
for a plain `sqlite3` shell, whose `sqlar_uncompress` reads zlib streams
(README, "Backups").
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from arbiter.store import engine

PLAIN = 0
DEFLATE = 1
_PLAIN = bytes([PLAIN])
_DEFLATE = bytes([DEFLATE])
_LEVEL = 6


# This thread's texts packed inside `packing()`, by blob: None outside it.
_packed = threading.local()


@contextmanager
def packing() -> Iterator[None]:
    """Texts this thread packs inside the block read back without inflating them.

    A write packs a text, inserts the blob, and the index upkeep then reads
    the text back (`content` is `arbiter_text(content_z)`): the recall
    copy's trigger, and the FTS index that `remember_many` and the import
    write set-based, each inflate it again (~4 us for an entry of bench.load's,
    a tenth of a bulk write's cost). A blob holds one text, so handing back
    the text it was packed from is exact. The texts are the block's own
    (its caller holds them anyway) and are let go when it ends.
    """
    outer = getattr(_packed, "texts", None)
    if outer is None:
        _packed.texts = {}
    try:
        yield
    finally:
        if outer is None:
            _packed.texts = None


def pack(text: str) -> bytes:
    """The stored form of `text`: deflated if that is smaller, else as is, after its codec byte."""
    data = text.encode("utf-8")
    packed = zlib.compress(data, _LEVEL)
    blob = _DEFLATE + packed if len(packed) < len(data) else _PLAIN + data
    texts = getattr(_packed, "texts", None)
    if texts is not None:
        texts[blob] = text
    return blob


def column(conn: object) -> str:
    """The column a writer sets with an entry's text: `content_z` (a `pack`ed blob) on SQLite; PostgreSQL
    stores `content` as text and compresses it itself (TOAST)."""
    return "content" if engine.is_postgresql(conn) else "content_z"


def stored(conn: object, text: str) -> bytes | str:
    """What a writer puts in `column(conn)` for `text`."""
    return text if engine.is_postgresql(conn) else pack(text)


def unpack(blob: bytes) -> str:
    """The text a `pack`ed blob holds (ValueError if it is not one)."""
    if not blob:
        raise ValueError("an empty blob is not a stored text")
    texts = getattr(_packed, "texts", None)
    if texts:
        text = texts.get(blob)
        if text is not None:
            return text
    codec = blob[0]
    if codec == DEFLATE:
        return zlib.decompress(memoryview(blob)[1:]).decode("utf-8")
    if codec == PLAIN:
        return str(memoryview(blob)[1:], "utf-8")
    raise ValueError(f"stored text codec {codec} is unknown to this Arbiter")


def _sql_text(blob: bytes | None) -> str | None:
    return None if blob is None else unpack(blob)


def _sql_pack(text: str | None) -> bytes | None:
    return None if text is None else pack(text)


def register(conn: apsw.Connection) -> None:
    """`arbiter_text(blob)` (what the generated `content` columns read) and `arbiter_pack(text)` (for SQL writers)."""
    conn.create_scalar_function("arbiter_text", _sql_text, 1, deterministic=True)
    conn.create_scalar_function("arbiter_pack", _sql_pack, 1, deterministic=True)
