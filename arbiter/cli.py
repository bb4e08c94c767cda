"""The `arbiter` command line: the daemon and a client for every verb.

Config is read here and only here (flags, then ARBITER_* env vars). Errors
become one line on stderr and exit 1; usage errors exit 2; ARBITER_DEBUG=1
keeps tracebacks.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click
import msgspec

from arbiter import __version__, paths
from arbiter.errors import ArbiterError
from arbiter.model import ENTRY_TYPES, RECALL_STAGES, RELATION_TYPES

EXAMPLES = """
\b
Examples:
  arbiter serve &
  arbiter remember --type project --title "Ship v1" --content "Target: Friday" --tag release
  arbiter recall "when do we ship"
  arbiter link 2 supersedes 1
  arbiter get 1 --as-of 2026-11-20T10:00:00Z
"""

_TYPES = click.Choice(ENTRY_TYPES)
_RELATIONS = click.Choice(RELATION_TYPES)


class Settings:
    """Where the CLI finds the daemon and its token."""

    def __init__(self, home: Path, socket: Path | None, tenant: str):
        self.home = home
        self.socket = socket or paths.socket_path(home)
        self.tenant = tenant

    def client(self, *, admin: bool = False):
        from arbiter.client import Client

        if admin:
            token = paths.read_secret(paths.admin_token_path(self.home), "the admin")
        else:
            token = paths.read_secret(paths.token_path(self.home, self.tenant), f"tenant {self.tenant!r}")
        return Client(self.socket, token)


def _emit(obj, as_json: bool, human) -> None:
    """Print `obj` as JSON (structs and lists of them) or through `human`."""
    if as_json:
        click.echo(msgspec.json.encode(obj).decode())
    else:
        human(obj)


def _date(text: str | None) -> str:
    return (text or "")[:10]


def entry_line(e) -> str:
    """`#42  [project]  Title  (2026-11-20 · superseded)`."""
    marks = [_date(e.valid_from)]
    if getattr(e, "superseded", None) or getattr(e, "superseded_by", None):
        marks.append("superseded")
    elif e.valid_to:
        marks.append("retired")
    line = f"#{e.id}  [{e.type}]  {e.title}  ({' · '.join(marks)})"
    if getattr(e, "scope", None) == "conversation":
        line += "  [conversation]"
    return line


def _show_entry(e) -> None:
    click.echo(entry_line(e))
    if e.tags:
        click.echo("tags: " + ", ".join(e.tags))
    extras = [
        f"{k}: {v}"
        for k, v in (
            ("source", e.source),
            ("conversation", e.conversation_id),
            ("parent", e.parent_id),
            ("valid_to", e.valid_to),
            ("superseded by", ", ".join(map(str, e.superseded_by)) or None),
        )
        if v
    ]
    for x in extras:
        click.echo(x)
    click.echo()
    click.echo(e.content)


def _show_list(items) -> None:
    for e in items:
        click.echo(entry_line(e))
    if not items:
        click.echo("(nothing)", err=True)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def handle_errors(f):
    """Turn ArbiterError into one stderr line and exit 1 (tracebacks with ARBITER_DEBUG=1)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except ArbiterError as e:
            if os.environ.get("ARBITER_DEBUG"):
                raise
            where = f" (at {e.path})" if e.path and e.path not in e.message else ""
            click.echo(f"arbiter: error: {e.message}{where}", err=True)
            sys.exit(1)

    return wrapper


def command(group, name=None, **kw):
    """A client command: JSON flag, error handling and the Settings object."""

    def deco(f):
        return group.command(name, **kw)(json_option(click.pass_obj(handle_errors(f))))

    return deco


@click.group(epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="arbiter")
@click.option("--home", type=click.Path(path_type=Path), envvar="ARBITER_HOME",
              help="Data folder (env ARBITER_HOME; default ~/.local/share/arbiter).")
@click.option("--socket", type=click.Path(path_type=Path), envvar="ARBITER_SOCKET",
              help="Daemon socket (env ARBITER_SOCKET; default HOME/arbiter.sock).")
@click.option("--tenant", default=paths.DEFAULT_TENANT, envvar="ARBITER_TENANT", show_default=True,
              help="Tenant whose token to use (env ARBITER_TENANT).")
@click.pass_context
def main(ctx, home, socket, tenant):
    """Arbiter: a local memory daemon for AI agents.

    Start the daemon with `arbiter serve`; every other command talks to it.
    """
    ctx.obj = Settings(home or paths.default_home(), socket, tenant)


@main.command()
@click.option("--home", type=click.Path(path_type=Path), help="Data folder (overrides the global option).")
@click.option("--socket", type=click.Path(path_type=Path), help="Socket path (overrides the global option).")
@click.option("--db", type=click.Path(path_type=Path), envvar="ARBITER_DB",
              help="Database file (env ARBITER_DB; default HOME/arbiter.db).")
@click.option("--synchronous", type=click.Choice(["FULL", "NORMAL"]), default="FULL", show_default=True,
              envvar="ARBITER_SYNCHRONOUS",
              help="FULL: acknowledged writes survive power loss. NORMAL: faster commits; the last "
                   "transactions before an OS crash or power cut may roll back (never corrupt).")
@click.option("--max-frame", type=click.IntRange(1024), default=4 * 1024 * 1024, show_default=True,
              help="Largest request line in bytes.")
@click.option("--fast-model", default="claude-haiku-4-5", show_default=True, envvar="ARBITER_FAST_MODEL",
              help="LLM for expand, rerank, auto-tag and topic names (needs ANTHROPIC_API_KEY).")
@click.option("--strong-model", default="claude-sonnet-4-6", show_default=True, envvar="ARBITER_STRONG_MODEL",
              help="LLM for rerank_fine and auto-supersede.")
@click.pass_obj
@handle_errors
def serve(settings: Settings, home, socket, db, synchronous, max_frame, fast_model, strong_model):
    """Run the daemon in the foreground until SIGTERM or Ctrl-C.

    A first start creates the database, a `default` tenant (token in
    HOME/tenants/default.token) and an admin token (HOME/admin.token).

    \b
    Example:
      arbiter --home /tmp/mem serve
    """
    from arbiter import server

    home = home or settings.home
    socket = socket or (settings.socket if settings.socket != paths.socket_path(settings.home) else None)
    services = {}
    if key := os.environ.get("ANTHROPIC_API_KEY"):
        from arbiter.advisor import Advisor  # cheap: the anthropic SDK itself loads on first use

        services["advisor"] = Advisor(
            api_key=key, base_url=os.environ.get("ANTHROPIC_BASE_URL"), fast_model=fast_model,
            strong_model=strong_model,
        )
    server.run(
        home=home,
        db_path=db or paths.db_path(home),
        socket_path=socket or paths.socket_path(home),
        synchronous=synchronous,
        max_frame=max_frame,
        services=services,
    )


@command(main)
@click.option("--type", "etype", type=_TYPES, required=True, help="What kind of entry this is.")
@click.option("--title", required=True, help="One line, at most 200 bytes.")
@click.option("--content", help="The body; `-` reads it from stdin. Required.")
@click.option("--tag", "tags", multiple=True, help="Repeatable.")
@click.option("--source", help="Where this came from (at most 200 bytes).")
@click.option("--conversation", type=int, help="Pin to a conversation id.")
@click.option("--parent", type=int, help="Reply to this entry (threads).")
@click.option("--supersedes", type=int, multiple=True, help="Retire this entry in favour of the new one. Repeatable.")
@click.option("--valid-from", help="When this became true (RFC 3339 or epoch seconds; default now).")
@click.option("--auto-tag", is_flag=True, help="LLM: add 2–4 tags, reusing the tenant's vocabulary.")
@click.option("--auto-supersede", is_flag=True, help="LLM: retire older entries this one directly contradicts.")
def remember(settings, as_json, etype, title, content, tags, source, conversation, parent, supersedes, valid_from,
             auto_tag, auto_supersede):
    """Write one entry.

    \b
    Example:
      arbiter remember --type feedback --title "Prefers tabs" --content "Use tabs in Go files" --tag style
      git log -1 | arbiter remember --type project --title "Last commit" --content -
    """
    if content == "-":
        content = sys.stdin.read()
    if content is None:
        raise click.UsageError("--content is required (use --content - to read it from stdin)")
    with settings.client() as c:
        e = c.remember(
            type=etype, title=title, content=content, tags=list(tags), source=source, conversation_id=conversation,
            parent_id=parent, supersedes_ids=list(supersedes), valid_from=valid_from,
            auto_tag=auto_tag, auto_supersede=auto_supersede,
        )
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))
    if e.note and not as_json:
        click.echo(f"note: {e.note}", err=True)


@command(main)
@click.argument("entry_id", type=int)
@click.option("--as-of", help="Read the entry as it stood then (RFC 3339 or epoch seconds).")
def get(settings, as_json, entry_id, as_of):
    """Show one entry (retired ones only with --as-of)."""
    with settings.client() as c:
        e = c.get(entry_id, as_of=as_of)
    _emit(e, as_json, _show_entry)


@command(main, "list")
@click.option("--type", "types", type=_TYPES, multiple=True, help="Only these types. Repeatable.")
@click.option("--tag", help="Only entries with this tag.")
@click.option("--conversation", type=int, help="Only entries pinned to this conversation.")
@click.option("--as-of", help="The set as it stood then.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
def list_(settings, as_json, types, tag, conversation, as_of, limit):
    """Browse entries newest first; filters are hard filters.

    \b
    Example:
      arbiter list --type project --tag release --limit 10
    """
    with settings.client() as c:
        items = c.list(types=list(types), tag=tag, conversation_id=conversation, as_of=as_of, limit=limit)
    _emit(items, as_json, _show_list)


@command(main)
@click.argument("entry_id", type=int)
@click.option("--type", "etype", type=_TYPES)
@click.option("--title")
@click.option("--content", help="`-` reads stdin.")
@click.option("--tag", "tags", multiple=True, help="Replace the tags. Repeatable.")
@click.option("--source")
def update(settings, as_json, entry_id, etype, title, content, tags, source):
    """Correct an active entry in place (typos, tags).

    To record that something changed in the world, remember the new fact with
    --supersedes instead: history keeps both.
    """
    if content == "-":
        content = sys.stdin.read()
    with settings.client() as c:
        e = c.update(entry_id, type=etype, title=title, content=content, tags=list(tags) or None, source=source)
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))


@command(main)
@click.argument("entry_id", type=int)
def forget(settings, as_json, entry_id):
    """Retire an entry (it stays readable with --as-of). Safe to repeat."""
    with settings.client() as c:
        done = c.forget(entry_id)
    _emit(
        {"id": entry_id, "forgotten": done}, as_json,
        lambda _: click.echo(f"#{entry_id} forgotten" if done else f"#{entry_id} was already retired"),
    )


@command(main)
@click.argument("entry_id", type=int)
def purge(settings, as_json, entry_id):
    """Delete an entry for good: its row, relations and index rows."""
    with settings.client() as c:
        c.purge(entry_id)
    _emit({"id": entry_id, "purged": True}, as_json, lambda _: click.echo(f"#{entry_id} purged"))


def _relation_line(r) -> str:
    return f"{r.source_id} {r.relation} {r.target_id}  (relation {r.id})"


@command(main)
@click.argument("source", type=int)
@click.argument("relation", type=_RELATIONS)
@click.argument("target", type=int)
def link(settings, as_json, source, relation, target):
    """Relate two entries: SOURCE RELATION TARGET.

    `supersedes` also retires TARGET.

    \b
    Example:
      arbiter link 7 supersedes 3
    """
    with settings.client() as c:
        r = c.link(source, relation, target)
    _emit(r, as_json, lambda r: click.echo(_relation_line(r)))


@command(main)
@click.argument("source", type=int)
@click.argument("relation", type=_RELATIONS)
@click.argument("target", type=int)
def unlink(settings, as_json, source, relation, target):
    """Remove a relation (a retired target stays retired)."""
    with settings.client() as c:
        c.unlink(source, relation, target)
    _emit({"removed": True}, as_json, lambda _: click.echo(f"unlinked {source} {relation} {target}"))


def _show_hits(result) -> None:
    if result.searched:
        click.echo("also searched: " + "; ".join(result.searched))
    for rank, h in enumerate(result.hits, 1):
        click.echo(entry_line(h))
        if rank <= 3 and h.excerpt:
            click.echo("    " + h.excerpt.replace("\n", " "))
        if h.parts:
            click.echo("    " + "  ".join(f"{k}={v:.3g}" for k, v in h.parts.items()))
    if not result.hits:
        click.echo("(no matches)", err=True)
    if result.note:
        click.echo(f"note: {result.note}", err=True)


@command(main)
@click.argument("query")
@click.option("--conversation", type=int, help="Search this conversation first, then the whole tenant.")
@click.option("--type", "types", type=_TYPES, multiple=True, help="Prefer these types. Repeatable.")
@click.option("--tag", help="Prefer entries with this tag.")
@click.option("--as-of", help="Rank the set as it stood then.")
@click.option("--limit", type=click.IntRange(1, 200), default=10, show_default=True)
@click.option("--explain", is_flag=True, help="Show each hit's score parts.")
@click.option("--intent", type=click.Choice(["on", "off"]), default="on", show_default=True,
              help="Let question words (when, how to, prefer...) softly favour entry types.")
@click.option("--decay/--no-decay", default=True, show_default=True, help="Favour recent entries.")
@click.option("--half-life", "half_life_days", type=click.FloatRange(min=0, min_open=True, max=36500), default=90.0,
              show_default=True, help="Age decay half-life in days.")
@click.option("--floor", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Age decay never goes below this factor.")
@click.option("--disable", "disable", type=click.Choice(RECALL_STAGES), multiple=True,
              help="Switch a pipeline stage off (to see what it does). Repeatable.")
@click.option("--expand", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM: also search two paraphrases of the query (default: the daemon's fast model).")
@click.option("--rerank", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM: reorder the top 25 (default: the daemon's fast model).")
@click.option("--rerank-fine", is_flag=False, flag_value="", default=None, metavar="[MODEL]",
              help="LLM cascade: reorder the top 8 again with excerpts (default: the daemon's strong model).")
def recall(settings, as_json, query, conversation, types, tag, as_of, limit, explain, intent, decay,
           half_life_days, floor, disable, expand, rerank, rerank_fine):
    """Search memory. The top three hits show the passage that matched.

    \b
    Example:
      arbiter recall "deploy checklist" --conversation 4 --limit 5
      arbiter recall "what did we decide about caching" --explain --disable voice
    """
    with settings.client() as c:
        llm = {k: (v or True) for k, v in (("expand", expand), ("rerank", rerank), ("rerank_fine", rerank_fine))
               if v is not None}
        res = c.recall(query, conversation_id=conversation, types=list(types), tag=tag, as_of=as_of,
                       limit=limit, explain=explain, intent=intent, decay=decay, half_life_days=half_life_days,
                       floor=floor, disable=list(disable), **llm)
    if as_json:
        click.echo(msgspec.json.encode(res.hits).decode())
    else:
        _show_hits(res)


@command(main)
@click.argument("entry_id", type=int)
def history(settings, as_json, entry_id):
    """The supersession chain through an entry, oldest first."""
    with settings.client() as c:
        h = c.history(entry_id)
    _emit(h.entries, as_json, _show_list)


@command(main)
@click.argument("entry_id", type=int)
@click.option("--depth", type=click.IntRange(1, 2), default=1, show_default=True)
def expand(settings, as_json, entry_id, depth):
    """The entries related to ENTRY_ID, up to two hops away."""
    with settings.client() as c:
        g = c.expand(entry_id, depth=depth)

    def human(g):
        for n in g.nodes:
            click.echo(("  " * g.depth[n.id]) + entry_line(n))
        for r in g.edges:
            click.echo("edge: " + _relation_line(r))
        if g.truncated:
            click.echo("(truncated at the node limit)", err=True)

    _emit(g, as_json, human)


@command(main)
@click.argument("entry_id", type=int)
def density(settings, as_json, entry_id):
    """How connected an entry is: degrees, relation labels, 2-hop reach."""
    with settings.client() as c:
        d = c.density(entry_id)
    _emit(d, as_json, lambda d: click.echo(
        f"#{d.id}  in {d.in_degree}  out {d.out_degree}  reach(2) {d.reach_2hop}  relations: "
        + (", ".join(d.relations) or "none")))


@command(main)
def status(settings, as_json):
    """What the daemon holds for this tenant."""
    with settings.client() as c:
        s = c.status()
    _emit(s, as_json, lambda s: [click.echo(f"{k}: {v}") for k, v in msgspec.structs.asdict(s).items()])


@main.group()
def conversation():
    """Conversations scope recall: their entries are searched first."""


@command(conversation, "add")
@click.argument("title")
def conversation_add(settings, as_json, title):
    """Create a conversation and print its id."""
    with settings.client() as c:
        conv = c.conversation_create(title)
    _emit(conv, as_json, lambda conv: click.echo(f"conversation {conv.id}  {conv.title}"))


@command(conversation, "list")
def conversation_list(settings, as_json):
    """Conversations, newest first."""
    with settings.client() as c:
        convs = c.conversation_list()
    _emit(convs, as_json, lambda cs: [click.echo(f"{x.id}  {x.title}  ({_date(x.created_at)})") for x in cs])


@main.group()
def tenant():
    """Tenants: separate memories behind separate tokens (admin)."""


@command(tenant, "add")
@click.argument("name")
def tenant_add(settings, as_json, name):
    """Create a tenant; print its token once and save it under HOME/tenants/NAME.token."""
    with settings.client(admin=True) as c:
        created = c.tenant_create(name)
    path = paths.token_path(settings.home, name)
    paths.write_secret(path, created.token)
    _emit(created, as_json, lambda t: click.echo(f"tenant {t.name}: token {t.token}\n(saved to {path})"))


@command(tenant, "list")
def tenant_list(settings, as_json):
    """All tenants."""
    with settings.client(admin=True) as c:
        ts = c.tenant_list().tenants
    _emit(ts, as_json, lambda ts: [click.echo(f"{t.name}  ({_date(t.created_at)})") for t in ts])



# ---- threads, graph projection, topic clusters, briefing, MCP -------------------


@command(main)
@click.argument("parent_id", type=int)
@click.option("--content", help="The reply; `-` reads it from stdin. Required.")
@click.option("--title", help="Default: 'Re: <parent title>'.")
@click.option("--type", "etype", type=_TYPES, help="Default: the parent's type.")
@click.option("--tag", "tags", multiple=True, help="Repeatable. Default: the parent's tags.")
@click.option("--source", help="Where this came from.")
def reply(settings, as_json, parent_id, content, title, etype, tags, source):
    """Reply in a thread: a new entry under PARENT_ID.

    \b
    Example:
      arbiter reply 12 --content "Fixed in 4.2; closing."
    """
    if content == "-":
        content = sys.stdin.read()
    if content is None:
        raise click.UsageError("--content is required (use --content - to read it from stdin)")
    with settings.client() as c:
        e = c.reply(parent_id, content, title=title, type=etype, tags=list(tags) or None, source=source)
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))


@command(main)
@click.argument("entry_id", type=int)
@click.option("--as-of", help="The thread as it stood then.")
def thread(settings, as_json, entry_id, as_of):
    """The thread through ENTRY_ID: its root and replies, oldest first.

    \b
    Example:
      arbiter thread 12
    """
    with settings.client() as c:
        t = c.thread(entry_id, as_of=as_of)

    def human(t):
        click.echo(entry_line(t.root))
        for r in t.replies:
            click.echo("  " * t.depth[r.id] + entry_line(r))

    _emit(t, as_json, human)


@command(main)
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True)
def threads(settings, as_json, limit):
    """Open threads (active roots with active replies), newest activity first.

    \b
    Example:
      arbiter threads --limit 5
    """
    with settings.client() as c:
        ts = c.open_threads(limit).threads

    def human(ts):
        for t in ts:
            click.echo(f"{entry_line(t.root)}  {t.replies} replies, last {_date(t.last_activity)} (#{t.last_reply.id})")
        if not ts:
            click.echo("(no open threads)", err=True)

    _emit(ts, as_json, human)


@command(main)
@click.argument("entry_id", type=int)
def backlinks(settings, as_json, entry_id):
    """What points at ENTRY_ID: replies, `#ID` mentions, incoming relations.

    \b
    Example:
      arbiter backlinks 12
    """
    with settings.client() as c:
        b = c.backlinks(entry_id)

    def human(b):
        for link in b.links:
            kind = f"{link.relation}" if link.kind == "relation" else link.kind
            click.echo(f"{kind:<12} {entry_line(link.entry)}")
        if not b.links:
            click.echo("(no backlinks)", err=True)

    _emit(b, as_json, human)


@command(main)
@click.argument("entry_id", type=int)
@click.option("-k", "k", type=click.IntRange(1, 50), default=5, show_default=True, help="Entries per list.")
def around(settings, as_json, entry_id, k):
    """ENTRY_ID's neighbourhood: thread, shared tags, `#ID` references, relations.

    \b
    Example:
      arbiter around 12 -k 3
    """
    with settings.client() as c:
        a = c.around(entry_id, k=k)

    def human(a):
        click.echo(entry_line(a.entry))
        groups = [
            ("parent", [a.parent] if a.parent else []),
            ("child", a.children),
            ("sibling", a.siblings),
            ("mentions", a.references),
            ("mentioned by", a.mentioned_by),
        ]
        for label, items in groups:
            for e in items:
                click.echo(f"  {label:<13} {entry_line(e)}")
        for n in a.shared_tags:
            click.echo(f"  {'shares tags':<13} {entry_line(n.entry)}  [{', '.join(n.shared_tags)}]")
        for r in a.relations:
            arrow = f"{r.relation} ->" if r.direction == "out" else f"<- {r.relation}"
            click.echo(f"  {arrow:<13} {entry_line(r.entry)}")

    _emit(a, as_json, human)


@command(main)
@click.argument("tag", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
def tags(settings, as_json, tag, limit):
    """Tag use and co-occurrence over active entries (or TAG's partners).

    \b
    Example:
      arbiter tags area:api
    """
    with settings.client() as c:
        co = c.tag_cooccurrence(tag, limit)

    def human(co):
        for t in co.tags:
            click.echo(f"{t.count:>6}  {t.tag}")
        for p in co.pairs:
            click.echo(f"{p.count:>6}  {p.a} + {p.b}")

    _emit(co, as_json, human)


def _show_cluster(cl) -> None:
    click.echo(f"{cl.name}  ({cl.entries} entries, {cl.named_by})  {cl.description}")
    click.echo("  tags: " + ", ".join(cl.tags))


@command(main)
def clusters(settings, as_json):
    """Topic clusters: Louvain communities of co-occurring tags, named.

    \b
    Example:
      arbiter clusters
    """
    with settings.client() as c:
        cs = c.topic_clusters().clusters
    _emit(cs, as_json, lambda cs: [_show_cluster(cl) for cl in cs] or click.echo("(no clusters)", err=True))


@command(main)
@click.argument("tag")
@click.option("--limit", type=click.IntRange(1, 200), default=10, show_default=True)
def cluster(settings, as_json, tag, limit):
    """The topic cluster TAG belongs to, with its most recent entries.

    \b
    Example:
      arbiter cluster runbook --limit 5
    """
    with settings.client() as c:
        r = c.topic_cluster(tag, limit)

    def human(r):
        _show_cluster(r.cluster)
        _show_list(r.entries)

    _emit(r, as_json, human)


@command(main)
@click.option("--max-bytes", type=click.IntRange(2048, 65536), default=8192, show_default=True)
def briefing(settings, as_json, max_bytes):
    """The session briefing: the markdown map an MCP client gets on connect.

    \b
    Example:
      arbiter briefing > briefing.md
    """
    with settings.client() as c:
        b = c.briefing(max_bytes)
    _emit(b, as_json, lambda b: click.echo(b.text, nl=False))


@main.command()
@click.option("--home", type=click.Path(path_type=Path), help="Data folder (overrides the global option).")
@click.option("--tenant", help="Tenant (overrides the global --tenant / ARBITER_TENANT).")
@click.pass_obj
@handle_errors
def mcp(settings: Settings, home, tenant):
    """Serve MCP on stdin/stdout for an agent (Claude Desktop, Claude Code, any MCP client).

    Starts the daemon (detached) if none answers on the socket, then hands
    the client this tenant's briefing as its instructions.

    \b
    Example MCP client config:
      {"mcpServers": {"arbiter": {"command": "arbiter", "args": ["mcp"]}}}
    """
    from arbiter import mcp_server  # the SDK loads only on this path

    home = home or settings.home
    socket = settings.socket if settings.socket != paths.socket_path(settings.home) else paths.socket_path(home)
    mcp_server.run(home=home, socket_path=socket, tenant=tenant or settings.tenant)


if __name__ == "__main__":
    main()
