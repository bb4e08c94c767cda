"""Size and cold-start time of the single-file executable.

    python -m bench.startup [--binary dist/arbiter] [--runs 9]

Prints the file size, the median wall time of `arbiter --version`, and the
median time from spawning `arbiter serve` on a fresh home until the socket
answers `ping`. Targets: ≤ 25 MB, --version ≤ 0.3 s, serve-to-ready ≤ 0.5 s.
"""

from __future__ import annotations

import json
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


def time_version(binary: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(binary), "--version"], check=True, capture_output=True)
    return time.perf_counter() - started


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
@click.option("--binary", type=click.Path(exists=True, dir_okay=False, path_type=Path), default="dist/arbiter",
              show_default=True)
@click.option("--runs", type=click.IntRange(1), default=9, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def main(binary: Path, runs: int, as_json: bool) -> None:
    """Measure the executable's size and cold-start times (medians of RUNS)."""
    size_mb = binary.stat().st_size / 1e6
    version = statistics.median(time_version(binary) for _ in range(runs))
    ready = statistics.median(time_serve_ready(binary) for _ in range(runs))
    result = {"binary": str(binary), "size_mb": round(size_mb, 2), "runs": runs,
              "version_s": round(version, 3), "serve_ready_s": round(ready, 3)}
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"| measure | value | target |\n|---|--:|--:|\n| size | {size_mb:.1f} MB | ≤ 25 MB |\n"
               f"| `--version` (median of {runs}) | {version:.3f} s | ≤ 0.3 s |\n"
               f"| `serve` until ping answers (median of {runs}) | {ready:.3f} s | ≤ 0.5 s |")


if __name__ == "__main__":
    main()
