"""How an entry's text is stored: a self-describing compressed blob (`content_z`).

`entries.content` and `entry_revisions.content` are VIRTUAL generated columns,
`arbiter_text(content_z)`, so every reader (SELECTs, views, the FTS5
external-content views, triggers) reads the text as before; only writers
store `pack(text)` in `content_z` (docs/architecture.md, "Stored text").

A blob is one codec byte, then the payload:

    0x00  the UTF-8 text as is (empty, tiny or incompressible texts)
    0x01  the UTF-8 text as raw deflate (zlib, no header or checksum)

Any other first byte is refused when read: a later codec (a trained
dictionary, say, naming its dictionary after the codec byte) gets a new
value and a migration, and rows written before it stay readable as they
are. Raw deflate at level 6 stores bench.load's text in 0.52 of its bytes
(docs/benchmarks.md, "Size"); zlib is in the standard library, so it adds no
dependency and nothing resident.
"""

from __future__ import annotations

import zlib

import apsw

PLAIN = 0
DEFLATE = 1
_PLAIN = bytes([PLAIN])
_DEFLATE = bytes([DEFLATE])
_LEVEL = 6
_RAW = -15  # raw deflate: the codec byte already says what follows; zlib's own header and checksum are 6 bytes


def pack(text: str) -> bytes:
    """The stored form of `text`: deflated if that is smaller, else as is, after its codec byte."""
    data = text.encode("utf-8")
    packed = zlib.compress(data, _LEVEL, _RAW)
    if len(packed) < len(data):
        return _DEFLATE + packed
    return _PLAIN + data


def unpack(blob: bytes) -> str:
    """The text a `pack`ed blob holds (ValueError if it is not one)."""
    if not blob:
        raise ValueError("an empty blob is not a stored text")
    codec = blob[0]
    if codec == DEFLATE:
        return zlib.decompress(memoryview(blob)[1:], _RAW).decode("utf-8")
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
