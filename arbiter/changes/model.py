"""The `changes` verb's params and result (the client and the MCP server import these, not the verb)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from arbiter.model import Id, Params

MAX_IDS = 1000


class ChangesParams(Params):
    ids: Annotated[list[Id], Meta(max_length=MAX_IDS)] = []


class EntryVersion(Struct, kw_only=True):
    id: int
    version: int


class Changes(Struct, kw_only=True):
    """`entries`: the version of each asked-for entry the caller sees (others are left out, as missing ones are).
    `memory`: a version of everything the caller sees; it moves when any of it does."""

    entries: list[EntryVersion]
    memory: int
