"""Size and cold-start time of the single-file executable.

    python -m bench.startup [--binary dist/arbiter] [--runs 9]
    python -m bench.startup --binary before/arbiter --binary dist/arbiter   # two builds, runs alternated

Prints the file size, the median wall time of `arbiter --version`, and the
median time from spawning `arbiter serve` on a fresh home until the socket
answers `ping`. Targets: ≤ 25 MB, --version ≤ 0.3 s, serve-to-ready ≤ 0.5 s.
Given several binaries, their runs alternate (a, b, a, b...), so a machine
busier at one moment weighs on each alike.
"""

from __future__ import annotations

import json
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import click

from bench.longmemeval.daemon import isolated_env


def _answers_ping(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(0.5)
            s.connect(str(path))
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            return b'"result"' in s.recv(4096)
    except OSError:
        return False


def time_version(binary: Path) -> tuple[float, float]:
    """Wall time of `BINARY --version`, and the CPU time (user + system) it and its children used.

    On a shared machine the CPU time is the steadier figure: the wall time also holds the waits for a core.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(binary), "--version"], check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_serve_ready(binary: Path) -> float:
    home = Path(tempfile.mkdtemp(prefix="arb-start-"))
    sock = home / "arbiter.sock"
    env = isolated_env(home)
    started = time.perf_counter()
    proc = subprocess.Popen([str(binary), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not _answers_ping(sock):
            if proc.poll() is not None:
                raise click.ClickException("serve exited before answering ping")
            if time.perf_counter() - started > 30:
                raise click.ClickException("serve did not answer ping within 30 s")
            time.sleep(0.002)
        return time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(home, ignore_errors=True)


@click.command()
@click.option("--binary", "binaries", type=click.Path(exists=True, dir_okay=False, path_type=Path), multiple=True,
              default=["dist/arbiter"], show_default=True, help="Repeat to compare builds, runs alternated.")
@click.option("--runs", type=click.IntRange(1), default=9, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def main(binaries: tuple[Path, ...], runs: int, as_json: bool) -> None:
    """Measure the executables' size and cold-start times (medians of RUNS)."""
    version: dict[Path, list[float]] = {b: [] for b in binaries}
    ready: dict[Path, list[float]] = {b: [] for b in binaries}
    for _ in range(runs):
        for b in binaries:
            version[b].append(time_version(b))
    for _ in range(runs):
        for b in binaries:
            ready[b].append(time_serve_ready(b))
    results = [{"binary": str(b), "size_mb": round(b.stat().st_size / 1e6, 2), "runs": runs,
                "version_s": round(statistics.median(w for w, _ in version[b]), 3),
                "version_cpu_s": round(statistics.median(c for _, c in version[b]), 3),
                "serve_ready_s": round(statistics.median(ready[b]), 3)} for b in binaries]
    if as_json:
        for r in results:
            click.echo(json.dumps(r))
        return
    click.echo("| binary | size (≤ 25 MB) | `--version` (≤ 0.3 s) | its CPU time | `serve` until ping answers (≤ 0.5 s) |\n"
               "|---|--:|--:|--:|--:|")
    for r in results:
        click.echo(f"| {r['binary']} | {r['size_mb']:.1f} MB | {r['version_s']:.3f} s | {r['version_cpu_s']:.3f} s "
                   f"| {r['serve_ready_s']:.3f} s |")
    click.echo(f"(medians of {runs} runs each)")


if __name__ == "__main__":
    main()
