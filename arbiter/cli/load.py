"""`arbiter load FILE.jsonl`: bulk-write entries with progress."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from arbiter.cli._common import GivenPath, Settings, _emit, command, counted, main


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


@command(main)
@click.argument("file", type=GivenPath(path_type=Path, exists=True, dir_okay=False, allow_dash=True))
@click.option("--skip", type=click.IntRange(0), default=0, show_default=True,
              help="Skip the first N lines (resume after a stop: the error names N).")
@click.option("--batch", "batch_size", type=click.IntRange(1, 10_000), default=1000, show_default=True,
              help="Entries per remember_many (one transaction each).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress on stderr.")
def load(settings: Settings, as_json, file, skip, batch_size, progress):
    """Write the entries in FILE (JSON Lines, `-` for stdin), one `remember` object per line.

    Each line holds the `remember` fields: type, title, content, and
    optionally tags, source, speaker, team, entities, conversation_id,
    parent_id, supersedes_ids, valid_from, salience, permanent (the LLM flags
    and candidates belong to `remember`). Lines go in `remember_many`
    batches, each all or nothing. A bad line stops the load once the lines
    before it are written; the error names the line and the --skip that
    resumes after fixing it.

    \b
    Example:
      echo '{"type":"learning","title":"Tabs","content":"Use tabs in Go"}' > notes.jsonl
      arbiter load notes.jsonl
      arbiter load big.jsonl --skip 120000     # resume where a stopped load ended
    """
    from arbiter import bulk
    from arbiter.cli._progress import Progress

    total = None
    if str(file) != "-" and file.is_file():
        total = max(0, _count_lines(file) - skip)
    stream = sys.stdin.buffer if str(file) == "-" else open(file, "rb")
    bar = Progress(total, "load", file=sys.stderr) if progress else None
    try:
        with settings.client() as c:
            summary = bulk.load(c, stream, skip=skip, batch_size=batch_size,
                                progress=bar.update if bar else (lambda n: None))
    finally:
        if bar:
            bar.finish()
        if stream is not sys.stdin.buffer:
            stream.close()
    def said(s) -> str:
        again = (f"{counted(s.duplicates, 'line')} repeating an entry already there, not written again"
                 if s.duplicates else "")
        if s.written:
            loaded = (f"loaded {counted(s.written, 'entry', 'entries')} (#{s.first_id}-#{s.last_id}) in "
                      f"{s.seconds:.1f}s, {s.entries_per_s:,.0f}/s")
            return f"{loaded}; {again}" if again else loaded
        return f"nothing new to load: {again}" if again else f"nothing to load ({counted(s.lines, 'line')} read)"

    _emit(summary, as_json, lambda s: click.echo(said(s)))
