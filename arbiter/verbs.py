"""The verbs: transport-free functions from typed params to typed results.

Each verb is declared once in VERBS with its params type, whether it writes
(writes are serialized on one connection) and whether it needs the admin
token. The socket daemon, the tests and anything else call verbs through
`Context` + VERBS; none of them touch SQL.
"""

from __future__ import annotations

import time

import msgspec

from arbiter._time import format_time
from arbiter import __version__, _code, derive, duplicates, entities as entities_mod, graph, recall as recall_mod
from arbiter import maintenance, salience as salience_mod
from arbiter.associations import advice as link_advice
from arbiter.entities import advice as entity_advice, clusters as entity_clusters
from arbiter.entities import core as entity_core
from arbiter.entities import visibility
from arbiter.model import (
    Conversation,
    ConversationCreateParams,
    ConversationList,
    ConversationListParams,
    Empty,
    EntryDetail,
    EntryList,
    ExpandParams,
    ForgetResult,
    GetParams,
    Mention,
    History,
    HistoryParams,
    IdParams,
    LinkParams,
    ListParams,
    Pong,
    PurgeResult,
    RecallParams,
    RememberManyParams,
    RememberManyResult,
    Remembered,
    RememberParams,
    RestoreResult,
    TenantCreateParams,
    TenantCreated,
    TenantList,
    UnlinkResult,
    UpdateParams,
)
from arbiter.facts import recall as fact_recall
from arbiter.recall import llm as llm_layers
from arbiter.consult import consult, skipped
from arbiter.verb import Context, Verb, _as_of, _known_at, advisor_for
from arbiter.store import entries, relations, schema_version, tenants
from arbiter import briefing as briefing_mod
from arbiter.graph import cascades, projection, tags as tag_graph, threads, topics
from arbiter.model import (
    AroundParams,
    BriefingParams,
    OpenThreads,
    OpenThreadsParams,
    ReplyParams,
    TagCooccurrenceParams,
    ThreadParams,
)


def remember(ctx: Context, p: RememberParams):
    """Write one entry; returns it as stored, with the entities it mentions and entries nearly the same.

    Title and content identical (up to case and whitespace) to an active entry
    of the same type writes nothing: the result is that entry, with
    `duplicate_of` (unless `allow_duplicate`); `similar` lists near-identical
    entries, the same text under another title among them. `similar` also
    compares the newest entries a `remember_many` left for the idle writer to
    index; `note` says how many past those were not compared.
    `note` says what `auto_tag`/`auto_supersede`/`extract_entities`/`auto_link` did;
    `linked` holds the candidates the advisor confirmed (`auto_link`). Link `candidates` are found only when
    asked (`candidates`, or `auto_link`); the entry's automatic similarity edges are derived by the idle writer
    moments after the answer unless candidates were asked for.
    """
    note = "; ".join(ctx.notes) or None
    # A write that retires something is never a no-op. Its references are checked first either way:
    # a bad parent or conversation is an error, duplicate or not.
    row = None
    if not duplicates.always_written(p):
        row = entries.checked_row(ctx.conn, ctx.viewer, p, now=ctx.now)
        existing = duplicates.duplicate_of(ctx.conn, ctx.viewer, p.type, p.title, p.content)
        if existing is not None:
            stored = entries.get(ctx.conn, ctx.viewer, existing)
            known = [Mention(id=e.id, name=e.name, type=e.type, created=False)
                     for e in entities_mod.mentions(ctx.conn, ctx.tenant_id, existing)]
            return Remembered(**msgspec.structs.asdict(stored), note=note, entities=known, duplicate_of=existing)
    if p.new_conversation is not None:  # only now: a duplicate or a refused write starts none
        started = tenants.create_conversation(ctx.conn, ctx.viewer, p.new_conversation, now=ctx.now)
        p, row = msgspec.structs.replace(p, conversation_id=started.id, new_conversation=None), None
    # What a batch left unsketched, read before the write (which queues this entry too), for `similar` and the note.
    pending = duplicates.unindexed(ctx.conn, ctx.viewer)
    entry_id = entries.remember(ctx.conn, ctx.viewer, p, now=ctx.now, row=row)
    salience_mod.set_initial(ctx.conn, ctx.tenant_id, entry_id, initial=p.salience, permanent=p.permanent, now=ctx.now)
    # Its similarity edges wait for the idle writer unless candidates are asked for: they were most of the
    # write's time (docs/architecture.md, Associations).
    derived = derive.written(ctx.conn, ctx.viewer, entry_id, p, now=ctx.now, pending=pending,
                             candidates=p.candidates or p.auto_link)
    # Fewer rows than the comparison takes means none was left out: no count to read.
    if len(pending) == duplicates.PENDING_COMPARED and (left := duplicates.not_compared(ctx.conn, ctx.viewer)):
        note = "; ".join(filter(None, [note, f"not compared with {left} entries a bulk write just made (the "
                                             "similar check sees them once indexed, within seconds)"]))
    stored = entries.written(ctx.viewer, entry_id, p, now=ctx.now) or entries.get(ctx.conn, ctx.viewer, entry_id)
    return Remembered(**msgspec.structs.asdict(stored), note=note, entities=derived.entities,
                      similar=derived.similar, candidates=derived.candidates)


AUTO_DEADLINE_S = 15.0
AUTO_SUPERSEDE_CANDIDATES = 5


def prepare_remember(ctx: Context, p: RememberParams) -> RememberParams:
    """`auto_tag`, `auto_supersede`, `extract_entities`: ask the advisor, then amend the params the write will use."""
    if p.auto_tag or p.auto_supersede:
        p = _auto_tag_supersede(ctx, p)
    if p.extract_entities:
        p = entity_advice.prepare(ctx, p)
    return p


def _auto_tag_supersede(ctx: Context, p: RememberParams) -> RememberParams:
    advisor = advisor_for(ctx)
    if advisor is None:
        ctx.notes.append(skipped("auto_tag/auto_supersede"))
        return p
    deadline = time.monotonic() + AUTO_DEADLINE_S
    if p.auto_tag:
        vocabulary = [t.tag for t in tag_graph.counts(ctx.conn, ctx.viewer, limit=100)]
        extra = consult(advisor, ctx.notes, "auto_tag",
                        lambda advisor: advisor.tags(p.title, p.content, p.tags, vocabulary, deadline=deadline))
        if extra is not None:
            merged = list(dict.fromkeys([*p.tags, *extra]))[:32]
            if added := [t for t in merged if t not in p.tags]:
                ctx.notes.append("auto_tag added " + ", ".join(added))
            p = msgspec.structs.replace(p, tags=merged)
    if p.auto_supersede:
        found = recall_mod.recall(ctx.conn, ctx.viewer, RecallParams(query=p.title, types=[p.type], limit=20))
        # Only the writer's own entries: a teammate's shared one is seen but not theirs to retire.
        same = entries.own(ctx.conn, ctx.viewer, [h.id for h in found.hits if h.type == p.type])
        olds = llm_layers.shown(ctx.conn, ctx.viewer, same[:AUTO_SUPERSEDE_CANDIDATES], llm_layers.FINE_EXCERPT)
        new = llm_layers.view(0, p.type, "new", False, p.title, p.content, p.speaker, llm_layers.FINE_EXCERPT)
        flagged = consult(advisor, ctx.notes, "auto_supersede",
                          lambda advisor: advisor.contradictions(new, olds, deadline=deadline) if olds else [])
        if flagged:
            ctx.notes.append("auto_supersede retired " + ", ".join(f"#{i}" for i in flagged))
            p = msgspec.structs.replace(p, supersedes_ids=list(dict.fromkeys([*p.supersedes_ids, *flagged])))
    return p


def remember_many(ctx: Context, p: RememberManyParams):
    """Write many entries in one transaction; returns their ids in order.

    An item identical to an entry already there (or earlier in the batch: same
    type, title and content up to case and whitespace) is not written again:
    its place in `ids` holds that entry's id, and `duplicates` counts them
    (unless the item says `allow_duplicate`). `auto_tag`/`auto_supersede`/
    `extract_entities` are refused here (use `remember`). Given entities are
    linked now; extraction, near copies and similarity edges follow on the
    idle writer, seconds after the answer (arbiter/derive.py).
    """
    started = None
    if p.new_conversation is not None:  # in the batch's transaction: a refused batch starts none
        started = tenants.create_conversation(ctx.conn, ctx.viewer, p.new_conversation, now=ctx.now).id
        p = msgspec.structs.replace(
            p, entries=[msgspec.structs.replace(e, conversation_id=started) for e in p.entries], new_conversation=None)
    keys = [duplicates.fingerprint(item.content) for item in p.entries]  # hashed once, for the check and the write
    same = duplicates.identical(ctx.conn, ctx.viewer, [
        None if duplicates.always_written(item) else (key, item.type, item.title) for item, key in zip(p.entries, keys)])
    ids = entries.remember_many(ctx.conn, ctx.viewer, p.entries, now=ctx.now, same=same, keys=keys)
    linker = entities_mod.Linker(ctx.conn, ctx.tenant_id, ctx.now, ctx.viewer)
    for entry_id, item, found in zip(ids, p.entries, same):
        if found is not None:
            continue
        if item.entities or item.speaker:
            linker.link(entry_id, entities_mod.given_in(item))
        salience_mod.set_initial(
            ctx.conn, ctx.tenant_id, entry_id, initial=item.salience, permanent=item.permanent, now=ctx.now
        )
    return RememberManyResult(ids=ids, conversation_id=started, duplicates=[i for i, f in enumerate(same) if f is not None])


def get(ctx: Context, p: GetParams):
    """One entry visible now (or at `as_of`), as recorded now (or at `known_at`), with its salience now.

    Missing is `not_found`; so is retired, with a message saying since when
    (an `as_of` before then shows it). `salience` (its value, reads,
    reinforcements, permanence) is the entry's now whatever the times asked:
    it is not versioned. A read is counted moments after it answers (the
    access log is written in batches).
    """
    entry = entries.get(ctx.conn, ctx.viewer, p.id, as_of=_as_of(p.as_of), known_at=_known_at(p.known_at))
    ctx.accessed.append((entry.id, "get"))
    now = salience_mod.info(ctx.conn, ctx.tenant_id, entry.id, now=ctx.now)
    return EntryDetail(**msgspec.structs.asdict(entry), salience=now)


def list_(ctx: Context, p: ListParams):
    """Browse newest first; every filter is a hard filter. Page with `before_id`; `known_at` reads past records."""
    if p.conversation_id is not None:
        tenants.require_conversation(ctx.conn, ctx.viewer, p.conversation_id)
    return EntryList(entries=entries.list_entries(ctx.conn, ctx.viewer, p))


def update(ctx: Context, p: UpdateParams):
    """Correct an active entry in place; omitted fields keep their value. The id stays; `history` keeps the old state.

    New text links the entities it mentions, a new speaker its entity.
    """
    before = entries.correctable(ctx.conn, ctx.viewer, p.id)
    entry = entries.update(ctx.conn, ctx.viewer, p, now=ctx.now)
    if (entry.title, entry.content, entry.speaker) != (before.title, before.content, before.speaker):
        written = RememberParams(type=entry.type, title=entry.title, content=entry.content, speaker=entry.speaker)
        derive.written(ctx.conn, ctx.viewer, entry.id, written, now=ctx.now, pending=[],
                       respoken=entry.speaker != before.speaker, compare=False)
    return entry


def forget(ctx: Context, p: IdParams):
    """Retire an entry you wrote, and your own replies below it (`also`); `forgotten` is false if it was already retired.

    A teammate's replies stay active; another user's entry is refused (`forbidden`): reply to it instead.
    """
    forgotten = entries.forget(ctx.conn, ctx.viewer, p.id, now=ctx.now)
    return ForgetResult(id=p.id, forgotten=forgotten,
                        also=cascades.run(ctx.conn, ctx.viewer, "forget", p.id, now=ctx.now))


def purge(ctx: Context, p: IdParams):
    """Delete an entry you wrote for good, with its relations and index rows, and your own replies below it (`also`).

    A teammate's reply is kept and loses its parent.
    """
    entries.require_author(ctx.conn, ctx.viewer, p.id, "purge")
    also = cascades.run(ctx.conn, ctx.viewer, "purge", p.id, now=ctx.now)
    entries.purge(ctx.conn, ctx.viewer, p.id)
    return PurgeResult(id=p.id, purged=True, also=also)


def restore(ctx: Context, p: IdParams):
    """Reopen a retired entry; `restored` is false if it was active. Refused (`conflict`) while a `supersedes` link retires it."""
    return RestoreResult(id=p.id, restored=entries.restore(ctx.conn, ctx.viewer, p.id, now=ctx.now))


def history(ctx: Context, p: HistoryParams):
    """The supersession chain through an entry, both ways, oldest first, with every recorded state (`revisions`) of each."""
    chain, edges, states = entries.history(ctx.conn, ctx.viewer, p.id, known_at=_known_at(p.known_at))
    return History(entries=chain, relations=edges, revisions=states)


def link(ctx: Context, p: LinkParams):
    """Add a directed relation; a duplicate is `conflict` with `existing_id`. `qualifier` only on `causes`."""
    return relations.link(ctx.conn, ctx.viewer, p.source_id, p.relation, p.target_id, now=ctx.now,
                          qualifier=p.qualifier)


def unlink(ctx: Context, p: LinkParams):
    """Remove a relation; effects already applied (a retired target) stay."""
    relations.unlink(ctx.conn, ctx.viewer, p.source_id, p.relation, p.target_id)
    return UnlinkResult(removed=True)


def expand(ctx: Context, p: ExpandParams):
    """Breadth-first subgraph around an entry (depth ≤ 2, ≤ 50 nodes) with relation labels."""
    return graph.expand(
        ctx.conn, ctx.viewer, p.id, depth=p.depth, limit=p.limit, as_of=_as_of(p.as_of), known_at=_known_at(p.known_at)
    )


def density(ctx: Context, p: IdParams):
    """In/out degree, distinct relation labels and 2-hop reach of an entry."""
    return graph.density(ctx.conn, ctx.viewer, p.id)


def recall(ctx: Context, p: RecallParams):
    """Search memory; with no query, browse with hard filters. Optional LLM layers: `expand`, `rerank`, `rerank_fine`. Active facts that match come back in `facts`."""
    if p.conversation_id is not None:
        tenants.require_conversation(ctx.conn, ctx.viewer, p.conversation_id)
    if not llm_layers.wants_llm(p):
        result = recall_mod.recall(ctx.conn, ctx.viewer, p)
    else:
        result = llm_layers.recall_with_llm(ctx.conn, ctx.viewer, p, advisor_for(ctx))
    result.facts = fact_recall.search(ctx.conn, ctx.viewer, p)
    ctx.accessed.extend((h.id, "recall") for h in result.hits)
    return result


def conversation_create(ctx: Context, p: ConversationCreateParams):
    """Create a conversation (a scope that recall searches first)."""
    return tenants.create_conversation(ctx.conn, ctx.viewer, p.title, now=ctx.now)


def conversation_list(ctx: Context, p: ConversationListParams):
    """Conversations, newest first."""
    return ConversationList(conversations=tenants.list_conversations(ctx.conn, ctx.viewer, p.limit))


def conversation_get(ctx: Context, p: IdParams):
    """One conversation by id (to resume it, however many came after it)."""
    tenants.require_conversation(ctx.conn, ctx.viewer, p.id, path="id")
    title, created_at = ctx.conn.execute("SELECT title, created_at FROM conversations WHERE tenant_id = ? AND id = ?",
                                         (ctx.tenant_id, p.id)).fetchone()
    return Conversation(id=p.id, title=title, created_at=format_time(created_at))


def status(ctx: Context, p: Empty):
    """Counts for the caller's tenant (the database size is the admin's: `tenant_list`)."""
    status = tenants.status(
        ctx.conn, ctx.viewer, ctx.tenant_name, version=__version__, schema=schema_version(ctx.conn)
    )
    # The maintenance report counts (and lists retired ids of) the whole tenant: only a one-user tenant's user sees it.
    last = maintenance.last(ctx.conn, ctx.tenant_id) if visibility.whole(ctx.viewer) else None
    return msgspec.structs.replace(
        status,
        entities=entity_core.count(ctx.conn, ctx.viewer),
        entity_clusters=entity_clusters.count(ctx.conn, ctx.viewer),
        average_salience=last.average_salience if last else None,
        last_maintenance=last,
    )


def ping(ctx: Context, p: Empty):
    """Liveness check and the code the daemon runs; needs no token."""
    return Pong(version=__version__, code=_code.fingerprint())


def tenant_create(ctx: Context, p: TenantCreateParams):
    """Admin: create a tenant and return its token (shown once)."""
    _, token = tenants.create_tenant(ctx.conn, p.name, now=ctx.now)
    return TenantCreated(name=p.name, token=token)


def tenant_list(ctx: Context, p: Empty):
    """Admin: all tenants."""
    return TenantList(tenants=tenants.list_tenants(ctx.conn), db_bytes=tenants.db_bytes(ctx.conn))


VERBS: dict[str, Verb] = {
    "remember": Verb(
        RememberParams, remember, writes=True, small=True, prepare=prepare_remember,
        needs_prepare=lambda p: p.auto_tag or p.auto_supersede or p.extract_entities,
        finish=link_advice.judge, needs_finish=lambda p: p.auto_link,
    ),
    "remember_many": Verb(RememberManyParams, remember_many, writes=True),
    "get": Verb(GetParams, get, lane="loop"),
    "list": Verb(ListParams, list_, lane="quick"),
    "update": Verb(UpdateParams, update, writes=True, small=True),
    "forget": Verb(IdParams, forget, writes=True, small=True),
    "purge": Verb(IdParams, purge, writes=True),
    "restore": Verb(IdParams, restore, writes=True, small=True),
    "history": Verb(HistoryParams, history, lane="quick"),
    "link": Verb(LinkParams, link, writes=True, small=True),
    "unlink": Verb(LinkParams, unlink, writes=True, small=True),
    "expand": Verb(ExpandParams, expand),
    "density": Verb(IdParams, density),
    "recall": Verb(RecallParams, recall),
    "conversation_create": Verb(ConversationCreateParams, conversation_create, writes=True),
    "conversation_list": Verb(ConversationListParams, conversation_list, lane="quick"),
    "conversation_get": Verb(IdParams, conversation_get, lane="quick"),
    "status": Verb(Empty, status),
    "ping": Verb(Empty, ping, public=True, lane="loop"),
    "tenant_create": Verb(TenantCreateParams, tenant_create, writes=True, admin=True),
    "tenant_list": Verb(Empty, tenant_list, admin=True),
}


# ---- threads, graph projection, topic clusters, briefing ---------------------

def reply(ctx: Context, p: ReplyParams):
    """Reply in a thread: a new entry under `parent_id`; type, title and tags default to the parent's."""
    entry_id = threads.reply(ctx.conn, ctx.viewer, p, now=ctx.now)
    entry = entries.get(ctx.conn, ctx.viewer, entry_id)
    written = RememberParams(type=entry.type, title=entry.title, content=entry.content, speaker=entry.speaker)
    derive.written(ctx.conn, ctx.viewer, entry_id, written, now=ctx.now, pending=[], compare=False)
    return entry


def thread(ctx: Context, p: ThreadParams):
    """The thread through an entry: its root and every visible reply, oldest first."""
    return threads.thread(ctx.conn, ctx.viewer, p.id, as_of=_as_of(p.as_of), known_at=_known_at(p.known_at))


def open_threads(ctx: Context, p: OpenThreadsParams):
    """Active threads (roots with active replies), newest activity first."""
    return OpenThreads(threads=threads.open_threads(ctx.conn, ctx.viewer, limit=p.limit)[0])


def backlinks(ctx: Context, p: IdParams):
    """What points at an entry: replies, `#ID` mentions and incoming relations, labelled by kind."""
    return projection.backlinks(ctx.conn, ctx.viewer, p.id)


def around(ctx: Context, p: AroundParams):
    """An entry's neighbourhood: parent, children, siblings, shared-tag neighbours, references, relations."""
    return projection.around(ctx.conn, ctx.viewer, p.id, k=p.k)


def tag_cooccurrence(ctx: Context, p: TagCooccurrenceParams):
    """Tag and tag-pair counts over the active entries the caller sees (or one tag's partners)."""
    return tag_graph.cooccurrence(ctx.conn, ctx.viewer, tag=p.tag, limit=p.limit)


def briefing(ctx: Context, p: BriefingParams):
    """The session briefing: a markdown map of this memory (what MCP `initialize` hands an agent)."""
    result, fresh = briefing_mod.build(
        ctx.conn, ctx.viewer, ctx.tenant_name, now=ctx.now, advisor=advisor_for(ctx), max_bytes=p.max_bytes
    )
    topics.save_names(ctx, fresh)
    return result


VERBS.update({
    "reply": Verb(ReplyParams, reply, writes=True, small=True),
    "thread": Verb(ThreadParams, thread),
    "open_threads": Verb(OpenThreadsParams, open_threads),
    "backlinks": Verb(IdParams, backlinks, lane="quick"),
    "around": Verb(AroundParams, around),
    "tag_cooccurrence": Verb(TagCooccurrenceParams, tag_cooccurrence),
    "briefing": Verb(BriefingParams, briefing),
})
VERBS.update(topics.VERBS)

from arbiter.backup import core as backup  # noqa: E402  (feature modules declare their own verbs)

VERBS.update(backup.VERBS)

from arbiter.entities.verbs import VERBS as _ENTITY_VERBS  # noqa: E402

VERBS.update(_ENTITY_VERBS)

from arbiter.ui import view as ui_view  # noqa: E402

VERBS.update(ui_view.VERBS)

from arbiter.transfer import dump as transfer_dump, load as transfer_load  # noqa: E402

VERBS.update(transfer_dump.VERBS)
VERBS.update(transfer_load.VERBS)
from arbiter.facts.verbs import VERBS as _FACT_VERBS  # noqa: E402  (facts behind the evaluation gate)

VERBS.update(_FACT_VERBS)

VERBS.update(salience_mod.VERBS)
VERBS.update(maintenance.VERBS)
from arbiter.associations.verbs import VERBS as _ASSOCIATION_VERBS  # noqa: E402

VERBS.update(_ASSOCIATION_VERBS)
from arbiter.people import VERBS as _PEOPLE_VERBS  # noqa: E402  (users, teams, sharing)

VERBS.update(_PEOPLE_VERBS)
from arbiter.changes.core import VERBS as _CHANGE_VERBS  # noqa: E402  (what a watcher polls: MCP change notifications)

VERBS.update(_CHANGE_VERBS)
