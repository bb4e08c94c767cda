"""Client commands for the association graph: `associations ID`, `associations --rebuild`."""

from __future__ import annotations

import click
from click.core import ParameterSource

from arbiter.cli._common import _emit, command, main
from arbiter.model import AssociationKind

_KINDS = click.Choice(AssociationKind.__args__)


@command(main, "associations")
@click.argument("id", metavar="ENTRY_ID", type=int, required=False)
@click.option("--kind", type=_KINDS, help="Only this kind of association.")
@click.option("--limit", type=click.IntRange(1, 200), default=50, show_default=True, help="At most this many.")
@click.option("--rebuild", is_flag=True, help="Derive the stored associations again from the entries (no ENTRY_ID).")
def associations(settings, as_json, id, kind, limit, rebuild):
    """What Arbiter derived around ENTRY_ID: temporal, entity and similarity edges, with the evidence.

    Associations are derived, never asserted, and never retire anything; to
    assert a link, use `arbiter link`. `--rebuild` derives the tenant's stored
    edges again from its entries alone.

    \b
    Examples:
      arbiter associations 42
      arbiter associations 42 --kind entity
      arbiter associations --rebuild
    """
    if rebuild == (id is not None):
        raise click.UsageError("give ENTRY_ID, or --rebuild alone")
    given = click.get_current_context().get_parameter_source
    if rebuild and (kind is not None or given("limit") is not ParameterSource.DEFAULT):
        raise click.UsageError("--kind and --limit read ENTRY_ID's associations: not with --rebuild")
    with settings.client() as c:
        if rebuild:
            done = c.associations_rebuild()
            _emit(done, as_json, lambda d: click.echo(f"rebuilt: {d.edges} stored similarity edges"))
            return
        found = c.associations(id, kind=kind, limit=limit)

    def show(result):
        for a in result.associations:
            click.echo(f"#{a.other_id}  {a.kind}/{a.sub_type}  {a.weight:.2f}  {a.evidence}")
        if not result.associations:
            click.echo("(no associations)", err=True)

    _emit(found, as_json, show)
