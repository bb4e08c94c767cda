"""`arbiter distribute`: spread a PostgreSQL database's tenants over a Citus cluster."""

from __future__ import annotations

import click

from arbiter.cli._common import DatabasePath, Settings, _emit, command, counted, main
from arbiter.store import engine


@command(main, "distribute")
@click.option("--db", "url", type=DatabasePath(), envvar="ARBITER_DB", required=True,
              help="The database on the Citus coordinator (postgresql://...; env ARBITER_DB).")
def distribute_cmd(settings: Settings, as_json, url):
    """Lay an Arbiter database out over a Citus cluster, by tenant.

    The directory (tenants, users, teams, scopes, settings) becomes
    reference tables, copied to every node; every table of a tenant's data
    is distributed by tenant_id, colocated with entries, so each request
    runs on the one node holding its tenant. The database is set up or
    upgraded first, as `arbiter serve` would. Tables already placed are left
    as they are: run it again after an upgrade to place a new table. A
    database without the citus extension is refused, unchanged.

    Citus must be installed on the coordinator and every worker, the
    database created on each with `CREATE EXTENSION citus`, and the workers
    added on the coordinator (`SELECT citus_add_node('worker-1', 5432)`).
    Distribute before loading much: Citus copies the rows a table holds.

    \b
    Examples:
      arbiter distribute --db postgresql://coordinator/arbiter
      arbiter serve --db postgresql://coordinator/arbiter
    """
    if not engine.is_url(url):
        raise click.BadParameter("a SQLite file has no nodes to spread over: give the coordinator's "
                                 "postgresql:// URL", param_hint="--db")
    from arbiter.store.pg import citus

    settings.as_administrator()  # every tenant's tables move: "as bob" would mean nothing
    placed = citus.distribute(url, say=lambda line: click.echo(line, err=True))

    def human(p: citus.Placed) -> None:
        click.echo(f"Citus {p.citus}, {counted(p.workers, 'worker')}: "
                   f"{counted(len(p.reference), 'reference table')} and "
                   f"{counted(len(p.distributed), 'table')} distributed by tenant_id now"
                   + ("" if p.reference or p.distributed else " (all were placed already)"))

    _emit(placed, as_json, human)
