"""Progress for long client work (`arbiter load`, `arbiter import`, the LongMemEval ingest).

On a terminal: one redrawn line with a bar, the count, the rate and the ETA.
Otherwise (a pipe, a log file, CI): a plain line at most every few seconds
and one at the end, so logs stay readable. Written to stderr, so stdout
stays clean for `--json`.
"""

from __future__ import annotations

import sys
import time

import click


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """Count `update(n)` calls against an optional `total`; draw as the output allows."""

    def __init__(self, total: int | None, label: str, *, unit: str = "entries", file=None,
                 interactive: bool | None = None, every_s: float = 5.0):
        self.total = total
        self.label = label
        self.unit = unit
        self.file = file or sys.stderr
        self.interactive = self.file.isatty() if interactive is None else interactive
        self.every_s = every_s
        self.done = 0
        self.started = time.monotonic()
        self._last = self.started  # plain lines: the first after `every_s`, not at once
        self._shown = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.finish()

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """`load  12,000/250,000 entries  8,431/s  ETA 28s` (no ETA without a total)."""
        rate = self.rate()
        count = f"{self.done:,}/{self.total:,}" if self.total is not None else f"{self.done:,}"
        text = f"{self.label}  {count} {self.unit}  {rate:,.0f}/s"
        if self.total is not None and rate > 0 and self.done < self.total:
            text += f"  ETA {_duration((self.total - self.done) / rate)}"
        elif self.done:
            text += f"  in {_duration(time.monotonic() - self.started)}"
        return text

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.interactive:
            if now - self._last >= 0.1:
                self._draw()
                self._last = now
        elif now - self._last >= self.every_s:
            click.echo(self.line(), file=self.file)
            self._shown = True
            self._last = now

    def _draw(self) -> None:
        bar = ""
        if self.total:
            width = 24
            filled = int(width * min(self.done, self.total) / self.total)
            bar = "[" + "#" * filled + "-" * (width - filled) + "]  "
        click.echo("\r" + bar + self.line() + "\x1b[K", file=self.file, nl=False)
        self._shown = True

    def finish(self) -> None:
        if not self.done and not self._shown:
            return  # nothing happened (no daemon, a bad first line): the error alone says why
        if self.interactive:
            self._draw()
            click.echo(file=self.file)
        else:
            click.echo(self.line(), file=self.file)
