"""The web view (`arbiter ui`): `view` (the graph_view verb), `model` (wire types), `server` (the local page)."""
