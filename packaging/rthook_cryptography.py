# PyInstaller runtime hook (see build.spec): stand-ins for the four names the
# MCP SDK imports from `cryptography` at load time.
#
# The SDK uses them only to encrypt request state for its HTTP transports;
# `arbiter mcp` speaks stdio, so they are never called. Shipping the real
# package would add 11 MB to a 25 MB budget. If anything ever does call them,
# it fails loudly instead of silently.
import sys
import types


def _unavailable(*args, **kwargs):
    raise RuntimeError("cryptography is not bundled in the arbiter executable (stdio MCP does not need it)")


class _Unavailable:
    __init__ = _unavailable
    generate_key = staticmethod(_unavailable)


class InvalidTag(Exception):
    pass


_names = {
    "cryptography": {},
    "cryptography.exceptions": {"InvalidTag": InvalidTag},
    "cryptography.hazmat": {},
    "cryptography.hazmat.primitives": {},
    "cryptography.hazmat.primitives.ciphers": {},
    "cryptography.hazmat.primitives.ciphers.aead": {"AESGCM": _Unavailable},
    "cryptography.hazmat.primitives.hashes": {"SHA256": _Unavailable},
    "cryptography.hazmat.primitives.kdf": {},
    "cryptography.hazmat.primitives.kdf.hkdf": {"HKDF": _Unavailable},
}
for _name, _attrs in _names.items():
    if _name not in sys.modules:
        _module = types.ModuleType(_name)
        _module.__path__ = []
        _module.__dict__.update(_attrs)
        sys.modules[_name] = _module
