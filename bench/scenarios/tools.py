"""Every MCP tool name and argument shape the scenarios use, in one place.

The scripted agents build their calls here and the hard assertions read a
transcript's calls back through here, so a change to the tool surface (issue
35: fewer default tools, neighbourhood views behind a `kind`, batches folded
into single-item tools) is adapted in this file alone. What a run leaves in
the memory is read through `arbiter.client.Client`, never through tool names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

REMEMBER = "remember"
LINK = "link"
UPDATE = "update"
FORGET = "forget"
RECALL = "recall"
EXPLORE = "explore"
LIST = "list"
GET = "get"

#: What the scripted agents look for in their earlier steps: an action, named by `action` below. On the default
#: surface a reply is a `remember` with a `parent_id`, and the topic views are `explore` kinds.
REPLY = "reply"
TOPIC_CLUSTER = "explore:topic"
TOPIC_CLUSTERS = "explore:topics"

#: Tools that only read the memory: "read before you write" is any of these before the first write.
READS = frozenset({RECALL, EXPLORE, LIST, GET, "facts", "entities", "conversation"})
#: Tools that change entries (the scenarios' writes).
WRITES = frozenset({REMEMBER, LINK, UPDATE, FORGET, "share", "entity_edit", "propose_facts"})

Call = tuple[str, dict[str, Any]]


def remember(*, type: str, title: str, content: str, tags: Iterable[str], supersedes: Iterable[int] = ()) -> Call:
    """A new top-level entry; `supersedes` retires the entries it replaces."""
    args: dict[str, Any] = {"type": type, "title": title, "content": content, "tags": list(tags)}
    if supersedes:
        args["supersedes_ids"] = list(supersedes)
    return REMEMBER, args


def reply(parent_id: int, content: str) -> Call:
    """A reply in the thread of `parent_id`."""
    return REMEMBER, {"parent_id": parent_id, "content": content}


def link(source_id: int, relation: str, target_id: int) -> Call:
    return LINK, {"source_id": source_id, "relation": relation, "target_id": target_id}


def update(entry_id: int, content: str) -> Call:
    """Overwrite an entry's text in place."""
    return UPDATE, {"id": entry_id, "content": content}


def recall(query: str) -> Call:
    return RECALL, {"query": query, "everywhere": True}


def topic_cluster(tag: str) -> Call:
    return EXPLORE, {"kind": "topic", "tag": tag}


def topic_clusters() -> Call:
    return EXPLORE, {"kind": "topics"}


# Reading a transcript's calls back.

def action(name: str, args: dict[str, Any]) -> str:
    """What a call did, as the agents name it: `reply` for a remember in a thread, `explore:<kind>` for a view."""
    if name == REMEMBER and args.get("parent_id") is not None:
        return REPLY
    if name == EXPLORE:
        return f"{EXPLORE}:{args.get('kind')}"
    return name


def reply_parent(name: str, args: dict[str, Any]) -> int | None:
    """The entry a call replies under, if it is a reply."""
    return args.get("parent_id") if action(name, args) == REPLY else None


def new_top_level(name: str, args: dict[str, Any]) -> bool:
    """Whether a call writes a new entry outside any thread."""
    return action(name, args) == REMEMBER


def edited_id(name: str, args: dict[str, Any]) -> int | None:
    """The entry whose text a call overwrites in place (`update` of its text, not a reinforcement)."""
    return args.get("id") if name == UPDATE and ({"title", "content"} & set(args)) else None
