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
REPLY = "reply"
LINK = "link"
UPDATE = "update"
FORGET = "forget"
RECALL = "recall"
TOPIC_CLUSTER = "topic_cluster"
TOPIC_CLUSTERS = "topic_clusters"
LIST = "list"
GET = "get"
THREAD = "thread"
OPEN_THREADS = "open_threads"

#: Tools that only read the memory: "read before you write" is any of these before the first write.
READS = frozenset({
    RECALL, TOPIC_CLUSTER, TOPIC_CLUSTERS, LIST, GET, THREAD, OPEN_THREADS,
    "around", "backlinks", "density", "expand", "history", "get_memory_briefing", "associations",
})
#: Tools that change entries (the scenarios' writes).
WRITES = frozenset({REMEMBER, "remember_many", REPLY, LINK, UPDATE, FORGET, "restore", "unlink", "share", "unshare"})
#: Writes that change an existing entry's own text in place (a teammate's words would be lost).
OVERWRITES = frozenset({UPDATE})

Call = tuple[str, dict[str, Any]]


def remember(*, type: str, title: str, content: str, tags: Iterable[str], supersedes: Iterable[int] = ()) -> Call:
    """A new top-level entry; `supersedes` retires the entries it replaces."""
    args: dict[str, Any] = {"type": type, "title": title, "content": content, "tags": list(tags)}
    if supersedes:
        args["supersedes_ids"] = list(supersedes)
    return REMEMBER, args


def reply(parent_id: int, content: str) -> Call:
    """A reply in the thread of `parent_id`."""
    return REPLY, {"parent_id": parent_id, "content": content}


def link(source_id: int, relation: str, target_id: int) -> Call:
    return LINK, {"source_id": source_id, "relation": relation, "target_id": target_id}


def update(entry_id: int, content: str) -> Call:
    """Overwrite an entry's text in place."""
    return UPDATE, {"id": entry_id, "content": content}


def recall(query: str) -> Call:
    return RECALL, {"query": query, "everywhere": True}


def topic_cluster(tag: str) -> Call:
    return TOPIC_CLUSTER, {"tag": tag}


def topic_clusters() -> Call:
    return TOPIC_CLUSTERS, {}


# Reading a transcript's calls back.

def reply_parent(name: str, args: dict[str, Any]) -> int | None:
    """The entry a call replies under, if it is a reply."""
    return args.get("parent_id") if name == REPLY else None


def new_top_level(name: str, args: dict[str, Any]) -> bool:
    """Whether a call writes a new entry outside any thread."""
    return name == REMEMBER


def edited_id(name: str, args: dict[str, Any]) -> int | None:
    """The entry whose text a call overwrites in place."""
    return args.get("id") if name in OVERWRITES else None
