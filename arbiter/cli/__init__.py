"""The `arbiter` command line: the daemon and a client for every verb.

Config is read here and only here (flags, then ARBITER_* env vars). Errors
become one line on stderr and exit 1; usage errors exit 2; ARBITER_DEBUG=1
keeps tracebacks.

Each module registers its commands on the root group in `_common`, imported
only when one of them runs; a new feature adds a module and its line below.
"""

import sys

if "serve" in sys.argv[1:]:  # the daemon, before any import maps OpenSSL (arbiter/_openssl.py)
    from arbiter import _openssl

    _openssl.leave_out()

from arbiter.cli._common import main  # noqa: E402

main.modules = {name: module for module, names in {
    "associations": ["associations"],
    "citus": ["distribute"],
    "backup": ["backup"],
    "daemon": ["mcp", "serve", "stop"],
    "entities": ["entities", "entity"],
    "entries": ["conversation", "density", "expand", "forget", "get", "history", "link", "list", "purge", "recall",
                "remember", "restore", "status", "tenant", "unlink", "update"],
    "facts": ["aspects", "batch", "fact", "facts", "predicates"],
    "graph": ["around", "backlinks", "briefing", "cluster", "clusters", "reply", "tags", "thread", "threads"],
    "load": ["load"],
    "migrate": ["migrate"],
    "people": ["share", "team", "unshare", "user", "whoami"],
    "salience": ["maintain", "reinforce"],
    "transfer": ["export", "import"],
    "ui": ["ui"],
}.items() for name in names}

__all__ = ["main"]
