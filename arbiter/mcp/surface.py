"""The default tool surface: 14 tools that reach every fine-grained tool, so a session's definitions stay small.

Every tool's name, description and input schema sit in the model's context in
every session, before it asks anything: the fine-grained set (`arbiter mcp
--tools all`) costs ~40 KB. Here views of one neighbourhood share `explore`
(a `kind`), facts views share `facts`, a batch is a list given to the
single-item tool, and an undo is a flag on the tool it undoes. Each combined
tool routes a call to one fine-grained tool, whose decoder checks the
arguments as a direct call would (`tool.Combined`); its input schema is the
union of theirs, each property described once.
"""

from __future__ import annotations

from typing import Callable

from arbiter.errors import InvalidParams
from arbiter.mcp.tool import TOOLS, Combined, Tool, schema

#: What a combined tool's schema says about a property instead of what its fine-grained tool says.
_ENTRIES = {"type": "array", "minItems": 1, "maxItems": 10_000, "items": {"type": "object"}, "description": (
    "Several new entries in one call, each an object with type, title, content and optionally tags, "
    "supersedes_ids, source, valid_from, speaker: one transaction, all or nothing, not checked for duplicates. "
    "With entries, give no other field but everywhere.")}


def _pick(kinds: dict[str, str], field: str, default: str | None = None) -> Callable[[dict], tuple[str, dict]]:
    """A route by an enum argument (`kind`, `action`) naming the fine-grained tool."""

    def route(args: dict) -> tuple[str, dict]:
        choice = args.pop(field, default)
        if choice not in kinds:
            allowed = ", ".join(map(repr, kinds))
            if choice is None:
                raise InvalidParams.at(field, f"required, one of {allowed}")
            raise InvalidParams.at(field, f"{choice!r} is not one of {allowed}")
        return kinds[choice], args

    return route


def _flag(flag: str, when_set: str, otherwise: str) -> Callable[[dict], tuple[str, dict]]:
    """A route by a boolean argument: `forget` with `restore: true` is `restore`."""

    def route(args: dict) -> tuple[str, dict]:
        value = args.pop(flag, False)
        if not isinstance(value, bool):
            raise InvalidParams.at(flag, "must be true or false")
        return (when_set if value else otherwise), args

    return route


def _renamed(route: Callable[[dict], tuple[str, dict]], names: dict[str, dict[str, str]]):
    """`route`, then the argument names one tool spells its own way (explore's `limit` is around's `k`)."""

    def renaming(args: dict) -> tuple[str, dict]:
        name, rest = route(args)
        for ours, theirs in names.get(name, {}).items():
            if ours in rest:
                rest[theirs] = rest.pop(ours)
        return name, rest

    renaming.spelled = {tool: {theirs: ours for ours, theirs in pairs.items()} for tool, pairs in names.items()}
    return renaming


def _remember_route(args: dict) -> tuple[str, dict]:
    if "entries" in args:
        return "remember_many", args
    return ("reply" if "parent_id" in args else "remember"), args


def _entities_route(args: dict) -> tuple[str, dict]:
    return ("entity_context" if "name" in args else "entities"), args


def _share_route(args: dict) -> tuple[str, dict]:
    if not args:
        return "whoami", args
    return _flag("remove", "unshare", "share")(args)


#: Shorter wording for properties many tools share: each is read once per tool in every session.
_SHORT = {
    "id": "An entry id.",
    "source_id": "An entry id.",
    "target_id": "An entry id.",
    "limit": "At most this many.",
    "as_of": "Read memory as it stood at this instant (RFC 3339).",
    "known_at": "Read memory as it was recorded by this instant (RFC 3339), before later corrections.",
    "max_chars": "Budget for the result in characters; the rest moves to the next page.",
    "cursor": "The previous page's `next_cursor`.",
}
#: Schema keywords a model does not need to call well: the decoder enforces them and its error names the limit.
_ENFORCED_ONLY = ("pattern", "minLength", "maxLength", "maxItems")


def _lean(prop: dict) -> dict:
    out = {}
    for k, v in prop.items():
        if k in _ENFORCED_ONLY:
            continue
        out[k] = _lean(v) if k == "items" else {f: _lean(x) for f, x in v.items()} if k == "properties" else v
    if out.get("default") in (False, [], ""):
        del out["default"]  # what leaving it out means anyway
    return out


def _combine(name: str, description: str, tools: list[str], route, *, extra: dict | None = None,
             rename: dict[str, str] | None = None, required: tuple = (), words: dict[str, str] | None = None,
             retype: dict[str, dict] | None = None) -> Combined:
    """A combined tool over `tools` (every tool its route reaches): their properties, the first tool's wording
    winning unless `words` has one (`facts.subject`: a property of a list's items), `retype` replacing a
    property's type, then `extra`."""
    words = {**_SHORT, **(words or {})}
    properties: dict = {}
    for t in tools:
        for field, prop in schema(TOOLS[t].args, arguments=True)["properties"].items():
            field = (rename or {}).get(field, field)
            if field not in properties:
                properties[field] = _lean({**prop, "description": words[field]} if field in words else prop)
    for path, text in words.items():
        if "." in path:
            outer, inner = path.split(".")
            properties[outer]["items"]["properties"][inner]["description"] = text
    for field, shape in (retype or {}).items():
        properties[field] = {**{k: v for k, v in properties[field].items() if k not in ("anyOf", "type")}, **shape}
    properties.update(extra or {})
    input_schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        input_schema["required"] = list(required)
    return Combined(name=name, description=description, input_schema=input_schema, route=route,
                    writes=any(TOOLS[t].writes for t in tools), spelled=getattr(route, "spelled", {}))


def _enum(values, description: str, default: str | None = None) -> dict:
    out = {"type": "string", "enum": list(values), "description": description}
    return out if default is None else {**out, "default": default}


_EXPLORE = {
    "around": "around", "thread": "thread", "backlinks": "backlinks", "density": "density", "expand": "expand",
    "associations": "associations", "suggestions": "suggest_links", "topic": "topic_cluster", "topics": "topic_clusters",
    "open_threads": "open_threads", "briefing": "get_memory_briefing",
}
_FACTS = {"current": "facts", "history": "fact_history", "aspects": "aspects", "predicates": "predicates"}
_ENTITY_EDIT = {"relate": "relate", "merge": "entity_merge", "rename": "entity_rename"}


def build() -> dict[str, Combined]:
    """The default surface, by name, in `tools/list` order (the fine-grained tools must be loaded)."""
    ts = [
        _combine("remember", """Store a NEW memory entry; `recall` its key words first. To add to a stored subject, reply
with `parent_id` (type, title, tags default to the parent's). A fact that changed: the new one with `supersedes_ids`
(the old retire, kept in history). Several at once: `entries`.""",
                 ["remember", "reply", "remember_many"], _remember_route, words={
                     "type": ("user: about the person; feedback: how to work with them; project: work, decisions; "
                              "reference: how-tos, facts; learning: lessons; context: session summaries."),
                     "title": "One specific line.",
                     "content": "The memory itself. Mention related entries as #ID.",
                     "tags": "Tags without spaces; reuse the briefing's.",
                     "valid_from": "When it became true (RFC 3339); default now, never future.",
                     "speaker": "Who said it: a name, 'user' or 'assistant'.",
                     "everywhere": "Not in this session's conversation: it holds beyond it.",
                     "entities": "Names it is about beyond those in its text.",
                     "team": "Share it with this team at once.",
                     "auto_link": "Let Arbiter's model make the links it finds (needs its LLM key).",
                     "allow_duplicate": "Write even if an entry of this type has this exact content.",
                     "supersedes_ids": "Entries this one replaces.",
                     "source": "Where it came from (URL, file, person).",
                     "permanent": "Never fades.",
                 }, retype={"valid_from": {"type": "string"}},  # epoch seconds decode too; one type reads everywhere
                 extra={
                     "parent_id": {"type": "integer", "minimum": 1, "description": "Reply to this entry."},
                     "entries": _ENTRIES}),
        _combine("update", """Correct your own slip in an entry in place (a typo, a wrong tag); omitted fields stay.
Another author's entry: reply. A fact that changed: `remember` with `supersedes_ids`. `reinforce: true` (only `id`):
mark it useful instead.""",
                 ["update", "reinforce"], _flag("reinforce", "reinforce", "update"), words={
                     "type": "The entry type.", "title": "New title.", "content": "New content.", "tags": "New tags.",
                     "source": "New source.", "speaker": "New speaker; '' removes it."},
                 extra={"reinforce": {"type": "boolean", "description": "Reinforce instead."}}, required=("id",)),
        _combine("forget", """Retire an entry you wrote that is wrong: it leaves searches, stays in history; your replies
under it retire with it. Replaced by a newer one: `remember` with `supersedes_ids` instead.
`restore: true` brings back one retired by mistake.""",
                 ["forget", "restore"], _flag("restore", "restore", "forget"),
                 extra={"restore": {"type": "boolean", "description": "Undo a forget."}}, required=("id",)),
        _combine("link", """Relate two entries: SOURCE relation TARGET, once `recall`/`get` confirmed both ids
(`supersedes` retires the target). `remove: true` removes a relation made by mistake.""",
                 ["link", "unlink"], _flag("remove", "unlink", "link"), words={
                     "relation": ("supersedes: source replaces target; contradicts: both stay; refines: details it; "
                                  "supports: evidence for it; relates_to: same subject; causes: source caused target."),
                     "qualifier": "Only with causes: enables or prevents.",
                 }, extra={"remove": {"type": "boolean", "description": "Remove it."}},
                 required=("source_id", "relation", "target_id")),
        _combine("get", """Read one entry in full: content, tags, both time axes, thread parent, what superseded it.
`history: true`: its supersession chain and every recorded state (pages with `cursor`).""",
                 ["get", "history"], _flag("history", "history", "get"),
                 extra={"history": {"type": "boolean", "description": "Its history."}}, required=("id",)),
        _combine("recall", """Search memory by words, BEFORE writing what may be stored and whenever the answer may be
there. Hits carry excerpts (`get` reads one); matching facts come first. Ask the question as it stands ("What did
the user buy for her sister?"): who, "how many", "when" and dates steer the ranking. Matching is by words: when hits
miss, use words a stored answer would use. An empty query lists the newest, the conversation's first.""",
                 ["recall"], lambda args: ("recall", args), words={
                     "query": "The question, or key words.",
                     "conversation_id": "Search this conversation first (default: the session's).",
                     "everywhere": "No conversation first.",
                     "types": "Prefer these types.", "tag": "Prefer this tag.",
                     "graph": "Also follow associations from the top hits (slower).",
                 }, required=("query",)),
        _combine("list", """Browse entries newest first, filtered by types, tag, conversation. To search: `recall`.""",
                 ["list"], lambda args: ("list", args)),
        _combine("explore", """Views around an entry (`id`) or a topic, by `kind`:
around: thread parent, children, siblings, shared tags, references, relations; thread: its thread (pages);
backlinks: what points to it; density: relation counts; expand: its links' subgraph (`depth` 1-2);
associations: what Arbiter relates to it (`association`); suggestions: links worth making, for `link`;
topic: a tag's cluster (`tag`); topics: all clusters; open_threads: recent threads; briefing: the briefing.""",
                 list(_EXPLORE.values()),
                 _renamed(_pick(_EXPLORE, "kind"), {"around": {"limit": "k"}, "associations": {"association": "kind"}}),
                 rename={"k": "limit", "kind": "association"}, words={
                     "tag": "A tag of the topic.", "depth": "Hops: 1 or 2.",
                     "association": "temporal, entity or similarity (default all).",
                 }, extra={"kind": _enum(_EXPLORE, "Which view."),
                           "limit": {"type": "integer", "minimum": 1, "description": "At most this many."}},
                 required=("kind",)),
        _combine("conversation", """This session's conversation (your writes go to it; `recall` searches it first): `title`
starts a new one, `id` resumes one, neither says which; `list: true` lists them, newest first.""",
                 ["conversation", "conversations"], _flag("list", "conversations", "conversation"), words={
                     "id": "Resume it.", "title": "Start one.", "limit": "At most this many."},
                 extra={"list": {"type": "boolean", "description": "List them."}}),
        _combine("facts", """Facts (subject predicate object) by `kind`: current (default): what holds, by `subject`,
`predicate`, at `as_of`; history: one fact's versions (`id`); aspects: a subject's; predicates: all relations.""",
                 list(_FACTS.values()), _pick(_FACTS, "kind", "current"), words={
                     "subject": "'user' or a name.", "predicate": "A relation.", "id": "A fact id."},
                 extra={"kind": _enum(_FACTS, "Which view.", "current")}),
        _combine("propose_facts", """Record lasting facts (subject predicate object) the user states about themselves or
the world (work, home, people, preferences, decisions); `remember` the statement first and cite it in `source_ids`.
A gate applies them: a contradicting fact of a single-valued predicate replaces the current one only if newer and
confident (>= 0.7). Never guesses or plans.""",
                 ["propose_facts"], lambda args: ("propose_facts", args), words={
                     "facts": "The facts.", "apply": "Apply now; false leaves them for review.",
                     "facts.subject": "'user' (the person you talk with) or a name.",
                     "facts.predicate": "snake_case: works_at, lives_in, knows, prefers_<topic>...",
                     "facts.object": "The value, short.",
                     "facts.confidence": "1.0 said outright, 0.7 strongly implied; below 0.5 is refused.",
                     "facts.source_ids": "Ids of the entries it comes from.",
                     "facts.valid_from": "When it became true (RFC 3339); default now.",
                     "team": "Share them with this team.",
                 }, required=("facts",)),
        _combine("entities", """People, projects, tools... the memory names. `name`: that entity, its entries, relations
and cluster. Else: entities whose name starts with `query`, most mentioned first.""",
                 ["entities", "entity_context"], _entities_route, words={
                     "query": "Start of a name.", "type": "Only this type.", "name": "A name or alias.",
                     "limit": "At most this many."}),
        _combine("entity_edit", """Change entities by `action`: relate `source` `relation` `target` (adds `weight`);
merge `other` into `keep` (one thing); rename `name` to `new_name` (the old stays an alias).""",
                 list(_ENTITY_EDIT.values()), _pick(_ENTITY_EDIT, "action"), words={
                     "source": "An entity.", "target": "An entity.", "relation": "How source relates to target.",
                     "weight": "Weight to add.", "keep": "The entity kept.", "other": "The entity folded in.",
                     "name": "The entity.", "new_name": "Its new name."},
                 extra={"action": _enum(_ENTITY_EDIT, "What to change.")}, required=("action",)),
        _combine("share", """Share a thread you started with a team you are in (`id`, `team`); `remove: true` makes it
private again; no arguments: who you are and your teams.""",
                 ["share", "unshare", "whoami"], _share_route, words={"id": "The thread's root.", "team": "The team."},
                 extra={"remove": {"type": "boolean", "description": "Unshare it."}}),
    ]
    return {t.name: t for t in ts}


#: How the default surface reaches a fine-grained tool whose name differs, for results that name a tool.
_CALLED_AS = {
    **{fine: ("explore", f"`explore` kind `{kind}`") for kind, fine in _EXPLORE.items() if kind != fine},
    **{fine: ("facts", f"`facts` kind `{kind}`") for kind, fine in _FACTS.items() if kind != fine},
    **{fine: ("entity_edit", f"`entity_edit` action `{action}`") for action, fine in _ENTITY_EDIT.items()},
    "remember_many": ("remember", "`remember` with `entries`"), "reply": ("remember", "`remember` with `parent_id`"),
    "reinforce": ("update", "`update` with `reinforce`"), "restore": ("forget", "`forget` with `restore`"),
    "unlink": ("link", "`link` with `remove`"), "history": ("get", "`get` with `history`"),
    "conversations": ("conversation", "`conversation` with `list`"), "entity_context": ("entities", "`entities` with `name`"),
    "whoami": ("share", "`share` with no arguments"), "unshare": ("share", "`share` with `remove`"),
}


def called_as(offered: dict) -> dict[str, str]:
    """How a client of `offered` calls each fine-grained tool it reaches only through a combined tool."""
    return {fine: text for fine, (via, text) in _CALLED_AS.items() if fine not in offered and via in offered}


def select(spec: str | None) -> dict[str, Tool | Combined]:
    """The tools a server offers: the default surface, `all` (every fine-grained tool), or a comma list of names."""
    default = build()
    if spec is None or spec == "default":
        return default
    if spec == "all":
        return dict(TOOLS)
    names = [n.strip() for n in spec.split(",") if n.strip()]
    known = {**TOOLS, **default}  # a name in both is the combined tool: it reaches everything the other does
    unknown = [n for n in names if n not in known] or ([] if names else [spec])
    if unknown:
        raise InvalidParams.at("tools", f"no tool named {unknown[0]!r}; give all, default, or a comma list of: "
                               + ", ".join(sorted(known)))
    return {n: known[n] for n in names}
