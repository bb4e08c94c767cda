"""Benchmarks: each `python -m bench.<name>` prints numbers (docs/benchmarks.md says what they measured)."""

from __future__ import annotations

import json
from pathlib import Path


def report(result: dict, out: Path | None, *, text: str | None = None) -> None:
    """Print `text` (default: `result` as JSON) and, with `out`, also write `result` there as JSON."""
    as_json = json.dumps(result, indent=2)
    print(as_json if text is None else text)
    if out:
        out.write_text(as_json + "\n")


def loadavg() -> str:
    """The machine's 1-, 5- and 15-minute load averages, as /proc/loadavg gives them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
