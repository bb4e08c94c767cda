"""Web view benchmark: how long headless Chromium takes to draw the graph of N entries.

    python -m bench.ui_render [--entries 2000] [--links 1500] [--runs 3]

Starts its own daemon on a temporary home, writes --entries entries (tags
from bench/load's vocabulary, so topic clusters form) and --links random
`relates_to` relations, serves `arbiter ui` in-process and loads the page in
Debian's headless chromium (selenium + chromedriver) at 1280x800. Reported
per run: `first_frame_ms`, from navigation start to the first canvas frame
drawn with every node (the page's `window.arbiter.renderedAt`), and
`settled_ms`, when the force layout stops (120 ticks). Target: the first
frame under 2 s. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from arbiter import __version__
from arbiter.client import Client
from arbiter.errors import Conflict
from arbiter.ui.server import UIServer
from bench.load import BenchDaemon, Vocabulary, make_entry

TARGET_MS = 2000.0


def _browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={tempfile.mkdtemp(prefix='arb-chromium-')}", f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))


def run(args) -> dict:
    home = Path(tempfile.mkdtemp(prefix="arb-ui-"))
    daemon = BenchDaemon(home, "NORMAL")
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    try:
        with Client.from_home(home) as c:
            ids = c.remember_many([make_entry(vocab, rng, n) for n in range(args.entries)])
            for _ in range(args.links):
                a, b = rng.sample(ids, 2)
                try:
                    c.link(a, "relates_to", b)
                except Conflict:  # the pair is already linked
                    pass
        server = UIServer(lambda: Client.from_home(home))
        server.start()
        driver = _browser(1280, 800)
        runs = []
        try:
            for _ in range(args.runs):
                driver.get(server.url)
                deadline = time.monotonic() + 120
                while not driver.execute_script("return window.arbiter && window.arbiter.settled"):
                    if time.monotonic() > deadline:
                        raise SystemExit("the page did not settle within 120 s")
                    time.sleep(0.05)
                nodes, first, settled = driver.execute_script(
                    "return [window.arbiter.nodes, window.arbiter.renderedAt, performance.now()]"
                )
                runs.append({"nodes": nodes, "first_frame_ms": round(first, 1), "settled_ms": round(settled, 1)})
            if args.screenshot:
                driver.save_screenshot(str(args.screenshot))
        finally:
            driver.quit()
            server.shutdown()
        return {
            "version": __version__,
            "entries": args.entries,
            "links": args.links,
            "runs": runs,
            "first_frame_ms_median": statistics.median(r["first_frame_ms"] for r in runs),
            "target_ms": TARGET_MS,
        }
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--links", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--screenshot", type=Path)
    args = ap.parse_args(argv)
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
