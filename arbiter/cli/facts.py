"""Client commands for facts behind the evaluation gate: propose, read, batches, predicates, aspects."""

from __future__ import annotations

import json

import click
from click.core import ParameterSource

from arbiter.cli._common import _date, _emit, command, counted, main
from arbiter.errors import InvalidParams

_STATUSES = click.Choice(["candidate", "active", "rejected"])
_BATCH_STATUSES = click.Choice(["proposed", "evaluated", "applied", "rejected"])
#: `fact propose`'s parameters that describe the one fact given on the command line, and their flags.
_ONE_FACT = {"subject": "--subject", "predicate": "--predicate", "object": "--object", "confidence": "--confidence",
             "valid_from": "--valid-from", "sources": "--source", "aspects": "--aspect"}


def fact_line(f) -> str:
    """`#3  user works_at Globex  (0.9 · 2025-06-01 → now · active)`, with the finding for candidates and rejects."""
    window = f"{_date(f.valid_from)} → {_date(f.valid_to) or 'now'}"
    line = f"#{f.id}  {f.subject} {f.predicate} {f.object}  ({f.confidence:g} · {window} · {f.status})"
    if f.supersedes_fact_id:
        line += f"  supersedes #{f.supersedes_fact_id}"
    if f.status != "active" and f.finding:
        line += f"  [{f.finding}: {f.reason}]"
    return line


def _show_batch(b) -> None:
    counts = ", ".join(f"{n} {s}" for s, n in sorted(b.counts.items()))
    who = f"  by {b.author}" + (f", shared with {b.team}" if b.team else ", private") if b.author else ""
    click.echo(f"batch #{b.id}  [{b.origin}]  {b.status}  ({counts}){who}")
    for f in b.facts:
        click.echo(f"  {fact_line(f)}" + (f"  [{f.finding}]" if f.status == "active" and f.finding else ""))
    if b.note:
        click.echo(f"note: {b.note}", err=True)


def _show_facts(items) -> None:
    for f in items:
        click.echo(fact_line(f))
    if not items:
        click.echo("(no facts)", err=True)


@main.group()
def fact():
    """Propose facts, extract them from entries, and read a fact's lineage.

    \b
    Example:
      arbiter fact propose --subject user --predicate works_at --object "Acme Corp" --source 12 --apply
      arbiter fact history 3
    """


@command(fact, "propose")
@click.option("--subject", help="Who or what the fact is about.")
@click.option("--predicate", help="The relation, e.g. works_at (normalised to snake_case).")
@click.option("--object", "object", help="The value.")
@click.option("--confidence", type=float, default=1.0, show_default=True,
              help="How clearly it was stated, 0 to 1 (1 said outright); below --threshold it is rejected.")
@click.option("--valid-from", help="When it became true (default now; never in the future).")
@click.option("--source", "sources", type=int, multiple=True, help="An entry it was drawn from (repeatable).")
@click.option("--aspect", "aspects", multiple=True, help="An aspect slug to stage (repeatable; see `arbiter aspects`).")
@click.option("--file", "path", type=click.File("rb"), help="A JSONL file of facts, one batch (`-` for stdin).")
@click.option("--origin", type=click.Choice(["agent", "extractor", "import"]), default="agent", show_default=True,
              help="Who proposes the batch, as `batch list` shows it.")
@click.option("--threshold", type=float, default=0.5, show_default=True, help="Minimum confidence to pass.")
@click.option("--apply", "apply_", is_flag=True, help="Evaluate and apply the batch now (through the same gate).")
@click.option("--team", help="Share the batch's facts with this team (one you are in); default private to you.")
def propose(settings, as_json, subject, predicate, object, confidence, valid_from, sources, aspects, path, origin,
            threshold, apply_, team):
    """Propose candidate facts as one patch batch; they stay invisible until the batch is applied.

    \b
    Examples:
      arbiter fact propose --subject user --predicate works_at --object "Acme Corp" --source 12 --apply
      arbiter fact propose --file facts.jsonl     # {"subject":..., "predicate":..., "object":...} per line
      arbiter fact propose --subject "release" --predicate due_on --object 2026-12-01 --team core --apply
    """
    if path is not None:
        given = click.get_current_context().get_parameter_source
        one_fact = [flag for name, flag in _ONE_FACT.items() if given(name) is not ParameterSource.DEFAULT]
        if one_fact:
            raise click.UsageError(f"{', '.join(one_fact)} describe one fact: with --file, each line carries its own")
        facts, where = [], getattr(path, "name", "<stdin>")  # a binary stdin may have no name
        # Read as bytes and decoded line by line: a text file's decoder fails in the middle of a block, past
        # the line at fault, and its UnicodeDecodeError would leave the command as a traceback.
        for n, raw in enumerate(path, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InvalidParams(f"{where} line {n}: not UTF-8 text (byte {e.start + 1} of the line): "
                                    "save the file as UTF-8") from None
            if line.strip():
                try:
                    facts.append(json.loads(line))
                except ValueError:
                    raise InvalidParams(f"{where} line {n}: not JSON") from None
    else:
        if None in (subject, predicate, object):
            raise click.UsageError("--subject, --predicate and --object are required (or --file)")
        facts = [{"subject": subject, "predicate": predicate, "object": object, "confidence": confidence,
                  "valid_from": valid_from, "sources": list(sources), "aspects": list(aspects)}]
        facts = [{k: v for k, v in facts[0].items() if v is not None}]
    with settings.client() as c:
        b = c.facts_propose(facts, origin=origin, threshold=threshold, apply=apply_, team=team)
    _emit(b, as_json, _show_batch)


@command(fact, "history")
@click.argument("id", metavar="FACT_ID", type=int)
def history(settings, as_json, id):
    """A fact's supersession lineage, oldest first, and every state recorded for it.

    \b
    Example:
      arbiter fact history 3
    """
    with settings.client() as c:
        h = c.fact_history(id)

    def human(h):
        _show_facts(h.facts)
        for r in h.revisions:
            end = f" valid_to {_date(r.valid_to)}" if r.valid_to else ""
            click.echo(f"  {r.recorded_at}  #{r.fact_id} {r.status}{end} ({r.confidence:g})")

    _emit(h, as_json, human)


@command(fact, "extract")
@click.argument("entry_ids", type=int, nargs=-1, required=True)
@click.option("--apply", "apply_", is_flag=True, help="Apply the batch now (through the same gate).")
@click.option("--threshold", type=float, default=0.5, show_default=True, help="Minimum confidence to pass.")
@click.option("--team", help="Share the proposed facts with this team (one you are in); default private to you.")
def extract(settings, as_json, entry_ids, apply_, threshold, team):
    """Ask the advisor for the facts ENTRY_IDS state; they are proposed as one batch.

    Needs ANTHROPIC_API_KEY on the daemon; without it nothing is proposed and
    the note says so.

    \b
    Example:
      arbiter fact extract 12 13 --apply
    """
    with settings.client() as c:
        r = c.fact_extract(list(entry_ids), apply=apply_, threshold=threshold, team=team)

    def human(r):
        if r.batch is not None:
            _show_batch(r.batch)
        elif r.note:
            click.echo(f"note: {r.note}", err=True)

    _emit(r, as_json, human)


@command(main, "facts")
@click.argument("subject", required=False)
@click.option("--predicate", help="Only this relation (e.g. works_at).")
@click.option("--status", type=_STATUSES, default="active", show_default=True,
              help="candidate and rejected are audit reads.")
@click.option("--as-of", help="What was true then (valid time).")
@click.option("--known-at", help="What we had recorded by then (record time).")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="Facts to list.")
def facts_cmd(settings, as_json, subject, predicate, status, as_of, known_at, limit):
    """Facts about SUBJECT (or all): active and true now unless told otherwise.

    \b
    Examples:
      arbiter facts user
      arbiter facts user --predicate works_at --as-of 2025-01-01T00:00:00Z
      arbiter facts --status candidate
    """
    with settings.client() as c:
        found = c.facts(subject, predicate=predicate, status=status, as_of=as_of, known_at=known_at, limit=limit)
    _emit(found.facts, as_json, _show_facts)


@main.group()
def batch():
    """Audit and decide patch batches: list, show, evaluate, apply, reject.

    \b
    Example:
      arbiter batch list --status proposed
      arbiter batch show 4 && arbiter batch apply 4
    """


@command(batch, "list")
@click.option("--status", type=_BATCH_STATUSES, help="Only batches in this state (default: all).")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Batches to list, newest first.")
def batch_list(settings, as_json, status, limit):
    """Patch batches, newest first.

    \b
    Example:
      arbiter batch list --status evaluated
    """
    with settings.client() as c:
        found = c.batch_list(status, limit).batches

    def human(found):
        for b in found:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(b.counts.items()))
            click.echo(f"batch #{b.id}  [{b.origin}]  {b.status}  {_date(b.created_at)}  ({counts})")
        if not found:
            click.echo("(no batches)", err=True)

    _emit(found, as_json, human)


def _batch_command(name: str, method: str, doc: str):
    @command(batch, name, help=doc)  # click reads the help when the command is made: a later __doc__ is unseen
    @click.argument("id", metavar="BATCH_ID", type=int)
    def run(settings, as_json, id):
        with settings.client() as c:
            b = getattr(c, method)(id)
        _emit(b, as_json, _show_batch)

    return run


_batch_command("show", "batch_show", "A batch and its facts with the gate's findings.\n\n\b\nExample:\n  arbiter batch show 4")
_batch_command("evaluate", "batch_evaluate",
               "Record the gate's findings on a batch (changes nothing that is true).\n\n\b\nExample:\n"
               "  arbiter batch evaluate 4")
_batch_command("apply", "batch_apply",
               "Evaluate and apply a batch in one transaction; applying twice changes nothing.\n\n\b\nExample:\n"
               "  arbiter batch apply 4")
_batch_command("reject", "batch_reject",
               "Reject a batch: its candidates are rejected for good.\n\n\b\nExample:\n  arbiter batch reject 4")


@command(main, "predicates")
@click.option("--declare", "name", help="Declare this predicate (once).")
@click.option("--functional", is_flag=True, help="With --declare: one active object per subject.")
def predicates_cmd(settings, as_json, name, functional):
    """The predicate registry (functional or multi-valued), or declare one.

    \b
    Examples:
      arbiter predicates
      arbiter predicates --declare favourite_editor --functional
    """
    if functional and name is None:
        raise click.UsageError("--functional goes with --declare NAME")
    with settings.client() as c:
        result = [c.predicate_declare(name, functional)] if name else c.predicates().predicates

    def human(items):
        for p in items:
            kind = "functional" if p.functional else "multi-valued"
            click.echo(f"{p.name}  {kind}{'  built-in' if p.builtin else ''}  {p.active_facts} active")

    _emit(result, as_json, human)


@command(main, "aspects")
@click.option("--subject", help="Score only this subject's facts (computed now).")
@click.option("--predicate", help="Score only this predicate's facts (computed now).")
def aspects_cmd(settings, as_json, subject, predicate):
    """The 14 aspects' 0-100 scores, by category.

    \b
    Examples:
      arbiter aspects
      arbiter aspects --subject user
    """
    with settings.client() as c:
        result = c.aspects(subject, predicate)

    def human(r):
        category = None
        for a in r.aspects:
            if a.category != category:
                category = a.category
                click.echo(category)
            click.echo(f"  {a.name:<14} {a.score:>3}  ({counted(a.facts, 'fact')}, "
                       f"{counted(a.entities, 'entity', 'entities')}, {counted(a.predicates, 'predicate')}, "
                       f"confidence {a.confidence:g})")

    _emit(result, as_json, human)
