"""`changes`: versions of what the caller sees, so a watcher (the MCP server) can tell what moved since it last asked.

A watcher sends the entry ids it watches and gets back, for each one the
caller sees, an opaque version; plus one version of the caller's whole
memory (every entry they see, its record time, its scope, the links from
it, and the facts they see). It keeps the last answer and compares: an
entry whose version changed or vanished was updated, forgotten, restored,
superseded, shared, unshared or purged; a changed memory version means the
entry list and the briefing's inputs moved.

Private by construction: versions are computed through the caller's Viewer,
so an entry they cannot see has no version (the same as a missing one), and
nothing they cannot see moves the memory version. The answer says nothing
about writes as such: the daemon's write count (`Memo`) only decides when
the memory version must be computed again, and never leaves the daemon.
"""
