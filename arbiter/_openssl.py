"""Keep OpenSSL out of the daemon's memory: 4.4 MB of its 36.6 MB resident when idle.

Two imports map libcrypto (and libssl) into a process: `hashlib`, which
prefers OpenSSL's digests, and asyncio, which imports `ssl` in case a
connection wants TLS. The daemon needs neither: it serves a unix socket in
the clear and hashes with sha256 and blake2b, which Python also builds in.
Both imports have a documented fallback for a Python built without OpenSSL
(`hashlib` and `hmac` use their builtin digests, asyncio sets `ssl = None`
and refuses TLS with "stdlib ssl module not available"), and this takes it:
`_hashlib` is made unimportable for the process's life, `ssl` only while
asyncio loads, so the advisor's HTTPS client (the anthropic SDK, imported on
first use) still gets it. The builtin sha256 is slower (1.9 us for 550 bytes,
OpenSSL's 0.6): a listing of 1000 entries, which hashes each, takes ~1.3 ms
more. Figures: docs/benchmarks.md "Daemon memory".
"""

from __future__ import annotations

import sys


def leave_out() -> bool:
    """Call before anything imports hashlib or asyncio; False (and no change) if it is too late."""
    # A name set to None is one left out already (the executable leaves out _hashlib: packaging/rthook_lazy_binaries.py).
    if any(sys.modules.get(name, None) is not None for name in ("_hashlib", "hashlib", "hmac", "ssl", "asyncio")):
        return False
    sys.modules["_hashlib"] = None  # hashlib then serves sha256/blake2b from _sha256/_blake2
    sys.modules["ssl"] = None
    try:
        import asyncio  # noqa: F401  (loads once, with ssl = None)
    finally:
        del sys.modules["ssl"]
    return True
