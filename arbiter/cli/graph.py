"""Client commands for threads, the graph projection, tags, topic clusters and the briefing."""

from __future__ import annotations

import click

from arbiter.cli._common import (
    _date, _emit, _show_list, command, counted, entry_line, main, read_content,
)
from arbiter.model import ENTRY_TYPES

_TYPES = click.Choice(ENTRY_TYPES)


@command(main)
@click.argument("parent_id", type=int)
@click.option("--content", help="The reply; `-` reads it from stdin. Required.")
@click.option("--title", help="Default: 'Re: <parent title>'.")
@click.option("--type", "type", type=_TYPES, help="Default: the parent's type.")
@click.option("--tag", "tags", multiple=True, help="Repeatable. Default: the parent's tags.")
@click.option("--source", help="Where this came from.")
@click.option("--speaker", help="Who said it: a name (Caroline) or a role (user, assistant).")
def reply(settings, as_json, parent_id, content, title, type, tags, source, speaker):
    """Reply in a thread: a new entry under PARENT_ID.

    \b
    Example:
      arbiter reply 12 --content "Fixed in 4.2; closing."
      arbiter reply 40 --content "It was Matt Patterson!" --speaker Melanie
    """
    content = read_content(content)
    if content is None:
        raise click.UsageError("--content is required (use --content - to read it from stdin)")
    with settings.client() as c:
        e = c.reply(parent_id, content, title=title, type=type, tags=list(tags) or None, source=source,
                    speaker=speaker)
    _emit(e, as_json, lambda e: click.echo(entry_line(e)))


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("--as-of", help="The thread as it stood then.")
@click.option("--known-at", help="The thread as it was recorded then (past texts, no later replies).")
def thread(settings, as_json, id, as_of, known_at):
    """The thread through ENTRY_ID: its root and replies, oldest first.

    \b
    Example:
      arbiter thread 12
    """
    with settings.client() as c:
        t = c.thread(id, as_of=as_of, known_at=known_at)

    def human(t):
        click.echo(entry_line(t.root))
        for r in t.replies:
            click.echo("  " * t.depth[r.id] + entry_line(r))

    _emit(t, as_json, human)


@command(main)
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True, help="Threads to list.")
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
            replies = counted(t.replies, "reply", "replies")
            click.echo(f"{entry_line(t.root)}  {replies}, last {_date(t.last_activity)} (#{t.last_reply.id})")
        if not ts:
            click.echo("(no open threads)", err=True)

    _emit(ts, as_json, human)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def backlinks(settings, as_json, id):
    """What points at ENTRY_ID: replies, `#ID` mentions, incoming relations.

    \b
    Example:
      arbiter backlinks 12
    """
    with settings.client() as c:
        b = c.backlinks(id)

    def human(b):
        for link in b.links:
            kind = f"{link.relation}" if link.kind == "relation" else link.kind
            click.echo(f"{kind:<12} {entry_line(link.entry)}")
        if not b.links:
            click.echo("(no backlinks)", err=True)

    _emit(b, as_json, human)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
@click.option("-k", "--limit", "k", type=click.IntRange(1, 50), default=5, show_default=True,
              help="Entries per list (as --limit elsewhere).")
def around(settings, as_json, id, k):
    """ENTRY_ID's neighbourhood: thread, shared tags, `#ID` references, relations.

    \b
    Example:
      arbiter around 12 -k 3
    """
    with settings.client() as c:
        a = c.around(id, k=k)

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
            label = f"{r.relation} ({r.qualifier})" if r.qualifier else r.relation
            arrow = f"{label} ->" if r.direction == "out" else f"<- {label}"
            click.echo(f"  {arrow:<13} {entry_line(r.entry)}")

    _emit(a, as_json, human)


@command(main)
@click.argument("tag", required=False)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Tags to list.")
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
        if not co.tags and not co.pairs:
            click.echo("(no tags)", err=True)

    _emit(co, as_json, human)


def _show_cluster(cl) -> None:
    click.echo(f"{cl.name}  ({counted(cl.entries, 'entry', 'entries')}, {cl.named_by})  {cl.description}")
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
@click.option("--limit", type=click.IntRange(1, 200), default=10, show_default=True, help="Recent entries to list.")
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
@click.option("--max-bytes", type=click.IntRange(2048, 65536), default=8192, show_default=True,
              help="Longest briefing in UTF-8 bytes; its lists are shortened to fit.")
def briefing(settings, as_json, max_bytes):
    """The session briefing: the markdown map an MCP client gets on connect.

    \b
    Example:
      arbiter briefing > briefing.md
    """
    with settings.client() as c:
        b = c.briefing(max_bytes)
    _emit(b, as_json, lambda b: click.echo(b.text, nl=False))

