"""MCP resources (the briefing, each entry) and prompts (the loop an agent should follow)."""

from __future__ import annotations

from arbiter.errors import InvalidParams, NotFound
from arbiter.mcp.entries import entry_view
from arbiter.mcp.tool import Session
from arbiter.mcp.watch import BRIEFING_URI, entry_id, entry_uri

ENTRY_TEMPLATE = "arbiter://entry/{id}"
PAGE = 100


def list_resources(s: Session, cursor: str | None) -> dict:
    """The briefing, then every active entry newest first, `PAGE` per page."""
    if cursor is not None and not cursor.isdigit():
        raise InvalidParams.at("cursor", "not a cursor this server returned")
    before = int(cursor) if cursor else None
    items = s.daemon.list(limit=PAGE + 1, before_id=before)
    out = [] if before else [{
        "uri": BRIEFING_URI, "name": "briefing", "title": "Memory briefing", "mimeType": "text/markdown",
        "description": "The map of this memory: totals, conventions, topics, open threads, recent activity.",
    }]
    out += [{"uri": entry_uri(e.id), "name": f"entry {e.id}", "title": f"#{e.id} [{e.type}] {e.title}",
             "mimeType": "text/plain"} for e in items[:PAGE]]
    result: dict = {"resources": out}
    if len(items) > PAGE:
        result["nextCursor"] = str(items[PAGE - 1].id)
    return result


def list_templates() -> dict:
    return {"resourceTemplates": [{
        "uriTemplate": ENTRY_TEMPLATE, "name": "entry", "title": "A memory entry", "mimeType": "text/plain",
        "description": "One entry in full, by id (as the `get` tool shows it).",
    }]}


def read_resource(s: Session, uri: str) -> dict:
    """The resource's text; NotFound for a URI this server does not serve."""
    if uri == BRIEFING_URI:
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": s.daemon.briefing().text}]}
    if (i := entry_id(uri)) is not None:
        text = entry_view(s.daemon.get(i)).text()
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]}
    raise NotFound(f"no resource {uri!r} (try {BRIEFING_URI} or {ENTRY_TEMPLATE})", path="uri")


def touched_uris(s: Session) -> set[str]:
    """The resources a write just changed: the briefing after any write, and each entry it touched."""
    return {entry_uri(i) for i in s.changed_ids} | {BRIEFING_URI}


def changed_uris(s: Session, subscribed: set[str]) -> list[str]:
    """Subscribed URIs a write just changed."""
    return sorted(subscribed & touched_uris(s))


# ---- prompts --------------------------------------------------------------------------

PROMPTS = {
    "record_decision": {
        "title": "Record what we decided",
        "description": "Store a decision so later sessions find it, without duplicating or contradicting memory.",
        "arguments": [{"name": "decision", "description": "What was decided, and why.", "required": True}],
        "text": (
            "Record this decision in Arbiter's memory: {decision}\n\n"
            "1. `recall` its key words first. If an entry already covers the subject, read it (`get`; `explore` kind `thread`).\n"
            "2. If the decision continues a thread, `remember` it with `parent_id` set to it. If it replaces an earlier decision, "
            "`remember` it with `supersedes_ids` set to the old entry (never `update` another author's entry).\n"
            "3. Otherwise `remember` it as type `project`, with a specific title, the reasons in the content, "
            "#ID mentions of related entries and tags reused from the briefing.\n"
            "4. Say which entry ids you wrote or retired."
        ),
    },
    "what_do_we_know": {
        "title": "What do we know about X",
        "description": "Answer from memory, with sources, and say what changed over time.",
        "arguments": [{"name": "subject", "description": "The subject, in a few key words.", "required": True}],
        "text": (
            "What does Arbiter's memory hold about: {subject}?\n\n"
            "1. `recall` the key words (page with `cursor` while `more` is true and the hits stay relevant).\n"
            "2. Read the strongest hits in full with `get`; follow threads (`explore` kind `thread`) and "
            "replacements (`get` with `history`) where a hit is superseded.\n"
            "3. Answer citing #IDs with their dates. Say what is current and what was superseded, and say "
            "plainly when memory holds nothing on the subject."
        ),
    },
}


def list_prompts() -> dict:
    return {"prompts": [{"name": name, "title": p["title"], "description": p["description"],
                         "arguments": p["arguments"]} for name, p in PROMPTS.items()]}


def get_prompt(name: str, arguments: dict | None) -> dict:
    """The prompt's one user message; NotFound or InvalidParams for a bad name or argument."""
    p = PROMPTS.get(name)
    if p is None:
        raise NotFound(f"no prompt named {name!r}", path="name")
    arguments = arguments or {}
    known = {a["name"] for a in p["arguments"]}
    if unknown := sorted(set(arguments) - known):
        raise InvalidParams.at(f"arguments.{unknown[0]}", "unknown argument")
    values = {}
    for a in p["arguments"]:
        value = arguments.get(a["name"])
        if not isinstance(value, str) or not value.strip():
            raise InvalidParams.at(f"arguments.{a['name']}", "required, a non-empty string")
        values[a["name"]] = value.strip()
    return {"description": p["description"], "messages": [
        {"role": "user", "content": {"type": "text", "text": p["text"].format(**values)}}]}
