"""Export and import (`arbiter export`, `arbiter import`): `model` (the file format and wire types),
`dump` (the export verb), `load` (the import verb), `sources` (other tools' files).

Kept light: the client imports `model`.
"""
