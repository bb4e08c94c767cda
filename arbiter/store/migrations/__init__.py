"""The schema's history: one frozen step per file, applied in order by `arbiter.store.db.migrate`.

A step is a module `mNNN_what.py` holding `SQL` (literal SQL), or `apply(conn)` where the step depends on the
rows (m010, m015, m020 and m023 remake each tenant's or scope's full-text index). Its module name is what
`schema_version` records, so a step is never renamed, and once it has shipped it is never edited: it imports
nothing from Arbiter, so a file upgrades the same way whenever it is upgraded, whatever the live code has
become since. Live code that makes the same objects at run time (a new scope's index: store/fts.py) owns its
own copy of their SQL. tests/unit/test_store.py upgrades a file from every earlier step and compares its whole
schema with a new file's, which fails if a step or that copy drifts.

To change the schema, add the next file (`m027_what.py`, a docstring saying what it adds and why, then `SQL`
or `apply`), add its row to docs/architecture.md's migrations table, and run tests/unit/test_store.py.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import Callable

import apsw

Step = str | Callable[[apsw.Connection], None]


def _load() -> list[tuple[str, Step]]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"m\d{3}_\w+", m.name))
    # Two branches that each added "the next" step would otherwise both apply, in an order no file records.
    numbers = [int(name[1:4]) for name in names]
    if numbers != list(range(1, len(names) + 1)):
        raise RuntimeError(f"migration files must be numbered 1..{len(names)} once each: {names}")
    steps = []
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        steps.append((name, getattr(module, "apply", None) or module.SQL))
    return steps


#: (name, step) in order: what `migrate` applies, and what `schema_version` counts.
MIGRATIONS: list[tuple[str, Step]] = _load()
