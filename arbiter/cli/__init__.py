"""The `arbiter` command line: the daemon and a client for every verb.

Config is read here and only here (flags, then ARBITER_* env vars). Errors
become one line on stderr and exit 1; usage errors exit 2; ARBITER_DEBUG=1
keeps tracebacks.

Each module registers its commands on the root group in `_common`; a new
feature adds a module and one import line below.
"""

import sys

if "serve" in sys.argv[1:]:  # the daemon, before any import maps OpenSSL (arbiter/_openssl.py)
    from arbiter import _openssl

    _openssl.leave_out()

from arbiter.cli._common import main  # noqa: E402
from arbiter.cli import associations, backup, daemon, entities, entries, facts, graph, load, people, salience, transfer, ui  # noqa: F401  (they register their commands)

__all__ = ["main"]
