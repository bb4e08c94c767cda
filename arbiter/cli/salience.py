"""Client commands for salience and maintenance: `reinforce`, `maintain`."""

from __future__ import annotations

import click

from arbiter.cli._common import _emit, command, counted, main


def maintenance_line(r) -> str:
    """`2026-11-23T06:00:00Z (idle): 1200 entries, average salience 0.48, retired 3, 14 entity clusters`."""
    avg = "n/a" if r.average_salience is None else f"{r.average_salience:.3f}"
    parts = [
        counted(r.salience_computed, "entry", "entries"), f"average salience {avg}", f"retired {len(r.retired)}",
        counted(r.entity_clusters, "entity cluster"), f"{counted(r.access_log_pruned, 'access log row')} pruned",
        "index merged" if r.fts_merged else "index already merged",
        *([] if r.wal_checkpointed is None else  # PostgreSQL: the server's WAL
          ["WAL checkpointed" if r.wal_checkpointed else "WAL not fully checkpointed"]),
        f"{r.duration_ms:.0f} ms",
    ]
    return f"{r.at} ({r.trigger}): " + ", ".join(parts)


@command(main)
@click.argument("id", metavar="ENTRY_ID", type=int)
def reinforce(settings, as_json, id):
    """Reinforce an entry: +0.15 salience (up to +0.6), so maintenance keeps it longer.

    \b
    Example:
      arbiter reinforce 12
    """
    with settings.client() as c:
        s = c.reinforce(id)
    _emit(s, as_json, lambda s: click.echo(f"#{s.id}  salience {s.salience:.3f}  "
                                           f"(reinforced {counted(s.reinforcements, 'time')})"))


@command(main)
@click.option("--min-salience", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Retire (never delete) non-permanent entries below this; 0 retires none.")
@click.option("--rebuild-associations", is_flag=True,
              help="Also derive the stored associations again from the entries (as `arbiter associations --rebuild`).")
def maintain(settings, as_json, min_salience, rebuild_associations):
    """Run maintenance now: recompute salience, retire low-salience entries, refresh entity clusters, tidy.

    The daemon also runs it hourly at a quiet spell (`serve --maintenance-interval`).
    A retired entry's reason is recorded; it stays readable with --as-of.

    \b
    Examples:
      arbiter maintain --min-salience 0
      arbiter maintain --rebuild-associations
    """
    with settings.client() as c:
        report = c.maintain(min_salience=min_salience)
        rebuilt = c.associations_rebuild() if rebuild_associations else None
    if rebuilt is not None and not as_json:
        click.echo(f"associations: rebuilt, {rebuilt.edges} stored similarity edges", err=True)

    def human(r):
        click.echo(maintenance_line(r))
        if r.retired:
            click.echo("retired: " + " ".join(f"#{i}" for i in r.retired))

    _emit(report, as_json, human)
