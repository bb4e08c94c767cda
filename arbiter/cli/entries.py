"""Client commands for entries, relations, recall, conversations and tenants."""

from __future__ import annotations

from typing import get_args

import click
import msgspec

from arbiter import paths
from arbiter.cli._common import (
    _date, _emit, _show_entry, _show_list, command, counted, entry_line, main, new_name, read_content,
)
from arbiter.model import ENTRY_TYPES, RECALL_STAGES, RELATION_TYPES, RelationQualifier

_TYPES = click.Choice(ENTRY_TYPES)
_RELATIONS = click.Choice(RELATION_TYPES)


@command(main)
@click.option("--type", "type", type=_TYPES, required=True, help="What kind of entry this is.")
@click.option("--title", required=True, help="One line, at most 200 bytes.")
@click.option("--content", help="The body; `-` reads it from stdin. Required.")
@click.option("--tag", "tags", multiple=True, help="Repeatable.")
@click.option("--source", help="Where this came from (at most 200 bytes).")
@click.option("--conversation", "conversation_id", type=int, help="Pin to a conversation id.")
@click.option("--parent", "parent_id", type=int, help="Reply to this entry (threads).")
@click.option("--supersedes", "supersedes_ids", type=int, multiple=True, help="Retire this entry in favour of the new one. Repeatable.")
@click.option("--valid-from", help="When this became true (RFC 3339 or epoch seconds; default now; never in the future).")
@click.option("--speaker", help="Who said it: a name (Caroline) or a role (user, assistant). Recall matches names "
              "in a query to it.")
@click.option("--auto-tag", is_flag=True, help="LLM: add 2–4 tags, reusing the tenant's vocabulary.")
@click.option("--auto-supersede", is_flag=True, help="LLM: retire older entries this one directly contradicts.")
@click.option("--entity", "entities", multiple=True, metavar="NAME",
              help="An entity this entry is about (beside those found in its text). Repeatable.")
@click.option("--salience", type=click.FloatRange(0, 1), help="Initial salience (default 0.5).")
@click.option("--permanent", is_flag=True, help="Salience never below 0.8; maintenance never retires it.")
@click.option("--allow-duplicate", is_flag=True, help="Write even if an active entry of this type says the same.")
@click.option("--extract-entities", is_flag=True, help="LLM: add entities the lexical extraction missed.")
@click.option("--candidates", "candidates", is_flag=True,
              help="Suggest links to judge (a likely cause, a similar entry), printed as `candidate: arbiter link ...`.")
@click.option("--auto-link", is_flag=True, help="LLM: link the candidates the advisor confirms (never supersedes).")
@click.option("--team", help="Share it with this team (one you are in) at once; default: only you see it.")
def remember(settings, as_json, type, title, content, tags, source, conversation_id, parent_id, supersedes_ids,
             valid_from, speaker, auto_tag, auto_supersede, entities, salience, permanent, allow_duplicate,
             extract_entities, candidates, auto_link, team):
    """Write one entry.

    \b
    Example:
      arbiter remember --type feedback --title "Prefers tabs" --content "Use tabs in Go files" --tag style
      git log -1 | arbiter remember --type project --title "Last commit" --content -
      arbiter remember --type project --title "DB choice" --content "We picked Postgres" --entity Apollo
      arbiter remember --type context --title "Support group" --content "I went yesterday" --speaker Caroline
      arbiter remember --type project --title "Cache" --content "SQLite, because we lack Redis skills" --candidates
      arbiter remember --type project --title "Cache" --content "SQLite, because we lack Redis skills" --auto-link
    """
    content = read_content(content)
    if content is None:
        raise click.UsageError("--content is required (use --content - to read it from stdin)")
    with settings.client() as c:
        e = c.remember(
            type=type, title=title, content=content, tags=list(tags), source=source, conversation_id=conversation_id,
            parent_id=parent_id, supersedes_ids=list(supersedes_ids), valid_from=valid_from, speaker=speaker,
            auto_tag=auto_tag, auto_supersede=auto_supersede, entities=list(entities), salience=salience,
            permanent=permanent, allow_duplicate=allow_duplicate, extract_entities=extract_entities, team=team,
            auto_link=auto_link, candidates=candidates,
        )
    if e.duplicate_of is not None and not as_json:
        click.echo(f"already remembered as #{e.duplicate_of}")
        return
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))
    if e.note and not as_json:
        click.echo(f"note: {e.note}", err=True)
    if e.entities and not as_json:
        click.echo("entities: " + ", ".join(m.name + " (new)" * m.created for m in e.entities), err=True)
        for m in e.entities:
            for other in m.possibly_same_as:
                click.echo(f"note: {m.name!r} may be the same as {other.name!r} (arbiter entity merge)", err=True)
    if e.similar and not as_json:
        click.echo("similar: " + " ".join(f"#{i}" for i in e.similar) + " (link or supersede them)", err=True)
    for r in e.linked if not as_json else []:
        click.echo(f"linked: {r.source_id} {r.relation} {r.target_id} (relation {r.id})", err=True)
    made = {(r.source_id, r.relation, r.target_id) for r in e.linked}
    if e.candidates and not as_json:
        for cand in (c for c in e.candidates if (c.source_id, c.relation, c.target_id) not in made):
            click.echo(f"candidate: arbiter link {cand.source_id} {cand.relation} {cand.target_id}  ({cand.reason})",
                       err=True)


_KNOWN_AT_HELP = "Read the memory as it was recorded then: its text, tags and validity at that time."


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("--as-of", help="Read the entry as it stood then (RFC 3339 or epoch seconds).")
@click.option("--known-at", help=_KNOWN_AT_HELP)
def get(settings, as_json, id, as_of, known_at):
    """Show one entry (retired ones only with --as-of), with its salience.

    --as-of is valid time (what held in the world then), --known-at record
    time (what the memory said then, before later corrections); they combine.
    The salience line (value, initial, reads, reinforcements, permanent) is
    the entry's now, whatever time is asked: salience is not versioned.

    \b
    Example:
      arbiter get 4 --known-at 2026-11-20T10:00:00Z
    """
    with settings.client() as c:
        e = c.get(id, as_of=as_of, known_at=known_at)
    _emit(e, as_json, _show_entry)


@command(main, "list")
@click.option("--type", "types", type=_TYPES, multiple=True, help="Only these types. Repeatable.")
@click.option("--tag", help="Only entries with this tag.")
@click.option("--conversation", "conversation_id", type=int, help="Only entries pinned to this conversation.")
@click.option("--as-of", help="The set as it stood then.")
@click.option("--known-at", help=_KNOWN_AT_HELP)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Entries per page.")
@click.option("--before", "before_id", type=click.IntRange(min=1), help="Only entries older than this id (the next page).")
@click.option("--all", "everything", is_flag=True, help="Every matching entry, fetched page by page.")
def list_(settings, as_json, types, tag, conversation_id, as_of, known_at, limit, before_id, everything):
    """Browse entries newest first; filters are hard filters.

    \b
    Example:
      arbiter list --type project --tag release --limit 10
      arbiter list --before 1200          # the page after one that ended at #1200
      arbiter list --all --json > everything.json
    """
    query = dict(types=list(types), tag=tag, conversation_id=conversation_id, as_of=as_of, known_at=known_at, limit=limit)
    items = []
    with settings.client() as c:
        while True:
            page = c.list(**query, before_id=before_id)
            items.extend(page)
            if not everything or len(page) < limit:
                break
            before_id = page[-1].id
    _emit(items, as_json, _show_list)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("--type", "type", type=_TYPES, help="The corrected kind of entry.")
@click.option("--title", help="The corrected title (one line, at most 200 bytes).")
@click.option("--content", help="`-` reads stdin.")
@click.option("--tag", "tags", multiple=True, help="Replace the tags. Repeatable.")
@click.option("--source", help="Where it came from, corrected; `--source ''` removes it.")
@click.option("--speaker", help="Who said it, corrected; `--speaker ''` removes it.")
def update(settings, as_json, id, type, title, content, tags, source, speaker):
    """Correct an active entry in place (typos, tags, who said it).

    To record that something changed in the world, remember the new fact with
    --supersedes instead: history keeps both.

    \b
    Examples:
      arbiter update 12 --content "Deploys freeze on Fridays"
      arbiter update 40 --speaker Melanie
    """
    if (type, title, content, tags, source, speaker) == (None, None, None, (), None, None):
        raise click.UsageError("nothing to update: give --title, --content, --tag, --type, --source or --speaker")
    content = read_content(content)
    with settings.client() as c:
        e = c.update(id, type=type, title=title, content=content, tags=list(tags) or None, source=source,
                     speaker=speaker)
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def forget(settings, as_json, id):
    """Retire an entry (it stays readable with --as-of; `arbiter restore` undoes it). Safe to repeat.

    Your replies under it are retired with it, never a teammate's.

    \b
    Example:
      arbiter forget 12
    """
    with settings.client() as c:
        done = c.forget(id)
    _emit(
        {"id": id, "forgotten": done}, as_json,
        lambda _: click.echo(f"#{id} forgotten" if done else f"#{id} was already retired"),
    )


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def restore(settings, as_json, id):
    """Reopen a retired entry (a forget undone). Refused while a `supersedes` link retires it: unlink that first.

    \b
    Example:
      arbiter restore 4
    """
    with settings.client() as c:
        done = c.restore(id)
    _emit(
        {"id": id, "restored": done}, as_json,
        lambda _: click.echo(f"#{id} restored" if done else f"#{id} was already active"),
    )


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def purge(settings, as_json, id):
    """Delete an entry for good: its row, its history, relations and index rows (cannot be undone).

    To retire an entry and keep it readable with --as-of, use `arbiter forget`.

    \b
    Example:
      arbiter purge 12
    """
    with settings.client() as c:
        c.purge(id)
    _emit({"id": id, "purged": True}, as_json, lambda _: click.echo(f"#{id} purged"))


def _relation_line(r) -> str:
    qualified = f" ({r.qualifier})" if r.qualifier else ""
    return f"{r.source_id} {r.relation}{qualified} {r.target_id}  (relation {r.id})"


_RELATION_LIST = "RELATION is one of: " + ", ".join(RELATION_TYPES) + "."


@command(main, epilog=_RELATION_LIST)
@click.argument("source_id", metavar="SOURCE", type=int)
@click.argument("relation", type=_RELATIONS, metavar="RELATION")
@click.argument("target_id", metavar="TARGET", type=int)
@click.option("--qualifier", type=click.Choice(get_args(RelationQualifier)),
              help="Only with causes: enables (an enabling condition) or prevents (a preventing factor).")
def link(settings, as_json, source_id, relation, target_id, qualifier):
    """Relate two entries: SOURCE RELATION TARGET.

    `supersedes` also retires TARGET. `causes` may take a qualifier: none is
    a direct cause, `enables` an enabling condition, `prevents` a preventing
    factor.

    \b
    Example:
      arbiter link 7 supersedes 3
      arbiter link 4 causes 9 --qualifier enables
    """
    with settings.client() as c:
        r = c.link(source_id, relation, target_id, qualifier=qualifier)
    _emit(r, as_json, lambda r: click.echo(_relation_line(r)))


@command(main, epilog=_RELATION_LIST)
@click.argument("source_id", metavar="SOURCE", type=int)
@click.argument("relation", type=_RELATIONS, metavar="RELATION")
@click.argument("target_id", metavar="TARGET", type=int)
def unlink(settings, as_json, source_id, relation, target_id):
    """Remove a relation (a retired target stays retired: `arbiter restore` it).

    \b
    Example:
      arbiter unlink 7 supersedes 3 && arbiter restore 3
    """
    with settings.client() as c:
        c.unlink(source_id, relation, target_id)
    _emit({"removed": True}, as_json, lambda _: click.echo(f"unlinked {source_id} {relation} {target_id}"))


def _show_hits(result) -> None:
    if result.searched:
        click.echo("also searched: " + "; ".join(result.searched))
    for rank, h in enumerate(result.hits, 1):
        click.echo(entry_line(h))
        if rank <= 3 and h.excerpt:
            click.echo("    " + h.excerpt.replace("\n", " "))
        if h.parts:
            click.echo("    " + "  ".join(f"{k}={v:.3g}" for k, v in h.parts.items()))
    for f in result.facts:
        sources = f"  from {', '.join(f'#{i}' for i in f.sources)}" if f.sources else ""
        click.echo(f"fact #{f.id}  {f.subject} {f.predicate} {f.object}  ({f.confidence:g} · {f.valid_from[:10]}){sources}")
        if f.parts:
            click.echo("    " + "  ".join(f"{k}={v:.3g}" for k, v in f.parts.items()))
    if not result.hits and not result.facts:
        click.echo("(no matches)", err=True)
    if result.note:
        click.echo(f"note: {result.note}", err=True)


@command(main)
@click.argument("query")
@click.option("--conversation", "conversation_id", type=int, help="Search this conversation first, then the whole tenant.")
@click.option("--type", "types", type=_TYPES, multiple=True, help="Prefer these types. Repeatable.")
@click.option("--tag", help="Prefer entries with this tag.")
@click.option("--as-of", help="Rank the set as it stood then.")
@click.option("--known-at", help="Search the memory as it was recorded then (past texts, none of what came later).")
@click.option("--limit", type=click.IntRange(1, 200), default=10, show_default=True, help="Hits to show.")
@click.option("--explain", is_flag=True, help="Show each hit's score parts.")
@click.option("--intent", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="Let question words (when, how to, prefer...) softly favour entry types.")
@click.option("--decay/--no-decay", default=False, show_default=True,
              help="Favour recent entries (off: an old note is as true as a new one until it is superseded).")
@click.option("--half-life", "half_life_days", type=click.FloatRange(min=0, min_open=True, max=36500), default=90.0,
              show_default=True, help="Age decay half-life in days.")
@click.option("--floor", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Age decay never goes below this factor.")
@click.option("--disable", "disable", type=click.Choice(RECALL_STAGES), multiple=True,
              help="Switch a pipeline stage off (to see what it does). Repeatable.")
@click.option("--expand", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM: also search a rephrasing of the query and a guess at how its answer is worded "
                   "(default: the daemon's fast model).")
@click.option("--rerank", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM: reorder the top 25 (default: the daemon's fast model).")
@click.option("--rerank-fine", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM cascade: reorder the top 8 again with excerpts (default: the daemon's strong model).")
@click.option("--graph", is_flag=True,
              help="Also walk associations and relations from the top hits, weighted by the question's intent.")
def recall(settings, as_json, query, conversation_id, types, tag, as_of, known_at, limit, explain, intent, decay,
           half_life_days, floor, disable, expand, rerank, rerank_fine, graph):
    """Search memory. The top three hits show the passage that matched.

    --json prints the whole result as the protocol returns it: an object with
    `hits`, `facts`, `searched`, `note` and (with --explain) `expression`.

    \b
    Example:
      arbiter recall "deploy checklist" --conversation 4 --limit 5
      arbiter recall "what did we decide about caching" --explain --disable voice
      arbiter recall "deploy" --json | jq '.hits[].id'
    """
    with settings.client() as c:
        llm = {k: (v or True) for k, v in (("expand", expand), ("rerank", rerank), ("rerank_fine", rerank_fine))
               if v is not None}
        res = c.recall(query, conversation_id=conversation_id, types=list(types), tag=tag, as_of=as_of, known_at=known_at,
                       limit=limit, explain=explain, intent=intent, decay=decay, half_life_days=half_life_days,
                       floor=floor, disable=list(disable), graph=graph, **llm)
    _emit(res, as_json, _show_hits)


def _revision_line(r) -> str:
    what = r.change + (f": {', '.join(f for f in r.fields if f != 'valid_to')}" if r.change == "updated" else "")
    if r.change == "superseded" and r.entry.superseded_by:
        what += " by " + ", ".join(f"#{i}" for i in r.entry.superseded_by)
    return f"  #{r.id}  {r.recorded_from}  {what}  \"{r.entry.title}\""


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("--known-at", help="The history as it was recorded then.")
def history(settings, as_json, id, known_at):
    """The supersession chain through an entry (oldest first), then every recorded change to each.

    \b
    Example:
      arbiter history 2
      arbiter history 2 --json | jq '.revisions[] | [.recorded_from, .change]'
    """
    with settings.client() as c:
        h = c.history(id, known_at=known_at)

    def human(h):
        _show_list(h.entries)
        if h.revisions:
            click.echo("revisions (record time, what changed):")
            for r in h.revisions:
                click.echo(_revision_line(r))

    _emit(h, as_json, human)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("--depth", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Hops to walk: 1 (its links) or 2 (their links too).")
@click.option("--as-of", help="The graph among entries valid then.")
@click.option("--known-at", help=_KNOWN_AT_HELP)
def expand(settings, as_json, id, depth, as_of, known_at):
    """The entries related to ENTRY_ID, up to two hops away.

    \b
    Example:
      arbiter expand 7 --depth 2 --as-of 2026-11-20T10:00:00Z
    """
    with settings.client() as c:
        g = c.expand(id, depth=depth, as_of=as_of, known_at=known_at)

    def human(g):
        for n in g.nodes:
            why = _reached_by(g, n.id)
            click.echo(("  " * g.depth[n.id]) + entry_line(n) + (f"  <- {why}" if why else ""))
        for r in g.edges:
            click.echo("edge: " + _relation_line(r))
        if g.truncated:
            click.echo("(truncated at the node limit)", err=True)

    _emit(g, as_json, human)


#: Why a derived neighbour is in a subgraph, in words (arbiter/associations).
_ASSOCIATED = {"temporal": "written close in time to", "entity": "names an entity with", "similarity": "reads like"}


def _reached_by(g, node: int) -> str:
    """Why `node` is in subgraph `g`: its relations and associations with the nodes a hop nearer the start."""
    nearer = {i for i, d in g.depth.items() if d < g.depth[node]}
    why = [f"{r.relation}{f' ({r.qualifier})' if r.qualifier else ''} #{r.target_id}" if r.source_id == node
           else f"#{r.source_id} {r.relation} it" for r in g.edges
           if {r.source_id, r.target_id} & nearer and node in (r.source_id, r.target_id)]
    why += [f"{_ASSOCIATED.get(a.kind, a.kind)} #{a.source_id if a.target_id == node else a.target_id} "
            f"({a.kind}/{a.sub_type})" for a in g.associations
            if node in (a.source_id, a.target_id) and {a.source_id, a.target_id} & nearer]
    return "; ".join(why)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def density(settings, as_json, id):
    """How connected an entry is: relations in and out, replies, #ID mentions both ways, 2-hop reach.

    \b
    Example:
      arbiter density 7
    """
    with settings.client() as c:
        d = c.density(id)
    def human(d):
        click.echo(f"#{d.id}  relations in {d.in_degree} out {d.out_degree}  {counted(d.replies, 'reply', 'replies')}  "
                   f"mentioned by {d.mentioned_by}, mentions {d.mentions}  reach(2) {d.reach_2hop}  relations: "
                   + (", ".join(d.relations) or "none"))

    _emit(d, as_json, human)


@command(main)
def status(settings, as_json):
    """What the daemon holds for this tenant: who you are, counts, last write and maintenance.

    \b
    Example:
      arbiter status
      arbiter status --json | jq .entries_active
    """
    with settings.client() as c:
        s = c.status()
        # The maintenance report counts the whole tenant: the daemon gives it only to the user of a one-user
        # tenant. Printed "none", it read as "never ran".
        hidden = s.last_maintenance is None and not as_json and len(c.user_list().users) > 1

    def human(s):
        from arbiter.cli.salience import maintenance_line

        for k, v in msgspec.structs.asdict(s).items():
            if k in ("last_maintenance", "average_salience") and v is None and hidden:
                v = "hidden (maintenance counts the whole tenant, and it has other users)"
            elif k == "last_maintenance":
                v = maintenance_line(v) if v is not None else "none"
            elif isinstance(v, list):
                v = ", ".join(v) or "none"
            elif isinstance(v, float):
                v = f"{v:.3f}"
            elif v is None:
                v = "none"
            click.echo(f"{k}: {v}")

    _emit(s, as_json, human)


@main.group()
def conversation():
    """Conversations scope recall: their entries are searched first.

    \b
    Example:
      arbiter conversation add "Release planning"      # prints its id, say 4
      arbiter remember --type project --title "Freeze" --content "From Dec 1" --conversation 4
      arbiter recall "freeze" --conversation 4
    """


@command(conversation, "add")
@click.argument("title")
def conversation_add(settings, as_json, title):
    """Create a conversation and print its id.

    \b
    Example:
      arbiter conversation add "Release planning"
    """
    with settings.client() as c:
        conv = c.conversation_create(title)
    _emit(conv, as_json, lambda conv: click.echo(f"conversation {conv.id}  {conv.title}"))


@command(conversation, "list")
def conversation_list(settings, as_json):
    """Conversations, newest first.

    \b
    Example:
      arbiter conversation list
    """
    with settings.client() as c:
        convs = c.conversation_list()
    _emit(convs, as_json, lambda cs: [click.echo(f"{x.id}  {x.title}  ({_date(x.created_at)})") for x in cs]
          or click.echo("(no conversations)", err=True))


@main.group()
def tenant():
    """Tenants: separate memories behind separate tokens (admin).

    \b
    Example:
      arbiter tenant add acme
      arbiter --tenant acme remember --type project --title "Kickoff" --content "Monday 10:00"
    """


@command(tenant, "add")
@click.argument("name")
def tenant_add(settings, as_json, name):
    """Create a tenant; print its token once and save it under HOME/tenants/NAME.token.

    If that file already holds a token (another database of this home may
    have a tenant of that name, and tokens are stored hashed), nothing is
    created: move the file aside first.

    \b
    Example:
      arbiter tenant add acme
    """
    name = new_name(name)
    path = paths.token_path(settings.home, name)
    with settings.client(admin=True) as c:
        paths.require_unheld(path, f"a tenant named {name!r}",
                             exists=lambda: name in {t.name for t in c.tenant_list().tenants})
        created = c.tenant_create(name)
    paths.write_secret(path, created.token)
    _emit(created, as_json, lambda t: click.echo(f"tenant {t.name}: token {t.token}\n(saved to {path})"))


@command(tenant, "list")
def tenant_list(settings, as_json):
    """All tenants, oldest first (needs the admin token).

    \b
    Example:
      arbiter tenant list
    """
    with settings.client(admin=True) as c:
        ts = c.tenant_list().tenants
    _emit(ts, as_json, lambda ts: [click.echo(f"{t.name}  ({_date(t.created_at)})") for t in ts])

