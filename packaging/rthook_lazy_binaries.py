# PyInstaller runtime hook (see build.spec): the shared libraries only the MCP server and the LLM client load
# are unpacked when first imported, not at every start.
#
# A one-file executable writes every bundled library to a temporary folder before Python starts, on every
# run: 28 MB for `arbiter --version`. Half of it (pydantic-core and rpds for the MCP SDK; OpenSSL, jiter and
# charset-normalizer for the anthropic SDK's HTTPS client; the CJK codecs) serves commands that load those
# SDKs. build.spec moves them into one zip inside the Python archive (read only when imported); the finder
# below writes them where PyInstaller would have, the first time one of their modules is imported.
#
# hashlib would load OpenSSL for every command: it uses Python's own sha256 and blake2b instead (as the
# daemon always has, arbiter/_openssl.py); `ssl` still gets OpenSSL, unpacked on its first import.
import importlib
import importlib.abc
import sys

_TRIGGERS = ("pydantic_core", "rpds", "jiter", "charset_normalizer", "_ssl", "_multibytecodec", "_codecs_", "psycopg")


class _UnpackOnImport(importlib.abc.MetaPathFinder):
    """Unpacks the lazy libraries before the first import that needs one; finds nothing itself."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if not (top.startswith(_TRIGGERS) or top.endswith("__mypyc")):
            return None
        sys.meta_path.remove(self)
        import base64
        import io
        import zipfile

        from arbiter_lazy_binaries import ZIP  # noqa: PLC0415  (made by build.spec)

        with zipfile.ZipFile(io.BytesIO(base64.b64decode(ZIP))) as z:
            z.extractall(sys._MEIPASS)
        del sys.modules["arbiter_lazy_binaries"]
        importlib.invalidate_caches()
        return None


sys.modules.setdefault("_hashlib", None)
sys.meta_path.insert(0, _UnpackOnImport())
