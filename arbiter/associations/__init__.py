"""The association graph (Mnemon's four graphs, lexically): what Arbiter derives between entries.

Relations are what a caller asserts (arbiter/store/relations.py); associations
are what Arbiter derives, typed and weighted with their evidence, and they
never retire anything. `core` derives and reads them, `walk` is graph recall
(`recall graph=true`), `advice` has the advisor judge link candidates
(`remember auto_link=true`), `verbs` serves them.
"""

from arbiter.associations.core import derive, of, rebuild

__all__ = ["derive", "of", "rebuild"]
