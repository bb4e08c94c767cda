"""Client commands for entities: `entities`, `entity show|merge|rename|relate`."""

from __future__ import annotations

import click

from arbiter.cli._common import _emit, command, main
from arbiter.entities.model import ENTITY_RELATIONS, ENTITY_TYPES

_ENTITY_TYPES = click.Choice(ENTITY_TYPES)


def entity_line(e) -> str:
    """`Alice Smith  [person]  12 mentions  (aka Alice, @alice)`."""
    line = f"{e.name}  [{e.type}]  {e.mentions} mention{'s' * (e.mentions != 1)}"
    if e.aliases:
        line += f"  (aka {', '.join(e.aliases)})"
    return line


@command(main, "entities")
@click.argument("query", required=False, default="")
@click.option("--type", "type", type=_ENTITY_TYPES, help="Only entities of this type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Entities to list.")
def entities_(settings, as_json, query, type, limit):
    """List known entities, most mentioned first; QUERY matches the start of a name or alias.

    \b
    Example:
      arbiter entities post --type tool
    """
    with settings.client() as c:
        found = c.entities(query, type=type, limit=limit)

    def show(items):
        for e in items:
            click.echo(entity_line(e))
        if not items:
            click.echo("(no entities)", err=True)

    _emit(found, as_json, show)


@main.group()
def entity():
    """Inspect and curate one entity: show, merge, rename, relate.

    \b
    Example:
      arbiter entity show PostgreSQL
      arbiter entity merge PostgreSQL "Postgres DB"
    """


@command(entity, "show")
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True, help="Entries to list.")
def show(settings, as_json, name, limit):
    """An entity's memories, relations and cluster (by name or alias).

    \b
    Example:
      arbiter entity show PostgreSQL
    """
    with settings.client() as c:
        ctx = c.entity_show(name, limit=limit)

    def human(ctx):
        click.echo(entity_line(ctx.entity))
        for r in ctx.relations:
            click.echo(f"  {r.source.name} {r.relation} {r.target.name}  (weight {r.weight:g})")
        if ctx.cluster is not None:
            others = [e.name for e in ctx.cluster.entities if e.id != ctx.entity.id]
            click.echo(f"cluster {ctx.cluster.id}: {', '.join(others)}")
        for e in ctx.entries:
            click.echo(f"#{e.id}  [{e.type}]  {e.title}  ({e.recorded_at[:10]})")

    _emit(ctx, as_json, human)


@command(entity, "merge")
@click.argument("keep")
@click.argument("other")
def merge(settings, as_json, keep, other):
    """Fold OTHER into KEEP: OTHER's names become aliases and its links move (recorded, not deleted).

    \b
    Example:
      arbiter entity merge PostgreSQL "Postgres DB"
    """
    with settings.client() as c:
        e = c.entity_merge(keep, other)
    _emit(e, as_json, lambda e: click.echo(entity_line(e)))


@command(entity, "rename")
@click.argument("name")
@click.argument("new_name")
def rename(settings, as_json, name, new_name):
    """Rename an entity; the old name stays as an alias.

    \b
    Example:
      arbiter entity rename "Project X" Apollo
    """
    with settings.client() as c:
        e = c.entity_rename(name, new_name)
    _emit(e, as_json, lambda e: click.echo(entity_line(e)))


@command(entity, "relate", epilog="RELATION is one of: " + ", ".join(ENTITY_RELATIONS) + ".")
@click.argument("source")
@click.argument("relation", type=click.Choice(ENTITY_RELATIONS), metavar="RELATION")
@click.argument("target")
@click.option("--weight", type=click.FloatRange(0, 100, min_open=True), default=1.0, show_default=True,
              help="Added to the relation's weight if it exists.")
def relate(settings, as_json, source, relation, target, weight):
    """Create or strengthen a relation between two known entities.

    \b
    Example:
      arbiter entity relate Alice works_on Apollo
    """
    with settings.client() as c:
        r = c.entity_relate(source, relation, target, weight=weight)
    _emit(r, as_json, lambda r: click.echo(f"{r.source.name} {r.relation} {r.target.name}  (weight {r.weight:g})"))
