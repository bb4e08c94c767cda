"""Backups: `core` (create, verify, restore and the verb), `model` (wire types). Kept light: the client imports `model`."""
